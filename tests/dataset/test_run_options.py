"""The run's options on the real evaluator, on the CPU, with the add problem of the evaluator tests
(about 1.5 s per evaluator call): the blob precheck, timeout overrides (a workload as a shard of its
own), the timeout policy, ``--solution-name``, pipeline mode on two slots with native prebuilds
into the build cache, and a ready subset with its execution closure."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from sol_execbench.schema.trace_files import read_traces
from sol_execbench.schema.dataset_inputs import ExecutionClosure
from sol_execbench.schema.dataset_run import DatasetSummary, RunRecord

from ..conftest import CONFORMANCE
from ..problems import poll_until, run_processes, staging_left
from ..native.helpers import tiny_solution
from .conftest import add_problem, light_config, run_to_end, start_run

HANGS_ON_64 = """import time

def run(a, b, c):
    while a.shape[0] == 64:
        time.sleep(0.1)
    c.copy_(a + b)
"""


def _summary(out: Path) -> DatasetSummary:
    return DatasetSummary.model_validate_json((out / "summary.json").read_text())


def test_blob_precheck_warn_records_the_missing_and_evaluates_what_it_found(tmp_path: Path):
    from safetensors.torch import save_file
    import torch

    root = tmp_path / "suite"
    gqa = root / "FlashInfer-Bench" / "gqa"
    gqa.mkdir(parents=True)
    for name in ("definition.json", "workload.jsonl"):
        (gqa / name).write_bytes((CONFORMANCE / "samples" / "gqa_paged_decode" / name).read_bytes())
    blob_path = "data/blobs/add/b.safetensors"  # found below the dataset root only: not where the evaluator looks
    problem = add_problem(root, "L1/add_blob", sizes=(8,))
    workload = json.loads((problem / "workload.jsonl").read_text())
    workload["inputs"]["b"] = {"type": "safetensors", "path": blob_path, "tensor_key": "b"}
    (problem / "workload.jsonl").write_text(json.dumps(workload) + "\n")
    (root / blob_path).parent.mkdir(parents=True)
    save_file({"b": torch.ones(8)}, str(root / blob_path))
    out = tmp_path / "out"
    result = run_to_end(tmp_path, root, out, light_config(tmp_path), "--blob-precheck", "warn")
    assert result.returncode == 1, result.stderr + result.stdout
    for trace in read_traces(out / "FlashInfer-Bench/gqa/traces.jsonl"):
        assert trace.evaluation.status.value == "RUNTIME_ERROR"
        assert "blob precheck" in trace.evaluation.log and ".safetensors" in trace.evaluation.log
    (found,) = read_traces(out / "L1/add_blob/traces.jsonl")
    assert found.evaluation.status.value == "PASSED", found.evaluation.log
    assert found.workload.inputs["b"].path == blob_path  # the trace keeps the workload as written


def _timeout_suite(tmp_path: Path) -> Path:
    root = tmp_path / "suite"
    hangs = add_problem(root, "L1/hangs", sizes=(8, 64, 16))
    (hangs / "solution.py").write_text(HANGS_ON_64)
    later = add_problem(root, "L3/later", sizes=(8,))
    (later / "solution.py").write_text("def run(a, b):\n    return a + b\n")
    add_problem(root, "L2/no_solution", sizes=(8,))
    return root


def test_a_workload_timeout_override_runs_it_alone_and_the_policy_fail_stops(tmp_path: Path):
    root = _timeout_suite(tmp_path)
    overrides = tmp_path / "timeouts.json"
    overrides.write_text(json.dumps({"workloads": {"L1/hangs:w1-64": 3}}))
    out, config = tmp_path / "out", light_config(tmp_path)
    common = ("--solution-name", "solution.py", "--timeout", "120", "--timeout-overrides", str(overrides))
    result = run_to_end(tmp_path, root, out, config, *common)
    assert result.returncode == 1, result.stderr + result.stdout
    traces = {t.workload.uuid: t for t in read_traces(out / "L1/hangs/traces.jsonl")}
    assert [traces[u].evaluation.status.value for u in ("w0-8", "w1-64", "w2-16")] == ["PASSED", "TIMEOUT", "PASSED"]
    assert "3 s" in traces["w1-64"].evaluation.log
    record = RunRecord.model_validate_json((out / "L1/hangs/run.json").read_text())
    assert record.shards == 3 and record.solution_origin == "solution.py" and not record.all_passed
    solution = json.loads((out / "L1/hangs/solution.json").read_text())
    assert solution["spec"]["destination_passing_style"] is True  # run(a, b, c): c is the output
    assert json.loads((out / "L3/later/solution.json").read_text())["spec"]["destination_passing_style"] is False
    skipped = {p.problem: p for p in _summary(out).problems}["L2/no_solution"]
    assert skipped.outcome == "skipped" and "no solution.py" in skipped.note

    stopped_out = tmp_path / "stopped"
    stopped = run_to_end(tmp_path, root, stopped_out, config, *common, "--timeout-policy", "fail")
    assert stopped.returncode == 2, stopped.stderr + stopped.stdout
    summary = _summary(stopped_out)
    assert summary.stopped and "--timeout-policy fail: L1/hangs workload w1-64 timed out" in summary.stopped
    assert "L3/later" not in {p.problem for p in summary.problems}  # queued after it: never started
    assert (stopped_out / "L1/hangs/traces.jsonl").is_file()


@pytest.mark.slow
def test_pipeline_on_two_slots_prebuilds_into_the_build_cache(tmp_path: Path, monkeypatch):
    """Each native solution is built by the preparation threads; the evaluation then finds it in
    the build cache (one build per solution, through the evaluator's own builder)."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("SOL_EXECBENCH_CACHE_DIR", str(cache))
    root = tmp_path / "suite"
    for offset, key in enumerate(("N/one", "N/two", "N/three")):
        problem = add_problem(root, key, sizes=(8,))
        (problem / "native.json").write_text(tiny_solution(["-O1", f"-DOFFSET={offset}"]).model_dump_json())
    out = tmp_path / "out"
    result = run_to_end(tmp_path, root, out, light_config(tmp_path), "--solution-name", "native.json",
                        "--execution-mode", "pipeline", "--gpu-jobs", "2", "--prepare-jobs", "2",
                        "--log-order", "problem")
    assert result.returncode == 1, result.stderr + result.stdout  # the tiny module is no vector add
    assert "pipeline on cpu, cpu" in result.stdout
    for key in ("N/one", "N/two", "N/three"):
        (trace,) = read_traces(out / key / "traces.jsonl")
        assert trace.evaluation.build is not None and trace.evaluation.build.cached is True, trace.evaluation.log
    assert len(list((cache / "builds").glob("??/*/manifest.json"))) == 3  # one entry per solution
    finished = [line.split("] ")[1].split(":")[0] for line in result.stdout.splitlines() if line.startswith("FAIL [")]
    assert len(finished) == 3


@pytest.mark.slow
def test_a_compile_error_of_the_prebuild_is_reported_without_compiling_again(tmp_path: Path, monkeypatch):
    """The pipeline's prebuild compiles a broken native solution once; its evaluation reports that
    compile error (every workload) instead of running the compiler on the same sources again. A
    compiler wrapper counts the compilations."""
    import shutil

    count = tmp_path / "compilations.log"
    wrapper = tmp_path / "counting-cc"
    wrapper.write_text(f"#!/bin/sh\ncase \"$*\" in *module.c*) echo x >> {count};; esac\n"
                       f"exec {shutil.which('gcc') or shutil.which('cc')} \"$@\"\n")
    wrapper.chmod(0o755)
    monkeypatch.setenv("CXX", str(wrapper))
    monkeypatch.setenv("SOL_EXECBENCH_CACHE_DIR", str(tmp_path / "cache"))
    root = tmp_path / "suite"
    problem = add_problem(root, "N/broken", sizes=(8, 16))
    broken = tiny_solution(["-O1"]).model_dump(mode="json")
    broken["sources"][0]["content"] += "\nthis is not C;\n"
    (problem / "native.json").write_text(json.dumps(broken))
    out = tmp_path / "out"
    result = run_to_end(tmp_path, root, out, light_config(tmp_path), "--solution-name", "native.json",
                        "--execution-mode", "pipeline")
    assert result.returncode == 1, result.stderr + result.stdout
    assert "prebuild failed (COMPILE_ERROR); the evaluation reports it without building again" in result.stdout
    traces = read_traces(out / "N/broken/traces.jsonl")
    assert [t.evaluation.status.value for t in traces] == ["COMPILE_ERROR", "COMPILE_ERROR"]
    assert "this is not C" in traces[0].evaluation.log
    assert count.read_text().count("x") == 1


def test_a_ready_subset_bounds_the_run_and_the_closure_accounts_for_every_workload(tmp_path: Path):
    root = tmp_path / "suite"
    add_problem(root, "L1/a", sizes=(8, 16))
    add_problem(root, "L1/b", sizes=(8,))
    subset = tmp_path / "ready_subset.json"
    subset.write_text(json.dumps({"schema_version": "sol_execbench.ready_subset.v1", "problems": [
        {"problem_path": "L1/a", "workloads": [{"uuid": "w1-16", "row_index": 1}]}],
        "exclusions": [{"problem_path": "L1/a", "workload_uuid": "w0-8", "reason_codes": ["too_small"]}]}))
    readiness = tmp_path / "readiness.json"
    readiness.write_text(json.dumps({"workloads": [
        {"problem_path": "L1/b", "workload_uuid": "w0-8", "status": "blocked",
         "reasons": [{"code": "missing_blob", "message": "no blob"}]}]}))
    out = tmp_path / "out"
    result = run_to_end(tmp_path, root, out, light_config(tmp_path), "--ready-subset", str(subset),
                        "--readiness", str(readiness))
    assert result.returncode == 0, result.stderr + result.stdout
    assert [t.workload.uuid for t in read_traces(out / "L1/a/traces.jsonl")] == ["w1-16"]
    closure = ExecutionClosure.model_validate_json((out / "execution_closure.json").read_text())
    states = {(w.problem, w.workload): (w.state, w.blockers) for w in closure.workloads}
    assert states == {("L1/a", "w0-8"): ("skipped", ["too_small"]), ("L1/a", "w1-16"): ("attempted", []),
                      ("L1/b", "w0-8"): ("skipped", ["missing_blob: no blob"])}
    assert closure.counts == {"attempted": 1, "skipped": 2} and closure.ready_subset_sha256
    again = run_to_end(tmp_path, root, out, light_config(tmp_path), "--ready-subset", str(subset))
    assert again.returncode == 0 and "0 to evaluate, 1 reused" in again.stdout, again.stderr  # no readiness asked
    readiness.write_text(readiness.read_text().replace("no blob", "no blob here"))
    other = run_to_end(tmp_path, root, out, light_config(tmp_path), "--ready-subset", str(subset),
                       "--readiness", str(readiness))
    assert other.returncode == 0 and "1 to evaluate, 0 reused" in other.stdout, other.stderr


def test_sigterm_stops_the_evaluation_in_progress_and_leaves_nothing(tmp_path: Path):
    root = tmp_path / "suite"
    quick = add_problem(root, "L1/quick", sizes=(8, 128))  # the more input bytes: evaluated first
    (quick / "solution.py").write_text("def run(a, b):\n    return a + b\n")
    hangs = add_problem(root, "L1/hangs", sizes=(64,))
    (hangs / "solution.py").write_text(HANGS_ON_64)
    out = tmp_path / "out"
    run = start_run(tmp_path, root, out, light_config(tmp_path), "--solution-name", "solution.py")
    assert poll_until(lambda: (out / "L1/quick/run.json").is_file() and (out / "L1/hangs/.traces.partial.jsonl").is_file(),
                      240), run.communicate(timeout=5)
    time.sleep(2)  # the hanging child is running by now
    run.send_signal(signal.SIGTERM)
    _, stderr = run.communicate(timeout=60)
    assert run.returncode == 143 and "stopped by SIGTERM" in stderr and "Traceback" not in stderr, stderr
    marker = str(tmp_path / "tmp")
    assert poll_until(lambda: run_processes(marker) == [], 5.0), run_processes(marker)
    assert staging_left(tmp_path) == []
    assert not (out / "L1/hangs/run.json").exists() and not (out / "L1/hangs/traces.jsonl").exists()
    summary = _summary(out)
    assert summary.stopped and "interrupted" in summary.stopped
    assert [p.problem for p in summary.problems] == ["L1/quick"]
