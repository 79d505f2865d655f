"""SOL scores of traces against their bounds (no torch: plain arithmetic on traces and bounds).

Per workload, with T_k the solution's latency, T_b the baseline time (the reference's latency in
the same evaluation, or a supplied baseline) and T_SOL the bound on datasheet ceilings:

- speedup = T_b / T_k; fraction of SOL = T_SOL / T_k;
- SOL score S = 1 / (1 + (T_k - T_SOL) / (T_b - T_SOL)): 0.5 at the baseline, 1 at the bound;
  where T_b <= T_SOL, S = 1 when T_k <= T_SOL else 0 (upstream's rule); T_k <= T_SOL scores 1;
- a workload that did not pass scores 0 (score and fraction).

A problem's score is the mean over its workloads; a category's and the run's the mean over their
problems, each problem weighted equally (docs/scoring.md)."""

from __future__ import annotations

import math
import statistics
from collections import Counter
from dataclasses import dataclass
from itertools import groupby

from sol_execbench.schema import EvaluationStatus, Trace
from sol_execbench.schema.bound import ProblemBound, WorkloadBound
from sol_execbench.schema.scores import ProblemScore, ScoreFlag, ScoreTotals, ScoringBaseline, WorkloadScore

FAR_FROM_REFERENCE = 100.0
"""A reference slower than this many times its T_SOL flags the bound as possibly not tight."""
MS = 1e3


def sol_score(t_k: float, t_b: float, t_sol: float) -> float:
    """S = 1 / (1 + (T_k - T_SOL) / (T_b - T_SOL)) with upstream's edge rule for T_b <= T_SOL; a
    latency at or under T_SOL scores 1 (and is flagged by the caller)."""
    if t_k <= t_sol:
        return 1.0
    if t_b <= t_sol:
        return 0.0
    return 1.0 / (1.0 + (t_k - t_sol) / (t_b - t_sol))


@dataclass(frozen=True)
class ProblemInput:
    """One problem's traces and bound (either may be missing)."""

    problem: str
    category: str
    definition: str | None
    traces: list[Trace] | None
    """None when the run has no traces file for it."""
    bound: ProblemBound | None
    bound_error: str | None = None
    """Why there is no bound."""


def geomean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


class _Scorer:
    def __init__(self, baseline: ScoringBaseline | None):
        self.baseline = baseline
        self.flags: list[ScoreFlag] = []

    def flag(self, problem: str, workload: str, kind: str, detail: str) -> None:
        self.flags.append(ScoreFlag(problem=problem, workload=workload, kind=kind, detail=detail))

    def _baseline_ms(self, problem: str, uuid: str, reference_ms: float | None) -> float | None:
        if self.baseline is None:
            return reference_ms
        return self.baseline.latency_ms.get(problem, {}).get(uuid)

    def _bound_flags(self, problem: str, uuid: str, t_k: float, reference_ms: float | None, t_sol: float) -> None:
        if t_k < t_sol:
            self.flag(problem, uuid, "solution_below_sol", f"latency {t_k:.6g} ms is under T_SOL {t_sol:.6g} ms")
        if reference_ms is not None and reference_ms < t_sol:
            self.flag(problem, uuid, "reference_below_sol",
                      f"reference latency {reference_ms:.6g} ms is under T_SOL {t_sol:.6g} ms")
        if reference_ms is not None and reference_ms > FAR_FROM_REFERENCE * t_sol:
            self.flag(problem, uuid, "bound_far_from_reference",
                      f"reference latency {reference_ms:.6g} ms is {reference_ms / t_sol:.0f}x T_SOL {t_sol:.6g} ms")

    def workload(self, problem: str, trace: Trace, bound: WorkloadBound | None) -> WorkloadScore:
        uuid = trace.workload.uuid
        status = trace.status.value if trace.status else "NO_EVALUATION"
        t_sol = bound.t_sol_s * MS if bound is not None else None
        base = WorkloadScore(uuid=uuid, status=status, t_sol_ms=t_sol, bound_by=bound.bound_by if bound else None,
                             bytes_only=bound is not None and bound.bytes_only_reason is not None)
        if trace.status is not EvaluationStatus.PASSED:
            return base.model_copy(update={"sol_score": 0.0, "sol_fraction": 0.0})
        performance = trace.evaluation.performance
        t_k = performance.latency_ms
        reference_ms = performance.reference_latency_ms or None
        t_b = self._baseline_ms(problem, uuid, reference_ms)
        update = {"latency_ms": t_k, "reference_latency_ms": reference_ms, "baseline_ms": t_b,
                  "speedup_interval": performance.speedup_interval,
                  "speedup": t_b / t_k if t_b and t_k > 0 else None}
        if t_b is None:
            self.flag(problem, uuid, "no_baseline_time", "the scoring baseline has no time for it" if self.baseline
                      else "the reference was not timed (benchmark_reference false)")
        if t_sol is not None and t_k > 0:
            update["sol_fraction"] = t_sol / t_k
            self._bound_flags(problem, uuid, t_k, reference_ms, t_sol)
            if t_b is not None:
                update["sol_score"] = sol_score(t_k, t_b, t_sol)
        return base.model_copy(update=update)

    def problem(self, item: ProblemInput) -> ProblemScore:
        base = ProblemScore(problem=item.problem, category=item.category, definition=item.definition)
        if item.traces is None:
            return base.model_copy(update={"sol_score": 0.0, "sol_fraction": 0.0,
                                           "note": "no traces: the problem was not evaluated (it scores 0)"})
        if item.bound is None and item.traces:
            self.flag(item.problem, "*", "no_bound", item.bound_error or "no bound")
        bounds = {w.uuid: w for w in item.bound.workloads} if item.bound else {}
        rows = [self.workload(item.problem, t, bounds.get(t.workload.uuid)) for t in item.traces]
        scored = [r for r in rows if r.sol_score is not None]
        statuses = Counter(r.status for r in rows)
        return base.model_copy(update={
            "statuses": dict(sorted(statuses.items())), "workloads": rows,
            "sol_score": _mean([r.sol_score for r in scored]),
            "sol_fraction": _mean([r.sol_fraction for r in scored]),
            "speedup_geomean": geomean([r.speedup for r in rows if r.speedup]),
            "note": item.bound_error if item.bound is None else None})


def totals(category: str, problems: list[ProblemScore]) -> ScoreTotals:
    """Problems weighted equally: means of the problems' scores and fractions, geomean of their speedups."""
    scored = [p for p in problems if p.sol_score is not None]
    return ScoreTotals(category=category, problems=len(problems), problems_scored=len(scored),
                       workloads=sum(len(p.workloads) for p in problems),
                       workloads_passed=sum(p.statuses.get(EvaluationStatus.PASSED.value, 0) for p in problems),
                       sol_score=_mean([p.sol_score for p in scored]),
                       sol_fraction=_mean([p.sol_fraction for p in scored if p.sol_fraction is not None]),
                       speedup_geomean=geomean([p.speedup_geomean for p in problems if p.speedup_geomean]))


@dataclass(frozen=True)
class Scores:
    problems: list[ProblemScore]
    categories: list[ScoreTotals]
    totals: ScoreTotals
    flags: list[ScoreFlag]


def score_problems(items: list[ProblemInput], baseline: ScoringBaseline | None = None) -> Scores:
    """Scores of every problem, per category (sorted by name) and for the whole run."""
    scorer = _Scorer(baseline)
    problems = [scorer.problem(item) for item in sorted(items, key=lambda i: (i.category, i.problem))]
    categories = [totals(category, list(group)) for category, group in groupby(problems, key=lambda p: p.category)]
    return Scores(problems, categories, totals("", problems), scorer.flags)
