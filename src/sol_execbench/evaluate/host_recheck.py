"""A second look, without the profiler, at a call the device method found host-bound.

Under the profiler every call carries the profiler's own cost per operation and per launch on the
host. On the H100 machine here (a virtual machine) honest calls of 17 to 150 us had host spans of
140 to 360 us in some sessions and were reported at their host span (docs/timing.md). So when the
device method calls a solution host-bound, a few more calls run with no profiler: fresh inputs
made from secret seeds (a cache keyed by pointer or content misses), a cold L2, each timed from
its start until the device finished, and each call's outputs copied the moment it finished and
checked against the reference, so a solution cannot skip its work where it sees no profiler. If
the host spans there do not meet the host-bound rule, the verdict was the profiler's: the device
spans are reported and the note says so. If they do, or an output is wrong, or anything fails,
the host-bound verdict stands (after a second round, for a host that was slow for a moment).

On a contended machine (other processes on the GPU, or more runnable threads than cores) the wall
spans also hold the wait for other processes' kernels and for a core: on the H100 host, with three
other evaluations beside it, an honest 12 us matmul had unprofiled spans of several hundred us.
There, as in ``timing.choose_latency``, the calling thread's CPU time in the call must show the host
work too; where it does not, the device span stands and a warning says why.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable

from .phases import phase
from .timing import Measurement, host_dominates, waited_not_worked
from .timing_methods.base import synchronize

RECHECK_CALLS = 7


@dataclass
class CallSpans:
    wall_ms: float  # from the call's start until the device finished what it launched
    cpu_ms: float  # the calling thread's CPU time from the call's start until it returned


# One call on fresh inputs, prepared, then L2 flushed and the device synchronised before it starts:
# (its spans, a problem with its outputs or None).
CallOnce = Callable[[int], tuple[CallSpans, str | None]]


def timed_call(fn: Callable[..., Any], args: list[Any], flusher: Any, device: Any) -> tuple[Any, CallSpans]:
    """One call, no profiler, from a cold L2 (``flusher``: timing.L2Flusher) and an idle device: its
    result and its spans."""
    flusher.flush()
    synchronize(device)
    began, cpu_began = time.perf_counter_ns(), time.thread_time_ns()
    result = fn(*args)
    cpu = (time.thread_time_ns() - cpu_began) / 1e6
    synchronize(device)
    return result, CallSpans((time.perf_counter_ns() - began) / 1e6, cpu)


def _bracket_ms(device: Any, calls: int) -> float:
    """The synchronisation around no call: what each re-check span carries besides the call."""
    spans = []
    for _ in range(calls):
        synchronize(device)
        began = time.perf_counter_ns()
        synchronize(device)
        spans.append((time.perf_counter_ns() - began) / 1e6)
    return statistics.median(spans)


def applies(m: Measurement) -> bool:
    """Host-bound by the device method, with a device span for every call to fall back to."""
    return bool(m.host_bound and m.method == "device" and m.device_ms and m.host_ms
                and len(m.device_ms) == len(m.host_ms))


RECHECK_ROUNDS = 2
RECHECK_PAUSE_S = 0.2


def _round(call_once: CallOnce, device: Any, first: int, calls: int) -> tuple[list[CallSpans], float, str | None]:
    """``calls`` unprofiled calls (numbered from ``first``), then the synchronisation's own span:
    (their spans, that span, the first problem with an output or None)."""
    spans = []
    for k in range(first, first + calls):
        span, problem = call_once(k)
        if problem:
            return spans, 0.0, problem
        spans.append(span)
    return spans, _bracket_ms(device, calls), None


def recheck(m: Measurement, call_once: CallOnce, device: Any, calls: int = RECHECK_CALLS, *,
            contended: bool = False) -> None:
    """Re-judge ``m`` (changed in place) on ``calls`` unprofiled calls; see the module docstring.
    ``contended``: other processes used the GPU, or the host had more runnable threads than cores.

    Where those calls still look host-bound, a second round runs after a pause and the verdict
    stands only if it looks so too: on the H100 virtual machine an honest 17 us GEMM had, in one
    run of ten, profiled host spans of 209 us and unprofiled ones of 116 us (sixth session), the
    host slow for that moment, not the call. Host work is there in every round."""
    if not applies(m):
        return
    device_median = statistics.median(m.device_ms)
    try:
        for look in range(RECHECK_ROUNDS):
            if look:
                time.sleep(RECHECK_PAUSE_S)
            spans, bracket, problem = _round(call_once, device, look * calls, calls)
            if problem:
                m.warnings.append(f"host-bound stands: in a re-check without the profiler, {problem}")
                return
            phase(f"    host-bound: {calls} call(s) re-checked without the profiler (round {look + 1})")
            host, cpu = statistics.median(s.wall_ms for s in spans), statistics.median(s.cpu_ms for s in spans)
            second = " (the second of two rounds, after a pause; the first alike)" if look else ""
            seen = (f"{calls} calls without the profiler on fresh inputs, outputs checked{second}: host span "
                    f"{host * 1e3:.1f} us, of which the synchronisation's own {bracket * 1e3:.1f} us")
            if not host_dominates(max(0.0, host - bracket), device_median) or \
                    waited_not_worked(contended, m.host_functions, cpu, device_median):
                break
    except Exception as exc:  # noqa: BLE001  (the verdict of the timed calls stands)
        m.warnings.append(f"host-bound stands: the re-check without the profiler failed: {exc!r}")
        return
    if not host_dominates(max(0.0, host - bracket), device_median):
        _take_back(m, f"not host-bound after all: {seen}, against the device span {device_median * 1e3:.1f} us; "
                      f"the profiler's own cost made it look host-bound; device span reported")
        return
    if waited_not_worked(contended, m.host_functions, cpu, device_median):
        _take_back(m, f"not host-bound after all: {seen}, but the calling thread spent only {cpu * 1e3:.1f} us "
                      f"of CPU time in the call on a contended machine: the wait is taken for other processes' "
                      f"GPU work or a busy host, not host work; device span reported")
        m.warnings.append(f"host span {host * 1e3:.1f} us against the device span {device_median * 1e3:.1f} us "
                          f"on a contended machine, with {cpu * 1e3:.1f} us of CPU time in the call: device span "
                          f"reported")
        return
    m.note = "; ".join(filter(None, [m.note, f"confirmed by {seen}" + (
        f"; {cpu * 1e3:.1f} us of CPU time in the call" if contended else "")]))


def _take_back(m: Measurement, why: str) -> None:
    m.times_ms, m.host_bound = list(m.device_ms or []), False
    m.note = "; ".join(filter(None, [m.note, why]))
