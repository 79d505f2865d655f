"""The two eager methods that need no profiler: device events, and the host clock (CPU only)."""

from __future__ import annotations

import time

import torch

from .base import MethodResult, MethodUnavailable, TimedCalls


def time_events(calls: TimedCalls) -> MethodResult:
    """Device events on the current stream immediately before and after each call.

    No host synchronisation between calls, so queued work runs back to back; the span is the
    call's work on the current stream plus any launch gaps inside it. Work the call leaves on
    another stream is not in the span (the ``device`` method counts it).
    """
    if not calls.device.is_gpu:
        raise MethodUnavailable("device events need a GPU")
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(calls.iterations)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(calls.iterations)]
    for start, end in zip(starts, ends):
        args = calls.setup()
        calls.enter_call()
        start.record()
        calls.call(args)
        end.record()
        calls.exit_call()
    calls.finish()
    return MethodResult([s.elapsed_time(e) for s, e in zip(starts, ends)])


def time_cpu(calls: TimedCalls) -> MethodResult:
    """Host clock around each call (the CPU device; a test and debug setting)."""
    if calls.device.is_gpu:
        raise MethodUnavailable("the host clock does not time GPU work")
    times = []
    for _ in range(calls.iterations):
        args = calls.setup()
        calls.enter_call()
        begin = time.perf_counter_ns()
        calls.call(args)
        times.append((time.perf_counter_ns() - begin) / 1e6)
        calls.exit_call()
    calls.finish()
    return MethodResult(times, host_ms=list(times))
