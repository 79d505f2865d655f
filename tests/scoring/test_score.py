"""SOL score arithmetic on crafted traces and bounds: the formula and upstream's edge rules, failed
workloads at 0, problems weighted equally in categories and the run, and the flags."""

from __future__ import annotations

import pytest

from sol_execbench.schema import Trace
from sol_execbench.schema.bound import ProblemBound, WorkloadBound
from sol_execbench.scoring.hardware import hardware_model
from sol_execbench.platform.peaks import peaks_for
from sol_execbench.scoring.score import FAR_FROM_REFERENCE, ProblemInput, score_problems, sol_score

from .crafted import trace


@pytest.mark.parametrize("t_k, t_b, t_sol, expected", [
    (2.0, 2.0, 1.0, 0.5),                    # at the baseline
    (1.5, 3.0, 1.0, 1 / (1 + 0.5 / 2.0)),    # between baseline and bound
    (6.0, 2.0, 1.0, 1 / (1 + 5.0 / 1.0)),    # slower than the baseline
    (1.0, 2.0, 1.0, 1.0),                    # at the bound
    (0.5, 2.0, 1.0, 1.0),                    # under the bound: 1 (and flagged)
    (0.9, 0.8, 1.0, 1.0),                    # T_b <= T_SOL, T_k <= T_SOL: 1
    (1.2, 0.8, 1.0, 0.0),                    # T_b <= T_SOL, T_k > T_SOL: 0
    (1.2, 1.0, 1.0, 0.0),                    # T_b == T_SOL counts as T_b <= T_SOL
])
def test_sol_score_formula_and_edge_rules(t_k, t_b, t_sol, expected):
    assert sol_score(t_k, t_b, t_sol) == pytest.approx(expected)


def _bound(problem: str, t_sol_ms: dict[str, float]) -> ProblemBound:
    workloads = [WorkloadBound(uuid=uuid, axes={}, bytes_moved=1, flops=[], total_flops=0, arithmetic_intensity=0.0,
                               compute_time_s=0.0, memory_time_s=t / 1e3, t_sol_s=t / 1e3, bound_by="memory")
                 for uuid, t in t_sol_ms.items()]
    return ProblemBound(problem=problem, definition="d", hardware=hardware_model(peaks_for("H100"), "H100"),
                        workloads=workloads)


def _traces(*items: dict) -> list[Trace]:
    return [Trace.model_validate(item) for item in items]


def test_problems_average_workloads_failed_score_zero_and_problems_weigh_equally():
    # L1/a: two workloads, one failed; L1/b: one; L2/c: no traces (scores 0)
    a = ProblemInput("L1/a", "L1", "d", _traces(trace("d", "w1", latency_ms=2.0, reference_ms=3.0),
                                                trace("d", "w2", status="INCORRECT_NUMERICAL")),
                     _bound("L1/a", {"w1": 1.0, "w2": 1.0}))
    b = ProblemInput("L1/b", "L1", "d", _traces(trace("d", "w1", latency_ms=4.0, reference_ms=4.0)),
                     _bound("L1/b", {"w1": 0.5}))
    c = ProblemInput("L2/c", "L2", None, None, None)
    scores = score_problems([c, b, a])
    by = {p.problem: p for p in scores.problems}
    s_a1 = sol_score(2.0, 3.0, 1.0)
    assert [w.sol_score for w in by["L1/a"].workloads] == [pytest.approx(s_a1), 0.0]
    assert by["L1/a"].sol_score == pytest.approx(s_a1 / 2)
    assert by["L1/a"].sol_fraction == pytest.approx((1.0 / 2.0 + 0.0) / 2)
    assert by["L1/a"].speedup_geomean == pytest.approx(3.0 / 2.0)  # over the PASSED workload only
    assert by["L1/b"].sol_score == pytest.approx(0.5) and by["L2/c"].sol_score == 0.0 and "no traces" in by["L2/c"].note
    (l1, l2) = scores.categories
    assert (l1.category, l1.problems, l1.sol_score) == ("L1", 2, pytest.approx((s_a1 / 2 + 0.5) / 2))
    assert (l2.category, l2.sol_score) == ("L2", 0.0)
    assert scores.totals.sol_score == pytest.approx((s_a1 / 2 + 0.5 + 0.0) / 3)  # problems, not categories, weigh
    assert scores.totals.workloads == 3 and scores.totals.workloads_passed == 2


def test_flags_below_sol_far_from_reference_and_missing_bound():
    t_sol = 1.0
    items = [ProblemInput("L1/a", "L1", "d", _traces(
        trace("d", "fast", latency_ms=0.5, reference_ms=0.8),                        # both under T_SOL
        trace("d", "far", latency_ms=2.0, reference_ms=FAR_FROM_REFERENCE * t_sol * 1.5),
        trace("d", "fine", latency_ms=2.0, reference_ms=FAR_FROM_REFERENCE * t_sol * 0.5)),
        _bound("L1/a", {"fast": t_sol, "far": t_sol, "fine": t_sol})),
        ProblemInput("L1/b", "L1", "d", _traces(trace("d", "w")), None, "no bound: the reference does not load")]
    scores = score_problems(items)
    flags = {(f.problem, f.workload, f.kind) for f in scores.flags}
    assert flags == {("L1/a", "fast", "solution_below_sol"), ("L1/a", "fast", "reference_below_sol"),
                     ("L1/a", "far", "bound_far_from_reference"), ("L1/b", "*", "no_bound")}
    (b,) = [p for p in scores.problems if p.problem == "L1/b"]
    assert b.sol_score is None and b.workloads[0].speedup == pytest.approx(1.0) and scores.totals.problems_scored == 1


def test_a_scoring_baseline_replaces_the_reference_and_a_missing_time_is_unscored():
    from sol_execbench.schema.scores import ScoringBaseline

    baseline = ScoringBaseline(latency_ms={"L1/a": {"w1": 4.0}})
    item = ProblemInput("L1/a", "L1", "d", _traces(trace("d", "w1", latency_ms=2.0, reference_ms=3.0,
                                                         interval=(1.4, 1.6)),
                                                   trace("d", "w2", latency_ms=2.0, reference_ms=3.0)),
                        _bound("L1/a", {"w1": 1.0, "w2": 1.0}))
    scores = score_problems([item], baseline)
    w1, w2 = scores.problems[0].workloads
    assert w1.baseline_ms == 4.0 and w1.sol_score == pytest.approx(sol_score(2.0, 4.0, 1.0))
    assert w1.speedup == pytest.approx(2.0) and w1.speedup_interval.low == 1.4
    assert w2.sol_score is None and w2.sol_fraction == pytest.approx(0.5)
    assert [(f.workload, f.kind) for f in scores.flags] == [("w2", "no_baseline_time")]
    assert scores.problems[0].sol_score == pytest.approx(w1.sol_score)
