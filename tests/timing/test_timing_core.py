"""FreshArgs, method choice, the paired measurement on the CPU, and the audit keeper."""

from __future__ import annotations

import time

import pytest
import torch

from sol_execbench.evaluate.child.measure import clock_warning, timing_stats
from sol_execbench.evaluate.child.timing import (CallKeeper, FreshArgs, L2Flusher, SideCalls, TimingPlan, measure, paired,
                                           resolve_method)
from sol_execbench.evaluate.child.timing.profiled import COOLDOWN_MAX_S, COOLDOWN_MIN_S, Cooldown
from sol_execbench.platform import DeviceInfo
from sol_execbench.schema import BenchmarkConfig, merge_configs

GPU = DeviceInfo(vendor="cuda", torch_device="cuda:0", index=0, name="NVIDIA H100", arch="sm_90a", compute_units=132,
                 l2_bytes=50 * 2**20, memory_bytes=80 * 2**30, runtime_version="12.8")


def _bank(sets=3, n=100):
    return [[torch.full((n,), float(k)), torch.arange(n, dtype=torch.float32), 7] for k in range(sets)]


def test_every_call_gets_a_new_address_and_the_same_layout():
    fresh = FreshArgs(_bank(), slots=5)
    calls = [fresh() for _ in range(5)]
    assert len({c[0].data_ptr() for c in calls}) == 5
    assert all(c[0].shape == (100,) and c[0].stride() == (1,) and c[2] == 7 for c in calls)
    assert all(c[0].data_ptr() % 256 == calls[0][0].data_ptr() % 256 for c in calls)


def test_contents_rotate_over_the_bank():
    fresh = FreshArgs(_bank(3), slots=8)
    firsts = [float(fresh()[0][0]) for _ in range(6)]
    assert firsts == [0.0, 1.0, 2.0, 0.0, 1.0, 2.0]
    assert fresh.input_sets == 3


def test_sets_with_another_layout_are_left_out_of_the_bank():
    bank = _bank(2) + [[torch.zeros(5), torch.zeros(5), 7]]
    assert FreshArgs(bank, slots=4).input_sets == 2


def test_addresses_wrap_after_the_slots_are_used():
    fresh = FreshArgs(_bank(1), slots=2)
    ptrs = [fresh()[0].data_ptr() for _ in range(4)]
    assert ptrs[0] == ptrs[2] and ptrs[0] != ptrs[1]


def test_a_substituted_call_gets_its_own_values():
    fresh = FreshArgs(_bank(2), slots=6)
    assert fresh.substitute(3, [torch.full((100,), 42.0), torch.zeros(100), 7])
    values = [float(fresh()[0][0]) for _ in range(5)]
    assert values == [0.0, 1.0, 0.0, 42.0, 0.0]
    assert not fresh.substitute(4, [torch.zeros(3), torch.zeros(3), 7])  # wrong layout


def test_call_k_of_both_sides_reads_its_inputs_at_the_same_address():
    reference = FreshArgs(_bank(2), slots=4)
    # the solution's arguments add a destination output after the inputs; that one stays its own
    solution = FreshArgs([b + [torch.zeros(100)] for b in _bank(2)], slots=4, share_pools_of=reference)
    for _ in range(6):
        ref, sol = reference(), solution()
        assert sol[0].data_ptr() == ref[0].data_ptr() and sol[1].data_ptr() == ref[1].data_ptr()
        assert sol[3].data_ptr() not in (ref[0].data_ptr(), ref[1].data_ptr())


def test_a_side_that_writes_its_inputs_leaves_the_other_side_s_next_call_untouched():
    reference = FreshArgs(_bank(1), slots=2)
    solution = FreshArgs(_bank(1), slots=2, share_pools_of=reference)
    solution()[0].fill_(-1.0)  # the solution scribbles over its input
    assert float(reference()[0].sum()) == 0.0  # the reference's call 0 gets its own contents back
    assert torch.equal(reference()[1], torch.arange(100, dtype=torch.float32))


def test_pools_of_another_layout_or_slot_count_are_not_shared():
    reference = FreshArgs(_bank(1), slots=3)
    other_shape = FreshArgs([[torch.zeros(50), torch.zeros(100), 7]], slots=3, share_pools_of=reference)
    other_slots = FreshArgs(_bank(1), slots=4, share_pools_of=reference)
    ref = reference()
    first, second = other_shape(), other_slots()
    assert first[0].data_ptr() != ref[0].data_ptr() and first[1].data_ptr() == ref[1].data_ptr()
    assert second[0].data_ptr() != ref[0].data_ptr()


def test_strided_and_negative_stride_inputs_keep_their_layout():
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    fresh = FreshArgs([[base.t(), base.flip(0)]], slots=3)
    a, b = fresh()
    assert a.stride() == base.t().stride() and torch.equal(a, base.t())
    assert torch.equal(b, base.flip(0))


def test_several_substitutes_and_tensors_passed_as_they_are():
    fresh = FreshArgs(_bank(2), slots=8)
    own = torch.full((100,), 3.0)
    assert fresh.substitute(1, [torch.full((100,), 42.0), own, 7], as_is=frozenset({1}))
    assert fresh.substitute(4, [torch.full((100,), 43.0), torch.zeros(100), 7])
    calls = [fresh() for _ in range(6)]
    assert [float(c[0][0]) for c in calls] == [0.0, 42.0, 0.0, 1.0, 43.0, 1.0]
    assert calls[1][1] is own and calls[4][1].data_ptr() != torch.zeros(1).data_ptr()
    assert fresh.substituted_calls == [1, 4]


@pytest.mark.parametrize("requested,expected,noted", [("auto", "cpu", False), ("cpu", "cpu", False),
                                                      ("device", "cpu", True), ("events", "cpu", True)])
def test_method_choice_on_the_cpu(cpu_device, requested, expected, noted):
    method, note = resolve_method(requested, cpu_device)
    assert method == expected and bool(note) == noted


@pytest.mark.parametrize("requested,expected", [("auto", "device"), (None, "device"), ("events", "events"),
                                                ("cpu", "device")])
def test_method_choice_on_a_gpu(requested, expected):
    assert resolve_method(requested, GPU)[0] == expected


def test_cpu_measurement_times_both_sides_and_keeps_the_audited_call(cpu_device):
    seen = []

    def fn(a, b, k):
        seen.append(float(a[0]))
        return a + b

    fresh = FreshArgs(_bank(2), slots=8)
    fresh.substitute(3, [torch.full((100,), 5.0), torch.ones(100), 7])
    keeper = CallKeeper(3)
    solution = SideCalls("solution", fn, fresh, [keeper])
    reference = SideCalls("reference", lambda a, b, k: a + b, FreshArgs(_bank(2), slots=8))
    m = measure(solution, reference, TimingPlan(warmup=2, rounds=3, device=cpu_device, flusher=L2Flusher(cpu_device)))
    assert m.solution.instrument == "cpu" and len(m.solution.host_ms) == 3 and m.solution.host_call_indices == (2, 3, 4)
    assert seen == [0.0, 1.0, 0.0, 5.0, 0.0]  # warm-up on sets 0 and 1, then calls 2, 3 (the substitute), 4
    assert torch.equal(keeper.kept, torch.full((100,), 6.0))
    assert m.solution.device_ms == () and m.solution.latency_ms == m.solution.host_time_ms
    assert m.speedup is not None and m.speedup.rounds == 3
    stats = timing_stats(m.solution, 2)
    assert stats.method == "cpu" and stats.host_time_ms == stats.median_ms and stats.device_time_ms is None
    assert stats.input_sets == 2 and stats.host_rounds == 3 and stats.count == 3 and stats.sync_floor_ms >= 0


def test_timing_config_defaults_and_validation():
    assert BenchmarkConfig().timing.method == "auto"
    assert merge_configs({"iterations": 5}, {"timing": {"method": "events"}}).timing.method == "events"
    with pytest.raises(ValueError):
        BenchmarkConfig.model_validate({"timing": {"method": "stopwatch"}})
    assert BenchmarkConfig.model_validate({"warmup_runs": 1}).model_dump()["timing"] == {
        "method": "auto", "cooldown": 1.0, "launch_allowance_us": 100.0}
    assert merge_configs({}, {"timing": {"cooldown": 0}}).timing.cooldown == 0
    with pytest.raises(ValueError):
        BenchmarkConfig.model_validate({"timing": {"cooldown": -1}})
    with pytest.raises(ValueError):
        BenchmarkConfig.model_validate({"timing": {"launch_allowance_us": -1}})


def test_calls_are_followed_by_an_idle_gap_as_long_as_the_device_work(monkeypatch):
    """The cool-down gap: ``cooldown`` times the host's wait for the device, capped at 50 ms, none at 0;
    the time the harness spends between the calls, and a hold still ahead, count towards it. Judged
    by the sleeps ``before_call`` asks for and the time that really passed, so a loaded host (late
    wake-ups) cannot fail it."""
    real_sleep = time.sleep
    requested: list[float] = []
    monkeypatch.setattr(time, "sleep", lambda seconds: requested.append(seconds) or real_sleep(seconds))

    def gap(cooldown, call_ms, between_s=0.0, idle_ahead_s=0.0):
        """(the idle time from the call's end to the next call, at least; the sleep asked for; the
        most it may be: the gap less the time that passed since the call at most)."""
        idle = Cooldown(cooldown)
        before = time.perf_counter()
        idle.after_call(call_ms)
        after = time.perf_counter()
        real_sleep(between_s)
        requested.clear()
        began = time.perf_counter()
        idle.before_call(idle_ahead_s)
        done = time.perf_counter()
        gap_s = min(cooldown * call_ms / 1e3, COOLDOWN_MAX_S)
        return done - before + COOLDOWN_MIN_S, sum(requested), max(0.0, after + gap_s - idle_ahead_s - began)

    idle_s, _, _ = gap(1.0, 30.0)
    assert idle_s >= 0.030  # the device idles until 30 ms after the call's wait
    assert gap(0.0, 30.0)[1] == 0
    idle_s, slept_s, most_s = gap(2.0, 1000.0)
    assert idle_s >= COOLDOWN_MAX_S and 0 < slept_s <= most_s <= COOLDOWN_MAX_S
    idle_s, slept_s, most_s = gap(1.0, 40.0, between_s=0.03)
    assert idle_s >= 0.040 and slept_s <= most_s <= 0.010  # the 30 ms that already passed are not slept again
    assert gap(1.0, 30.0, between_s=0.03)[1] == 0
    assert gap(1.0, 30.0, idle_ahead_s=0.03)[1] == 0  # a hold of 30 ms comes before the call's work


def test_extra_warm_up_only_after_the_device_sat_idle(cpu_device, monkeypatch):
    """The clocks-up warm-up (0.1 s of repeated calls) runs on a device that sat idle, not when a
    measurement ended on it moments ago (workload after workload)."""
    made = []
    gpu_like = type("D", (), {"is_gpu": True, "torch_device": "fake:0"})()
    monkeypatch.setattr(paired, "synchronize", lambda d: None)
    side = SideCalls("solution", lambda x: made.append(x), FreshArgs([[torch.ones(2)]], slots=4))
    plan = TimingPlan(warmup=1, rounds=1, device=gpu_like, flusher=None)
    paired._last_end.pop("fake:0", None)
    paired._warm_up((side,), plan)
    assert len(made) > 1
    made.clear()
    paired._last_end["fake:0"] = time.perf_counter()
    paired._warm_up((side,), plan)
    assert len(made) == 1  # the warm-up call itself, nothing more
    paired._last_end.pop("fake:0", None)


def test_a_falling_sm_clock_is_warned_about():
    steady = (1980.0, 1972.0, 1935.0, 1900.0)  # a cool GEMM loop moved by about 4%
    assert clock_warning(steady) is None and clock_warning(()) is None
    warning = clock_warning(steady + (1650.0, 1530.0))
    assert warning is not None and "1530 to 1980 MHz" in warning


def test_keeper_copies_destination_outputs_before_the_next_call_overwrites_them():
    keeper = CallKeeper(1, dps_outputs=1, inspect=lambda args, result: ["looked"])
    out = torch.zeros(4)
    keeper.observe(0, [torch.ones(4), out], None)
    keeper.settle()
    assert keeper.kept is None
    keeper.observe(1, [torch.ones(4), out], None)
    out.fill_(3.0)
    keeper.settle()
    out.fill_(-1.0)  # the next call's FreshArgs copy
    assert torch.equal(keeper.kept[0], torch.full((4,), 3.0)) and keeper.problems == ["looked"]


def test_keeper_copies_structured_results():
    keeper = CallKeeper(0)
    a, b = torch.ones(2), torch.zeros(2)
    keeper.keep_now([], {"p": a, "q": (b, 3)})
    a.fill_(9)
    assert torch.equal(keeper.kept["p"], torch.ones(2)) and keeper.kept["q"][1] == 3


