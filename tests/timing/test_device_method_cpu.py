"""The device method's loop and bookkeeping, run on the CPU with the device parts stood in for.

The profiler runs for real (CPU activity); synchronisation is a no-op and device records are
added next to the real call ranges, so everything but CUPTI itself is exercised.
"""

from __future__ import annotations

import dataclasses
import re
import statistics
import time

import pytest
import torch
from torch.profiler import ProfilerActivity, profile, record_function

from sol_execbench.evaluate import timing
from sol_execbench.evaluate.timing import CallKeeper, FreshArgs, L2Flusher, time_calls
from sol_execbench.evaluate.timing_methods import activity, base, device
from sol_execbench.evaluate.timing_methods.activity import Activity
from sol_execbench.evaluate.timing_methods.base import CALL_RANGE, HOLD_RANGE, PROBE_RANGE, SETUP_RANGE


@pytest.fixture
def fake_gpu(cpu_device, monkeypatch):
    monkeypatch.setattr(device, "synchronize", lambda d: None)
    monkeypatch.setattr(base, "synchronize", lambda d: None)
    monkeypatch.setattr(timing, "synchronize", lambda d: None)
    # The CPU activity stands in for device activity.
    monkeypatch.setattr(device, "_profiler", lambda: ({ProfilerActivity.CPU}, record_function))
    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: None)  # the clock probe: its range, no kernel
    return dataclasses.replace(cpu_device, vendor="cuda")


def _with_kernels(kernel_ns: int, calls_without_kernels: tuple[int, ...] = ()):
    real = activity.from_kineto

    def from_kineto(events):
        records = real(events)
        added = []
        for r in records:
            if r.kind == "user_annotation" and r.name.startswith(CALL_RANGE + "#"):
                if int(r.name.rsplit("#", 1)[1]) not in calls_without_kernels:
                    added.append(Activity("kernel", "gemm", r.start_ns + 500, r.start_ns + 500 + kernel_ns,
                                          linked=r.correlation))
        return records + added

    return from_kineto


def _time(fake_gpu, fn, keeper=None):
    bank = [[torch.full((64,), float(k)), torch.ones(64)] for k in range(3)]
    return time_calls(fn, FreshArgs(bank, slots=12), warmup=2, iterations=6, device=fake_gpu,
                      flusher=L2Flusher(fake_gpu), method="device", keepers=[keeper] if keeper else None)


def test_device_spans_come_from_the_records_of_each_call(fake_gpu, monkeypatch):
    monkeypatch.setattr(activity, "from_kineto", _with_kernels(5_000_000))  # 5 ms: longer than the host span
    keeper = CallKeeper(4)
    m = _time(fake_gpu, lambda x, y: x + y, keeper)
    assert m.method == "device" and m.device_ms == [5.0] * 6 and m.host_bound is False
    assert m.times_ms == [5.0] * 6 and len(m.host_ms) == 6 and m.warnings == [] and m.suspicious == []
    assert torch.equal(keeper.kept, torch.full((64,), 2.0))  # call 4 used bank set 4 % 3 = 1: 1 + 1
    # Which argument set each timed call ran on (the content-cache check pairs calls by it): the
    # timed calls follow the two warm-up calls.
    assert m.call_indices == list(range(2, 8))


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
    m = _time(fake_gpu, lambda x, y: x + y)
    assert m.sm_clock_mhz == [2000.0] * 6 and m.device_ms == [5.0] * 6 and m.suspicious == []
    assert m.stats().sm_clock_median_mhz == 2000.0 and m.warnings == []


def test_hold_length_follows_the_hosts_time_for_a_call():
    """Twice a warm-up call's host time plus the profiler's range, from 0.5 to 2 ms."""
    assert device.hold_us(0.02, 0.03) == 500.0
    assert device.hold_us(0.04, 0.46) == pytest.approx(1000.0)
    assert device.hold_us(0.05, 1.5) == 2000.0


@pytest.mark.parametrize("warm_own_ms,held", [
    ([900.0, 0.02, 0.02, 0.03, 0.02, 0.02], True),  # the first call compiled: only the last five count
    ([0.03, 0.2, 0.2, 0.2], False),  # a dozen operators launched one by one: no hold
    ([], False),  # no warm-up: nothing to size it by
])
def test_only_calls_that_return_quickly_are_held(fake_gpu, warm_own_ms, held):
    calls = base.TimedCalls(lambda: None, None, 1, None, fake_gpu, warm_own_ms=list(warm_own_ms))
    hold = device._Hold(calls, record_function, bracket_own_ms=0.03)
    assert (hold.us == 500.0) is held and (hold.cycles == 1_000_000) is held
    note = hold.note(0.506)
    if held:
        assert "500 us hold (measured 506 us; warm-up calls returned in 20.0 us)" in note
    elif warm_own_ms:
        assert note.startswith("no hold before the flush: warm-up calls spent 200.0 us on the host")
    else:
        assert note is None


def test_what_a_host_span_waited_for_the_hold_is_taken_out():
    assert device._less_hold(0.9, 0.05, 0.6) == pytest.approx(0.35)  # returned 0.55 ms before the hold ended
    assert device._less_hold(1.0, 0.8, 0.6) == 1.0  # the hold was over before the call returned
    assert device._less_hold(0.3, 0.05, 0.6) == 0.05  # never below the span until the call returned


def test_each_call_is_queued_behind_a_hold_and_its_host_spans_lose_the_wait(fake_gpu, monkeypatch):
    """A fake device timeline: the spin kernel keeps it busy for 5 ns a cycle (a slow clock: ten
    times the hold asked for, longer than the host's own steps here), synchronising waits for
    that. The hold comes before every call's flush and every bracket's; the host spans that waited
    for it get that wait taken back out, and the note says so."""
    busy_until = [0.0]

    def spin(cycles):
        busy_until[0] = max(time.perf_counter(), busy_until[0]) + cycles * 5e-9

    def wait_for_device(_device):
        while time.perf_counter() < busy_until[0]:
            pass

    for module in (device, base, timing):
        monkeypatch.setattr(module, "synchronize", wait_for_device)
    monkeypatch.setattr(torch.cuda, "_sleep", spin)
    monkeypatch.setattr(device._Hold, "HOST_MAX_MS", 10.0)  # held however slow this host's CPU add is
    with_kernels = _with_kernels(50_000_000)  # 50 ms calls: no host span on a loaded CI host makes them host-bound
    seen = {}

    def from_kineto(events):
        records = with_kernels(events)
        for r in list(records):
            if r.kind == "user_annotation" and r.name.startswith(HOLD_RANGE + "#"):
                cycles = int(r.name.rsplit("#", 1)[1])
                records.append(Activity("kernel", "spin_kernel", r.start_ns + 100, r.start_ns + 100 + cycles * 5,
                                        linked=r.correlation))
        seen["ranges"] = [r.name for r in sorted(records, key=lambda r: r.start_ns) if r.kind == "user_annotation"]
        return records

    monkeypatch.setattr(activity, "from_kineto", from_kineto)
    m = _time(fake_gpu, lambda x, y: x + y)
    ranges = seen["ranges"]
    holds = [k for k, name in enumerate(ranges) if name.startswith(HOLD_RANGE + "#")]
    assert len(holds) == device.BRACKET_SAMPLES + 6
    for k, name in enumerate(ranges):
        if name.startswith(CALL_RANGE + "#"):  # hold, flush, call
            assert ranges[k - 1] == SETUP_RANGE and ranges[k - 2].startswith(f"{HOLD_RANGE}#")
    assert m.device_ms == [50.0] * 6 and m.host_bound is False
    # Each call waited about 5 ms for the hold: taken out (the median, as one call on a loaded host
    # can take milliseconds by itself).
    assert statistics.median(m.host_ms) < 2.0, m.host_ms
    assert re.search(r"behind a (\d+) us hold \(measured (\d+) us; warm-up calls returned in", m.note)
    asked, measured = map(int, re.search(r"behind a (\d+) us hold \(measured (\d+) us", m.note).groups())
    assert asked >= 500 and measured == pytest.approx(10 * asked, abs=2)  # 5 ns a cycle, 2000 cycles a us


def test_without_device_records_the_method_falls_back_to_events(fake_gpu, monkeypatch):
    monkeypatch.setitem(timing.METHODS, "events", lambda calls: base.MethodResult([0.5] * calls.iterations))
    m = _time(fake_gpu, lambda x, y: x + y)
    assert m.method == "events" and "no device activity records" in m.note


def test_calls_without_kernels_are_warned_about_and_use_the_host_span(fake_gpu, monkeypatch):
    monkeypatch.setattr(activity, "from_kineto", _with_kernels(5_000_000, calls_without_kernels=(2,)))
    m = _time(fake_gpu, lambda x, y: x + y)
    assert any("1 of 6 timed call(s) launched no kernel" in w for w in m.warnings)
    assert "1 timed call(s) launched no device work" in m.note and len(m.device_ms) == 5


def test_a_profiler_left_running_by_the_solution_is_suspicious(fake_gpu, monkeypatch):
    monkeypatch.setitem(timing.METHODS, "events", lambda calls: base.MethodResult([0.5] * calls.iterations))
    with profile(activities=[ProfilerActivity.CPU]):
        m = _time(fake_gpu, lambda x, y: x + y)
    assert m.method == "events" and "device unavailable" in m.note
    assert m.suspicious == ["a profiler was already running in the evaluation process (left by the solution)"]


def test_switching_the_profiler_off_during_a_call_is_suspicious(fake_gpu, monkeypatch):
    monkeypatch.setitem(timing.METHODS, "events", lambda calls: base.MethodResult([0.5] * calls.iterations))

    def sabotage(x, y):
        if torch.autograd._profiler_enabled():
            torch.autograd._disable_profiler()  # hoping for a method that cannot see side streams
        return x + y

    m = _time(fake_gpu, sabotage)
    assert m.method == "events" and any("switched off" in s for s in m.suspicious)


def test_an_exception_in_a_call_is_the_solutions_not_a_fallback(fake_gpu):
    def fails_when_profiled(x, y):
        if torch.autograd._profiler_enabled():
            raise RuntimeError("CUPTI_ERROR_NOT_INITIALIZED")  # dressed up as a profiler failure
        return x + y

    with pytest.raises(RuntimeError, match="CUPTI_ERROR"):
        _time(fake_gpu, fails_when_profiled)


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
    m = _time(fake_gpu, lambda x, y: x + y)
    assert any("no launch record" in s and "mystery" in s for s in m.suspicious), m.suspicious


def test_the_recording_keeps_ranges_and_leaves_operators_out():
    """The device method records only record_function ranges on the host (plus device activity):
    every operator recorded cost host time per call and 40-60 ms per loop to read back."""
    recording = device._Recording({ProfilerActivity.CPU})
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

    monkeypatch.setattr(device._Recording, "start", refuse)
    monkeypatch.setitem(timing.METHODS, "events", lambda calls: base.MethodResult([0.5] * calls.iterations))
    m = _time(fake_gpu, lambda x, y: x + y)
    assert m.method == "events" and "could not start" in m.note and "incompatible function arguments" in m.note
    assert m.suspicious == [] and any("was not used" in w for w in m.warnings)
