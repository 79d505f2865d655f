"""The device pass and the paired measurement, run on the CPU with the device parts stood in for.

The profiler runs for real (CPU activity); synchronisation is a no-op and device records are
added next to the real call ranges, so everything but CUPTI itself is exercised.
"""

from __future__ import annotations

import dataclasses
import time

import pytest
import torch
from torch.profiler import ProfilerActivity, profile, record_function

from sol_execbench.evaluate.child.timing import (CallKeeper, FreshArgs, L2Flusher, SideCalls, SideFailed, TimingPlan,
                                           activity, calls, measure, paired, profiled, unprofiled)
from sol_execbench.evaluate.child.timing.activity import Activity
from sol_execbench.evaluate.child.timing.calls import CALL_RANGE, PROBE_RANGE, SETUP_RANGE
from sol_execbench.evaluate.child.timing.profiled import DevicePass
from sol_execbench.evaluate.child.timing.statistics import host_may_set

ROUNDS = 6
ALLOWANCE_MS = 0.025


@pytest.fixture
def fake_gpu(cpu_device, monkeypatch):
    for module in (profiled, unprofiled, paired, calls):
        monkeypatch.setattr(module, "synchronize", lambda d: None)
    # The CPU activity stands in for device activity.
    monkeypatch.setattr(profiled, "_profiler", lambda: ({ProfilerActivity.CPU}, record_function))
    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: None)  # the hold and the probe: their ranges, no kernel
    return dataclasses.replace(cpu_device, vendor="cuda", l2_bytes=1024)


def _with_kernels(kernel_ns: dict[str, int] | int, calls_without_kernels: tuple[int, ...] = ()):
    """Device records for every call range: ``kernel_ns`` per side (reference calls are the even
    positions of even rounds and the odd of odd rounds; ``_side_of``)."""
    real = activity.from_kineto

    def from_kineto(events):
        records = real(events)
        added = []
        for r in records:
            if r.kind == "user_annotation" and r.name.startswith(CALL_RANGE + "#"):
                k = int(r.name.rsplit("#", 1)[1])
                if k in calls_without_kernels:
                    continue
                ns = kernel_ns if isinstance(kernel_ns, int) else kernel_ns[_side_of(k)]
                added.append(Activity("kernel", "gemm", r.start_ns + 500, r.start_ns + 500 + ns, linked=r.correlation))
        return records + added

    return from_kineto


def _side_of(k: int) -> str:
    round_index, position = divmod(k, 2)
    first, second = ("reference", "solution") if round_index % 2 == 0 else ("solution", "reference")
    return first if position == 0 else second


def _sides(fn, reference_fn=None, keeper=None):
    bank = [[torch.full((64,), float(k)), torch.ones(64)] for k in range(3)]
    slots = 2 + 2 * ROUNDS + 2
    solution = SideCalls("solution", fn, FreshArgs(bank, slots=slots), [keeper] if keeper else [])
    reference = SideCalls("reference", reference_fn or (lambda x, y: x + y), FreshArgs(bank, slots=slots))
    return solution, reference


def _stops_computing_after(calls: int):
    """x + y for its first ``calls`` calls, then zeros without computing."""
    made = [0]

    def run(x, y):
        made[0] += 1
        return x + y if made[0] <= calls else torch.zeros_like(x)

    return run


def _measure(fake_gpu, fn, keeper=None, method="device", reference_fn=None):
    solution, reference = _sides(fn, reference_fn, keeper)
    plan = TimingPlan(warmup=2, rounds=ROUNDS, device=fake_gpu, flusher=L2Flusher(fake_gpu), method=method,
                      allowance_ms=ALLOWANCE_MS)
    return measure(solution, reference, plan)


def test_each_sides_device_spans_come_from_the_records_of_its_own_calls(fake_gpu, monkeypatch):
    monkeypatch.setattr(activity, "from_kineto", _with_kernels({"reference": 8_000_000, "solution": 5_000_000}))
    keeper = CallKeeper(4)
    m = _measure(fake_gpu, lambda x, y: x + y, keeper)
    assert m.solution.instrument == "device" and m.solution.device_ms == (5.0,) * ROUNDS
    assert m.reference.device_ms == (8.0,) * ROUNDS
    # 5 ms and 8 ms of device time: far above any host span here, so the device time is the latency.
    assert m.solution.latency_ms == 5.0 and m.reference.latency_ms == 8.0 and len(m.solution.host_ms) == ROUNDS
    assert m.speedup.point == pytest.approx(1.6) and m.speedup.verdict == "faster"
    assert m.warnings == () and m.suspicious == ()
    assert torch.equal(keeper.kept, torch.full((64,), 2.0))  # call 4 used bank set 4 % 3 = 1: 1 + 1
    # After two warm-up calls: the device pass's calls, then the host pass's.
    assert m.solution.device_call_indices == tuple(range(2, 2 + ROUNDS))
    assert m.solution.host_call_indices == tuple(range(2 + ROUNDS, 2 + 2 * ROUNDS))


def test_rounds_alternate_which_side_goes_first(fake_gpu, monkeypatch):
    order = []
    solution, reference = _sides(lambda x, y: order.append("s") or x + y, lambda x, y: order.append("r") or x + y)
    plan = profiled.PassPlan((reference, solution), 4, fake_gpu, L2Flusher(fake_gpu))
    unprofiled.host_pass(plan)
    assert "".join(order) == "rssrrssr"
    # a batch that opens with the other side
    order.clear()
    host = unprofiled.host_pass(plan)
    unprofiled.host_pass(dataclasses.replace(plan, rounds=2, first=1), into=host)
    assert "".join(order) == "rssrrssr" + "srrs"
    assert host.opened_round["reference"] == [True, False, True, False] + [False, True]
    assert host.opened_round["solution"] == [False, True, False, True] + [True, False]


def test_the_clock_probe_after_each_call_gives_its_sm_clock(fake_gpu, monkeypatch):
    """One zero-cycle probe per calibration and one spinning probe after each call, under the
    probe's own range; a 1 us floor and 20,000 cycles in 11 us make 2000 MHz."""
    with_kernels = _with_kernels(5_000_000)

    def from_kineto(events):
        records = with_kernels(events)
        for r in list(records):
            if r.kind == "user_annotation" and r.name.startswith(PROBE_RANGE + "#"):
                cycles = int(r.name.rsplit("#", 1)[1])
                duration = 1_000 + cycles // 2  # ns: 1 us floor, then 2 cycles per ns
                records.append(Activity("kernel", "spin_kernel", r.start_ns + 100, r.start_ns + 100 + duration,
                                        linked=r.correlation))
        return records

    monkeypatch.setattr(activity, "from_kineto", from_kineto)
    m = _measure(fake_gpu, lambda x, y: x + y)
    assert m.solution.sm_clock_mhz == (2000.0,) * ROUNDS and m.reference.sm_clock_mhz == (2000.0,) * ROUNDS
    assert m.suspicious == ()


def test_hold_length_follows_the_hosts_time_for_a_call():
    """Twice a warm-up call's host time plus 100 us for the profiler's ranges, from 0.2 to 2 ms."""
    assert profiled.hold_us(0.02) == pytest.approx(200.0)
    assert profiled.hold_us(0.45) == pytest.approx(1000.0)
    assert profiled.hold_us(1.5) == 2000.0
    assert profiled.hold_us(None) == 200.0


def test_later_holds_follow_the_launches_seen_under_the_profiler():
    """After a side's first call, its hold lasts 1.25 times the longest of its last four launches
    (hold launched until the call returned) plus 20 us, within 50 us and 2 ms."""
    hold = profiled.Hold(0.45, True)
    assert hold.us == pytest.approx(1000.0)

    def launch_took(us: float) -> float:
        hold.used_us.append(hold.us)
        hold.work_after(0, int(us * 1e3), 0.1)
        return hold.us

    assert launch_took(100.0) == pytest.approx(145.0)
    assert launch_took(20.0) == pytest.approx(145.0)  # the 100 us launch is among the last four
    for _ in range(3):
        launch_took(20.0)
    assert hold.us == pytest.approx(50.0)
    for _ in range(4):
        launch_took(1.0)
    assert hold.us == profiled.Hold.LAUNCH_MIN_US
    assert launch_took(5_000.0) == profiled.Hold.MAX_US
    assert hold.median_us == sorted(hold.used_us)[len(hold.used_us) // 2]


def test_the_cooldown_counts_the_device_work_after_the_hold():
    """The wait after the call returned, less what remained of the hold then."""
    hold = profiled.Hold(0.05, True)  # a first hold of 200 us
    assert hold.work_after(0, 150_000, 0.5) == pytest.approx(0.45)  # 50 us of the wait was the hold
    assert hold.work_after(0, 400_000, 0.5) == pytest.approx(0.5)  # the hold had ended
    unheld = profiled.Hold(0.45, False)
    assert unheld.work_after(0, 200_000, 0.1) == pytest.approx(0.1)
    assert unheld.us == 0.0 and unheld.median_us == 0.0


def test_the_harnesss_work_between_two_calls_is_one_range_the_probe_then_the_hold_then_the_flush(fake_gpu,
                                                                                                  monkeypatch):
    """Between two calls one gap range: the clock probe after the one call, then the other's hold
    and flush (and its arguments); the first call's gap has no probe, a last gap holds only the
    last call's. Every range is two records on a GPU (the host's and its projection on the
    device), and their number sets what reading a pass costs."""
    seen, work = {}, []
    with_kernels = _with_kernels(5_000_000)

    def from_kineto(events):
        records = with_kernels(events)
        seen["ranges"] = [r.name for r in sorted(records, key=lambda r: r.start_ns) if r.kind == "user_annotation"]
        return records

    monkeypatch.setattr(activity, "from_kineto", from_kineto)
    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: work.append(f"spin {cycles}"))
    monkeypatch.setattr(L2Flusher, "flush", lambda self: work.append("flush"))
    def add(x, y):
        work.append("call")
        return x + y

    m = _measure(fake_gpu, add, reference_fn=add)
    calibration = [f"{PROBE_RANGE}#0"] * profiled._ClockProbe.CALIBRATIONS
    gaps = [SETUP_RANGE] + [f"{PROBE_RANGE}#{profiled._ClockProbe.CYCLES}"] * (2 * ROUNDS - 1)
    calls = [f"{CALL_RANGE}#{k}" for k in range(2 * ROUNDS)]
    assert seen["ranges"] == calibration + [r for pair in zip(gaps, calls) for r in pair] + gaps[-1:]
    probe = profiled._ClockProbe.CYCLES
    named = ["probe" if w == f"spin {probe}" else "hold" if w.startswith("spin") and w != "spin 0" else w for w in work]
    device_pass = named[named.index("spin 0"):len(named) - named[::-1].index("probe")]
    per_call = [["probe"] * (k > 0) + ["hold", "flush", "call"] for k in range(2 * ROUNDS)]
    assert device_pass == ["spin 0"] * profiled._ClockProbe.CALIBRATIONS + sum(per_call, []) + ["probe"]
    assert m.solution.hold_us >= profiled.Hold.LAUNCH_MIN_US


def _events_pass(plan):
    return DevicePass("events", {s.name: [0.5] * plan.rounds for s in plan.sides},
                      {s.name: [0] * plan.rounds for s in plan.sides})


def test_without_device_records_the_device_pass_falls_back_to_events(fake_gpu, monkeypatch):
    monkeypatch.setattr(paired, "events_pass", _events_pass)
    m = _measure(fake_gpu, lambda x, y: x + y)
    assert m.solution.instrument == "events" and "no device activity records" in m.notes[-1]
    assert any("was not used" in w for w in m.warnings) and m.suspicious == ()


def test_calls_without_kernels_are_warned_about_and_use_the_host_time(fake_gpu, monkeypatch):
    # Position 2 is round 1's first call: the solution goes first in odd rounds.
    monkeypatch.setattr(activity, "from_kineto", _with_kernels(5_000_000, calls_without_kernels=(2,)))
    m = _measure(fake_gpu, lambda x, y: x + y)
    assert any(f"1 of {ROUNDS} timed call(s) launched no kernel" in w for w in m.warnings)
    assert m.solution.device_ms[1] is None and m.solution.latency_ms == 5.0  # the calls that launched work


def test_a_profiler_left_running_by_the_solution_is_suspicious(fake_gpu, monkeypatch):
    monkeypatch.setattr(paired, "events_pass", _events_pass)
    with profile(activities=[ProfilerActivity.CPU]):
        m = _measure(fake_gpu, lambda x, y: x + y)
    assert m.solution.instrument == "events"
    assert m.suspicious == ("a profiler was already running in the evaluation process (left by the solution)",)


def test_switching_the_profiler_off_during_a_call_is_suspicious(fake_gpu, monkeypatch):
    monkeypatch.setattr(paired, "events_pass", _events_pass)

    def sabotage(x, y):
        if torch.autograd._profiler_enabled():
            torch.autograd._disable_profiler()  # hoping for a method that cannot see side streams
        return x + y

    m = _measure(fake_gpu, sabotage)
    assert m.solution.instrument == "events" and any("switched off" in s for s in m.suspicious)


def test_an_exception_in_a_call_is_the_sides_not_a_fallback(fake_gpu):
    def fails_when_profiled(x, y):
        if torch.autograd._profiler_enabled():
            raise RuntimeError("CUPTI_ERROR_NOT_INITIALIZED")  # dressed up as a profiler failure
        return x + y

    with pytest.raises(SideFailed, match="CUPTI_ERROR") as raised:
        _measure(fake_gpu, fails_when_profiled)
    assert raised.value.side == "solution"
    with pytest.raises(SideFailed) as raised:
        _measure(fake_gpu, lambda x, y: x + y, reference_fn=fails_when_profiled)
    assert raised.value.side == "reference"


def test_device_work_without_a_launch_record_is_suspicious_where_launches_are_recorded(fake_gpu, monkeypatch):
    """Every launch of the profiled thread has its launch record; a kernel without one was
    launched by a thread the profiler does not follow."""
    with_kernels = _with_kernels(5_000_000)

    def from_kineto(events):
        records = with_kernels(events)
        t = records[-1].end_ns
        return records + [Activity("cuda_runtime", "cudaLaunchKernel", t, t + 5, correlation=900),
                          Activity("kernel", "mystery", t + 10, t + 20, correlation=901)]

    monkeypatch.setattr(activity, "from_kineto", from_kineto)
    m = _measure(fake_gpu, lambda x, y: x + y)
    assert any("no launch record" in s and "mystery" in s for s in m.suspicious), m.suspicious


def test_the_recording_keeps_ranges_and_leaves_operators_out():
    """The device pass records only record_function ranges on the host (plus device activity):
    every operator recorded cost host time per call and 40-60 ms per loop to read back."""
    recording = profiled._Recording({ProfilerActivity.CPU})
    recording.start()
    try:
        x = torch.ones(8)
        for i in range(3):
            with record_function(f"{CALL_RANGE}#{i}"):
                (x * 2 + 1).sum()
    finally:
        recording.stop()
    names = [e.name() for e in recording.events]
    assert [n for n in names if n.startswith(CALL_RANGE)] == [f"{CALL_RANGE}#{i}" for i in range(3)]
    assert not any(n.startswith("aten::") for n in names), names
    assert not torch.autograd._profiler_enabled()


def test_a_recording_that_cannot_start_falls_back_to_events(fake_gpu, monkeypatch):
    """The recording uses torch's private profiler entry points: a torch whose signatures moved
    gives a fallback with the reason, not a failed evaluation."""
    def refuse(self):
        raise TypeError("_enable_profiler(): incompatible function arguments")

    monkeypatch.setattr(profiled._Recording, "start", refuse)
    monkeypatch.setattr(paired, "events_pass", _events_pass)
    m = _measure(fake_gpu, lambda x, y: x + y)
    assert m.solution.instrument == "events" and "could not start" in m.notes[-1]
    assert "incompatible function arguments" in m.notes[-1]
    assert m.suspicious == () and any("was not used" in w for w in m.warnings)


def test_host_work_beyond_the_allowance_sets_the_latency(fake_gpu, monkeypatch):
    """A call that spends 3 ms on the host before launching 5 us of device work: its latency is its host
    time less the allowance, on both passes' evidence; the reference's 1 ms call keeps its device time."""
    monkeypatch.setattr(activity, "from_kineto", _with_kernels({"reference": 1_000_000, "solution": 5_000}))

    def slow_host(x, y):
        time.sleep(0.003)
        return x + y

    m = _measure(fake_gpu, slow_host)
    assert m.solution.host_bound and m.solution.latency_ms >= 3.0 - ALLOWANCE_MS
    assert not m.reference.host_bound and m.reference.latency_ms == 1.0
    # the reference's host time is far below its own device time: nothing the sides share would
    # cancel in their ratio, so the solution's host time gets no added rounds, however imprecise
    assert not paired.host_rounds_paired(m.solution, m.reference)
    assert len(m.solution.host_ms) == len(m.reference.host_ms) == len(m.solution.device_ms) == ROUNDS
    assert m.speedup.verdict == "slower"


def test_added_host_rounds_run_for_both_sides_each_batch_announced_to_the_audit_planner(fake_gpu, monkeypatch):
    """Two sides whose host work beyond the allowance varies call to call (0.2 to 1 ms), 5 us of
    device work each: the host pass goes on for both, round by round, and the solution's audit
    planner hears of every batch before it runs; the interval pairs all the host rounds."""
    monkeypatch.setattr(activity, "from_kineto", _with_kernels(5_000))

    def uneven_host(pattern):  # each side its own order: paired rounds differ, so their ratio stays imprecise
        delays = iter(pattern * 400)

        def run(x, y):
            time.sleep(next(delays))
            return x + y
        return run

    solution, reference = _sides(uneven_host([0.0002, 0.001, 0.0004, 0.0008, 0.0003]),
                                 uneven_host([0.0008, 0.0003, 0.001, 0.0002, 0.0004]))
    asked = []
    solution.audit_ahead = lambda count: asked.append(count) or CallKeeper(solution.fresh.calls_made)
    m = measure(solution, reference, TimingPlan(warmup=2, rounds=ROUNDS, device=fake_gpu, flusher=L2Flusher(fake_gpu),
                                                allowance_ms=ALLOWANCE_MS))
    assert m.solution.host_bound and m.reference.host_bound
    assert ROUNDS < len(m.solution.host_ms) == len(m.reference.host_ms) <= paired.HOST_ROUNDS_FACTOR * ROUNDS
    assert sum(asked) == len(m.solution.host_ms) - ROUNDS and all(k.kept is not None for k in solution.keepers)
    assert m.speedup.rounds == len(m.solution.host_ms) and m.speedup.low <= m.speedup.point <= m.speedup.high
    assert m.speedup.point == pytest.approx(m.reference.latency_ms / m.solution.latency_ms)


def _rounds_of(name: str, device_ms: float, host_ms: list[float]) -> paired.SideMeasurement:
    return paired.SideMeasurement(name=name, instrument="device", device_ms=(device_ms,) * ROUNDS,
                                  host_ms=tuple(host_ms), sync_floor_ms=0.0, allowance_ms=ALLOWANCE_MS)


def test_a_side_near_host_set_runs_the_added_host_rounds_with_its_host_set_partner():
    """Host load comes by stretches: a side whose host time less the allowance is at least half its
    device time runs the added rounds beside a partner whose host time may set its latency, so both
    meet the same load; beside a side further below there are none, and none where neither may be host-set."""
    jitter = [0.001 * (k % 5) for k in range(2 * ROUNDS)]
    host_set = _rounds_of("solution", 0.030, [0.075 + j for j in jitter])  # 50 us after the allowance
    near = _rounds_of("reference", 0.036, [0.050 + j for j in jitter])  # 25 us: below 36, above 18
    far = _rounds_of("reference", 0.036, [0.035 + j for j in jitter])  # 10 us
    assert not host_may_set(near.spans, paired.HOST_SET_MARGIN)
    assert paired.host_rounds_paired(host_set, near) and not paired.host_rounds_paired(host_set, far)
    assert not paired.host_rounds_wanted(_rounds_of("solution", 0.036, [0.050 + j for j in jitter]), near)


def test_the_host_pass_starts_after_untimed_rounds_on_the_warm_up_arguments(fake_gpu, monkeypatch):
    """On a GPU the first host rounds after the device pass ran slow: WAKE_ROUNDS untimed rounds of
    each side come first, on the warm-up's own arguments, so no timed call index is used up."""
    monkeypatch.setattr(activity, "from_kineto", _with_kernels(5_000))
    calls: list[tuple[str, int, bool]] = []  # (side, its arguments drawn so far, inside a timed host span)
    timing = [False]
    real_span = unprofiled.host_span_ms

    def timed_span(device, call):
        timing[0] = True
        try:
            return real_span(device, call)
        finally:
            timing[0] = False

    monkeypatch.setattr(unprofiled, "host_span_ms", timed_span)

    def counted(name):
        def fn(x, y):
            calls.append((name, sides[name].fresh.calls_made, timing[0]))
            return x + y
        return fn

    solution, reference = _sides(counted("solution"), counted("reference"))
    sides = {"solution": solution, "reference": reference}
    plan = TimingPlan(warmup=2, rounds=ROUNDS, device=fake_gpu, flusher=L2Flusher(fake_gpu), allowance_ms=ALLOWANCE_MS)
    m = measure(solution, reference, plan)
    device_end = max(m.solution.device_call_indices) + 1
    assert list(m.solution.host_call_indices) == list(range(device_end, device_end + ROUNDS))
    first_timed = next(i for i, c in enumerate(calls) if c[2])
    for name in sides:
        # the device pass's last call on index device_end - 1, then the untimed rounds, no new index
        untimed = [c for c in calls[:first_timed] if c[0] == name and c[1] == device_end]
        assert unprofiled.WAKE_ROUNDS >= 1 and len(untimed) == 1 + unprofiled.WAKE_ROUNDS


@pytest.mark.parametrize("cooldown", [0.0, 1.0])
def test_the_warm_up_after_an_idle_device_idles_between_calls_as_the_rounds_do(fake_gpu, monkeypatch, cooldown):
    """The 0.1 s of calls that bring an idle device's clocks up keep the timed rounds' duty cycle: with
    the device busy 2 ms after each call returned, the next call starts ``cooldown`` x 2 ms later."""
    device_wait_s = 0.002
    warm_s = 0.3  # long against a loaded host's first call, so that several calls follow it
    monkeypatch.setattr(paired, "WARMUP_MIN_S", warm_s)
    monkeypatch.setattr(paired, "synchronize", lambda d: time.sleep(device_wait_s))
    monkeypatch.setattr(paired, "_last_end", {})  # the device sat idle
    starts = []
    solution, reference = _sides(lambda x, y: starts.append(time.perf_counter()) or x + y)
    plan = TimingPlan(warmup=1, rounds=ROUNDS, device=fake_gpu, flusher=L2Flusher(fake_gpu), cooldown=cooldown)
    paired._warm_up((solution,), plan)
    gaps = [b - a for a, b in zip(starts[1:], starts[2:])]  # the calls after the one warm-up call
    assert len(gaps) >= 3
    assert min(gaps) >= device_wait_s * (1 + cooldown) * 0.95
    if cooldown:
        assert len(gaps) < warm_s / (device_wait_s * (1 + cooldown) * 0.95)


def test_more_device_passes_run_after_the_host_pass_while_the_device_rounds_leave_the_speedup_imprecise(
        fake_gpu, monkeypatch):
    """Kernels of 1.0 to 1.2 ms at random: six rounds a pass leave the speedup known to a few percent
    however many passes run, so device passes of as many rounds follow the host pass up to
    DEVICE_PASSES_MAX in all, each opening with the side the one before did not; the audited call
    planned in the host pass stays where it was, and each added pass carries one of its own."""
    import random

    real, pick = activity.from_kineto, random.Random(3)

    def from_kineto(events):
        records = real(events)
        added = [Activity("kernel", "gemm", r.start_ns + 500, r.start_ns + 500 + pick.randrange(1_000_000, 1_200_000),
                          linked=r.correlation)
                 for r in records if r.kind == "user_annotation" and r.name.startswith(CALL_RANGE + "#")]
        return records + added

    monkeypatch.setattr(activity, "from_kineto", from_kineto)
    monkeypatch.setattr(paired, "DEVICE_EXTENSION_BUDGET_S", 30.0)
    keeper = CallKeeper(2 + ROUNDS + 1)  # the host pass's second call
    solution, reference = _sides(_stops_computing_after(2 + 2 * ROUNDS), keeper=keeper)
    asked = []
    solution.audit_ahead = lambda count: asked.append(count) or CallKeeper(solution.fresh.calls_made + count - 1)
    m = measure(solution, reference, TimingPlan(warmup=2, rounds=ROUNDS, device=fake_gpu, flusher=L2Flusher(fake_gpu),
                                                allowance_ms=ALLOWANCE_MS))
    passes = paired.DEVICE_PASSES_MAX
    assert len(m.solution.device_ms) == len(m.reference.device_ms) == passes * ROUNDS
    assert m.solution.device_call_indices == tuple(range(2, 2 + ROUNDS)) + tuple(range(2 + 2 * ROUNDS,
                                                                                         2 + (passes + 1) * ROUNDS))
    assert m.solution.host_call_indices == tuple(range(2 + ROUNDS, 2 + 2 * ROUNDS))
    assert keeper.kept is not None and m.suspicious == ()
    assert all(1.0 <= d <= 1.2 for d in m.solution.device_ms)
    # each added pass was announced to the solution's audit planner, whose keeper saw its last call:
    # a solution that stopped computing after the planned passes is seen there
    late = [k for k in solution.keepers if k is not keeper]
    assert asked == [ROUNDS] * (passes - 1)
    assert [k.call_index for k in late] == [2 + (p + 2) * ROUNDS - 1 for p in range(1, passes)]
    assert all(torch.all(k.kept == 0) for k in late)
    # each pass opens with the other side: the first call after a pause is not always the reference's
    opened = (True, False) * (ROUNDS // 2)
    flipped = tuple(not o for o in opened)
    assert m.reference.device_opened_round == (opened + flipped) * (passes // 2)
    assert m.solution.device_opened_round == (flipped + opened) * (passes // 2)
    assert m.reference.host_opened_round == opened


def test_added_device_passes_go_to_the_sides_whose_device_time_sets_their_latency(fake_gpu, monkeypatch):
    """A reference whose host time sets its latency (3 ms of host work a call beside 0.1 ms of
    kernels) and a solution of 0.5 to 1.5 ms kernels at random: only the solution runs the added
    device passes, and the interval draws each side's device rounds apart. (Kernels that spread
    this much leave the device rounds' error above the host rounds' however a loaded machine
    stretches the reference's sleeps.)"""
    import random

    real, pick = activity.from_kineto, random.Random(4)

    def from_kineto(events):  # a call range of over 2 ms is the reference's
        records = real(events)
        return records + [
            Activity("kernel", "k", r.start_ns + 500, r.start_ns + 500 + (
                100_000 if r.end_ns - r.start_ns > 2_000_000 else pick.randrange(500_000, 1_500_000)),
                linked=r.correlation)
            for r in records if r.kind == "user_annotation" and r.name.startswith(CALL_RANGE + "#")]

    def host_work(x, y):
        time.sleep(0.003)
        return x + y

    monkeypatch.setattr(activity, "from_kineto", from_kineto)
    monkeypatch.setattr(paired, "DEVICE_EXTENSION_BUDGET_S", 30.0)
    solution, reference = _sides(lambda x, y: x + y, host_work)
    m = measure(solution, reference, TimingPlan(warmup=2, rounds=ROUNDS, device=fake_gpu, flusher=L2Flusher(fake_gpu),
                                                allowance_ms=ALLOWANCE_MS))
    assert m.reference.host_bound and not m.solution.host_bound
    assert len(m.reference.device_ms) == ROUNDS and all(d == pytest.approx(0.1) for d in m.reference.device_ms)
    # How many passes the solution adds depends on the reference's host rounds (their error can
    # end the added passes early; here they time real sleeps on a loaded machine): at least one.
    added = len(m.solution.device_ms) // ROUNDS - 1
    assert len(m.solution.device_ms) % ROUNDS == 0 and 1 <= added <= paired.DEVICE_PASSES_MAX - 1
    assert m.speedup is not None and m.speedup.low < m.speedup.point < m.speedup.high


def test_each_batch_of_added_host_rounds_opens_with_the_other_side(fake_gpu, monkeypatch):
    """Two host-set sides whose host time is imprecise: the host pass adds batches, and the side that
    opens a batch's first round alternates, so the slow first call after each pause falls on both."""
    monkeypatch.setattr(activity, "from_kineto", _with_kernels(5_000))
    monkeypatch.setattr(paired, "HOST_EXTENSION_BUDGET_S", 30.0)
    delays = iter([0.0002, 0.001, 0.0004, 0.0008, 0.0003] * 400)

    def uneven_host(x, y):
        time.sleep(next(delays))
        return x + y

    solution, reference = _sides(uneven_host, uneven_host)
    m = measure(solution, reference, TimingPlan(warmup=2, rounds=ROUNDS, device=fake_gpu, flusher=L2Flusher(fake_gpu),
                                                allowance_ms=ALLOWANCE_MS))
    batches = len(m.reference.host_ms) // ROUNDS
    assert batches >= 3 and len(m.solution.host_ms) == len(m.reference.host_ms)
    openers = [m.reference.host_opened_round[b * ROUNDS] for b in range(batches)]
    assert openers == [b % 2 == 0 for b in range(batches)]
    assert all(r != s for r, s in zip(m.reference.host_opened_round, m.solution.host_opened_round))


def test_steady_device_rounds_get_no_added_device_pass(fake_gpu, monkeypatch):
    monkeypatch.setattr(activity, "from_kineto", _with_kernels(5_000_000))
    m = _measure(fake_gpu, lambda x, y: x + y)
    assert len(m.solution.device_ms) == len(m.reference.device_ms) == ROUNDS
