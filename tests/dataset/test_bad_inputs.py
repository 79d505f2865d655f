"""Every bad input of ``dataset run`` is exit 2 with one line naming the file or flag, the field
and the fix, before any evaluation; never a traceback. In process (click's runner): nothing here
reaches the evaluator."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from sol_execbench.cli.main import _register, cli

from ..conftest import CONFORMANCE
from .conftest import add_problem

_register()


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    root = tmp_path / "suite"
    add_problem(root, "L1/add")
    add_problem(root, "L2/add")
    return root


def _run(*args: str):
    return CliRunner().invoke(cli, ["dataset", "run", *args, "--device", "cpu"])


def _one_error_line(result, *words: str) -> None:
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if "error" in line.lower()]
    assert len(errors) == 1, result.output
    for word in words:
        assert word in errors[0], result.output


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_a_root_that_is_missing_a_file_or_empty(tmp_path: Path):
    _one_error_line(_run(str(tmp_path / "nope"), "-o", str(tmp_path / "o")), "no such directory")
    _one_error_line(_run(str(_write(tmp_path / "f", "x")), "-o", str(tmp_path / "o")), "is a file")
    (tmp_path / "empty").mkdir()
    _one_error_line(_run(str(tmp_path / "empty"), "-o", str(tmp_path / "o")), "no problem below it",
                    "definition.json and workload.jsonl")


def test_an_unknown_category_names_the_known_ones(suite: Path, tmp_path: Path):
    _one_error_line(_run(str(suite), "--category", "L3", "-o", str(tmp_path / "o")), "--category L3",
                    "the categories are: L1, L2")
    _one_error_line(_run(str(suite), "--category", "L11", "-o", str(tmp_path / "o")), "did you mean 'L1'")
    _one_error_line(_run(str(suite / "L1/add"), "--category", "L1", "-o", str(tmp_path / "o")), "is one problem")


def test_a_malformed_definition_names_its_file(suite: Path, tmp_path: Path):
    _write(suite / "L2/add/definition.json", '{"name": ')
    _one_error_line(_run(str(suite), "-o", str(tmp_path / "o")), str(suite / "L2/add/definition.json"),
                    "malformed JSON")


def test_a_workload_naming_no_axis_value_names_its_line(suite: Path, tmp_path: Path):
    _write(suite / "L1/add/workload.jsonl", json.dumps({"uuid": "w", "axes": {}}) + "\n")
    _one_error_line(_run(str(suite), "-o", str(tmp_path / "o")), "workload.jsonl", "line 1", "gives no value for axes")


def test_a_solution_name_of_another_kind(suite: Path, tmp_path: Path):
    _one_error_line(_run(str(suite), "--solution-name", "kernel.cu", "-o", str(tmp_path / "o")),
                    "--solution-name kernel.cu", ".json or .py")


@pytest.mark.parametrize("content, words", [
    ("{", ["malformed JSON"]),
    ('{"default": -1}', ["field 'default'", "greater than 0"]),
    ('{"problems": {"L1/ad": 5}}', ["field 'problems.L1/ad'", "did you mean 'L1/add'"]),
    ('{"workloads": {"L9/add:w0-8": 5}}', ["field 'workloads.L9/add:w0-8'", "no problem 'L9/add'"]),
])
def test_bad_timeout_overrides(suite: Path, tmp_path: Path, content: str, words: list[str]):
    path = _write(tmp_path / "timeouts.json", content)
    _one_error_line(_run(str(suite), "--timeout-overrides", str(path), "-o", str(tmp_path / "o")), str(path), *words)


def test_bad_ready_subset_readiness_and_manifest(suite: Path, tmp_path: Path):
    subset = _write(tmp_path / "subset.json", json.dumps({"problems": [{"problem_path": "L7/x", "workloads": []}]}))
    _one_error_line(_run(str(suite), "--ready-subset", str(subset), "-o", str(tmp_path / "o")), str(subset),
                    "problems.0.problem_path", "no problem 'L7/x'")
    shapeless = _write(tmp_path / "subset2.json", json.dumps({"problem": []}))
    _one_error_line(_run(str(suite), "--ready-subset", str(shapeless), "-o", str(tmp_path / "o")), str(shapeless),
                    "field 'problems'")
    readiness = _write(tmp_path / "readiness.json", json.dumps({"workloads": [{"problem_path": "L1/add"}]}))
    _one_error_line(_run(str(suite), "--execution-closure", str(tmp_path / "c.json"), "--readiness", str(readiness),
                         "-o", str(tmp_path / "o")), str(readiness), "workloads.0.status")
    manifest = _write(tmp_path / "manifest.json", "[1, 2]")
    _one_error_line(_run(str(suite), "--dataset-manifest", str(manifest), "-o", str(tmp_path / "o")), str(manifest),
                    "JSON object")
    _one_error_line(_run(str(suite), "--dataset-manifest", str(tmp_path / "none.json"), "-o", str(tmp_path / "o")),
                    "--dataset-manifest", "no such file")


def test_a_malformed_config(suite: Path, tmp_path: Path):
    config = _write(tmp_path / "config.json", '{"iterations": 0}')
    _one_error_line(_run(str(suite), "--config", str(config), "-o", str(tmp_path / "o")), str(config), "iterations")


@pytest.mark.parametrize("flags, words", [
    (["--phase", "timing", "--execution-mode", "pipeline"], ["--phase timing", "pipeline"]),
    (["--phase", "traces", "--timing-evidence-dir", "t"], ["--timing-evidence-dir", "--phase all", "--phase timing"]),
    (["--amd-score-report", "r.json"], ["--amd-score-report", "--device cpu", "--hardware"]),
    (["--amd-score-report", "r.json", "--hardware", "Radeon 7900"], ["--hardware", "known parts"]),
    (["--phase", "traces", "--gpu-architecture", "gfx942"], ["--gpu-architecture", "--phase traces"]),
    (["--phase", "traces", "--timing-tool-version", "rocprofv3.1"], ["--timing-tool-version", "--phase traces"]),
    (["--execution-mode", "pipeline", "--ready-subset", "s.json"], ["pipeline", "--ready-subset"]),
    (["--execution-mode", "pipeline", "--execution-closure", "c.json"], ["pipeline", "--execution-closure"]),
    (["--readiness", "r.json"], ["--readiness", "--ready-subset"]),
    (["--jobs", "many"], ["--jobs 'many'", "'auto'"]),
    (["--prepare-jobs", "0"], ["--prepare-jobs 0"]),
    (["--gpu-jobs", "0"], ["--gpu-jobs 0"]),
])
def test_flags_that_cannot_be_honoured(suite: Path, tmp_path: Path, flags: list[str], words: list[str]):
    _one_error_line(_run(str(suite), *flags, "-o", str(tmp_path / "o")), *words)


def test_gpu_jobs_without_gpus_and_with_one_device(suite: Path, tmp_path: Path, monkeypatch):
    monkeypatch.setattr("sol_execbench.dataset.devices.visible_gpus", lambda: 0)
    result = CliRunner().invoke(cli, ["dataset", "run", str(suite), "--gpu-jobs", "2", "-o", str(tmp_path / "o")])
    _one_error_line(result, "--gpu-jobs 2", "0 GPU(s) visible")
    result = CliRunner().invoke(cli, ["dataset", "run", str(suite), "--gpu-jobs", "2", "--device", "cuda:1",
                                      "-o", str(tmp_path / "o")])
    _one_error_line(result, "--device cuda:1", "drop --device")


def test_an_output_in_use_by_another_run(suite: Path, tmp_path: Path):
    out = tmp_path / "o"
    out.mkdir()
    fd = os.open(out / ".dataset-run.lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        _one_error_line(_run(str(suite), "-o", str(out)), f"--output {out}", "another dataset run")
    finally:
        os.close(fd)
    _one_error_line(_run(str(suite), "-o", str(_write(tmp_path / "file", "x"))), "--output", "writable folder")


def test_missing_blobs_with_precheck_fail_list_every_blob(tmp_path: Path, monkeypatch):
    monkeypatch.delenv("FLASHINFER_TRACE_DIR", raising=False)
    root = tmp_path / "suite"
    (root / "FlashInfer-Bench").mkdir(parents=True)
    source = CONFORMANCE / "samples" / "gqa_paged_decode"
    problem = root / "FlashInfer-Bench" / "gqa"
    problem.mkdir()
    for name in ("definition.json", "workload.jsonl"):
        (problem / name).write_bytes((source / name).read_bytes())
    result = _run(str(root), "-o", str(tmp_path / "o"))
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert "--blob-precheck fail: 4 safetensors blob(s) not found" in result.output
    missing = [line for line in result.output.splitlines() if line.strip().startswith("missing:")]
    assert len(missing) == 4 and all("FlashInfer-Bench/gqa: workload" in line for line in missing)
    assert sum("input 'kv_indptr':" in line for line in missing) == sum("input 'kv_indices':" in line for line in missing) == 2
    assert all(".safetensors" in line for line in missing)
    assert not (tmp_path / "o" / "FlashInfer-Bench" / "gqa" / "traces.jsonl").exists()


def test_the_unknown_first_word_is_not_an_evaluation():
    result = CliRunner().invoke(cli, ["bnech", "--help"])
    assert result.exit_code == 2 and "'bnech' is not a command" in result.output
    assert "dataset" in result.output and "evaluate" in result.output and "Evaluate SOLUTION" not in result.output
