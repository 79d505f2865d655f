"""Measuring a reference and a solution side by side: the one public entry of timing.

``measure`` warms each side up, runs the device pass (profiler, or device events) and the host
pass (wall clock, no profiler) over the same alternating rounds, and applies the latency rule
(``rule``) to every call. The result is a frozen value carrying its statistics.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

from ...phases import phase
from .arguments import private_copy
from .calls import CallKeeper, MethodUnavailable, SideCalls, synchronize
from .profiled import Cooldown, DevicePass, PassPlan, events_pass, profiler_pass
from .rule import LAUNCH_ALLOWANCE_US, host_set, side_latency_ms
from .statistics import (PROCESS_HOST_SHIFT, SideSpans, SpeedupInterval, Summary, device_sets_latency, device_speedup_se,
                         host_may_set, host_response_gap, host_speedup_se, host_time_ms, speedup_interval, summarize)
from .unprofiled import HostPass, host_pass

WARMUP_MIN_S = 0.1  # GPU: warm-up goes on until the device was busy this long (clocks rise over ms)
WARMUP_MAX_EXTRA_CALLS = 10_000
WARM_DEVICE_GAP_S = 0.25  # a measurement that ended this recently left the clocks up: no extra warm-up
_last_end: dict[str, float] = {}  # device -> perf_counter() when its last measurement ended

INSTRUMENTS = ("device", "events", "cpu")
# More host rounds where the host may set a side's latency and its host time is not yet precise
# (see host_rounds_wanted, _more_host_rounds).
HOST_SET_MARGIN = 3.0  # host time less the allowance within this many of its standard errors of the device time
SPEEDUP_PRECISION = 0.0125  # until the log speedup's standard error from host rounds is this
# ... where only one side's host time may set its latency and its partner runs the added rounds
# with it (``host_rounds_paired``), or a side is timed without a reference (its latency is the result,
# not a ratio): that host time moves by 10 to 50% between processes (one eager RMSNorm: 118, 104,
# 157 us), which no number of rounds within one removes.
LONE_SIDE_PRECISION = 0.025
# ... and never below a third of what a shift of every host time by PROCESS_HOST_SHIFT (log, the
# spread of host times between processes; statistics.py) moves the log speedup by
# (``host_response_gap``): the interval carries that move, and rounds' error under a third of it
# adds under 6% to it. Where the sides' latencies follow such a shift unequally (host-set at host
# times of 291 and 146 us, an eager reference and a Triton solution follow it 1.5 and 3.2 times)
# no rounds within one process narrow it. Replayed on 27 recorded evaluations of Triton solutions
# against the eager nemotron and olmo3 references (H200): host rounds 13,676 -> 6,500, the median
# interval 25% -> 33% of the speedup wide (before the interval carried the shift). Identical sides
# follow the shift alike: every recorded A/A set the same.
SHIFT_SE_SHARE = 1 / 3
# A host-set side whose partner's host time is far from its own device time gets no added rounds:
# nothing the two sides share cancels in their ratio, and the latency such a side reads moves
# between processes by far more than rounds within one can narrow (the eager reference of the
# 14-workload RMSNorm problem: 32 to 189 us over eleven processes on one H200). Replayed on 84
# recorded evaluations of Triton solutions against that reference, stopping its rounds at a
# standard error of 5% used 7,878 host rounds and 1 added device pass, none 4,368 and 0; the median
# interval 13.7% and 15.5% of the speedup wide, each run's interval holding 43% and 45% of the other
# runs' speedups; on every recorded A/A set it changed no target (benchmarks/aa_replay.py).
# A partner is near where its host time less the allowance is at least this share of its device
# time: it runs the added rounds beside the host-set side (host_rounds_paired).
HOST_NEAR_FRACTION = 0.5
HOST_ROUNDS_FACTOR = 24  # at most this many times the rounds of a pass in all
HOST_EXTENSION_BUDGET_S = 1.0  # and at most this long for the added rounds
# More device passes, after the host pass, while the device rounds leave the log speedup (or a lone
# side's log latency) with a standard error above this (``device_speedup_se``): 26 spans of a
# 1.4 us kernel, quantised to the records' steps, leave its device time known to a few percent. Replayed
# on 162 recorded A/A evaluations (H200, benchmarks/aa_replay.py), 1% kept every A/A target that
# 0.5% met with half the second passes; 1.5% and above lost workloads of a few microseconds.
DEVICE_SPEEDUP_PRECISION = 0.01
# ... and at least this share of the standard error the host rounds leave (device_rounds_wanted).
# Replayed on 84 recorded evaluations of Triton solutions against an eager reference whose host time
# alone set its latency (H200), 0.75 ran 7 added passes against 27 at 0.5, the median interval 11.34%
# of the speedup wide against 11.08%; on eleven recorded A/A sets it changed nothing (no A/A pair has
# one host-set side and one device-set side).
DEVICE_SHARE = 0.75
# ... each added pass of ``rounds`` rounds to the sides whose device time sets their latency, at most
# this many device passes in all: spans of a 1.2 us Triton add spread 1.02 to 1.4 us with the cache
# cold, and two passes (52 rounds) left its A/A speedup known to about 2.4%, 0.92 to 1.06 between
# runs (H200) ...
DEVICE_PASSES_MAX = 4
DEVICE_EXTENSION_BUDGET_S = 0.5  # ... and no added pass begins this long after the first added one did


@dataclass(frozen=True)
class HostPrecision:
    """Standard errors of the log speedup at which the added host rounds stop (``host_rounds_wanted``):
    ``both`` where both sides' host times may set their latencies, ``lone`` where one side's may
    (beside a partner whose rounds run with it, or without a reference); and the shift of every host
    time between processes (``process_shift``, log) whose effect on the speedup bounds them from below."""

    both: float = SPEEDUP_PRECISION
    lone: float = LONE_SIDE_PRECISION
    process_shift: float = PROCESS_HOST_SHIFT

    def wanted_se(self, host_set_sides: int, response_gap: float) -> float:
        """The standard error to stop at, for this many host-set sides whose latencies follow a shift
        of the host times ``response_gap`` apart (``host_response_gap``)."""
        floor = SHIFT_SE_SHARE * self.process_shift * response_gap
        return max(self.both if host_set_sides == 2 else max(self.both, self.lone), floor)


def rounds_per_pass(iterations: int, gpu: bool) -> int:
    """Rounds of each pass for ``iterations`` timed calls per side, as upstream counts them: on a GPU
    split over the device and the host pass, each an even number so that each side goes first as
    often (26 and 26 for 50); on the CPU, whose only pass is the host pass, ``iterations``."""
    if not gpu:
        return iterations
    half = -(-iterations // 2)
    return half + half % 2


@dataclass(frozen=True)
class TimingPlan:
    """How to measure: warm-up calls per side, rounds of each pass (``rounds_per_pass``), the device
    and its flusher, the method asked for (``auto|device|events|cpu``), the idle time after each call
    and the launch allowance."""

    warmup: int
    rounds: int
    device: Any
    flusher: Any
    method: str | None = None
    cooldown: float = 0.0
    allowance_ms: float = LAUNCH_ALLOWANCE_US / 1e3


@dataclass(frozen=True)
class SideMeasurement:
    """One side's rounds: its device span per device-pass round (None on the CPU or where the call
    launched no device work) and its host span per host-pass round, less the floor. Its latency is
    the rule applied to their trimmed means."""

    name: str
    instrument: str  # device | events | cpu
    device_ms: tuple[float | None, ...]
    host_ms: tuple[float, ...]
    sync_floor_ms: float
    allowance_ms: float
    device_call_indices: tuple[int, ...] = ()
    host_call_indices: tuple[int, ...] = ()
    device_opened_round: tuple[bool, ...] = ()  # per device span: its call was the first of its round
    host_opened_round: tuple[bool, ...] = ()
    sm_clock_mhz: tuple[float, ...] = ()
    hold_us: float = 0.0

    @property
    def spans(self) -> SideSpans:
        return SideSpans(self.device_ms, self.host_ms, self.allowance_ms)

    @property
    def latency_ms(self) -> float:
        """The side's latency: ``side_latency_ms`` of its device and host times."""
        return side_latency_ms(self.device_time_ms(), self.host_time_ms, self.allowance_ms)

    @property
    def host_time_ms(self) -> float:
        return host_time_ms(self.host_ms)

    @property
    def host_bound(self) -> bool:
        return host_set(self.device_time_ms(), self.host_time_ms, self.allowance_ms)

    @property
    def setting_spans_ms(self) -> tuple[float, ...]:
        """The spans of the pass that set the latency, each counted by the latency's own rule
        (``side_latency_ms`` of the device time and that host span): a host round shorter than the
        allowance reads as the device time, never below it, and never as a negative time."""
        if not self.host_bound:
            return tuple(d for d in self.device_ms if d is not None)
        device = self.device_time_ms()
        return tuple(side_latency_ms(device, h, self.allowance_ms) for h in self.host_ms)

    @property
    def summary(self) -> Summary:
        return summarize(list(self.setting_spans_ms))

    def device_time_ms(self) -> float | None:
        return self.spans.device_time_ms()

    def call_times(self) -> list[tuple[int, float, str]]:
        """(FreshArgs call index, ms, pass) of every timed call: device spans of the device pass,
        host spans (less the floor) of the host pass."""
        out = [(i, d, "device") for i, d in zip(self.device_call_indices, self.device_ms) if d is not None]
        return out + [(i, h, "host") for i, h in zip(self.host_call_indices, self.host_ms)]


@dataclass(frozen=True)
class PairedMeasurement:
    solution: SideMeasurement
    reference: SideMeasurement | None
    speedup: SpeedupInterval | None
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()  # about the solution's calls
    suspicious: tuple[str, ...] = ()  # evidence of tampering by the solution: REWARD_HACK
    host_functions: int = 0


class SideFailed(Exception):
    """A call of one side raised while being measured (``__cause__`` is the exception)."""

    def __init__(self, side: str, exc: BaseException):
        super().__init__(f"{side}: {exc}")
        self.side = side


def resolve_method(requested: str | None, device: Any) -> tuple[str, str | None]:
    """The device instrument to try first (``device``, ``events`` or ``cpu``), and a note when it is
    not what was asked for."""
    requested = requested or "auto"
    if not device.is_gpu:
        if requested in ("auto", "cpu"):
            return "cpu", None
        return "cpu", f"timing.method '{requested}' needs a GPU; the host clock was used"
    if requested == "events":
        return "events", None
    if requested == "cpu":
        return "device", "timing.method 'cpu' does not time GPU work; the device method was used"
    return "device", None


def _guarded(side: SideCalls) -> SideCalls:
    """The side, its function wrapped so that whatever it raises names the side (the caller tells a
    broken reference from a broken solution), on every path that calls it (warm-up, priming, passes)."""
    fn, name = side.fn, side.name

    def named_failures(*args: Any) -> Any:
        try:
            return fn(*args)
        except Exception as exc:
            raise SideFailed(name, exc) from exc

    return replace(side, fn=named_failures)


def _warm_up(sides: tuple[SideCalls, ...], plan: TimingPlan) -> None:
    began = time.perf_counter()
    for side in sides:
        for _ in range(plan.warmup):
            side.warm_args = side.fresh()
            side.warm_call(side.warm_args)
        if side.warm_args is not None:
            # re-used below and in priming while the other side writes the pools the sides share
            side.warm_args = private_copy(side.warm_args)
    for side in sides:
        side.touch_output_memory()
    phase(f"    {plan.warmup} warm-up call(s) per side")
    last = _last_end.get(plan.device.torch_device)
    if plan.device.is_gpu and not (last is not None and began - last < WARM_DEVICE_GAP_S):
        # Clocks come up from idle over milliseconds: keep the device busy before the first round,
        # idling between calls as the timed rounds do (``Cooldown``): called back to back, a 342 us
        # GEMM ran its first timed rounds in the power cap on an H100, 3% slow.
        warm = [s for s in sides if s.warm_args is not None]
        cooldown = Cooldown(plan.cooldown)
        for i in range(WARMUP_MAX_EXTRA_CALLS if warm else 0):
            if time.perf_counter() - began >= WARMUP_MIN_S:
                break
            side = warm[i % len(warm)]
            cooldown.before_call()
            side.warm_call(side.warm_args)
            returned = time.perf_counter_ns()
            synchronize(plan.device)
            cooldown.after_call((time.perf_counter_ns() - returned) / 1e6)
    synchronize(plan.device)


def _device_pass(first: str, plan: PassPlan, notes: list[str], suspicious: list[str]) -> DevicePass | None:
    if first == "cpu":
        return None
    if first == "device":
        try:
            return profiler_pass(plan)
        except MethodUnavailable as exc:
            synchronize(plan.device)
            if exc.suspicious:
                suspicious.append(exc.reason)
            notes.append(f"profiler unavailable ({exc.reason}); device events on the current stream used")
    return events_pass(plan)


def _side(name: str, device: DevicePass | None, host: HostPass, allowance_ms: float) -> SideMeasurement:
    hosts = tuple(max(0.0, h - host.floor_ms) for h in host.spans_ms[name])
    devices: tuple[float | None, ...] = tuple(device.spans_ms[name]) if device is not None else ()
    return SideMeasurement(
        name=name, instrument=device.instrument if device is not None else "cpu", device_ms=devices,
        host_ms=hosts, sync_floor_ms=host.floor_ms, allowance_ms=allowance_ms,
        device_call_indices=tuple(device.call_indices[name]) if device is not None else (),
        host_call_indices=tuple(host.call_indices[name]),
        device_opened_round=tuple(device.opened_round.get(name, ())) if device is not None else (),
        host_opened_round=tuple(host.opened_round.get(name, ())),
        sm_clock_mhz=tuple(device.sm_clock_mhz.get(name, ())) if device is not None else (),
        hold_us=device.hold_us.get(name, 0.0) if device is not None else 0.0)


def _pair(sides: tuple[SideCalls, ...], device: DevicePass | None, host: HostPass,
          allowance_ms: float) -> tuple[SideMeasurement, SideMeasurement | None]:
    """(solution, reference or None) as measured so far; ``sides`` is (reference, solution) or (solution,)."""
    solution = _side(sides[-1].name, device, host, allowance_ms)
    return solution, _side(sides[0].name, device, host, allowance_ms) if len(sides) == 2 else None


def host_rounds_wanted(solution: SideMeasurement, reference: SideMeasurement | None,
                       precision: HostPrecision = HostPrecision()) -> bool:
    """Whether a side's host time may set its latency (host time less the allowance within
    ``HOST_SET_MARGIN`` standard errors of its device time, or above it), the added rounds would
    run for every side (``host_rounds_paired``) and the speedup is not yet known to ``precision``
    (``host_speedup_se``; ``benchmarks/aa_replay.py`` replays other values): ``both`` where both
    sides' host times may set their latencies, else ``lone``; never below a third of what a shift of
    the host times between processes moves the speedup by (``PROCESS_HOST_SHIFT``). The host time
    less the allowance is a difference of two larger numbers: where it sets the latency its noise
    is the host time's, magnified (a host time of 145 us, known to 0.75%, gives a latency of 45 us
    known to 2.4%), so it needs more rounds than a device time for the same precision; host rounds
    cost no profiler."""
    setting = _host_set_sides(solution, reference)
    if not setting or not _every_side_runs_them(solution, reference, setting):
        return False
    ref = reference.spans if reference is not None else None
    gap = host_response_gap(solution.spans, ref, HOST_SET_MARGIN) if ref is not None else 0.0
    return host_speedup_se(solution.spans, ref, HOST_SET_MARGIN) > precision.wanted_se(len(setting), gap)


def _sides(solution: SideMeasurement, reference: SideMeasurement | None) -> list[SideMeasurement]:
    return [reference, solution] if reference is not None else [solution]


def _host_set_sides(solution: SideMeasurement, reference: SideMeasurement | None) -> list[str]:
    return [s.name for s in _sides(solution, reference) if host_may_set(s.spans, HOST_SET_MARGIN)]


def host_rounds_paired(solution: SideMeasurement, reference: SideMeasurement | None) -> bool:
    """Whether added host rounds would run for every side: a side timed without a reference, or
    two sides each of whose host time may set its latency or, less the allowance, is at least
    ``HOST_NEAR_FRACTION`` of its device time. Host load comes and goes by stretches: measured
    alone, one side's host time would meet load its partner never saw, though a partner this near
    would have been host-set under it too (docs/validation.md). Beside a partner further below, a
    host-set side gets no added rounds (``LONE_SIDE_PRECISION``'s comment says why)."""
    return _every_side_runs_them(solution, reference, _host_set_sides(solution, reference))


def _every_side_runs_them(solution: SideMeasurement, reference: SideMeasurement | None, setting: list[str]) -> bool:
    """``host_rounds_paired`` given the sides whose host time may set their latency (``setting``)."""
    return all(s.name in setting or _host_near(s) for s in _sides(solution, reference))


def _host_near(side: SideMeasurement) -> bool:
    device = side.device_time_ms()
    return device is not None and side.host_time_ms - side.allowance_ms >= HOST_NEAR_FRACTION * device


def _more_host_rounds(solution: SideMeasurement, reference: SideMeasurement | None, rounds: int,
                      per_round_s: float, spent_s: float) -> int:
    """Host-pass rounds to add next (an even number, so each side goes first as often): another
    ``rounds`` while they are wanted, within ``HOST_ROUNDS_FACTOR`` times ``rounds`` in all and
    ``HOST_EXTENSION_BUDGET_S`` of added rounds."""
    if not host_rounds_wanted(solution, reference):
        return 0
    done = max(len(s.host_ms) for s in (solution, reference) if s is not None)
    affordable = int((HOST_EXTENSION_BUDGET_S - spent_s) / per_round_s) if per_round_s > 0 else rounds
    chunk = min(rounds + rounds % 2, HOST_ROUNDS_FACTOR * rounds - done, affordable)
    return max(0, chunk - chunk % 2)


def device_rounds_wanted(solution: SideMeasurement, reference: SideMeasurement | None,
                         precision: float = DEVICE_SPEEDUP_PRECISION, share: float = DEVICE_SHARE) -> bool:
    """Whether another device pass is wanted: the device rounds leave the log speedup with a
    standard error above ``precision`` (``device_speedup_se``), and at least ``share`` of the one
    the host rounds leave (``host_speedup_se``): below that, beside a host-set side's larger error,
    halving the device rounds' variance would narrow the speedup's standard error by under 10% (at
    0.75; ``benchmarks/aa_replay.py`` replays other values)."""
    sol, ref = solution.spans, reference.spans if reference is not None else None
    device = device_speedup_se(sol, ref)
    return device > precision and device >= share * host_speedup_se(sol, ref, HOST_SET_MARGIN)


def device_extended_sides(solution: SideMeasurement, reference: SideMeasurement | None) -> list[str]:
    """The sides that run an added device pass: those whose device time sets their latency. Another
    side's device rounds cannot move its latency, so calls of it would only cost time."""
    return [s.name for s in _sides(solution, reference) if device_sets_latency(s.spans)]


def _announced(batch: PassPlan, names: list[str], rounds: int) -> PassPlan:
    """``batch`` narrowed to the sides ``names`` names and to ``rounds`` rounds, for a pass or batch
    added after the planned ones; each of those sides is told of the calls first (``audit_ahead``)."""
    sides = tuple(s for s in batch.sides if s.name in names)
    for side in sides:
        side.before_unforeseen_calls(rounds)
    return replace(batch, sides=sides, rounds=rounds)


def _more_device_passes(device: DevicePass, plan: PassPlan, host: HostPass, allowance_ms: float,
                        suspicious: list[str]) -> int:
    """Device passes of ``plan``'s rounds, by ``device``'s instrument, appended to it while
    ``device_rounds_wanted``, each to ``device_extended_sides``, within ``DEVICE_PASSES_MAX`` passes
    and ``DEVICE_EXTENSION_BUDGET_S``; each opens with the side the one before did not. Stops where
    the profiler could not run again (the passes so far stand; tampering is recorded). Returns how
    many were added."""
    added, began, batch = 0, time.perf_counter(), plan
    while 1 + added < DEVICE_PASSES_MAX and time.perf_counter() - began < DEVICE_EXTENSION_BUDGET_S:
        sol, ref = _pair(plan.sides, device, host, allowance_ms)
        if not device_rounds_wanted(sol, ref):
            break
        batch = batch.opened_by_the_other_side()
        extended = _announced(batch, device_extended_sides(sol, ref), plan.rounds)
        try:
            more = profiler_pass(extended) if device.instrument == "device" else events_pass(extended)
        except MethodUnavailable as exc:
            synchronize(plan.device)
            if exc.suspicious:
                suspicious.append(exc.reason)
            device.notes.append(f"an added device pass could not run ({exc.reason})")
            break
        device.extend(more)
        added += 1
    return added


def measure(solution: SideCalls, reference: SideCalls | None, plan: TimingPlan) -> PairedMeasurement:
    """Warm up, then time both sides in alternating rounds: the device pass, the host pass (with
    more rounds where a host time may set a latency and is imprecise), and more device passes
    while the device rounds leave the speedup imprecise (``_more_device_passes``). Each pass runs
    ``plan.rounds`` rounds (``rounds_per_pass``). The planned audited calls sit in the first two
    passes; before each pass added after them a side's ``audit_ahead`` may plant one among its calls.

    A call that raises ends the measurement with ``SideFailed`` naming its side."""
    first, resolved = resolve_method(plan.method, plan.device)
    notes = [resolved] if resolved else []
    sides = tuple(_guarded(s) for s in ((reference, solution) if reference is not None else (solution,)))
    _warm_up(sides, plan)
    passes = PassPlan(sides, plan.rounds, plan.device, plan.flusher, plan.cooldown)
    suspicious: list[str] = []
    try:
        device = _device_pass(first, passes, notes, suspicious)
        phase("    device pass")
        began = time.perf_counter()
        host = host_pass(passes)
        per_round_s = (time.perf_counter() - began) / plan.rounds
        phase("    host pass")
        extension_began, added, batch = time.perf_counter(), 0, passes
        while device is not None:
            sol, ref = _pair(sides, device, host, plan.allowance_ms)
            more = _more_host_rounds(sol, ref, plan.rounds, per_round_s, time.perf_counter() - extension_began)
            if not more:
                break
            batch = batch.opened_by_the_other_side()
            host_pass(_announced(batch, [s.name for s in batch.sides], more), into=host)
            added += more
        if added:
            phase(f"    host pass: {added} more round(s)")
        if device is not None and (more_passes := _more_device_passes(device, passes, host, plan.allowance_ms,
                                                                      suspicious)):
            phase(f"    {more_passes} more device pass(es)")
    finally:
        _last_end[plan.device.torch_device] = time.perf_counter()
    sol, ref = _pair(sides, device, host, plan.allowance_ms)
    interval = speedup_interval(ref.spans, sol.spans) if ref is not None else None
    warnings = list(device.warnings) if device is not None else []
    if device is not None and device.instrument != first:
        warnings.insert(0, f"timing method '{first}' was not used: {notes[-1]}")
    return PairedMeasurement(
        solution=sol, reference=ref, speedup=interval,
        notes=tuple(notes + (device.notes if device is not None else [])), warnings=tuple(warnings),
        suspicious=tuple(suspicious + (device.suspicious if device is not None else [])),
        host_functions=device.host_functions if device is not None else 0)


__all__ = ["CallKeeper", "HostPrecision", "PairedMeasurement", "SideCalls", "SideFailed", "SideMeasurement", "TimingPlan", "measure",
           "resolve_method", "rounds_per_pass"]
