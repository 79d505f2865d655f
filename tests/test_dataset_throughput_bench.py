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


def test_a_prior_json_of_the_same_suite_is_continued_and_another_suite_refused(tmp_path: Path, capsys):
    bench = _bench_module()
    suite = {"problems": 2, "pytorch": 2, "cuda_cpp": 0, "cuda_skipped": None, "workloads": 4}
    pipeline = bench.ModeResult("pipeline", "dataset run", 10.0, 2, 2, 4, 4, statuses={"p/w": "PASSED"})
    args = bench.parse_args(["--problems", "2", "--cuda", "0", "--device", "cpu"])
    prior = tmp_path / "prior.json"
    bench.write_json(prior, args, suite, [pipeline])
    (kept,) = bench.prior_results(prior, suite, None)
    assert kept == pipeline  # every field, the statuses too, comes back
    for other, field_name in (({**suite, "problems": 3}, "suite"), (suite, "gpu")):
        with pytest.raises(SystemExit) as stopped:
            bench.prior_results(prior, other, "NVIDIA H100 80GB HBM3" if field_name == "gpu" else None)
        assert stopped.value.code == 2
        assert f"field '{field_name}'" in capsys.readouterr().err
    prior.write_text("{not json")
    with pytest.raises(SystemExit) as stopped:
        bench.prior_results(prior, suite, None)
    assert stopped.value.code == 2 and "not this benchmark's JSON" in capsys.readouterr().err


def test_scaling_compares_each_workload_with_the_one_gpu_run():
    bench = _bench_module()
    one = bench.ModeResult("pipeline", "x", 100.0, 2, 2, 2, 2, statuses={"a/1": "PASSED", "b/1": "PASSED"})
    two = bench.ModeResult("pipeline", "x", 52.0, 2, 2, 2, 1, gpu_jobs=2,
                           statuses={"a/1": "PASSED", "b/1": "RUNTIME_ERROR"})
    bench.add_scaling([one, two])
    assert two.scaling == 1.92 and two.status_mismatches == ["b/1"] and one.scaling is None


def test_a_stopped_mode_is_estimated_per_category():
    """Problems not reached count at their own category's mean: a suite stopped after its slow CUDA
    C++ builds is not estimated as if every PyTorch problem left took a build's time too."""
    bench = _bench_module()
    walls = {"cuda/a": 70.0, "cuda/b": 66.0, "pytorch/c": 6.0, "pytorch/d": 8.0}
    problems = [*walls, "cuda/e", "pytorch/f", "pytorch/g", "triton/h"]
    # measured 150 s; left: one CUDA at 68, two PyTorch at 7, one of an unseen category at the mean of all (37.5)
    assert bench.estimated_full_wall(150.0, walls, problems) == pytest.approx(150 + 68 + 14 + 37.5)
    assert bench.estimated_full_wall(10.0, {}, problems) is None
