"""The ``graph`` method: one CUDA/HIP graph captured per input set, replays timed by events.

A few independent input sets (each at its own address, one of them possibly the audited set)
are captured once each; the timed replays rotate through them so consecutive replays read
different addresses, and the L2 is flushed before every replay. Replays have no launch
overhead, so this is the device time a graph-launched kernel would see. For comparison only:
host work inside the solution runs once at capture and is not replayed, so this method does
not defend against results computed on the host (the ``device`` method does).
"""

from __future__ import annotations

from typing import Any

import torch

from .base import MethodResult, MethodUnavailable, TimedCalls, synchronize

GRAPH_INPUT_SETS = 4


def _capture(calls: TimedCalls, args: list[Any]) -> tuple[Any, Any]:
    current = torch.cuda.current_stream()
    side = torch.cuda.Stream()
    side.wait_stream(current)
    with torch.cuda.stream(side):  # warm up off the capture stream, as torch documents for capture
        calls.fn(*args)
    current.wait_stream(side)
    synchronize(calls.device)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = calls.fn(*args)
    synchronize(calls.device)
    return graph, out


def time_graph(calls: TimedCalls) -> MethodResult:
    if not calls.device.is_gpu:
        raise MethodUnavailable("graphs need a GPU")
    count = max(1, min(GRAPH_INPUT_SETS, calls.iterations))
    sets, audit_position = calls.fresh.persistent_sets(count)
    captured = []
    try:
        for args in sets:
            captured.append((*_capture(calls, args), args))
    except Exception as exc:  # noqa: BLE001  (the solution is not capturable: syncs, host reads, ...)
        synchronize(calls.device)
        raise MethodUnavailable(f"graph capture failed: {type(exc).__name__}: {str(exc)[:200]}") from exc
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(calls.iterations)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(calls.iterations)]
    for i, (start, end) in enumerate(zip(starts, ends)):
        graph = captured[i % count][0]
        calls.flusher.flush()
        start.record()
        graph.replay()
        end.record()
    synchronize(calls.device)
    if calls.keeper is not None and audit_position is not None:
        _, out, args = captured[audit_position]
        calls.keeper.keep_now(args, out)
    times = [s.elapsed_time(e) for s, e in zip(starts, ends)]
    note = f"{count} graph(s), one per input set, replayed in rotation"
    return MethodResult(times, notes=[note])
