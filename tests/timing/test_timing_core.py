"""FreshArgs, method choice, fallbacks, the host-bound rule and the audit keeper (CPU)."""

from __future__ import annotations

import time

import pytest
import torch

from sol_execbench.evaluate import timing
from sol_execbench.evaluate.timing import (CallKeeper, FreshArgs, L2Flusher, choose_latency, resolve_method,
                                           time_calls)
from sol_execbench.evaluate.timing_methods.base import MethodResult, MethodUnavailable, TimedCalls
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


def test_strided_and_negative_stride_inputs_keep_their_layout():
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    fresh = FreshArgs([[base.t(), base.flip(0)]], slots=3)
    a, b = fresh()
    assert a.stride() == base.t().stride() and torch.equal(a, base.t())
    assert torch.equal(b, base.flip(0))


def test_persistent_sets_are_separate_allocations_with_the_substitutes_first():
    fresh = FreshArgs(_bank(2), slots=6)
    fresh.substitute(5, [torch.full((100,), 9.0), torch.zeros(100), 7])
    fresh.substitute(2, [torch.full((100,), 8.0), torch.zeros(100), 7])
    sets, sources = fresh.persistent_sets(4)
    assert sources == [2, 5, None, None] and [float(s[0][0]) for s in sets] == [8.0, 9.0, 0.0, 1.0]
    assert len({s[0].data_ptr() for s in sets}) == 4


def test_several_substitutes_and_tensors_passed_as_they_are():
    fresh = FreshArgs(_bank(2), slots=8)
    own = torch.full((100,), 3.0)
    assert fresh.substitute(1, [torch.full((100,), 42.0), own, 7], as_is=frozenset({1}))
    assert fresh.substitute(4, [torch.full((100,), 43.0), torch.zeros(100), 7])
    calls = [fresh() for _ in range(6)]
    assert [float(c[0][0]) for c in calls] == [0.0, 42.0, 0.0, 1.0, 43.0, 1.0]
    assert calls[1][1] is own and calls[4][1].data_ptr() != torch.zeros(1).data_ptr()
    assert fresh.substituted_calls == [1, 4]
    # A call outside the timed ones (a graph capture) wrote into the output passed as it is: cleared,
    # copied inputs untouched.
    own.fill_(5.0)
    fresh.clear_passed_as_is()
    assert float(own.abs().sum()) == 0.0 and float(fresh._substitutes[1][0][0][0]) == 42.0


@pytest.mark.parametrize("requested,expected,noted", [("auto", "cpu", False), ("cpu", "cpu", False),
                                                      ("device", "cpu", True), ("graph", "cpu", True)])
def test_method_choice_on_the_cpu(cpu_device, requested, expected, noted):
    method, note = resolve_method(requested, cpu_device)
    assert method == expected and bool(note) == noted


@pytest.mark.parametrize("requested,expected", [("auto", "device"), (None, "device"), ("events", "events"),
                                                ("graph", "graph"), ("cpu", "device")])
def test_method_choice_on_a_gpu(requested, expected):
    assert resolve_method(requested, GPU)[0] == expected


def test_fallback_chain_states_each_step(cpu_device, monkeypatch):
    def unavailable(reason):
        def method(calls):
            raise MethodUnavailable(reason)
        return method

    monkeypatch.setitem(timing.METHODS, "graph", unavailable("graph capture failed: sync in capture"))
    monkeypatch.setitem(timing.METHODS, "device", unavailable("profiler busy"))
    monkeypatch.setitem(timing.METHODS, "events", lambda calls: MethodResult([1.0]))
    notes: list[str] = []
    suspicious: list[str] = []
    calls = TimedCalls(lambda: None, None, 1, None, cpu_device)
    name, result = timing._run_with_fallback("graph", calls, notes, suspicious)
    assert name == "events" and result.times_ms == [1.0] and suspicious == []
    assert notes == ["graph unavailable (graph capture failed: sync in capture); fell back to device",
                     "device unavailable (profiler busy); fell back to events"]


def test_a_fallback_the_solution_caused_is_suspicious(cpu_device, monkeypatch):
    def sabotaged(calls):
        raise MethodUnavailable("the profiler was switched off during the timed calls (by the solution)", suspicious=True)

    monkeypatch.setitem(timing.METHODS, "device", sabotaged)
    monkeypatch.setitem(timing.METHODS, "events", lambda calls: MethodResult([1.0]))
    suspicious: list[str] = []
    timing._run_with_fallback("device", TimedCalls(lambda: None, None, 1, None, cpu_device), [], suspicious)
    assert suspicious == ["the profiler was switched off during the timed calls (by the solution)"]


def test_launch_bound_calls_keep_their_device_time():
    c = choose_latency([0.005] * 5, [0.05] * 5)
    times, host_bound, notes = c.times_ms, c.host_bound, c.notes
    assert times == [0.005] * 5 and host_bound is False and notes == []


def test_host_dominated_calls_report_the_host_span():
    c = choose_latency([0.01] * 5, [0.5] * 5)
    times, host_bound, notes = c.times_ms, c.host_bound, c.notes
    assert times == [0.5] * 5 and host_bound is True and "host-bound" in notes[0]


def test_the_measuring_brackets_own_cost_does_not_make_a_call_host_bound():
    """A GPU run saw 133 us host spans under the profiler around a 13 us matmul: the profiler
    range and the synchronisation cost that much around no call at all in a slow session."""
    c = choose_latency([0.013] * 5, [0.133] * 5, bracket_ms=0.1)
    times, host_bound, notes = c.times_ms, c.host_bound, c.notes
    assert times == [0.013] * 5 and host_bound is False and "measuring bracket" in notes[0]
    c = choose_latency([0.013] * 5, [1.3] * 5, bracket_ms=0.1)
    times, host_bound, notes = c.times_ms, c.host_bound, c.notes
    assert times == [1.3] * 5 and host_bound is True and "host-bound" in notes[0]


def _spans(cpu_own, cpu_full, bracket_cpu=0.005):
    from sol_execbench.evaluate.timing_methods.base import HostSpans

    return HostSpans(wall_own=[0.03] * 5, wall_full=[0.3] * 5, cpu_own=[cpu_own] * 5, cpu_full=[cpu_full] * 5,
                     bracket={"cpu_own": bracket_cpu, "cpu_full": bracket_cpu})


def test_waits_on_a_contended_machine_are_not_host_work():
    """Four evaluations and parallel compiles beside it: an honest 12.5 us matmul had 0.3-1 ms
    wall spans, but its process spent ~20 us of CPU time in the call."""
    c = choose_latency([0.0125] * 5, [0.3] * 5, 0.04, spans=_spans(0.02, 0.3), contended=True)
    assert c.times_ms == [0.0125] * 5 and c.host_bound is False
    assert len(c.warnings) == 1 and "contended machine" in c.warnings[0]
    # on a machine nobody else uses, the spec's rule: the wall-clock span decides
    c = choose_latency([0.0125] * 5, [0.3] * 5, 0.04, spans=_spans(0.02, 0.3))
    assert c.host_bound is True and c.times_ms == [0.3] * 5


def test_host_work_shows_in_cpu_time_on_a_contended_machine():
    c = choose_latency([0.0125] * 5, [1.3] * 5, 0.04, spans=_spans(1.2, 1.25), contended=True)
    assert c.times_ms == [1.3] * 5 and c.host_bound is True and "of CPU time" in c.notes[0]


def test_host_functions_are_judged_on_the_wall_clock_span_alone():
    """A host function (cudaLaunchHostFunc) computes after the call returned, in stream order, on
    a driver thread: no CPU time of the calling thread shows it."""
    c = choose_latency([0.0125] * 5, [1.3] * 5, 0.04, spans=_spans(0.02, 0.02), host_functions=5, contended=True)
    assert c.times_ms == [1.3] * 5 and c.host_bound is True
    assert "host function" in c.notes[0] and "host-bound" in c.notes[1]


def test_host_span_over_100us_but_under_twice_the_device_span_keeps_device_time():
    c = choose_latency([0.1] * 5, [0.15] * 5)
    times, host_bound, _ = c.times_ms, c.host_bound, c.notes
    assert times == [0.1] * 5 and host_bound is False


def test_calls_without_device_work_use_their_host_span():
    c = choose_latency([0.01, None, 0.01], [0.02, 0.03, 0.02])
    times, host_bound, notes = c.times_ms, c.host_bound, c.notes
    assert times == [0.01, 0.03, 0.01] and host_bound is False and "1 timed call(s)" in notes[0]
    c = choose_latency([None, None], [0.02, 0.03])
    times, host_bound, notes = c.times_ms, c.host_bound, c.notes
    assert times == [0.02, 0.03] and host_bound is True


def test_cpu_timing_runs_and_keeps_the_audited_call(cpu_device):
    seen = []

    def fn(a, b, k):
        seen.append(float(a[0]))
        return a + b

    fresh = FreshArgs(_bank(2), slots=8)
    fresh.substitute(3, [torch.full((100,), 5.0), torch.ones(100), 7])
    keeper = CallKeeper(3)
    m = time_calls(fn, fresh, warmup=2, iterations=3, device=cpu_device, flusher=L2Flusher(cpu_device),
                   keepers=[keeper])
    assert m.method == "cpu" and len(m.times_ms) == 3 and m.input_sets == 2 and m.call_indices == [2, 3, 4]
    assert seen == [0.0, 1.0, 0.0, 5.0, 0.0]
    assert torch.equal(keeper.kept, torch.full((100,), 6.0))
    stats = m.stats()
    assert stats.host_median_ms == stats.median_ms and stats.device_median_ms is None and stats.input_sets == 2


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


def test_timing_config_defaults_and_validation():
    assert BenchmarkConfig().timing.method == "auto"
    assert merge_configs({"iterations": 5}, {"timing": {"method": "events"}}).timing.method == "events"
    with pytest.raises(ValueError):
        BenchmarkConfig.model_validate({"timing": {"method": "stopwatch"}})
    assert BenchmarkConfig.model_validate({"warmup_runs": 1}).model_dump()["timing"] == {"method": "auto", "cooldown": 1.0}
    assert merge_configs({}, {"timing": {"cooldown": 0}}).timing.cooldown == 0
    with pytest.raises(ValueError):
        BenchmarkConfig.model_validate({"timing": {"cooldown": -1}})


def test_device_method_idles_after_each_call_as_long_as_the_call():
    """The cool-down gap: ``cooldown`` times the call's span, capped at 50 ms, none at 0."""
    import time
    from types import SimpleNamespace

    from sol_execbench.evaluate.timing_methods.device import COOLDOWN_MAX_S, _cool_down

    def gap(cooldown, call_ms):
        began = time.perf_counter()
        _cool_down(SimpleNamespace(cooldown=cooldown), call_ms)
        return time.perf_counter() - began

    assert gap(1.0, 30.0) >= 0.03
    assert gap(0.0, 30.0) < 0.01
    assert COOLDOWN_MAX_S <= gap(2.0, 1000.0) < COOLDOWN_MAX_S + 0.1


def test_extra_warm_up_only_after_the_device_sat_idle(cpu_device):
    """The clocks-up warm-up (0.1 s of repeated calls) runs on a device that sat idle, not when a
    timed loop ended on it moments ago (the reference's loop right after the solution's)."""
    from types import SimpleNamespace

    from sol_execbench.evaluate import timing

    made = []
    calls = SimpleNamespace(device=cpu_device, warm_args=[1], warm_call=lambda args: made.append(*args))
    timing._last_loop_end.pop(cpu_device.torch_device, None)
    timing._keep_busy(calls, time.perf_counter())
    assert len(made) > 1
    made.clear()
    timing._last_loop_end[cpu_device.torch_device] = time.perf_counter()
    timing._keep_busy(calls, time.perf_counter())
    assert made == []
    timing._last_loop_end.pop(cpu_device.torch_device, None)


def test_host_work_hidden_behind_the_queued_flush_still_counts():
    """The device method queues the L2 flush right before the call: 120 us of host work before
    a 1 us kernel overlaps the flush still running, so the full span (250 us) less the bracket's
    (150 us, mostly that flush) shows only 100 us. The span until the call returned shows it."""
    from sol_execbench.evaluate.timing_methods.base import HostSpans

    spans = HostSpans(wall_own=[0.125] * 5, wall_full=[0.25] * 5, cpu_own=[0.12] * 5, cpu_full=[0.12] * 5,
                      bracket={"wall_own": 0.005, "wall_full": 0.15})
    c = choose_latency([0.001] * 5, [0.25] * 5, 0.15, spans=spans)
    assert c.host_bound is True and c.times_ms == [0.25] * 5
    honest = HostSpans(wall_own=[0.02] * 5, wall_full=[0.16] * 5, bracket={"wall_own": 0.005, "wall_full": 0.15})
    c = choose_latency([0.001] * 5, [0.16] * 5, 0.15, spans=honest)
    assert c.host_bound is False and c.times_ms == [0.001] * 5


def test_a_falling_sm_clock_is_warned_about_and_recorded():
    steady = [1980.0, 1972.0, 1935.0, 1900.0]  # a cool GEMM loop moved by about 4%
    assert timing.clock_warning(steady) is None and timing.clock_warning(None) is None
    capped = steady + [1650.0, 1530.0]
    warning = timing.clock_warning(capped)
    assert warning is not None and "1530 to 1980 MHz" in warning
    m = timing.Measurement([0.35] * 6, "device", sm_clock_mhz=capped)
    stats = m.stats()
    assert stats.sm_clock_min_mhz == 1530.0 and stats.sm_clock_median_mhz == 1917.5
    assert timing.Measurement([0.35], "events").stats().sm_clock_median_mhz is None
