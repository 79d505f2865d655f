"""The ``device`` method: each call's device span from the vendor's activity records.

The timed loop runs once under ``torch.profiler`` with device activity on (CUPTI on NVIDIA,
roctracer/rocprofiler on ROCm). Each call is a ``record_function`` range; the harness's own
work between calls (new arguments, the L2 flush) is in separately named setup ranges. Per call
the span runs from the first start to the last end of every kernel, memcpy and memset the call
launched, on any stream (``activity.attribute``).

The device is synchronised before and after each call, so every call starts on an idle device
with a cold L2 and its span cannot overlap the next call's. The same pass gives the host span of
each call: from the call's start until the device has finished what it launched.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from . import activity
from .base import CALL_RANGE, SETUP_RANGE, MethodResult, MethodUnavailable, TimedCalls, synchronize


def _profiler():
    try:
        from torch.profiler import ProfilerActivity, profile, record_function, supported_activities
    except Exception as exc:  # noqa: BLE001  (a torch build without the profiler)
        raise MethodUnavailable(f"torch.profiler is not importable: {exc}") from exc
    if ProfilerActivity.CUDA not in supported_activities():
        raise MethodUnavailable("this PyTorch build's profiler records no device activity (built without "
                                "CUPTI/roctracer)")
    return ProfilerActivity, profile, record_function


def _start(profile: Any, activities: list[Any]) -> Any:
    if torch.autograd._profiler_enabled():  # a fresh child runs no profiler: only solution code starts one
        raise MethodUnavailable("a profiler was already running in the evaluation process (left by the solution)",
                                suspicious=True)
    prof = profile(activities=activities, record_shapes=False, with_stack=False, profile_memory=False)
    try:
        prof.__enter__()
    except Exception as exc:  # noqa: BLE001  (CUPTI refusing, an incompatible kineto...)
        raise MethodUnavailable(f"the profiler could not start: {exc}") from exc
    return prof


def _profiled_loop(calls: TimedCalls) -> tuple[list[activity.Activity], list[float]]:
    """The timed loop under the profiler. Exceptions from the solution's calls propagate as they
    are: they must not turn into a quiet fallback to a method that sees less."""
    ProfilerActivity, profile, record_function = _profiler()
    prof = _start(profile, [ProfilerActivity.CPU, ProfilerActivity.CUDA])
    host_ms: list[float] = []
    switched_off = False
    try:
        for i in range(calls.iterations):
            args = calls.setup()
            synchronize(calls.device)
            calls.enter_call()
            begin = time.perf_counter_ns()
            with record_function(f"{CALL_RANGE}#{i}"):
                calls.call(args)
            synchronize(calls.device)
            host_ms.append((time.perf_counter_ns() - begin) / 1e6)
            calls.exit_call()
            switched_off = switched_off or not torch.autograd._profiler_enabled()
        calls.finish()
    finally:
        try:
            prof.__exit__(None, None, None)
        except Exception:  # noqa: BLE001  (already stopped by someone else)
            switched_off = True
    if switched_off:
        raise MethodUnavailable("the profiler was switched off during the timed calls (by the solution)",
                                suspicious=True)
    try:
        return activity.from_kineto(prof.profiler.kineto_results.events()), host_ms
    except Exception as exc:  # noqa: BLE001  (the results API moved in this torch version)
        raise MethodUnavailable(f"the profiler's records could not be read: {exc!r}") from exc


def time_device(calls: TimedCalls) -> MethodResult:
    if not calls.device.is_gpu:
        raise MethodUnavailable("device activity records need a GPU")
    records, host_ms = _profiled_loop(calls)
    found = activity.attribute(records, calls.iterations, CALL_RANGE, SETUP_RANGE)
    spans = [c.span_ns for c in found.calls]
    if found.setup_count == 0 and all(s is None for s in spans):
        raise MethodUnavailable("the profiler delivered no device activity records (CUPTI/roctracer in use by "
                                "another tool, or not permitted here)")
    result = MethodResult(times_ms=[], device_ms=[s / 1e6 if s is not None else None for s in spans],
                          host_ms=host_ms)
    result.warnings.extend(activity.work_set_warnings(found.calls))
    if found.foreign:
        result.suspicious.append(activity.foreign_description(found.foreign))
    if found.unmatched:
        result.notes.append(f"{len(found.unmatched)} device record(s) had no launch record and were not counted")
    return result
