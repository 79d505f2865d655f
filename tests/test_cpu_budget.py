"""On the CPU a workload's counts are cut to ``cpu_budget_s`` at its own pace; 0 and a GPU run them all."""

from __future__ import annotations

import json
import re
from pathlib import Path

from click.testing import CliRunner

from sol_execbench import evaluate
from sol_execbench.cli.main import _register, cli
from sol_execbench.evaluate.child.cpu_budget import MIN_TIMED_ROUNDS, fitted_counts
from sol_execbench.schema import BenchmarkConfig

from .problems import add_definition, solution, workloads, write_problem

SLOW_ADD = "import time\n\ndef run(a, b):\n    time.sleep({pause})\n    return a + b\n"
COUNTS = {"correctness_rounds": 4, "warmup_runs": 2, "iterations": 6}


def _counts_in(warning: str) -> tuple[int, int, int]:
    found = re.search(r"(\d+) of \d+ correctness round\(s\), (\d+) of \d+ warm-up call\(s\) and (\d+) of \d+ timed", warning)
    assert found, warning
    return int(found[1]), int(found[2]), int(found[3])


def _evaluate(pause: float, **config):
    [trace] = evaluate(add_definition(), workloads(16), solution(SLOW_ADD.format(pause=pause)), config, device="cpu")
    return trace.evaluation


def test_slow_calls_on_the_cpu_run_the_counts_that_fit_the_budget():
    ev = _evaluate(0.1, cpu_budget_s=0.01, **COUNTS)
    assert ev.status.value == "PASSED", ev.log
    [cut] = [w for w in ev.warnings if "cpu_budget_s" in w]
    rounds, warmup, timed = _counts_in(cut)
    # the first correctness round takes 0.1 s, past the budget: one round, and the least of the rest
    assert (rounds, warmup, timed) == (1, 1, MIN_TIMED_ROUNDS)
    assert ev.correctness.extra["rounds"] == rounds
    assert ev.performance.solution_timing.host_rounds == timed
    assert ev.performance.reference_timing.host_rounds == timed


def test_a_budget_of_zero_runs_every_configured_count():
    ev = _evaluate(0.1, cpu_budget_s=0, **COUNTS)
    assert ev.status.value == "PASSED", ev.log
    assert not [w for w in ev.warnings if "cpu_budget_s" in w]
    assert ev.correctness.extra["rounds"] == COUNTS["correctness_rounds"]
    assert ev.performance.solution_timing.host_rounds == COUNTS["iterations"]


def test_the_default_budget_leaves_quick_calls_their_counts():
    ev = _evaluate(0.0, **COUNTS)
    assert ev.status.value == "PASSED", ev.log
    assert not [w for w in ev.warnings if "cpu_budget_s" in w]
    assert ev.correctness.extra["rounds"] == COUNTS["correctness_rounds"]


def test_the_warm_up_and_timed_calls_shrink_together_and_never_below_their_floors():
    config = BenchmarkConfig(cpu_budget_s=30)  # 10 warm-up calls, 50 timed, 10 correctness rounds
    fitted = fitted_counts(config, is_gpu=False, round_spans_s=[1.0, 1.0, 1.0])  # 60 calls at 1 s: half fits
    assert (fitted.config.warmup_runs, fitted.config.iterations, fitted.correctness_rounds) == (5, 25, 3)
    assert fitted.cut and "5 of 10 warm-up" in fitted.warning()
    slow = fitted_counts(config, is_gpu=False, round_spans_s=[100.0])
    assert (slow.config.warmup_runs, slow.config.iterations) == (1, MIN_TIMED_ROUNDS)
    none_asked = fitted_counts(config.model_copy(update={"warmup_runs": 0}), is_gpu=False, round_spans_s=[100.0])
    assert none_asked.config.warmup_runs == 0
    fits = fitted_counts(config, is_gpu=False, round_spans_s=[0.4] * 10)  # 60 calls in 24 s
    assert not fits.cut and fits.warning() is None and fits.config is config


def test_a_gpu_runs_every_count_however_slow():
    config = BenchmarkConfig()
    fitted = fitted_counts(config, is_gpu=True, round_spans_s=[100.0] * config.correctness_rounds)
    assert fitted.config is config and fitted.warning() is None


def test_the_table_says_on_the_cpu_how_many_workloads_ran_fewer_rounds(tmp_path: Path):
    """Two workloads, one slow (its counts cut) and one quick; the command's CPU line counts the first."""
    slow_on_large = "import time\n\ndef run(a, b):\n    if a.shape[0] > 8:\n        time.sleep(0.2)\n    return a + b\n"
    root = write_problem(tmp_path / "add", add_definition(), workloads(8, 64), solution(slow_on_large))
    (root / "budget.json").write_text(json.dumps({"cpu_budget_s": 0.5, **COUNTS}))
    _register()
    result = CliRunner().invoke(cli, [str(root), "--config", str(root / "budget.json"), "--device", "cpu",
                                      "-o", str(tmp_path / "t.jsonl")], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())  # the console wraps long lines
    assert ("timed on the CPU by the host clock (no GPU visible): not a GPU measurement; 1 workload(s) ran fewer "
            "rounds to fit cpu_budget_s (each trace's warnings give the counts)") in text
