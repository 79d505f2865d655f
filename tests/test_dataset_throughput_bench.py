"""benchmarks/dataset_throughput.py end to end on the CPU: a suite of three problems (its CUDA C++
one left out on the CPU) through the serial run (with a warm pool) and one process per problem
(stopped by its budget after the first), the JSON it writes; and the suite it generates for a GPU."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks" / "dataset_throughput.py"


def _bench_module():
    spec = importlib.util.spec_from_file_location("dataset_throughput", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


def test_the_suite_mixes_pytorch_and_cuda_problems_with_distinct_sources(tmp_path: Path):
    bench = _bench_module()
    folders = bench.write_suite(tmp_path, 30, 6, gpu=True)
    assert len(folders) == 30 and sum(f.parent.name == "cuda" for f in folders) == 6
    names = {json.loads((f / "definition.json").read_text())["name"] for f in folders}
    assert len(names) == 30
    cuda = [json.loads((f / "solution.json").read_text()) for f in folders if f.parent.name == "cuda"]
    assert all(s["spec"]["languages"] == ["cuda_cpp"] and s["spec"]["binding"] == "torch" for s in cuda)
    assert len({s["sources"][0]["content"] for s in cuda}) == 6  # no build is another's cache hit
    assert all("PYBIND11_MODULE(TORCH_EXTENSION_NAME" in s["sources"][0]["content"] for s in cuda)  # importable
    assert bench.cuda_unavailable("cpu") == "--device cpu"


@pytest.mark.slow
def test_a_cpu_smoke_run_measures_every_mode(tmp_path: Path):
    out = tmp_path / "throughput.json"
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {**os.environ, "SOL_EXECBENCH_SANDBOX": "none", "TMPDIR": str(temp),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))}
    result = subprocess.run([sys.executable, str(BENCH), "--problems", "3", "--cuda", "1", "--device", "cpu",
                             "--config", str(ROOT / "examples" / "cpu_config.json"), "--spares", "3",
                             "--upstream-budget", "1", "--modes", "serial,upstream", "--keep", str(tmp_path / "work"), "--out", str(out)],
                            env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr + result.stdout
    document = json.loads(out.read_text())
    assert document["suite"]["pytorch"] == 2 and document["suite"]["cuda_cpp"] == 0
    assert "left out: --device cpu" in document["suite"]["cuda_skipped"]
    modes = {m["mode"]: m for m in document["modes"]}
    assert list(modes) == ["serial", "upstream"]  # pipeline is the same path with another flag
    serial = modes["serial"]
    assert serial["problems_done"] == 2 and serial["passed"] == serial["workloads"] == 4
    assert serial["speedup"] is not None and serial["wall_s"] > 0 and len(serial["per_problem_s"]) == 2
    fresh = modes["upstream"]
    assert fresh["finished"] is False and fresh["problems_done"] == 1 and fresh["passed"] == 2
    assert "upstream not importable" in fresh["label"]
    assert "dataset throughput" in result.stdout and "lower bound" in result.stdout
