"""The device pass: each timed call's device span from the vendor's activity records.

The rounds run once under a profiler recording with device activity on (CUPTI on NVIDIA,
roctracer/rocprofiler on ROCm, through PyTorch's Kineto; see ``_Recording``). Each call is a
``record_function`` range; the harness's work between calls (new arguments, the L2 flush, the hold,
the clock probe) is in setup ranges. A call's span runs from the first start to the last end of
every kernel, memcpy and memset it launched, on any stream (``activity.attribute``).

Before each call the device is synchronised, then a hold (a one-thread spin kernel,
``torch.cuda._sleep``, NVIDIA only) and the flush are queued: the host launches the call's work
while the device still spins, so the span holds the device's work without the host's launch gaps
(the host's share is measured in the unprofiled pass). Without a hold, a GEMM of 344 us read up to
365 us on an H100 whenever the profiled launch took longer than the flush. After each call the
device is synchronised again and the clock probe runs; before the next call's hold the device has
idled for ``cooldown`` times the call's device work (power cap; ``Cooldown``).

All the harness's work between two calls (the clock probe after the one, the arguments, the hold
and the flush of the other) sits in one setup range, the gap range: each range costs a record on
the host and one projected onto the device, and the records' number sets what stopping the
recording and reading it cost (52 calls of an eager RMSNorm left 1,979 records with a range per
piece of work, 1,669 with one, and a pass took about 49 ms against 45 on an H200).

Where the profiler cannot run, device events around each call on the current stream stand in
(``events``), behind the same hold: they see no other stream.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator

import torch

from ...phases import phase
from . import activity, cupti_tsc
from .calls import CALL_RANGE, PROBE_RANGE, SETUP_RANGE, MethodUnavailable, SideCalls, flush, synchronize

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


def recording(device: Any) -> tuple[Any, Any]:
    """(a context manager recording device activity and user ranges as the device pass does,
    ``record_function``) for ``--profile torch``: the session's ``recording.events`` after the block."""
    activities, record_function = _profiler()
    return _session(activities, device.vendor), record_function


PRIMING_CALLS = 3
_primed: set[str] = set()  # devices whose first profiler session of this process has run (mutated, never rebound)


def _prime(side: SideCalls, device: Any, flusher: Any, activities: set[Any], record_function: Any) -> None:
    """Once per process and device: a short profiler session whose records are thrown away (the
    first recording of a process carried far more host overhead per call than later ones)."""
    if device.torch_device in _primed or side.warm_args is None:
        return
    _primed.add(device.torch_device)
    with _session(activities, device.vendor) as session:
        for _ in range(PRIMING_CALLS):
            flush(flusher)
            synchronize(device)
            side.enter_call()
            with record_function(SETUP_RANGE):
                side.fn(*side.warm_args)
            synchronize(device)
            side.exit_call()
            session.check()


def spin_available(device: Any) -> bool:
    """``torch.cuda._sleep`` can run here: NVIDIA, for the hold and the clock probe alike."""
    return device.vendor == "cuda" and callable(getattr(torch.cuda, "_sleep", None))


class Hold:
    """A spin kernel queued before each call's flush, so the device is still busy with it while the
    host launches the call. Each side's first hold lasts twice its host time per call (median of
    its last warm-up calls) plus 100 us for the profiler's ranges, within 0.2 to 2 ms; every later
    one lasts 1.25 times the longest of the side's last four launches under the profiler (from the
    hold's launch until the call returned) plus 20 us, within 50 us and 2 ms. A call that takes
    longer on the host launches its last kernels into a running device, and its host time sets its
    latency anyway. ``torch.cuda._sleep`` counts SM cycles, converted at 2 GHz (at a lower clock the
    hold only lasts longer). NVIDIA only: on ROCm the spin counts a clock whose rate was not verified."""

    MIN_US, MAX_US = 200.0, 2000.0
    RANGE_US = 100.0
    CYCLES_PER_US = 2000
    LAUNCH_FACTOR, LAUNCH_PAD_US, LAUNCH_MIN_US = 1.25, 20.0, 50.0
    RECENT_LAUNCHES = 4

    def __init__(self, own_ms: float | None, enabled: bool):
        self.enabled = enabled
        self.us = hold_us(own_ms) if enabled else 0.0  # the next hold's length
        self.used_us: list[float] = []
        self._launches_us: list[float] = []

    def launch(self) -> None:
        """Queue the hold (inside the caller's setup range, in the device pass the gap range)."""
        if self.us > 0:
            self.used_us.append(self.us)
            torch.cuda._sleep(int(self.us * self.CYCLES_PER_US))

    def work_after(self, launched_ns: int, returned_ns: int, waited_ms: float) -> float:
        """Of the host's wait after a call returned (``waited_ms``; the hold was launched at
        ``launched_ns``, the call returned at ``returned_ns``), the part spent on device work other
        than the hold: the cooldown is sized by that, not by a spin that draws next to no power.
        The launch's length (hold launched until the call returned) sizes the side's next hold."""
        launch_ms = (returned_ns - launched_ns) / 1e6
        hold_left_ms = max(0.0, self.us / 1e3 - launch_ms)
        if self.enabled:
            self._launches_us = (self._launches_us + [launch_ms * 1e3])[-self.RECENT_LAUNCHES:]
            wanted = self.LAUNCH_FACTOR * max(self._launches_us) + self.LAUNCH_PAD_US
            self.us = min(self.MAX_US, max(self.LAUNCH_MIN_US, wanted))
        return max(0.0, waited_ms - hold_left_ms)

    @property
    def median_us(self) -> float:
        used = sorted(self.used_us)
        return used[len(used) // 2] if used else 0.0


def hold_us(own_ms: float | None) -> float:
    """A side's first hold, for calls that return from the host in ``own_ms`` without the profiler."""
    wanted = 2e3 * (own_ms or 0.0) + Hold.RANGE_US
    return min(Hold.MAX_US, max(Hold.MIN_US, wanted))


class _ClockProbe:
    """The SM clock right after each timed call, read on the device itself.

    ``torch.cuda._sleep(cycles)`` launches a kernel that spins until the SM's cycle counter has
    advanced by ``cycles``; its duration in the activity records, less that of a zero-cycle one,
    is ``cycles`` over the clock (``activity.sm_clocks_mhz``). NVML reads the clock between timed
    loops only; on an H100 a bf16 GEMM of 350 us read 339 us in a loop at 1980 MHz and 341 to
    417 us in loops that ended at 1530 to 1815 MHz after a sustained load had pushed the device
    into its power cap, and this is what says, per loop, which it was. It runs after the call
    was synchronised, as the first work of the gap range that follows (``gap``), whose name
    carries its cycles. NVIDIA only: on ROCm the spin counts a clock whose rate was not verified
    here."""

    CYCLES = 20_000  # ~10 us at 2 GHz: long against the records' ~32 ns steps, short against the idle gap
    CALIBRATIONS = 5

    def __init__(self, enabled: bool, record_function: Any):
        self.enabled = enabled
        self.record_function = record_function

    @contextmanager
    def gap(self, cycles: int | None) -> Iterator[None]:
        """The setup range of the harness's work between two calls, opened by a probe of ``cycles``
        (None: no call came before, no probe): ``PROBE_RANGE#<cycles>``, the probe's kernel the
        first launched in it (``activity.probe_durations``), else ``SETUP_RANGE``."""
        probing = self.enabled and cycles is not None
        with self.record_function(f"{PROBE_RANGE}#{cycles}" if probing else SETUP_RANGE):
            if probing:
                torch.cuda._sleep(cycles)
            yield

    def calibrate(self, device: Any) -> None:
        for _ in range(self.CALIBRATIONS if self.enabled else 0):
            synchronize(device)
            with self.gap(0):
                pass
        synchronize(device)


COOLDOWN_MAX_S = 0.05
COOLDOWN_MIN_S = 1e-4


class Cooldown:
    """Idle time for the device between timed calls: before the next call's device work starts,
    the device has sat idle for ``cooldown`` times as long as the host waited for the last call's
    device work after it returned (at most 50 ms): millisecond GEMMs called back to back ran into
    the power cap on the H100, 6 to 15% above Nsight Compute's time. The wait, not the host span: a
    call whose time is the host's leaves the device idle anyway. The harness's own work between the
    calls (new arguments, synchronisations, the hold's one-thread spin) counts as idle, so only what
    remains is slept; remainders under COOLDOWN_MIN_S are skipped: a sleep that short costs the host
    more than the gap (the timer's slack) and no power cap builds up over work that short."""

    def __init__(self, cooldown: float):
        self.cooldown = cooldown
        self._idle_until = 0.0  # perf_counter() before which the device should stay idle

    def after_call(self, device_wait_ms: float) -> None:
        gap_s = min(self.cooldown * max(0.0, device_wait_ms) / 1e3, COOLDOWN_MAX_S)
        self._idle_until = time.perf_counter() + gap_s

    def before_call(self, idle_ahead_s: float = 0.0) -> None:
        """Called right before the next call's device work is queued; ``idle_ahead_s`` of near-idle
        device time (the hold) still comes before it."""
        left_s = self._idle_until - idle_ahead_s - time.perf_counter()
        if left_s >= COOLDOWN_MIN_S:
            time.sleep(left_s)


@dataclass
class DevicePass:
    """Per side (by name), per round: the call's device span in ms (None: it launched no device
    work), the FreshArgs call index it ran on, and the SM clock the probe read after it."""

    instrument: str  # "device" or "events"
    spans_ms: dict[str, list[float | None]] = field(default_factory=dict)
    call_indices: dict[str, list[int]] = field(default_factory=dict)
    opened_round: dict[str, list[bool]] = field(default_factory=dict)  # per call: the first of its round
    sm_clock_mhz: dict[str, list[float]] = field(default_factory=dict)
    hold_us: dict[str, float] = field(default_factory=dict)
    host_functions: int = 0  # host functions the solution's calls enqueued in stream order
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # about the solution's calls
    suspicious: list[str] = field(default_factory=list)  # evidence of tampering: REWARD_HACK

    def extend(self, more: DevicePass) -> None:
        """Append a later device pass's rounds (same sides, same instrument) to this one's."""
        for name, spans in more.spans_ms.items():
            self.spans_ms[name].extend(spans)
            self.call_indices[name].extend(more.call_indices[name])
            self.opened_round.setdefault(name, []).extend(more.opened_round.get(name, ()))
            self.sm_clock_mhz.setdefault(name, []).extend(more.sm_clock_mhz.get(name, ()))
            if name in more.hold_us:
                self.hold_us[name] = (self.hold_us.get(name, more.hold_us[name]) + more.hold_us[name]) / 2
        self.host_functions += more.host_functions
        self.notes.extend(n for n in more.notes if n not in self.notes)
        self.warnings.extend(w for w in more.warnings if w not in self.warnings)
        self.suspicious.extend(more.suspicious)


@dataclass(frozen=True)
class PassPlan:
    """What both passes share: the sides, the order of each round, the device and its flusher."""

    sides: tuple[SideCalls, ...]
    rounds: int
    device: Any
    flusher: Any
    cooldown: float = 0.0
    # Which of ``sides`` goes first in round 0. The first call after any pause (the first pass, each
    # batch of added host rounds) ran 10 to 40% above its side's host time on an H100: were it always
    # the same side's, that side would read slower (docs/timing.md), so ``measure`` alternates it.
    first: int = 0

    def order(self, round_index: int) -> tuple[SideCalls, ...]:
        """Alternating: A B, then B A, so neither side always follows the other."""
        return self.sides if (round_index + self.first) % 2 == 0 else tuple(reversed(self.sides))

    def schedule(self) -> Iterator[tuple[int, int, SideCalls]]:
        """(round, position in the pass, side) of every call, in order."""
        k = 0
        for r in range(self.rounds):
            for side in self.order(r):
                yield r, k, side
                k += 1

    def opened_by_the_other_side(self) -> PassPlan:
        """This plan with round 0 opened by the side that did not open it here: each pass or batch
        after a pause starts so, from the one before it."""
        return replace(self, first=1 - self.first)

    def opens_round(self, side: SideCalls, round_index: int) -> bool:
        """Whether ``side``'s call is the first of round ``round_index``."""
        return self.order(round_index)[0] is side


def note_call(record: Any, plan: PassPlan, round_index: int, side: SideCalls) -> None:
    """Into a pass's ``record`` (``DevicePass``, ``HostPass``): the FreshArgs index of the call
    ``side`` is about to make, and whether it opens its round."""
    record.call_indices[side.name].append(side.fresh.calls_made - 1)
    record.opened_round.setdefault(side.name, []).append(plan.opens_round(side, round_index))


@dataclass(frozen=True)
class TimedCall:
    """When a timed call returned (``perf_counter_ns``) and how long the host then waited for the
    device (ms)."""

    returned_ns: int
    waited_ms: float


def _timed(plan: PassPlan, side: SideCalls, args: list[Any], body: Callable[[], Any]) -> TimedCall:
    """Run one call's ``body`` on a synchronised device, then wait for it. The audit keepers see
    the call afterwards."""
    side.enter_call()
    result = body()
    returned = time.perf_counter_ns()
    synchronize(plan.device)
    waited = (time.perf_counter_ns() - returned) / 1e6
    side.exit_call()
    side.observe(args, result)
    return TimedCall(returned, waited)


def _profiled_rounds(plan: PassPlan, result: DevicePass) -> list[activity.Activity]:
    """The rounds under the profiler; the activity records. Exceptions from a call propagate."""
    activities, record_function = _profiler()
    _prime(plan.sides[-1], plan.device, plan.flusher, activities, record_function)
    phase("    profiler primed")
    spin = spin_available(plan.device)
    holds = {s.name: Hold(s.typical_own_ms(), spin) for s in plan.sides}
    probe = _ClockProbe(spin, record_function)
    cooldown = Cooldown(plan.cooldown)
    with _session(activities, plan.device.vendor) as session:
        probe.calibrate(plan.device)
        probed: int | None = None  # the probe that opens the next gap: none before the first call
        for r, k, side in plan.schedule():
            with probe.gap(probed):
                args = side.fresh()
                note_call(result, plan, r, side)
                synchronize(plan.device)  # the copies done: every call starts from the same state
                cooldown.before_call(holds[side.name].us / 1e6)
                held_from = time.perf_counter_ns()
                holds[side.name].launch()
                plan.flusher.flush()

            def body(k: int = k, side: SideCalls = side, args: Any = args) -> Any:
                with record_function(f"{CALL_RANGE}#{k}"):
                    return side.call(args)

            timed = _timed(plan, side, args, body)
            session.check()
            probed = probe.CYCLES
            cooldown.after_call(holds[side.name].work_after(held_from, timed.returned_ns, timed.waited_ms))
        with probe.gap(probed):
            pass
        synchronize(plan.device)
    result.hold_us = {name: h.median_us for name, h in holds.items()}
    phase("    device pass: profiler stopped")
    try:
        return activity.from_kineto(session.recording.events)
    except Exception as exc:  # noqa: BLE001  (the results API moved in this torch version)
        raise MethodUnavailable(f"the profiler's records could not be read: {exc!r}") from exc


def _record_summary(records: list[activity.Activity]) -> str:
    kinds = {"launch": activity.LAUNCH_KINDS, "device": activity.DEVICE_KINDS, "host range": activity.HOST_RANGE_KINDS}
    return ", ".join(f"{sum(r.kind in members for r in records)} {name}" for name, members in kinds.items()) + " records"


def _workaround_state() -> str:
    state = cupti_tsc.state()
    return f"; CUPTI timestamp workaround: {state.reason}" if state is not None else ""


def profiler_pass(plan: PassPlan, solution_name: str = "solution") -> DevicePass:
    """The device pass through the profiler. Findings that show tampering are the solution's:
    the reference is the problem's own code."""
    if not plan.device.is_gpu:
        raise MethodUnavailable("device activity records need a GPU")
    result = DevicePass("device", {s.name: [] for s in plan.sides}, {s.name: [] for s in plan.sides})
    records = _profiled_rounds(plan, result)
    calls = len(plan.sides) * plan.rounds
    found = activity.attribute(records, calls, CALL_RANGE, SETUP_RANGE)
    if found.setup_count == 0 and all(c.span_ns is None for c in found.calls):
        raise MethodUnavailable(f"the profiler delivered no device activity records ({_record_summary(records)}; "
                                f"CUPTI/roctracer in use by another tool, not permitted here, or its records "
                                f"dropped{_workaround_state()})")
    clocks = activity.sm_clocks_mhz(activity.probe_durations(records, PROBE_RANGE))
    mine = []
    for (_, k, side), clock in zip(plan.schedule(), clocks + [None] * calls):
        span = found.calls[k].span_ns
        result.spans_ms[side.name].append(span / 1e6 if span is not None else None)
        if clock is not None:
            result.sm_clock_mhz.setdefault(side.name, []).append(clock)
        if side.name == solution_name:
            mine.append(found.calls[k])
    result.warnings.extend(activity.work_set_warnings(mine))
    result.host_functions = len(found.host_functions)
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


def events_pass(plan: PassPlan) -> DevicePass:
    """The device pass through device events on the current stream, behind the same hold."""
    if not plan.device.is_gpu:
        raise MethodUnavailable("device events need a GPU")
    result = DevicePass("events", {s.name: [] for s in plan.sides}, {s.name: [] for s in plan.sides})
    spin = spin_available(plan.device)
    holds = {s.name: Hold(s.typical_own_ms(), spin) for s in plan.sides}
    cooldown = Cooldown(plan.cooldown)
    for r, _, side in plan.schedule():
        args = side.arguments()
        note_call(result, plan, r, side)
        synchronize(plan.device)
        cooldown.before_call(holds[side.name].us / 1e6)
        held_from = time.perf_counter_ns()
        holds[side.name].launch()
        flush(plan.flusher)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

        def body(side: SideCalls = side, args: Any = args, start: Any = start, end: Any = end) -> Any:
            start.record()
            result = side.call(args)
            end.record()
            return result

        timed = _timed(plan, side, args, body)
        result.spans_ms[side.name].append(start.elapsed_time(end))
        cooldown.after_call(holds[side.name].work_after(held_from, timed.returned_ns, timed.waited_ms))
    synchronize(plan.device)
    result.hold_us = {name: h.median_us for name, h in holds.items()}
    return result
