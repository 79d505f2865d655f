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
the host-bound verdict stands.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable

from .timing import Measurement, host_dominates
from .timing_methods.base import synchronize

RECHECK_CALLS = 7

# One call on fresh inputs, prepared, then L2 flushed and the device synchronised before it starts:
# (wall ms from its start until the device finished, a problem with its outputs or None).
CallOnce = Callable[[int], tuple[float, str | None]]


def timed_call(fn: Callable[..., Any], args: list[Any], flusher: Any, device: Any) -> tuple[Any, float]:
    """One call, no profiler, from a cold L2 (``flusher``: timing.L2Flusher) and an idle device: its
    result and the wall ms from its start until the device finished."""
    flusher.flush()
    synchronize(device)
    began = time.perf_counter_ns()
    result = fn(*args)
    synchronize(device)
    return result, (time.perf_counter_ns() - began) / 1e6


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


def recheck(m: Measurement, call_once: CallOnce, device: Any, calls: int = RECHECK_CALLS) -> None:
    """Re-judge ``m`` (changed in place) on ``calls`` unprofiled calls; see the module docstring."""
    if not applies(m):
        return
    try:
        walls = []
        for k in range(calls):
            wall, problem = call_once(k)
            if problem:
                m.warnings.append(f"host-bound stands: in a re-check without the profiler, {problem}")
                return
            walls.append(wall)
        bracket = _bracket_ms(device, calls)
    except Exception as exc:  # noqa: BLE001  (the verdict of the timed calls stands)
        m.warnings.append(f"host-bound stands: the re-check without the profiler failed: {exc!r}")
        return
    host, device_median = statistics.median(walls), statistics.median(m.device_ms)
    seen = (f"{calls} calls without the profiler on fresh inputs, outputs checked: host span "
            f"{host * 1e3:.1f} us, of which the synchronisation's own {bracket * 1e3:.1f} us")
    if host_dominates(max(0.0, host - bracket), device_median):
        m.note = "; ".join(filter(None, [m.note, f"confirmed by {seen}"]))
        return
    m.times_ms, m.host_bound = list(m.device_ms), False
    m.note = "; ".join(filter(None, [m.note, f"not host-bound after all: {seen}, against the device span "
                                             f"{device_median * 1e3:.1f} us; the profiler's own cost made it "
                                             f"look host-bound; device span reported"]))
