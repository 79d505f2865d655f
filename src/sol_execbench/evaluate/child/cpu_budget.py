"""Counts that fit the CPU: a workload's rounds cut to ``BenchmarkConfig.cpu_budget_s``.

The configured counts (10 correctness rounds, 10 warm-up calls and 50 timed calls per side) are
meant for a GPU. On the CPU a Triton solution runs through Triton's interpreter, a Python loop over
its programs: one call of a 4096x4096 RMSNorm took 5.4 s on a 2-core machine, so the counts alone
came to about six minutes for that one workload. On the CPU, then, the correctness rounds stop once
they have taken the budget (after the first), and the warm-up and timed calls are scaled down
together to what fits in the budget again at the correctness rounds' pace (at least one warm-up
call where any was asked for, and ``MIN_TIMED_ROUNDS`` timed rounds). A GPU always runs every count.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from sol_execbench.schema import BenchmarkConfig
from sol_execbench.schema.config import CPU_BUDGET_WARNING

MIN_TIMED_ROUNDS = 3  # an interval and a median need a few rounds; examples/cpu_config.json runs 3


def budget_in_effect_s(config: BenchmarkConfig, is_gpu: bool) -> float | None:
    """``cpu_budget_s`` where it applies: on the CPU, unless 0 (None: every configured count runs)."""
    return config.cpu_budget_s if not is_gpu and config.cpu_budget_s > 0 else None


@dataclass(frozen=True)
class FittedCounts:
    """The counts a workload runs: ``config`` (the configured one, or a copy with fewer warm-up and
    timed calls) and how many correctness rounds ran of how many configured."""

    config: BenchmarkConfig
    correctness_rounds: int
    configured: BenchmarkConfig

    @property
    def cut(self) -> bool:
        return (self.correctness_rounds < self.configured.correctness_rounds
                or self.config.warmup_runs < self.configured.warmup_runs
                or self.config.iterations < self.configured.iterations)

    def warning(self) -> str | None:
        """One line for the trace where any count was cut, naming each count and the budget."""
        if not self.cut:
            return None
        c, was = self.config, self.configured
        return (f"{CPU_BUDGET_WARNING} ({was.cpu_budget_s:g} s) at this workload's pace: "
                f"{self.correctness_rounds} of {was.correctness_rounds} correctness round(s), "
                f"{c.warmup_runs} of {was.warmup_runs} warm-up call(s) and {c.iterations} of {was.iterations} "
                "timed call(s) per side (cpu_budget_s 0 runs every count)")


def fitted_counts(config: BenchmarkConfig, is_gpu: bool, round_spans_s: list[float]) -> FittedCounts:
    """The counts for the timing that follows correctness rounds that took ``round_spans_s`` each:
    on the CPU, where the warm-up and timed calls (one call per side each, as a correctness round
    has) would take longer than the budget at the rounds' median pace, both scaled down by the same
    factor."""
    rounds = len(round_spans_s)
    budget = budget_in_effect_s(config, is_gpu)
    if budget is None or not round_spans_s:
        return FittedCounts(config, rounds, config)
    pace_s = statistics.median(round_spans_s)
    share = budget / (pace_s * (config.warmup_runs + config.iterations)) if pace_s > 0 else 1.0
    if share >= 1.0:
        return FittedCounts(config, rounds, config)
    warmup = min(config.warmup_runs, max(1, int(config.warmup_runs * share)))
    iterations = min(config.iterations, max(MIN_TIMED_ROUNDS, int(config.iterations * share)))
    return FittedCounts(config.model_copy(update={"warmup_runs": warmup, "iterations": iterations}), rounds, config)
