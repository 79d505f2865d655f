"""benchmarks/eval_overhead.py: choosing the problems (the timing itself needs the GPU machine)."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location("eval_overhead_bench", ROOT / "benchmarks" / "eval_overhead.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_only_keeps_the_named_python_family_problems():
    bench = _bench()
    every = bench.problems()
    names = {str(root.relative_to(bench.CORPUS)) for root, _ in every}
    assert "samples/rmsnorm" in names and not any("gqa_paged_decode" in n for n in names)
    assert all(sol.suffix == ".json" and "cuda" not in sol.name for _, sol in every)
    picked = bench.problems(["rmsnorm"])
    assert {str(root.relative_to(bench.CORPUS)) for root, _ in picked} == {"samples/rmsnorm", "examples/triton/rmsnorm"}
    assert bench.problems(["no-such-problem"]) == []


# A stand-in for a harness's CLI: it reports the Triton cache it was given (as the workload) and
# whether that cache was empty when it started (as the status), then compiles into it.
_CACHE_REPORTER = """
import json, os, pathlib, sys
cache = pathlib.Path(os.environ["TRITON_CACHE_DIR"])
cache.mkdir(parents=True, exist_ok=True)
status = "EMPTY" if not any(cache.iterdir()) else "WARM"
(cache / f"kernel-{os.getpid()}.cubin").write_bytes(b"compiled")
trace = {"workload": {"uuid": str(cache)}, "evaluation": {"status": status}}
pathlib.Path(sys.argv[-1]).write_text(json.dumps(trace) + "\\n")
"""


def test_upstream_runs_on_empty_jit_caches_of_its_own_unless_told_to_share(tmp_path):
    bench = _bench()
    shared = tmp_path / "shared-triton-cache"
    env = dict(os.environ, TRITON_CACHE_DIR=str(shared))
    modes = {"upstream": ([sys.executable, "-c", _CACHE_REPORTER], env, [])}
    root, sol = bench.problems(["rmsnorm"])[0]
    for scratch in ("a", "b"):
        (tmp_path / scratch).mkdir()

    fresh = bench._measure_problem(0, root, sol, modes, 2, tmp_path / "a", {"upstream"})
    (cache, status), = fresh["upstream_verdicts"].items()
    assert status == "EMPTY" and Path(cache) != shared and str(tmp_path / "a") in cache
    assert not shared.exists()  # the environment's cache was never touched

    kept = bench._measure_problem(1, root, sol, modes, 2, tmp_path / "b", set())
    assert kept["upstream_verdicts"] == {str(shared): "WARM"}  # the second run found the first's kernel


def test_rows_carry_each_runs_wall_time_and_the_ratio_to_upstream_and_the_targets_count_them(tmp_path):
    """Two stand-in harnesses that sleep different times: the row keeps every run's wall time, the
    ratio of the medians, and the target summary counts the problems within each target."""
    bench = _bench()
    root, sol = bench.problems(["rmsnorm"])[0]
    sleeper = ("import pathlib, sys, time; time.sleep({}); "
               "pathlib.Path(sys.argv[-1]).write_text('')")
    modes = {"warm": ([sys.executable, "-c", sleeper.format(0.05)], dict(os.environ), []),
             "upstream": ([sys.executable, "-c", sleeper.format(0.6)], dict(os.environ), [])}
    row = bench._measure_problem(0, root, sol, modes, 2, tmp_path, set())
    assert len(row["warm_walls_s"]) == 2 and len(row["upstream_walls_s"]) == 2
    assert row["warm_ratio"] == row["warm_wall_s"] / row["upstream_wall_s"] < 1.0
    fast, slow = dict(row, warm_ratio=0.2), dict(row, warm_ratio=0.5)
    assert bench.target_summary([fast, slow]) == {"warm": {"target": 0.35, "within": 1, "of": 2, "largest_ratio": 0.5}}
    text = bench._format_row(dict(row, cold_verdicts={}))
    assert f"{row['warm_ratio']:.2f}x" in text and f"({min(row['warm_walls_s']):.2f}-" in text


def test_no_mode_always_goes_first_or_follows_the_same_one():
    bench = _bench()
    names = ["cold", "warm", "warm_self", "upstream"]
    rounds = [bench.run_order(names, r) for r in range(4)]
    assert all(sorted(order) == sorted(names) for order in rounds)
    assert sorted(order[0] for order in rounds) == sorted(names)  # each goes first once
    pairs = [(a, b) for order in rounds for a, b in zip(order, order[1:])]
    assert len(set(pairs)) == len(pairs) == 12  # and follows each other mode once
    assert bench.run_order(["cold", "warm", "upstream"], 1) == ["warm", "upstream", "cold"]
