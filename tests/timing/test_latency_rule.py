"""The latency rule is continuous, and reference and solution are timed alike (CPU)."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from sol_execbench.evaluate.child.timing import (LAUNCH_ALLOWANCE_US, FreshArgs, L2Flusher, SideCalls, SideSpans, TimingPlan,
                                           measure, side_latency_ms, speedup_interval, unprofiled)
from sol_execbench.evaluate.child.timing import paired, statistics
from sol_execbench.evaluate.child.timing.paired import _side
from sol_execbench.evaluate.child.timing.profiled import DevicePass
from sol_execbench.evaluate.child.timing.statistics import _trimmed_rows, host_speedup_se, host_time_ms, host_time_se_ms
from sol_execbench.evaluate.child.timing.unprofiled import HostPass

ALLOWANCE_MS = LAUNCH_ALLOWANCE_US / 1e3
# Spans in ms around every threshold the rule has had: the allowance, 50 us (a hold gate), 100 us
# (a host-bound floor), twice the device time, and a bracket's cost subtracted from a span.
GRID = sorted({0.0, 0.001, 0.01, 0.0249, 0.025, 0.0251, 0.049, 0.05, 0.051, 0.099, 0.1, 0.101, 0.125, 0.149, 0.15,
               0.2, 0.25, 0.3, 1.0, 5.0, ALLOWANCE_MS - 1e-4, ALLOWANCE_MS + 1e-4})
STEPS = (1e-6, 1e-4, 3e-3)


def test_a_small_change_in_either_span_moves_the_latency_by_no_more_than_that_change():
    for device, host, step in itertools.product(GRID, GRID, STEPS):
        here = side_latency_ms(device, host, ALLOWANCE_MS)
        for moved in (side_latency_ms(device + step, host, ALLOWANCE_MS), side_latency_ms(device, host + step, ALLOWANCE_MS),
                      side_latency_ms(max(0.0, device - step), host, ALLOWANCE_MS),
                      side_latency_ms(device, max(0.0, host - step), ALLOWANCE_MS)):
            assert abs(moved - here) <= step + 1e-12, (device, host, step)


def test_the_rule_keeps_device_time_for_a_launch_and_counts_host_work_beyond_it():
    assert side_latency_ms(0.003, 0.06, ALLOWANCE_MS) == 0.003  # one Triton kernel: 60 us on the host
    assert side_latency_ms(0.042, 0.3, ALLOWANCE_MS) == pytest.approx(0.3 - ALLOWANCE_MS)  # a dozen eager operators
    assert side_latency_ms(None, 0.12, ALLOWANCE_MS) == 0.12  # the CPU: the host clock is the measurement


def _measured_side(device_ms, host_ms, floor=0.004, name="solution"):
    dev = DevicePass("device", {name: list(device_ms)}, {name: list(range(len(device_ms)))})
    host = HostPass(floor, {name: [h + floor for h in host_ms]}, {name: list(range(len(host_ms)))})
    return _side(name, dev, host, ALLOWANCE_MS)


def test_a_sides_latency_is_continuous_across_the_host_device_crossover():
    """Rounds whose host time less the allowance sits right at the device time: nudging one round's
    host or device time across it moves the latency by no more than the nudge."""
    device = [0.1 + 1e-3 * (k % 3) for k in range(9)]
    for host_centre, step in itertools.product((0.1 + ALLOWANCE_MS - 1e-4, 0.1 + ALLOWANCE_MS, 0.1 + ALLOWANCE_MS + 1e-4, MARGIN), STEPS):
        host = [host_centre + 1e-4 * (k % 4) for k in range(9)]
        base = _measured_side(device, host).latency_ms
        for k in range(9):
            nudged_host, nudged_device = list(host), list(device)
            nudged_host[k] += step
            nudged_device[k] += step
            assert abs(_measured_side(device, nudged_host).latency_ms - base) <= step + 1e-12
            assert abs(_measured_side(nudged_device, host).latency_ms - base) <= step + 1e-12


def test_more_host_rounds_than_device_rounds_follow_the_same_rule():
    side = _measured_side([0.05] * 5, [0.3] * 5 + [0.4] * 20)
    assert side.latency_ms == pytest.approx(0.4 - ALLOWANCE_MS) and side.host_bound
    assert side.summary.count == 25 and side.summary.median == pytest.approx(side.latency_ms)
    quiet = _measured_side([0.05] * 5, [0.06] * 25)
    assert quiet.latency_ms == pytest.approx(0.05) and not quiet.host_bound and quiet.summary.count == 5


def test_a_host_round_below_the_allowance_counts_as_the_device_time():
    """Host-set rounds are counted by the latency's rule one by one: a round whose host span is
    shorter than the allowance reads as the device time, so the trace's minimum is never negative
    nor below the device time."""
    host = [ALLOWANCE_MS / 2] + [0.4] * 24
    side = _measured_side([0.05] * 5, host)
    assert side.host_bound and side.summary.count == 25
    assert side.summary.minimum == pytest.approx(0.05) and side.summary.maximum == pytest.approx(0.4 - ALLOWANCE_MS)


def _spans(device, host):
    return SideSpans(tuple(device), tuple(host), ALLOWANCE_MS)


def test_the_speedup_interval_moves_continuously_with_the_rounds():
    ref = [1.0 + 0.01 * (k % 5) for k in range(30)]
    sol = [1.0 + 0.01 * ((k + 2) % 5) for k in range(30)]
    base = speedup_interval(_spans(ref, [0.0] * 30), _spans(sol, [0.0] * 30))
    nudged = speedup_interval(_spans([r + 1e-6 for r in ref], [0.0] * 30), _spans(sol, [0.0] * 30))
    assert abs(nudged.low - base.low) < 1e-5 and abs(nudged.high - base.high) < 1e-5
    assert base.low <= base.point <= base.high and base.verdict == "parity"
    assert speedup_interval(_spans([2.0] * 10, [0.0] * 10), _spans([1.0] * 10, [0.0] * 10)).verdict == "faster"
    assert speedup_interval(_spans([1.0] * 10, [0.0] * 10), _spans([2.0] * 10, [0.0] * 10)).verdict == "slower"


def test_the_interval_draws_host_rounds_where_the_host_sets_the_latency():
    """Host-set sides: the interval comes from the host rounds (here more of them than device rounds);
    the point is the ratio of the latencies."""
    ref = _spans([0.02] * 10, [0.30 + 0.01 * (k % 7) for k in range(60)])
    sol = _spans([0.02] * 10, [0.20 + 0.01 * ((k + 3) % 7) for k in range(60)])
    interval = speedup_interval(ref, sol)
    assert interval.point == pytest.approx((host_time_ms(ref.host) - ALLOWANCE_MS) / (host_time_ms(sol.host) - ALLOWANCE_MS))
    assert interval.verdict == "faster" and interval.rounds == 60  # the reference is the slower side
    assert interval.low < interval.point < interval.high


def test_the_interval_allows_for_an_offset_between_the_sides_device_times():
    """Identical device spans on both sides still give an interval about 1 as wide as an offset of
    DEVICE_OFFSET per side allows (about +-1.4% at 95%), so a steady offset of a few tenths of a
    percent within one process reads parity; where the host sets both latencies the offset does
    not move them."""
    same = speedup_interval(_spans([0.04] * 50, [0.0] * 50), _spans([0.04] * 50, [0.0] * 50))
    expected = np.exp(1.96 * statistics.DEVICE_OFFSET * 2 ** 0.5)
    assert same.point == 1.0 and same.verdict == "parity"
    assert same.high == pytest.approx(expected, rel=0.003) and same.low == pytest.approx(1 / expected, rel=0.003)
    assert speedup_interval(_spans([0.0404] * 50, [0.0] * 50), _spans([0.04] * 50, [0.0] * 50)).verdict == "parity"
    assert speedup_interval(_spans([0.042] * 50, [0.0] * 50), _spans([0.04] * 50, [0.0] * 50)).verdict == "faster"


def test_the_interval_allows_for_an_offset_between_the_sides_host_times():
    """Identical host-set sides give an interval about 1 as wide as an offset of HOST_OFFSET per side
    allows, magnified as the host time less the allowance is (0.3 ms of host time, 0.2 ms of
    latency: 1.5 times); the device offset does not move them, nor the host offset a device-set side."""
    host_set = speedup_interval(_spans([0.04] * 50, [0.3] * 50), _spans([0.04] * 50, [0.3] * 50))
    expected = np.exp(1.96 * 1.5 * statistics.HOST_OFFSET * 2 ** 0.5)
    assert host_set.point == 1.0 and host_set.verdict == "parity"
    assert host_set.high == pytest.approx(expected, rel=0.003) and host_set.low == pytest.approx(1 / expected, rel=0.003)
    assert speedup_interval(_spans([0.04] * 50, [0.303] * 50), _spans([0.04] * 50, [0.3] * 50)).verdict == "parity"
    assert speedup_interval(_spans([0.04] * 50, [0.33] * 50), _spans([0.04] * 50, [0.3] * 50)).verdict == "faster"
    device_set = speedup_interval(_spans([0.04] * 50, [0.12] * 50), _spans([0.04] * 50, [0.12] * 50))
    expected = np.exp(1.96 * statistics.DEVICE_OFFSET * 2 ** 0.5)
    assert device_set.high == pytest.approx(expected, rel=0.003)


def test_the_interval_allows_for_a_shift_of_both_sides_host_times_between_processes():
    """A host-set eager reference (300 us of host time: 200 us of latency) against a device-set
    solution (40 us): in a process whose host runs 20% slower or faster the reference reads 260 or
    140 us, the speedup 6.5 or 3.5 instead of 5; the interval holds both, where rounds alone
    (``process_shift=0``) hold neither. Identical sides follow the shift alike (the same interval),
    and so do sides whose latency is their host time (the CPU)."""
    reference, solution = _spans([0.02] * 50, [0.3] * 50), _spans([0.04] * 50, [0.1] * 50)
    shifted, rounds_only = speedup_interval(reference, solution), speedup_interval(reference, solution, process_shift=0.0)
    assert shifted.point == rounds_only.point == pytest.approx(5.0)
    assert shifted.low < 3.5 and shifted.high > 6.5 and shifted.verdict == "faster"
    assert 3.5 < rounds_only.low and rounds_only.high < 6.5
    twins = _spans([0.02] * 50, [0.15 + 0.01 * (k % 5) for k in range(50)])
    assert speedup_interval(twins, twins) == speedup_interval(twins, twins, process_shift=0.0)
    cpu_ref, cpu_sol = _spans([None] * 50, [0.3 + 0.01 * (k % 3) for k in range(50)]), _spans([None] * 50, [0.2] * 50)
    on_cpu = speedup_interval(cpu_ref, cpu_sol)
    assert (on_cpu.low, on_cpu.high) == pytest.approx((speedup_interval(cpu_ref, cpu_sol, process_shift=0.0).low,
                                                       speedup_interval(cpu_ref, cpu_sol, process_shift=0.0).high))


def test_the_interval_draws_host_rounds_in_runs_where_there_are_many():
    """Host rounds are resampled as runs of consecutive rounds (HOST_BLOCKS of them): a stretch of
    load that slowed one side's calls for many rounds in a row moves the interval as one stretch,
    not as many independent rounds. The same paired differences in stretches of 60 rounds give a
    wider interval than in an order with no stretches; below 2 x HOST_BLOCKS rounds, single rounds."""
    rng = np.random.default_rng(3)
    picks = statistics._host_picks(rng, 624, 50)
    block = 624 // statistics.HOST_BLOCKS
    assert picks.shape == (50, 624) and picks.min() >= 0 and picks.max() < 624
    runs = picks.reshape(50, -1, block)
    assert (np.diff(runs, axis=2) == 1).all()  # each run is consecutive rounds
    assert len(np.unique(runs[:, :, 0])) > 500  # starting anywhere
    single = statistics._host_picks(rng, 2 * statistics.HOST_BLOCKS - 1, 400)
    assert (np.diff(single, axis=1) == 1).mean() < 0.1  # single rounds

    n, stretch = 600, 60
    slow = [(k // stretch) % 2 == 0 for k in range(n)]  # the reference slower in every other stretch
    reference = [0.30 + (0.02 if s else 0.0) for s in slow]
    solution = [0.30 + (0.0 if s else 0.02) for s in slow]
    order = np.random.default_rng(5).permutation(n)  # the same rounds with no stretches
    in_stretches = speedup_interval(_spans([0.04] * 50, reference), _spans([0.04] * 50, solution))
    shuffled = speedup_interval(_spans([0.04] * 50, [reference[i] for i in order]),
                                _spans([0.04] * 50, [solution[i] for i in order]))
    assert in_stretches.point == pytest.approx(shuffled.point)
    assert np.log(in_stretches.high / in_stretches.low) > 1.2 * np.log(shuffled.high / shuffled.low)


class _VirtualClock:
    """A clock that only calls move: each call adds its cost, so host spans are exact."""

    def __init__(self):
        self.ns = 0

    def perf_counter_ns(self):
        return self.ns


def _aa(monkeypatch, cpu_device, rounds, cost_ns):
    clock = _VirtualClock()
    monkeypatch.setattr(unprofiled, "time", SimpleNamespace(perf_counter_ns=clock.perf_counter_ns))
    made = {"calls": 0}

    def body(x):
        made["calls"] += 1
        clock.ns += cost_ns(made["calls"])
        return x

    bank = [[torch.ones(4) * k] for k in range(3)]
    sides = [SideCalls(name, body, FreshArgs(bank, slots=rounds + 4)) for name in ("solution", "reference")]
    return measure(sides[0], sides[1], TimingPlan(warmup=1, rounds=rounds, device=cpu_device,
                                                  flusher=L2Flusher(cpu_device)))


def test_identical_code_reads_one_with_an_interval_on_one(monkeypatch, cpu_device):
    """Identical spans: the point is 1 and the interval only as wide as the host offset allows."""
    m = _aa(monkeypatch, cpu_device, 20, lambda n: 150_000)
    widest = np.exp(1.96 * statistics.HOST_OFFSET * 2 ** 0.5)
    assert m.speedup.point == 1.0 and 1 / widest * 0.995 < m.speedup.low < 1.0 < m.speedup.high < widest * 1.005
    assert m.speedup.verdict == "parity"
    assert m.solution.host_ms == m.reference.host_ms and m.solution.latency_ms == pytest.approx(0.15)


def test_an_order_effect_hits_both_sides_alike(monkeypatch, cpu_device):
    """The first call of every round costs 40% more (a cache, a clock, a queue the previous round left):
    alternating which side goes first gives both sides that cost equally often, so identical code still
    reads exactly 1. Timing one side always first (or one side's calls all before the other's) would not."""
    # Calls 1 and 2 are the warm-ups; from call 3 on, odd-numbered calls open a round.
    m = _aa(monkeypatch, cpu_device, 20, lambda n: 140_000 if n > 2 and n % 2 == 1 else 100_000)
    assert sorted(set(m.solution.host_ms)) == [0.1, 0.14]
    assert m.speedup.point == 1.0 and m.speedup.verdict == "parity"


def test_the_host_time_is_the_mean_without_the_lowest_and_highest_fifth():
    assert host_time_ms([1.0] * 8 + [10.0] * 2) == 1.0  # a preempted fifth does not move it
    assert host_time_ms([float(k) for k in range(1, 11)]) == pytest.approx(5.5)
    assert host_time_ms([2.0, 4.0]) == 3.0  # too few rounds to cut: the mean
    drawn = np.array([[5.0, 1.0, 9.0, 3.0, 7.0], [2.0, 2.0, 2.0, 2.0, 50.0]])
    assert list(_trimmed_rows(drawn)) == [host_time_ms(list(row)) for row in drawn]


def test_the_device_time_is_the_mean_without_the_lowest_and_highest_fifth_of_the_calls_with_device_work():
    spans = SideSpans((1.0, None, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 100.0), (0.5,) * 12, ALLOWANCE_MS)
    assert spans.device_time_ms() == pytest.approx(6.0)  # 11 measured, 2 cut from each end: 4 to 10, not 100
    assert SideSpans((None, None), (0.5, 0.5), ALLOWANCE_MS).device_time_ms() is None
    # Resampled as the interval does it: a row's calls without device work are left out, a row of none is NaN.
    drawn = np.array([[5.0, np.nan, 1.0, 9.0, 3.0, 7.0], [np.nan] * 6, [2.0, 2.0, 2.0, 2.0, 2.0, 50.0]])
    rows = _trimmed_rows(drawn)
    assert rows[0] == host_time_ms([5.0, 1.0, 9.0, 3.0, 7.0]) and np.isnan(rows[1]) and rows[2] == 2.0


def test_the_device_time_of_spans_on_the_records_steps_moves_by_the_share_that_changed():
    """A few-us kernel's spans fall on the records' 32 ns steps. With half its 26 spans on each of
    two steps, one span moving up a step moves their median by half a step (1.3% of 1.2 us); the
    device time moves by a sixteenth of a step."""
    low, high = 0.001184, 0.001216
    half = SideSpans((low,) * 13 + (high,) * 13, (0.02,) * 26, ALLOWANCE_MS)
    moved = SideSpans((low,) * 12 + (high,) * 14, (0.02,) * 26, ALLOWANCE_MS)
    assert float(np.median(moved.device) - np.median(half.device)) == pytest.approx((high - low) / 2)
    assert moved.device_time_ms() - half.device_time_ms() == pytest.approx((high - low) / 16)


MARGIN = paired.HOST_SET_MARGIN


def test_the_speedup_s_host_standard_error_follows_the_spread_the_rounds_and_the_pairing():
    rng = np.random.default_rng(3)
    spans = 0.15 + 0.02 * rng.standard_normal(400)  # latency 50 us
    alone = host_speedup_se(_spans([0.03] * 50, spans), None, MARGIN)
    # a trimmed mean of normal spans: about 1.1 x the plain mean's 0.02 / sqrt(400), over the latency
    assert 0.001 / 0.05 < alone < 0.0013 / 0.05
    assert host_speedup_se(_spans([0.03] * 50, spans[:100]), None, MARGIN) == pytest.approx(2 * alone, rel=0.25)
    # two sides with independent noise: the paired error is the two errors combined
    other = 0.15 + 0.02 * rng.standard_normal(400)
    assert host_speedup_se(_spans([0.03] * 50, spans), _spans([0.03] * 50, other), MARGIN) == pytest.approx(alone * 2 ** 0.5, rel=0.2)
    # noise both sides' rounds shared (a slow stretch of the host) cancels in the pair
    shared = 0.02 * rng.standard_normal(400)
    common = host_speedup_se(_spans([0.03] * 50, 0.15 + shared + 0.002 * rng.standard_normal(400)),
                             _spans([0.03] * 50, 0.15 + shared + 0.002 * rng.standard_normal(400)), MARGIN)
    assert common < alone / 5
    # a side whose host time cannot set its latency adds nothing: the device time's
    assert host_speedup_se(_spans([0.03] * 50, spans), _spans([0.2] * 50, other), MARGIN) == pytest.approx(alone)
    assert host_speedup_se(_spans([0.2] * 50, spans), None, MARGIN) == 0.0
    assert host_speedup_se(_spans([0.03] * 50, [0.15] * 50), None, MARGIN) == 0.0


def test_the_interval_pairs_host_rounds_and_refuses_sides_of_different_counts():
    """Every host round is run by both sides (added rounds too): sides of different host round
    counts cannot be paired, and the interval says so rather than drawing them apart."""
    rng = np.random.default_rng(5)
    ref = _spans([0.5 + 0.001 * (k % 3) for k in range(20)], list(0.3 + 0.02 * rng.standard_normal(20)))
    sol = _spans([0.01] * 20, list(0.2 + 0.02 * rng.standard_normal(200)))
    with pytest.raises(ValueError, match="same number"):
        speedup_interval(ref, sol)
    interval = speedup_interval(ref, _spans([0.01] * 20, sol.host[:20]))
    assert interval.rounds == 20 and interval.low < interval.point < interval.high and interval.verdict == "faster"


def test_host_rounds_go_on_until_the_speedup_is_precise_where_a_host_time_may_set_it():
    rng = np.random.default_rng(4)
    noisy = list(0.145 + 0.03 * rng.standard_normal(50))  # latency ~45 us, known to ~10%
    side = _measured_side([0.03] * 50, noisy)
    assert paired.host_rounds_wanted(side, None)
    assert paired._more_host_rounds(side, None, 50, per_round_s=1e-3, spent_s=0.0) == 50
    # both sides' rounds moved together, round by round: their ratio is known already
    assert paired._more_host_rounds(side, side, 50, per_round_s=1e-3, spent_s=0.0) == 0
    # the budget of added rounds bounds them, in even numbers
    assert paired._more_host_rounds(side, None, 50, 1e-3, paired.HOST_EXTENSION_BUDGET_S - 0.0315) == 30
    assert paired._more_host_rounds(side, None, 50, 1e-3, paired.HOST_EXTENSION_BUDGET_S) == 0
    # and so does the factor over the configured rounds
    many = _measured_side([0.03] * 50, list(0.145 + 0.03 * rng.standard_normal(50 * paired.HOST_ROUNDS_FACTOR)))
    assert paired._more_host_rounds(many, None, 50, 1e-3, 0.0) == 0
    # the host time cannot set the latency: no more rounds, however noisy
    assert not paired.host_rounds_wanted(_measured_side([0.2] * 50, noisy), None)
    # precise already: no more rounds
    assert not paired.host_rounds_wanted(_measured_side([0.03] * 50, [0.145] * 50), None)
    # no device time (CPU): the host time is the latency whatever its precision, and no device pass to balance
    assert not paired.host_rounds_wanted(_measured_side([None] * 50, noisy), None)


def test_a_host_time_below_the_device_time_by_more_than_its_margin_gets_no_added_rounds():
    """Whether a host time may set the latency is judged with its own uncertainty: host time less
    the allowance within HOST_SET_MARGIN standard errors of the device time, or above it."""
    rng = np.random.default_rng(6)
    noise = 0.03 * rng.standard_normal(800)
    host = list(0.145 + noise)  # less the allowance: ~45 us, its standard error ~4.5 us over 50 rounds
    se = host_time_se_ms(tuple(host[:50]))
    assert 0.003 < se < 0.006
    # 45 us against a device time of 80 us: clearly below, no added rounds however noisy
    assert not paired.host_rounds_wanted(_measured_side([0.08] * 50, host[:50]), None)
    # against 50 us: within the margin, so it may set the latency: more rounds
    assert paired.host_rounds_wanted(_measured_side([0.05] * 50, host[:50]), None)
    # 800 rounds narrow the host time's error to ~1.1 us: 45 us is then clearly below 50 us
    assert host_time_se_ms(tuple(host)) < se / 3
    assert not paired.host_rounds_wanted(_measured_side([0.05] * 50, host), None)


def test_a_lone_host_set_side_gets_added_rounds_only_beside_a_partner_that_runs_them_too():
    """Where only one side's host time may set its latency, the speedup moves with that host's speed
    between processes: beside a partner whose host time is near its device time (both run the added
    rounds) its rounds stop at LONE_SIDE_PRECISION, and so without a reference; beside one far below
    it gets none, however imprecise. Two host-set sides go on to SPEEDUP_PRECISION."""
    rng = np.random.default_rng(7)
    one = _measured_side([0.03] * 400, list(0.145 + 0.03 * rng.standard_normal(400)))  # ~45 us after the allowance
    other = _measured_side([0.03] * 400, list(0.145 + 0.03 * rng.standard_normal(400)), name="reference")
    # 45 us after the allowance, precise: above half of a 60 us device time (near), below half of 200 (far)
    near = _measured_side([0.06] * 400, list(0.145 + 0.001 * rng.standard_normal(400)), name="reference")
    far = _measured_side([0.2] * 400, list(0.145 + 0.001 * rng.standard_normal(400)), name="reference")
    assert paired.host_rounds_paired(one, near) and not paired.host_rounds_paired(one, far)
    lone = host_speedup_se(one.spans, far.spans, MARGIN)
    assert lone == pytest.approx(host_speedup_se(one.spans, near.spans, MARGIN))  # neither partner's host time counts
    assert lone > paired.LONE_SIDE_PRECISION
    assert not paired.host_rounds_wanted(one, far)
    assert not paired.host_rounds_wanted(one, far, paired.HostPrecision(both=0.001, lone=0.001))
    assert paired.host_rounds_wanted(one, near)
    assert not paired.host_rounds_wanted(one, near, paired.HostPrecision(lone=2 * lone))
    # timed without a reference (the fidelity benchmark), its latency is the result: the lone precision
    assert host_speedup_se(one.spans, None, MARGIN) == pytest.approx(lone)
    assert paired.host_rounds_paired(one, None) and paired.host_rounds_wanted(one, None)
    assert host_speedup_se(one.spans, other.spans, MARGIN) > paired.SPEEDUP_PRECISION
    assert paired.host_rounds_wanted(one, other)


def test_a_sides_response_to_its_host_time_is_what_its_latency_follows():
    """d log latency / d log host time over host times within the margin: 0 where the device time
    sets the latency, host / (host - allowance) where the host time does, both where the margin
    reaches across; 1 without a device time."""
    steady = [0.2 + 1e-4 * (k % 3 - 1) for k in range(60)]  # 200 us, known to well under 1 us
    assert statistics.host_response(_measured_side([0.15] * 60, steady).spans, MARGIN) == ((0.0, 0.0),)
    (low, high), = statistics.host_response(_measured_side([0.01] * 60, steady).spans, MARGIN)
    assert low < 2.0 < high and high - low < 0.01  # 200 / (200 - 100)
    near = statistics.host_response(_measured_side([0.1] * 60, steady).spans, MARGIN)  # 200 - 100 = the device time
    assert near[0] == (0.0, 0.0) and near[1][1] == pytest.approx(2.0)  # (allowance + device) / device
    assert statistics.host_response(_measured_side([None] * 60, steady).spans, MARGIN) == ((1.0, 1.0),)
    at_allowance = [ALLOWANCE_MS + 1e-4 * (k % 3 - 1) for k in range(60)]  # a device time of 0: no division by it
    assert statistics.host_response(_measured_side([0.0] * 60, at_allowance).spans, MARGIN)[1][1] == float("inf")


def test_two_host_set_sides_that_follow_the_host_unequally_stop_their_rounds_at_what_a_process_shift_moves():
    """An eager reference at a host time of 291 us and a Triton solution at 146 us, both host-set:
    a shift of every host time between processes moves the speedup by 1.7 times the shift (1.5 and
    3.2 times for the sides), so their rounds stop at a third of PROCESS_HOST_SHIFT times that, not
    at SPEEDUP_PRECISION. Identical sides follow the shift alike and go on to SPEEDUP_PRECISION."""
    rng = np.random.default_rng(11)
    shared = 0.03 * rng.standard_normal(52)  # host load both sides of a round meet

    def side(host, device, name, scale):
        return _measured_side([device] * 52, list(host + scale * shared + 0.006 * rng.standard_normal(52)), name=name)

    reference, solution = side(0.291, 0.034, "reference", 2.0), side(0.146, 0.0034, "solution", 1.0)
    gap = statistics.host_response_gap(solution.spans, reference.spans, MARGIN)
    assert 1.0 < gap < 1.8
    se = host_speedup_se(solution.spans, reference.spans, MARGIN)
    assert paired.SPEEDUP_PRECISION < se < paired.SHIFT_SE_SHARE * paired.PROCESS_HOST_SHIFT * gap
    assert not paired.host_rounds_wanted(solution, reference)
    assert paired.host_rounds_wanted(solution, reference, paired.HostPrecision(process_shift=0.0))
    twin = side(0.146, 0.0034, "reference", 1.0)
    assert statistics.host_response_gap(solution.spans, twin.spans, MARGIN) == 0.0
    assert host_speedup_se(solution.spans, twin.spans, MARGIN) > paired.SPEEDUP_PRECISION
    assert paired.host_rounds_wanted(solution, twin)
    # a side whose host time cannot set its latency claims no gap (the lone and far rules decide)
    device_set = side(0.146, 0.2, "reference", 1.0)
    assert statistics.host_response_gap(solution.spans, device_set.spans, MARGIN) == 0.0


def _measured_pair(ref_device, sol_device, host_ms, floor=0.004):
    names = ("reference", "solution")
    dev = DevicePass("device", {"reference": list(ref_device), "solution": list(sol_device)},
                     {n: list(range(len(sol_device))) for n in names})
    host = HostPass(floor, {n: [h + floor for h in host_ms] for n in names}, {n: list(range(len(host_ms))) for n in names})
    return _side("solution", dev, host, ALLOWANCE_MS), _side("reference", dev, host, ALLOWANCE_MS)


def test_iterations_are_split_over_the_two_passes_in_even_rounds():
    assert paired.rounds_per_pass(50, gpu=True) == 26
    assert paired.rounds_per_pass(20, gpu=True) == 10
    assert paired.rounds_per_pass(1, gpu=True) == 2
    assert paired.rounds_per_pass(50, gpu=False) == 50  # the CPU's only pass is the host pass
    assert paired.rounds_per_pass(3, gpu=False) == 3


def test_another_device_pass_is_wanted_where_the_device_rounds_leave_the_speedup_imprecise():
    rng = np.random.default_rng(8)
    # 1.4 us kernels read in steps of 32 ns over five steps (a 2.7 us Triton RMSNorm spread 8.4% on
    # an H200): the device times of 26 leave their ratio known to about 1.2%
    quantised = [0.001376 + 0.000032 * int(k) for k in rng.integers(0, 5, size=(2, 26)).ravel()]
    sol, ref = _measured_pair(quantised[:26], quantised[26:], [0.02] * 26)
    se = statistics.device_speedup_se(sol.spans, ref.spans)
    assert se > paired.DEVICE_SPEEDUP_PRECISION and paired.device_rounds_wanted(sol, ref)
    # four times the rounds halve it
    many = [0.001376 + 0.000032 * int(k) for k in rng.integers(0, 5, size=(2, 104)).ravel()]
    sol4, ref4 = _measured_pair(many[:104], many[104:], [0.02] * 104)
    assert statistics.device_speedup_se(sol4.spans, ref4.spans) < se * 0.75
    # a 1 ms kernel spread by 0.1%: precise after one pass
    steady = list(1.0 + 0.001 * rng.standard_normal(52))
    sol, ref = _measured_pair(steady[:26], steady[26:], [0.2] * 26)
    assert statistics.device_speedup_se(sol.spans, ref.spans) < 0.001 and not paired.device_rounds_wanted(sol, ref)
    # a lone side: the precision of its own latency, here of a 1.2 us add whose spans spread over
    # twelve steps (1.02 to 1.4 us with the cache cold, H200)
    wide = [0.00102 + 0.000032 * int(k) for k in rng.integers(0, 12, size=26)]
    assert paired.device_rounds_wanted(_measured_side(wide, [0.02] * 26), None)
    assert not paired.device_rounds_wanted(_measured_side([0.00102] * 26, [0.02] * 26), None)


def test_device_rounds_of_a_side_whose_host_time_sets_its_latency_are_not_wanted():
    rng = np.random.default_rng(9)
    noisy = list(0.01 * np.exp(0.2 * rng.standard_normal(52)))  # 10 us kernels spread by 20%
    # 300 us on the host: both latencies are host-set, whatever the device rounds say
    sol, ref = _measured_pair(noisy[:26], noisy[26:], [0.3] * 26)
    assert sol.host_bound and ref.host_bound
    assert statistics.device_speedup_se(sol.spans, ref.spans) == 0.0 and not paired.device_rounds_wanted(sol, ref)
    # the same device rounds where the device sets both latencies
    sol, ref = _measured_pair(noisy[:26], noisy[26:], [0.02] * 26)
    assert paired.device_rounds_wanted(sol, ref)


def _triton_beside_eager(solution_device_ms: list[float], reference_host_ms: list[float]) -> tuple[DevicePass, HostPass]:
    """The passes of a Triton solution (its device spans, 20 us on the host) against an eager
    reference (30 us of device work, its host spans): 26 rounds each."""
    names = ("reference", "solution")
    dev = DevicePass("device", {"reference": [0.03] * 26, "solution": list(solution_device_ms)},
                     {n: list(range(26)) for n in names})
    host = HostPass(0.004, {"reference": list(reference_host_ms), "solution": [0.024] * 26},
                    {n: list(range(26)) for n in names})
    return dev, host


def test_no_second_device_pass_beside_a_host_set_side_whose_error_dominates():
    """A Triton solution (1.4 us, quantised device rounds) against an eager reference set by its noisy
    host time: the speedup's error is the reference's host rounds'; more device rounds would not
    narrow it."""
    rng = np.random.default_rng(10)
    quantised = [0.001376 + 0.000032 * int(k) for k in rng.integers(0, 7, size=52)]
    dev, host = _triton_beside_eager(quantised[:26], list(0.3 + 0.06 * rng.standard_normal(26)))
    sol, ref = _side("solution", dev, host, ALLOWANCE_MS), _side("reference", dev, host, ALLOWANCE_MS)
    assert ref.host_bound and not sol.host_bound
    assert statistics.device_speedup_se(sol.spans, ref.spans) > paired.DEVICE_SPEEDUP_PRECISION
    assert not paired.device_rounds_wanted(sol, ref)
    # the same solution beside a device-set reference of steady rounds: its device rounds set the error
    dev.spans_ms["reference"] = [0.2] * 26
    host.spans_ms["reference"] = [0.2] * 26
    sol, ref = _side("solution", dev, host, ALLOWANCE_MS), _side("reference", dev, host, ALLOWANCE_MS)
    assert paired.device_rounds_wanted(sol, ref)


def test_a_device_pass_beside_a_host_set_side_is_wanted_only_while_its_error_is_a_large_share_of_the_hosts():
    """A Triton solution's quantised device rounds leave an error of 1.1%, a host-set eager reference's
    host rounds 1.8%: at 0.6 of it, another device pass would narrow the speedup's standard error by
    about 7%; it runs where the share asked for is half, not at ``DEVICE_SHARE``."""
    rng = np.random.default_rng(11)
    quantised = [0.001376 + 0.000032 * int(k) for k in rng.integers(0, 7, size=26)]
    dev, host = _triton_beside_eager(quantised, list(0.3 + 0.02 * rng.standard_normal(26)))
    sol, ref = _side("solution", dev, host, ALLOWANCE_MS), _side("reference", dev, host, ALLOWANCE_MS)
    device = statistics.device_speedup_se(sol.spans, ref.spans)
    share = device / statistics.host_speedup_se(sol.spans, ref.spans, MARGIN)
    assert ref.host_bound and not sol.host_bound and device > paired.DEVICE_SPEEDUP_PRECISION
    assert 0.5 < share < paired.DEVICE_SHARE
    assert paired.device_rounds_wanted(sol, ref, share=0.5) and not paired.device_rounds_wanted(sol, ref)


def test_students_t_quantiles_match_the_table():
    for dof, table in ((1, 12.706), (2, 4.303), (3, 3.182), (9, 2.262), (25, 2.060), (120, 1.980)):
        assert statistics.t_quantile(0.95, dof) == pytest.approx(table, abs=6e-4)
    assert statistics.small_sample_widening(1) == 1.0
    assert statistics.small_sample_widening(3) > statistics.small_sample_widening(10) > statistics.small_sample_widening(100) > 1.0


def test_an_interval_over_few_rounds_of_identical_code_holds_one_as_often_as_it_claims():
    """Identical sides whose rounds scatter by 10% (the CPU: the latency is the host time), 3 rounds
    each: a percentile bootstrap of 3 rounds holds 1.00 in about 70% of draws; the widened interval
    in about 95%."""
    rng = np.random.default_rng(1)
    for rounds in (2, 3):
        held = 0
        for _ in range(200):
            reference, solution = (tuple(0.3 * np.exp(0.1 * rng.standard_normal(rounds))) for _ in range(2))
            interval = speedup_interval(_spans([None] * rounds, reference), _spans([None] * rounds, solution))
            held += interval.low <= 1.0 <= interval.high
        assert held >= 0.9 * 200, (rounds, held)
