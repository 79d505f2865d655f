"""The command line: usage errors, file errors without tracebacks, outputs and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from sol_execbench.cli.main import _register, cli

from .conftest import LIGHT_CONFIG
from .problems import add_definition, solution, workloads, write_problem

_register()
ADD = "def run(a, b):\n    return a + b\n"


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.fixture
def problem(tmp_path: Path) -> Path:
    root = write_problem(tmp_path / "vector_add", add_definition(), workloads(8, 32), solution(ADD))
    (root / "light.json").write_text(json.dumps(LIGHT_CONFIG))
    return root


def test_no_solution_anywhere_is_a_usage_error(problem: Path):
    (problem / "solution.json").rename(problem / "solution_other.json")
    result = invoke(str(problem))
    assert result.exit_code == 2
    assert "no --solution given" in result.output and "solution_other.json" in result.output


def test_neither_directory_nor_paths(tmp_path: Path):
    result = invoke("--solution", str(tmp_path / "s.json"))
    assert result.exit_code == 2 and "--definition and --workload" in result.output


def test_missing_problem_directory():
    result = invoke("does/not/exist")
    assert result.exit_code == 2 and "does not exist" in result.output


def test_malformed_solution_json_names_file_no_traceback(problem: Path):
    (problem / "solution.json").write_text('{"name": "x", ')
    result = invoke(str(problem))
    assert result.exit_code == 2
    assert "solution.json" in result.output and "malformed JSON" in result.output
    assert "Traceback" not in result.output


def test_schema_violation_names_field(problem: Path):
    sol = json.loads((problem / "solution.json").read_text())
    sol["spec"]["entry_point"] = "kernel.py"
    (problem / "solution.json").write_text(json.dumps(sol))
    result = invoke(str(problem))
    assert result.exit_code == 2 and "spec" in result.output and "file::function" in result.output


def test_unknown_only_uuid(problem: Path):
    result = invoke(str(problem), "--only", "nope")
    assert result.exit_code == 2 and "nope" in result.output


def test_bad_memory_limit(problem: Path, cpu_timing):
    result = CliRunner().invoke(cli, [str(problem), "--memory-limit", "lots"])
    assert result.exit_code == 2 and "not a size" in result.output


def test_json_output_file_and_only(problem: Path, cpu_timing, tmp_path: Path):
    out = tmp_path / "out" / "traces.jsonl"
    result = invoke(str(problem), "--config", str(problem / "light.json"), "--only", "w1-32", "--json", "-o", str(out))
    assert result.exit_code == 0, result.output
    printed = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert [t["workload"]["uuid"] for t in printed] == ["w1-32"] == [t["workload"]["uuid"] for t in written]
    assert written[0]["evaluation"]["status"] == "PASSED"
    # Upstream's fields are all there, with upstream's names.
    ev = written[0]["evaluation"]
    assert {"status", "environment", "timestamp", "log", "correctness", "performance"} <= set(ev)
    assert {"latency_ms", "reference_latency_ms", "speedup_factor"} <= set(ev["performance"])


def test_failing_workload_exit_code_and_definition_mismatch_warning(problem: Path, cpu_timing):
    sol = solution("def run(a, b):\n    return a - b\n", definition="something_else")
    (problem / "solution.json").write_text(json.dumps(sol))
    result = invoke(str(problem), "--config", str(problem / "light.json"))
    assert result.exit_code == 1
    assert "INCORRECT_NUMERICAL" in result.output
    assert "something_else" in result.output and "vector_add" in result.output


def test_definition_and_workload_flags(problem: Path, cpu_timing):
    result = invoke("--definition", str(problem / "definition.json"), "--workload", str(problem / "workload.jsonl"),
                    "--solution", str(problem / "solution.json"), "--config", str(problem / "light.json"))
    assert result.exit_code == 0, result.output
    assert "2 PASSED" in result.output


def test_subcommand_name_wins_over_directory(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "evaluate").mkdir()
    result = invoke("./evaluate")  # a path reaches the directory, which has no problem files
    assert result.exit_code == 2 and "no --solution given" in result.output


def test_traces_carry_the_environment_hash_and_the_snapshot_sidecar(problem: Path, cpu_timing, tmp_path: Path,
                                                                     monkeypatch):
    monkeypatch.setenv("SOLEXECBENCH_ENV_SNAPSHOT", "1")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    out = tmp_path / "run" / "traces.jsonl"
    result = invoke(str(problem), "--config", str(problem / "light.json"), "--only", "w0-8", "-o", str(out))
    assert result.exit_code == 0, result.output
    snapshot = json.loads((tmp_path / "run" / "traces.env.json").read_text())
    assert {"schema_version", "partial_reasons", "host", "pytorch_build"} <= set(snapshot)
    from sol_execbench.envprobe.hashing import snapshot_hash

    trace = json.loads(out.read_text().splitlines()[0])
    assert trace["evaluation"]["env_hash"] == snapshot_hash(snapshot)
