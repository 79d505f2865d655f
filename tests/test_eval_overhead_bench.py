"""benchmarks/eval_overhead.py: choosing the problems (the timing itself needs the GPU machine)."""

from __future__ import annotations

import importlib.util
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
