"""``summary.json``: per problem and per category, workloads, statuses, median speedup, wall time."""

from __future__ import annotations

import statistics
from collections import Counter
from itertools import groupby

from sol_execbench.schema import EvaluationStatus, Trace
from sol_execbench.schema.dataset_run import CategorySummary, ProblemSummary, ProblemOutcome

PASSED = EvaluationStatus.PASSED.value


def status_counts(traces: list[Trace]) -> dict[str, int]:
    counts = Counter(t.evaluation.status.value if t.evaluation is not None else "NO_EVALUATION" for t in traces)
    return dict(sorted(counts.items()))


def speedups(traces: list[Trace]) -> list[float]:
    return [t.evaluation.performance.speedup_factor for t in traces
            if t.evaluation is not None and t.evaluation.status == EvaluationStatus.PASSED
            and t.evaluation.performance is not None and t.evaluation.performance.speedup_factor > 0]


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 6) if values else None


def problem_summary(key: str, category: str, definition: str, solution: str | None, outcome: ProblemOutcome,
                    traces: list[Trace], wall_s: float | None, device: str | None = None,
                    note: str | None = None) -> ProblemSummary:
    return ProblemSummary(problem=key, category=category, definition=definition, solution=solution, outcome=outcome,
                          workloads=len(traces), statuses=status_counts(traces), median_speedup=_median(speedups(traces)),
                          wall_s=wall_s, device=device, note=note)


def all_passed(summary: ProblemSummary) -> bool:
    return summary.workloads > 0 and summary.statuses.get(PASSED, 0) == summary.workloads


def category_summary(category: str, problems: list[ProblemSummary], speedup_values: list[float]) -> CategorySummary:
    statuses: Counter[str] = Counter()
    for problem in problems:
        statuses.update(problem.statuses)
    return CategorySummary(category=category, problems=len(problems),
                           problems_passed=sum(all_passed(p) for p in problems),
                           workloads=sum(p.workloads for p in problems), statuses=dict(sorted(statuses.items())),
                           median_speedup=_median(speedup_values),
                           wall_s=round(sum(p.wall_s or 0.0 for p in problems), 3))


def category_summaries(problems: list[ProblemSummary],
                       speedups_by_problem: dict[str, list[float]]) -> tuple[list[CategorySummary], CategorySummary]:
    """Per category (sorted by name) and for the whole run; medians over the workloads' speedups."""
    ordered = sorted(problems, key=lambda p: (p.category, p.problem))
    categories = []
    for category, group in groupby(ordered, key=lambda p: p.category):
        members = list(group)
        values = [v for p in members for v in speedups_by_problem.get(p.problem, [])]
        categories.append(category_summary(category, members, values))
    every = [v for values in speedups_by_problem.values() for v in values]
    return categories, category_summary("", problems, every)
