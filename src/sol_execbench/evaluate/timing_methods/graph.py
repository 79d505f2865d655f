"""The ``graph`` method: one CUDA/HIP graph captured per input set, replays timed by events.

A few independent input sets (each at its own address, the audited sets among them)
are captured once each; the timed replays rotate through them so consecutive replays read
different addresses, and the L2 is flushed before every replay. Replays have no launch
overhead, so this is the device time a graph-launched kernel would see. For comparison only:
host work inside the solution runs once at capture and is not replayed, so this method does
not defend against results computed on the host (the ``device`` method does).

A capture that fails (a host synchronisation, ``.item()``, an allocation the capture refuses)
is cleaned up completely before the fallback runs: the capture is ended, the graph released,
the current stream restored, and the CUDA generators' graph bookkeeping reset. torch leaves the
default generator in capture mode when ``capture_end`` fails, after which every later random
draw in the process raises "Offset increment outside graph capture encountered unexpectedly".
The capture runs through ``CUDAGraph.capture_begin``, which registers the default generators,
so a solution that draws random numbers is captured graph-safely.
"""

from __future__ import annotations

from typing import Any

import torch

from .base import MethodResult, MethodUnavailable, TimedCalls, synchronize

GRAPH_INPUT_SETS = 4


def _capture(calls: TimedCalls, args: list[Any], stream: Any) -> tuple[Any, Any]:
    """Warm up once off the capture stream, then capture one call on ``stream``."""
    current = torch.cuda.current_stream()
    stream.wait_stream(current)
    calls.enter_call()
    try:
        with torch.cuda.stream(stream):  # warm up off the default stream, as torch documents for capture
            calls.fn(*args)
        current.wait_stream(stream)
        synchronize(calls.device)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.stream(stream):  # restored on the way out, whatever the capture did
            # thread_local: the capture may not stop the harness's other threads (clock and
            # activity watchers, the profiler's) from calling CUDA, as the default global mode does.
            graph.capture_begin(capture_error_mode="thread_local")
            try:
                out = calls.fn(*args)
            except BaseException:
                _end_failed_capture(graph)
                raise
            graph.capture_end()
        current.wait_stream(stream)
        synchronize(calls.device)
    finally:
        calls.exit_call()
    return graph, out


def _end_failed_capture(graph: Any) -> None:
    """End a capture whose body raised (ending an invalidated capture raises too: ignored)."""
    try:
        if torch.cuda.is_current_stream_capturing():
            graph.capture_end()
    except Exception:  # noqa: BLE001
        pass
    try:
        graph.reset()
    except Exception:  # noqa: BLE001
        pass


def _restore_generator(generator: Any) -> None:
    """Take the generator out of capture mode if a failed capture left it there; its seed and
    offset stay as they were (a probe draw is undone)."""
    saved = generator.get_state()
    try:
        torch.empty(1, device=generator.device).uniform_(generator=generator)
        stuck = False
    except RuntimeError:
        stuck = True
    if stuck:  # a fresh state object: same seed and offset, not capturing
        generator.graphsafe_set_state(generator.clone_state())
    generator.set_state(saved)


def reset_after_failed_capture(device_index: int | None = None) -> list[str]:
    """Leave the process as it was before a failed capture; returns what could not be restored."""
    problems = []
    try:
        if torch.cuda.is_current_stream_capturing():
            problems.append("the current stream is still capturing")
    except Exception as exc:  # noqa: BLE001
        problems.append(f"capture status unreadable: {exc}")
    for index, generator in enumerate(torch.cuda.default_generators):
        if device_index is not None and index != device_index:
            continue
        try:
            _restore_generator(generator)
        except Exception as exc:  # noqa: BLE001  (torch without graph-safe generator states)
            problems.append(f"CUDA generator {index} not reset: {exc}")
    try:
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001
        problems.append(f"device error after the capture: {exc}")
    return problems


def time_graph(calls: TimedCalls) -> MethodResult:
    if not calls.device.is_gpu:
        raise MethodUnavailable("graphs need a GPU")
    count = max(1, min(GRAPH_INPUT_SETS, calls.iterations))
    sets, sources = calls.fresh.persistent_sets(count)
    captured = []
    stream = torch.cuda.Stream()
    try:
        for args in sets:
            captured.append((*_capture(calls, args, stream), args))
    except Exception as exc:  # noqa: BLE001  (the solution is not capturable: syncs, host reads, ...)
        for graph, _, _ in captured:
            graph.reset()
        captured.clear()
        left = reset_after_failed_capture(torch.device(calls.device.torch_device).index)
        calls.fresh.clear_passed_as_is()  # the fallback method's audited call starts from zeros again
        reason = f"graph capture failed: {type(exc).__name__}: {str(exc)[:200]}"
        if left:
            reason += f" (not restored: {'; '.join(left)})"
        raise MethodUnavailable(reason) from exc
    # The warm-up and capture calls wrote into the audited calls' outputs: only replays may count.
    calls.fresh.clear_passed_as_is()
    synchronize(calls.device)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(calls.iterations)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(calls.iterations)]
    for i, (start, end) in enumerate(zip(starts, ends)):
        graph = captured[i % count][0]
        calls.flusher.flush()
        start.record()
        graph.replay()
        end.record()
    synchronize(calls.device)
    for keeper in calls.keepers:
        if keeper.call_index in sources:
            _, out, args = captured[sources.index(keeper.call_index)]
            keeper.keep_now(args, out)
    times = [s.elapsed_time(e) for s, e in zip(starts, ends)]
    replayed = [sources[i % count] if sources[i % count] is not None else -1 for i in range(calls.iterations)]
    note = f"{count} graph(s), one per input set, replayed in rotation"
    return MethodResult(times, call_indices=replayed, notes=[note])
