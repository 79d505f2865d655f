"""bench baselines, fast-p and compare-hardware: the baseline file's shape, fast_p on crafted baselines
and traces with known answers, two machines compared, a tiny torch.compile baseline on the CPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sol_execbench.benches.baselines import baseline_entry, level_name
from sol_execbench.schema import Trace
from sol_execbench.schema.benches import BaselineFile, FastPReport, HardwareComparison

from .test_allreduce import cli

ROOT = Path(__file__).resolve().parents[2]


def _timing(ms: float) -> dict:
    return {"method": "device", "count": 100, "median_ms": ms, "mean_ms": ms, "std_ms": ms / 10, "iqr_ms": 0.0,
            "min_ms": ms * 0.9, "max_ms": ms * 1.5}


def trace(uuid: str, ms: float | None, status: str = "PASSED", interval: tuple[float, float] | None = None,
          jit_s: float | None = None) -> Trace:
    evaluation: dict = {"status": status, "environment": {"hardware": "NVIDIA H100 80GB HBM3"},
                        "timestamp": "2026-01-01T00:00:00+00:00", "log": "" if status == "PASSED" else "went wrong",
                        "device": {"vendor": "cuda", "index": 0, "name": "NVIDIA H100 80GB HBM3"}}
    if status in ("PASSED", "INCORRECT_NUMERICAL"):
        evaluation["correctness"] = {}
    if status == "PASSED":
        performance = {"latency_ms": ms, "reference_latency_ms": ms, "speedup_factor": 1.0,
                       "solution_timing": _timing(ms)}
        if interval:
            performance["speedup_interval"] = {"low": interval[0], "high": interval[1], "verdict": "faster",
                                               "rounds": 50}
        evaluation["performance"] = performance
    if jit_s is not None:
        evaluation["build"] = {"language": "pytorch", "jit_time_s": jit_s}
    return Trace.model_validate({"definition": "d", "workload": {"uuid": uuid, "axes": {}}, "solution": "s",
                                 "evaluation": evaluation})


def test_baseline_entry_has_kernelbench_fields_and_geometric_means():
    entry = baseline_entry([trace("w1", 1.0, jit_s=3.5), trace("w2", 4.0)], compiled=True)
    data = json.loads(BaselineFile({"level1": {"p": entry}}).model_dump_json(exclude_none=True))
    fields = data["level1"]["p"]
    assert {"mean", "std", "min", "max", "num_trials", "hardware", "gpu_type", "device"} <= set(fields)
    assert fields["mean"] == pytest.approx(2.0)  # geometric mean of 1 and 4
    assert fields["max"] == pytest.approx(3.0)  # of 1.5 and 6
    assert fields["num_trials"] == 100 and fields["compile_s"] == 3.5
    assert (fields["gpu_type"], fields["device"]) == ("NVIDIA", "cuda:0")
    assert set(fields["workloads"]) == {"w1", "w2"} and fields["workloads"]["w2"]["mean"] == 4.0
    single = baseline_entry([trace("w1", 1.0, jit_s=3.5)], compiled=False)
    assert single.workloads is None and single.compile_s is None and single.mean == 1.0
    failed = baseline_entry([trace("w1", 1.0), trace("w2", None, status="RUNTIME_ERROR")], compiled=True)
    assert failed.mean is None and failed.status == "RUNTIME_ERROR" and failed.error == "went wrong"


def test_level_names():
    assert [level_name(c) for c in ("L1", "level2", "", "Quant")] == ["level1", "level2", "default", "Quant"]


def _baseline(path: Path, means: dict[str, dict[str, float]]) -> Path:
    entries = {level: {name: {"mean": ms, "std": 0.0, "min": ms, "max": ms, "num_trials": 100, "hardware": "H",
                              "gpu_type": "NVIDIA", "device": "cuda:0"} for name, ms in problems.items()}
               for level, problems in means.items()}
    path.write_text(json.dumps(entries))
    return path


def _run_dir(root: Path, problems: dict[str, list[Trace]]) -> Path:
    for key, traces in problems.items():
        folder = root / key
        folder.mkdir(parents=True)
        (folder / "traces.jsonl").write_text("".join(t.model_dump_json() + "\n" for t in traces))
    return root


def test_fast_p_on_crafted_baseline_and_traces(tmp_path):
    baseline = _baseline(tmp_path / "baseline_time_torch.json", {
        "level1": {"a.py": 1.0, "b": 2.0, "c": 3.0, "d": 4.0},  # KernelBench names files; folders drop .py
        "level2": {"e": 1.0},
    })
    runs = _run_dir(tmp_path / "run", {
        "L1/a": [trace("w", 0.5, interval=(1.8, 2.2))],  # speedup 2: fast for p < 2, not p = 2 (strict)
        "L1/b": [trace("w", 4.0)],  # speedup 0.5: fast_0 only (0.5 > 0.5 is false)
        "L1/c": [trace("w", None, status="INCORRECT_NUMERICAL")],  # not correct
        # d: missing, not fast
        "L2/e": [trace("w1", 0.5), trace("w2", 2.0)],  # geometric mean 1.0: speedup 1.0, not above 1
    })
    result = cli("bench", "fast-p", "--baseline", str(baseline), "--traces", str(runs), "--p", "0", "--p", "0.5",
                 "--p", "1", "--p", "2", "--json", "-o", str(tmp_path / "fast_p.json"))
    assert result.returncode == 0, result.stderr
    report = FastPReport.model_validate_json(result.stdout)
    assert FastPReport.model_validate_json((tmp_path / "fast_p.json").read_text()) == report
    levels = {level.level: level for level in report.levels}
    assert levels["level1"].fast_p == {"0": 0.5, "0.5": 0.25, "1": 0.25, "2": 0.0}
    assert levels["level1"].problems == 4 and levels["level1"].correct == 2
    assert levels["level2"].fast_p == {"0": 1.0, "0.5": 1.0, "1": 0.0, "2": 0.0}
    assert report.overall.fast_p == {"0": 0.6, "0.5": 0.4, "1": 0.2, "2": 0.0}
    assert report.overall.interval_clears == {"0": 1, "0.5": 1, "1": 1, "2": 0}
    by_name = {p.problem: p for p in report.problems}
    assert by_name["a.py"].speedup == pytest.approx(2.0) and "not in the traces" in by_name["d"].note
    table = cli("bench", "fast-p", "--baseline", str(baseline), "--traces", str(runs))
    assert table.returncode == 0 and "fast_1" in table.stdout and "level2" in table.stdout


def test_compare_hardware(tmp_path):
    a = _baseline(tmp_path / "a.json", {"level1": {"x": 1.0, "y": 2.0, "only_a": 1.0}})
    b = _baseline(tmp_path / "b.json", {"level1": {"x": 2.0, "y": 8.0}})
    result = cli("bench", "compare-hardware", str(a), str(b), "--json")
    assert result.returncode == 0, result.stderr
    comparison = HardwareComparison.model_validate_json(result.stdout)
    assert comparison.geomean_ratio["level1"] == pytest.approx(2 ** 1.5)  # ratios 2 and 4
    assert {r.problem: r.ratio for r in comparison.problems} == {"x": 2.0, "y": 4.0, "only_a": None}


@pytest.mark.parametrize("args, words", [
    (("fast-p", "--baseline", "{bad}", "--traces", "{tmp}"), ["{bad}", "field", "level1.p"]),
    (("fast-p", "--baseline", "{good}", "--traces", "{tmp}/none"), ["--traces", "no such directory"]),
    (("compare-hardware", "{tmp}/missing.json", "{good}"), ["missing.json", "cannot be read"]),
    (("baselines", "examples", "--modes", "eager,turbo", "--device", "cpu"), ["--modes turbo", "inductor-default"]),
    (("baselines", "examples", "--level", "7", "--device", "cpu", "--results", "{tmp}/r"), ["--level 7", "L7"]),
])
def test_bad_inputs_exit_2_with_one_line(tmp_path, args, words):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"level1": {"p": {"mean": "fast"}}}))
    good = _baseline(tmp_path / "good.json", {"level1": {"p": 1.0}})
    subs = {"{bad}": str(bad), "{good}": str(good), "{tmp}": str(tmp_path)}

    def fill(text: str) -> str:
        for key, value in subs.items():
            text = text.replace(key, value)
        return text

    result = cli("bench", *[fill(a) for a in args], cwd=ROOT)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and all(fill(w) in lines[0] for w in words), result.stderr


TINY_DEFINITION = {
    "name": "scale_add", "op_type": "elementwise", "axes": {"n": {"type": "const", "value": 64}},
    "inputs": {"x": {"shape": ["n"], "dtype": "float32"}},
    "outputs": {"y": {"shape": ["n"], "dtype": "float32"}},
    "reference": "import torch\n\ndef run(x):\n    return x * 2.0 + 1.0\n",
}


@pytest.mark.slow
def test_tiny_inductor_compile_baseline_on_the_cpu(tmp_path):
    # one torch.compile'd problem through the dataset runner and the evaluator (about 20 s: inductor's C++ build)
    problem = tmp_path / "suite" / "L1" / "1_scale_add"
    problem.mkdir(parents=True)
    (problem / "definition.json").write_text(json.dumps(TINY_DEFINITION))
    (problem / "workload.jsonl").write_text(json.dumps({"uuid": "w", "axes": {}, "inputs": {"x": {"type": "random"}}})
                                            + "\n")
    results = tmp_path / "results"
    result = cli("bench", "baselines", str(tmp_path / "suite"), "--level", "1", "--modes", "inductor-default",
                 "--num-trials", "2", "--config", str(ROOT / "examples" / "cpu_config.json"), "--device", "cpu",
                 "--results", str(results), "--test")
    assert result.returncode == 0, result.stdout + result.stderr
    written = results / "CPU_cpu" / "baseline_time_torch_compile_inductor_default_test.json"
    entry = BaselineFile.model_validate_json(written.read_text()).root["level1"]["1_scale_add"]
    assert entry.status == "PASSED", entry.error
    assert entry.mean > 0 and entry.num_trials == 2 and entry.compile_s > 0
    assert (results / "CPU_cpu" / "environment.json").is_file()
    solution = json.loads((results / "CPU_cpu" / "runs" / "inductor-default" / "L1" / "1_scale_add" /
                           "solution.json").read_text())
    assert "torch.compile(_sol_bench_reference_run, backend='inductor', mode='default')" in \
        solution["sources"][0]["content"]
    # the run directory is a dataset run that fast-p reads: the problem is correct, so fast_0 is 1
    fast = cli("bench", "fast-p", "--baseline", str(written), "--traces",
               str(results / "CPU_cpu" / "runs" / "inductor-default"), "--json")
    assert fast.returncode == 0, fast.stderr
    assert FastPReport.model_validate_json(fast.stdout).overall.fast_p["0"] == 1.0


def test_a_generated_solution_does_not_go_with_a_solution_name(tmp_path):
    from sol_execbench.benches.baselines import MODES, compile_solution
    from sol_execbench.dataset.discovery import DatasetUsageError
    from sol_execbench.dataset.options import RunOptions, check_combination
    from sol_execbench.dataset.solutions import GeneratedSolution

    generated = GeneratedSolution("torch.compile", lambda d: compile_solution(d, MODES["inductor-default"]))
    with pytest.raises(DatasetUsageError, match="--solution-name solution.py: this run generates"):
        check_combination(RunOptions(root=tmp_path, solution_name="solution.py", generated_solution=generated))
    check_combination(RunOptions(root=tmp_path, generated_solution=generated))


def test_rocm_children_get_the_quiet_crash_variables_and_only_asked_for_timing_ones():
    from sol_execbench.benches.baselines import BaselineOptions, _child_environment

    plain = BaselineOptions(root=Path("."))
    assert _child_environment(plain, "cuda") == {}
    assert _child_environment(plain, "rocm") == {"HSA_ENABLE_COREDUMP": "0", "AMD_LOG_LEVEL": "0",
                                                 "ROCM_DISABLE_CRASH_DUMP": "1", "HIP_ENABLE_COREDUMP": "0"}
    both = BaselineOptions(root=Path("."), sdma_off=True, one_hw_queue=True)
    extra = {k: v for k, v in _child_environment(both, "rocm").items() if k not in _child_environment(plain, "rocm")}
    assert extra == {"HSA_ENABLE_SDMA": "0", "GPU_MAX_HW_QUEUES": "1"}
    from sol_execbench.envprobe.env_vars import CANONICAL_ENV_VARS

    assert set(_child_environment(both, "rocm")) <= set(CANONICAL_ENV_VARS)  # the env probe records all six


def test_selection_by_level_and_problem(tmp_path):
    from sol_execbench.benches.baselines import BaselineOptions, run_units
    from sol_execbench.benches.errors import BenchUsageError

    for name in ("L1/1_Square_matrix_multiplication_", "L1/12_Gemm", "level2/1_Conv2D_ReLU_BiasAdd"):
        (tmp_path / name).mkdir(parents=True)
    units = run_units(BaselineOptions(root=tmp_path, levels=(1, 2), test=True))
    assert [(u.categories, u.limit, u.level) for u in units] == [(("L1",), 5, "level1"), (("level2",), 5, "level2")]
    (one,) = run_units(BaselineOptions(root=tmp_path, problem="1", problem_level=1))
    assert one.root == tmp_path / "L1" / "1_Square_matrix_multiplication_" and one.level == "level1"
    assert run_units(BaselineOptions(root=tmp_path, problem="12_Gemm"))[0].root.name == "12_Gemm"
    with pytest.raises(BenchUsageError, match="--problem 7: no problem"):
        run_units(BaselineOptions(root=tmp_path, problem="7"))
    with pytest.raises(BenchUsageError, match="--level 3"):
        run_units(BaselineOptions(root=tmp_path, levels=(3,)))
    assert run_units(BaselineOptions(root=tmp_path, max_problems=2))[0].limit == 2


def test_reuse_draws_the_baselines_figure_from_the_files(tmp_path):
    folder = tmp_path / "timing" / "H100_cuda"
    folder.mkdir(parents=True)
    _baseline(folder / "baseline_time_torch.json", {"level1": {"a": 1.0, "b": 2.0}})
    compiled = json.loads(_baseline(folder / "x.json", {"level1": {"a": 0.5}}).read_text())
    compiled["level1"]["a"]["compile_s"] = 12.0
    compiled["level1"]["b"] = {"hardware": "H", "gpu_type": "NVIDIA", "device": "cuda:0", "status": "TIMEOUT",
                               "error": "timed out"}
    (folder / "baseline_time_torch_compile_inductor_default.json").write_text(json.dumps(compiled))
    result = cli("bench", "baselines", "--reuse", "--results", str(tmp_path / "timing"))
    assert result.returncode == 0, result.stderr
    assert (folder / "baselines.png").stat().st_size > 0
    empty = cli("bench", "baselines", "--reuse", "--results", str(tmp_path / "none"))
    assert empty.returncode == 2 and "--hardware" in empty.stderr and len(empty.stderr.splitlines()) == 1
    no_root = cli("bench", "baselines")
    assert no_root.returncode == 2 and "give ROOT" in no_root.stderr
