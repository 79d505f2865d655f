"""The ``device`` method: each call's device span from the vendor's activity records.

The timed loop runs once under a profiler recording with device activity on (CUPTI on NVIDIA,
roctracer/rocprofiler on ROCm, through PyTorch's Kineto; see ``_Recording``). Each call is a
``record_function`` range; the harness's own work between calls (new arguments, the L2 flush) is
in separately named setup ranges. Per call the span runs from the first start to the last end of
every kernel, memcpy and memset the call launched, on any stream (``activity.attribute``).

The device is synchronised after each call, so its span cannot overlap the next call's, and
after the next call's arguments are copied. Then a hold (a one-thread spin kernel,
``torch.cuda._sleep``, NVIDIA only) and the L2 flush are queued just before the call: the host
launches the call's kernels while the device still spins, so the first of them starts as the
flush ends, on a device that is already busy, whatever the host's launch took. Without a hold
the device idled whenever the launch took longer than the 30 us flush: with a synchronisation
between flush and call, bf16 GEMMs of 200 us to 1.4 ms read 2 to 12% above Nsight Compute with
run-to-run spreads of 3 to 6.5% (H100, fifth session); with the flush queued right before the
call but no hold, on a host whose launches under the profiler took 100 us or more at times, a
GEMM of 344 us read up to 365 us, five-run spreads over 2% in 14 of 43 groups (seventh session;
with a 300 us hold 1 of 43, with events behind a 500 us spin 0 of 43). The hold lasts twice the
call's host time (warm-up) plus the profiler's range, 0.5 to 2 ms, for calls that return within
50 us (``_Hold``: why not longer ones). What the host spans wait for it is taken back out of them
(``_less_hold``).

The same pass gives the host span of each call: wall-clock and the calling thread's CPU time,
until the call returned (``own``) and until the device has finished (``full``). The full span
also holds whatever of the flush was still running when the call started; the measuring bracket
(an empty range after the same flush) holds it too and is subtracted (``timing.choose_latency``).
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

import torch

from ..phases import phase
from . import activity, cupti_tsc
from .base import (CALL_RANGE, HOLD_RANGE, PROBE_RANGE, SETUP_RANGE, HostSpans, MethodResult, MethodUnavailable,
                   TimedCalls, synchronize)


def _profiler() -> tuple[set[Any], Any]:
    """The activities a recording enables (host ranges and device activity), and record_function."""
    try:
        from torch.profiler import ProfilerActivity, record_function, supported_activities
    except Exception as exc:  # noqa: BLE001  (a torch build without the profiler)
        raise MethodUnavailable(f"torch.profiler is not importable: {exc}") from exc
    if ProfilerActivity.CUDA not in supported_activities():
        raise MethodUnavailable("this PyTorch build's profiler records no device activity (built without "
                                "CUPTI/roctracer)")
    return {ProfilerActivity.CPU, ProfilerActivity.CUDA}, record_function


class _Recording:
    """A profiler recording through Kineto's own entry points rather than ``torch.profiler.profile``.

    On the host it records only user-scope ranges (``record_function``: the harness's call and
    setup ranges, and any the solution opens), not every operator: the attribution needs the
    ranges, the launch records and the device records, and nothing else. With every operator
    recorded, an RMSNorm reference call left about 70 records per call (3,568 per loop of 50),
    reading them took 40 to 60 ms per loop, and each operator added its own cost to the call's
    host span. ``torch.profiler.profile`` also builds Python events for every record and may
    import torch._inductor on start; neither is needed here."""

    def __init__(self, activities: set[Any]):
        self.activities = activities
        self.events: list[Any] = []

    def start(self) -> None:
        from torch._C._profiler import RecordScope, _ExperimentalConfig
        from torch.autograd import ProfilerConfig, ProfilerState, _enable_profiler, _prepare_profiler

        config = ProfilerConfig(ProfilerState.KINETO, False, False, False, False, False, _ExperimentalConfig())
        _prepare_profiler(config, self.activities)
        _enable_profiler(config, self.activities, {RecordScope.USER_SCOPE})

    def stop(self) -> None:
        from torch.autograd import _disable_profiler

        self.events = list(_disable_profiler().events())


def _start(activities: set[Any], vendor: str) -> _Recording:
    if torch.autograd._profiler_enabled():  # a fresh child runs no profiler: only solution code starts one
        raise MethodUnavailable("a profiler was already running in the evaluation process (left by the solution)",
                                suspicious=True)
    if vendor == "cuda":
        cupti_tsc.prepare()  # before the process's first CUDA profiler session (see cupti_tsc)
    recording = _Recording(activities)
    try:
        recording.start()
    except Exception as exc:  # noqa: BLE001  (CUPTI refusing, an incompatible kineto or torch API...)
        raise MethodUnavailable(f"the profiler could not start: {exc!r}") from exc
    cupti_tsc.after_start()
    return recording


class _Session:
    """A running recording, and whether it was switched off while it ran."""

    def __init__(self, recording: _Recording):
        self.recording, self.switched_off = recording, False

    def check(self) -> None:
        self.switched_off = self.switched_off or not torch.autograd._profiler_enabled()


@contextmanager
def _session(activities: set[Any], vendor: str) -> Iterator[_Session]:
    """Record the block. A profiler the solution switched off is REWARD_HACK evidence; an
    exception from the block (the solution's) propagates as it is."""
    session = _Session(_start(activities, vendor))
    try:
        yield session
    finally:
        try:
            session.recording.stop()
        except Exception:  # noqa: BLE001  (already stopped by someone else)
            session.switched_off = True
    if session.switched_off:
        raise MethodUnavailable("the profiler was switched off during the timed calls (by the solution)",
                                suspicious=True)


PRIMING_CALLS = 3
_primed: set[str] = set()  # devices whose first profiler session of this process has run (mutated, never rebound)


def _prime(calls: TimedCalls, activities: set[Any], record_function: Any) -> None:
    """Once per process and device: a short profiler session whose records are thrown away.

    The first session of a process was seen to carry far more host overhead per call (host spans
    of 236 us around a 1.5 us kernel, 40 us in every later session), which made a tiny kernel look
    host-bound. The priming session repeats the last warm-up call under the same bracket."""
    if calls.device.torch_device in _primed or calls.warm_args is None:
        return
    _primed.add(calls.device.torch_device)
    with _session(activities, calls.device.vendor) as session:
        for _ in range(PRIMING_CALLS):
            calls.flush()
            synchronize(calls.device)
            calls.enter_call()
            with record_function(SETUP_RANGE):
                calls.fn(*calls.warm_args)
            synchronize(calls.device)
            calls.exit_call()
            session.check()


BRACKET_SAMPLES = 5


class _Stopwatch:
    """Wall-clock and the calling thread's CPU time from one start. The thread's, not the
    process's: on a loaded H100 host a 12 us matmul call showed about 0.7 ms of process CPU time,
    spent by other threads of the process (likely OpenMP workers still spinning after an earlier
    CPU op, and the profiler's own threads; not broken down further)."""

    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter_ns(), time.thread_time_ns()

    def read(self) -> tuple[float, float]:
        return (time.perf_counter_ns() - self.wall) / 1e6, (time.thread_time_ns() - self.cpu) / 1e6


def _measured(spans: HostSpans, calls: TimedCalls, body: Any) -> None:
    """Run ``body`` between the stopwatch readings a timed call gets, then wait for the device."""
    watch = _Stopwatch()
    body()
    wall_own, cpu_own = watch.read()
    synchronize(calls.device)
    wall_full, cpu_full = watch.read()
    spans.add(wall_own=wall_own, wall_full=wall_full, cpu_own=cpu_own, cpu_full=cpu_full)


def _bracket(calls: TimedCalls, record_function: Any, hold: _Hold | None = None) -> dict[str, float]:
    """The measuring bracket itself, around no call, in this session: what every call's spans
    carry besides the call (with the loop's ``hold`` before the flush, as every call gets it)."""
    def empty_range() -> None:
        with record_function(SETUP_RANGE):
            pass

    spans = HostSpans()
    for _ in range(BRACKET_SAMPLES):
        synchronize(calls.device)
        if hold is not None:
            hold.launch()
        calls.flush()  # as before every call: the full span waits for what is left of it
        _measured(spans, calls, empty_range)
    return spans.medians()


def _spin_available(calls: TimedCalls) -> bool:
    """``torch.cuda._sleep`` can run here: NVIDIA, for the hold and the clock probe alike."""
    return calls.device.vendor == "cuda" and callable(getattr(torch.cuda, "_sleep", None))


class _Hold:
    """A spin kernel queued before each call's flush, so that the device is still busy with it
    while the host launches the call (module docstring).

    Only for calls that return from the host within ``HOST_MAX_MS`` (median of the last five
    warm-up calls; the first ones compile and autotune): a kernel launch or a few. A call that
    spends longer on the host launches its kernels as it goes, and holding them all back would
    leave its device span without the launch gaps it really has: a PyTorch RMSNorm of a dozen small
    operators (host 130 us, device 30 us) then read host-bound at its profiled host span where
    it had read its gapped device span (seventh session). Such calls run as before, unheld.

    The hold lasts twice that host time plus the profiler's range (the bracket), 0.5 to 2 ms.
    ``torch.cuda._sleep`` counts SM cycles, converted here at 2 GHz: at a lower clock the hold
    only lasts longer. NVIDIA only: on ROCm the spin's counter runs at a rate not verified here
    (the clock probe is off there too)."""

    MIN_US, MAX_US = 500.0, 2000.0
    HOST_MAX_MS = 0.05
    CYCLES_PER_US = 2000

    def __init__(self, calls: TimedCalls, record_function: Any, bracket_own_ms: float):
        self.record_function = record_function
        recent = sorted(calls.warm_own_ms[-5:])
        self.own_ms = recent[len(recent) // 2] if recent else None
        held = _spin_available(calls) and self.own_ms is not None and self.own_ms <= self.HOST_MAX_MS
        self.us = hold_us(self.own_ms, bracket_own_ms) if held else 0.0
        self.cycles = int(self.us * self.CYCLES_PER_US)

    def launch(self) -> None:
        if self.cycles > 0:
            with self.record_function(f"{HOLD_RANGE}#{self.cycles}"):
                torch.cuda._sleep(self.cycles)

    def note(self, measured_ms: float) -> str | None:
        if self.us:
            return (f"each call's flush queued behind a {self.us:.0f} us hold (measured {measured_ms * 1e3:.0f} us; "
                    f"warm-up calls returned in {self.own_ms * 1e3:.1f} us), so its kernels were launched before "
                    f"the device got to them")
        if self.own_ms is not None and self.own_ms > self.HOST_MAX_MS:
            return (f"no hold before the flush: warm-up calls spent {self.own_ms * 1e3:.1f} us on the host "
                    f"(over {self.HOST_MAX_MS * 1e3:.0f} us), so each call launched its kernels as it went")
        return None


def hold_us(own_ms: float, bracket_own_ms: float) -> float:
    """The hold's length: twice the host's time to return from a call under the profiler (a
    warm-up call's ``own_ms`` plus the bracket's range), within 0.5 to 2 ms."""
    return min(_Hold.MAX_US, max(_Hold.MIN_US, 2e3 * (own_ms + max(0.0, bracket_own_ms))))


def _less_hold(full_ms: float, own_ms: float, hold_ms: float) -> float:
    """A host span until the device finished, less what it waited for the hold: a call that
    returned before the hold ended waited for the rest of it (and the flush behind it, as the
    bracket did) only because of the hold. Never below the span until the call returned."""
    return max(own_ms, full_ms - max(0.0, hold_ms - own_ms))


class _ClockProbe:
    """The SM clock right after each timed call, read on the device itself.

    ``torch.cuda._sleep(cycles)`` launches a kernel that spins until the SM's cycle counter has
    advanced by ``cycles``; its duration in the activity records, less that of a zero-cycle one,
    is ``cycles`` over the clock (``activity.sm_clocks_mhz``). NVML reads the clock between timed
    loops only; on an H100 a bf16 GEMM of 350 us read 339 us in a loop at 1980 MHz and 341 to
    417 us in loops that ended at 1530 to 1815 MHz after a sustained load had pushed the device
    into its power cap (sixth session), and this is what says, per loop, which it was. It runs in
    the idle gap after the call (the call's span and host spans are already taken), under a
    setup range. NVIDIA only: on ROCm the spin counts a clock whose rate was not verified here."""

    CYCLES = 20_000  # ~10 us at 2 GHz: long against the records' ~32 ns steps, short against the idle gap
    CALIBRATIONS = 5

    def __init__(self, calls: TimedCalls, record_function: Any):
        self.enabled = _spin_available(calls)
        self.record_function = record_function

    def launch(self, cycles: int) -> None:
        if self.enabled:
            with self.record_function(f"{PROBE_RANGE}#{cycles}"):
                torch.cuda._sleep(cycles)

    def calibrate(self, calls: TimedCalls) -> None:
        for _ in range(self.CALIBRATIONS if self.enabled else 0):
            synchronize(calls.device)
            self.launch(0)
        synchronize(calls.device)


COOLDOWN_MAX_S = 0.05


def _cool_down(calls: TimedCalls, device_wait_ms: float) -> None:
    """Leave the device idle for ``cooldown`` times as long as the host waited for it after the
    last call returned (at most 50 ms): with calls back to back, millisecond GEMMs on the H100 ran
    into the power cap, 6 to 15% above Nsight Compute's time and 4 to 11% apart from run to run.
    The wait, not the whole host span: a call whose time is the host's leaves the device idle
    anyway (a kernel of a few us slept as long as its 150 to 200 us host span under the profiler
    after every call, a large share of an evaluation's timed loops). The
    device is idle here (the call was synchronised) but for the clock probe's ~10 us spin."""
    gap_s = min(calls.cooldown * max(0.0, device_wait_ms) / 1e3, COOLDOWN_MAX_S)
    if gap_s > 0:
        time.sleep(gap_s)


@dataclass
class _Loop:
    records: list[activity.Activity]
    spans: HostSpans
    hold: _Hold | None = None  # the hold before each call's flush


def _profiled_loop(calls: TimedCalls) -> _Loop:
    """The timed loop under the profiler. Exceptions from the solution's calls propagate as they
    are: they must not turn into a quiet fallback to a method that sees less."""
    activities, record_function = _profiler()
    _prime(calls, activities, record_function)
    phase("    profiler primed")
    spans = HostSpans()
    probe = _ClockProbe(calls, record_function)
    with _session(activities, calls.device.vendor) as session:
        hold = _Hold(calls, record_function, _bracket(calls, record_function).get("wall_own", 0.0))
        spans.bracket = _bracket(calls, record_function, hold)
        probe.calibrate(calls)
        flush_wait = spans.bracket.get("wall_full", 0.0) - spans.bracket.get("wall_own", 0.0)
        phase("    profiler started, bracket measured")
        for i in range(calls.iterations):
            args = calls.arguments()
            synchronize(calls.device)  # the copies done: what is left of the flush is the same every call
            hold.launch()  # the device spins while the host launches the call (module docstring)
            calls.flush()  # queued right before the call: no idle device between them
            calls.enter_call()

            def timed_call(i: int = i, args: Any = args) -> None:
                with record_function(f"{CALL_RANGE}#{i}"):
                    calls.call(args)

            _measured(spans, calls, timed_call)
            calls.exit_call()
            session.check()
            probe.launch(probe.CYCLES)  # after the spans were taken; the next call waits for it
            # The host's wait for the device after the call returned, less the bracket's (for
            # what was left of the flush): the call's own device work.
            _cool_down(calls, spans.wall_full[-1] - spans.wall_own[-1] - flush_wait)
        calls.finish()
        phase(f"    {calls.iterations} timed call(s)")
    phase("    profiler stopped")
    try:
        records = activity.from_kineto(session.recording.events)
    except Exception as exc:  # noqa: BLE001  (the results API moved in this torch version)
        raise MethodUnavailable(f"the profiler's records could not be read: {exc!r}") from exc
    phase(f"    {len(records)} profiler record(s) read")
    return _Loop(records, spans, hold)


def _record_summary(records: list[activity.Activity]) -> str:
    kinds = {"launch": activity.LAUNCH_KINDS, "device": activity.DEVICE_KINDS, "host range": activity.HOST_RANGE_KINDS}
    return ", ".join(f"{sum(r.kind in members for r in records)} {name}" for name, members in kinds.items()) + " records"


def _workaround_state() -> str:
    state = cupti_tsc.state()
    return f"; CUPTI timestamp workaround: {state.reason}" if state is not None else ""


def time_device(calls: TimedCalls) -> MethodResult:
    if not calls.device.is_gpu:
        raise MethodUnavailable("device activity records need a GPU")
    loop = _profiled_loop(calls)
    records = loop.records
    found = activity.attribute(records, calls.iterations, CALL_RANGE, SETUP_RANGE)
    phase("    records attributed to calls")
    spans = [c.span_ns for c in found.calls]
    if found.setup_count == 0 and all(s is None for s in spans):
        raise MethodUnavailable(f"the profiler delivered no device activity records ({_record_summary(records)}; "
                                f"CUPTI/roctracer in use by another tool, not permitted here, or its records "
                                f"dropped{_workaround_state()})")
    held = sorted(ns for _, ns in activity.probe_durations(records, HOLD_RANGE))
    hold_ms = held[len(held) // 2] / 1e6 if held else 0.0
    bracket = loop.spans.bracket
    result = MethodResult(times_ms=[], device_ms=[s / 1e6 if s is not None else None for s in spans],
                          host_ms=[_less_hold(full, own, hold_ms) for full, own in
                                   zip(loop.spans.wall_full, loop.spans.wall_own)],
                          bracket_ms=_less_hold(bracket.get("wall_full", 0.0), bracket.get("wall_own", 0.0), hold_ms),
                          spans=loop.spans, host_functions=len(found.host_functions),
                          sm_clock_mhz=activity.sm_clocks_mhz(activity.probe_durations(records, PROBE_RANGE)) or None)
    if loop.hold is not None and (said := loop.hold.note(hold_ms)):
        result.notes.append(said)
    result.warnings.extend(activity.work_set_warnings(found.calls))
    if found.foreign:
        result.suspicious.append(activity.foreign_description(found.foreign))
    if found.forged_ranges:
        names = ", ".join(sorted(set(found.forged_ranges))[:5])
        result.suspicious.append(f"{len(found.forged_ranges)} profiler range(s) named like the harness's own were "
                                 f"opened by the solution ({names}): they would pass its work off as the harness's")
    if found.unmatched and any(r.kind in activity.LAUNCH_KINDS for r in records):
        # Every launch the harness's thread makes has its launch record here; device work without
        # one was launched where the profiler does not follow (another thread).
        result.suspicious.append(activity.unmatched_description(found.unmatched))
    elif found.unmatched:
        result.notes.append(f"{len(found.unmatched)} device record(s) had no launch record and were not counted")
    return result
