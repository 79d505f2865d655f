"""A whole run of a small suite, killed by SIGKILL once its first problem finished and started
again: the finished problem is kept byte for byte, the rest are evaluated, nothing is missing or
duplicated, and no process of the killed run is left. The runs are costly, so one test item
(one pytest-xdist worker) makes them and checks each point with a helper of its own."""

from __future__ import annotations

import json
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from sol_execbench.schema.trace_files import read_traces
from sol_execbench.schema import load_workloads
from sol_execbench.schema.dataset_run import DatasetSummary, RunRecord

from ..problems import poll_until, run_processes
from .conftest import SUITE, build_suite, light_config, run_to_end, start_run


@dataclass
class Resumed:
    root: Path
    out: Path
    config: Path
    first_problem: str  # the problem that had finished when the first run was killed
    first_bytes: bytes
    first_record: bytes
    killed_marker: str  # in the environment of every process of the killed run
    leftovers: list[str]  # processes of the killed run still there 5 s after the kill
    second: subprocess.CompletedProcess


def _finished(out: Path) -> list[str]:
    return sorted(key for key in SUITE if (out / key / "run.json").is_file())


def _kill_after_the_first_problem_and_resume(folder: Path) -> Resumed:
    root, out, config = build_suite(folder / "suite"), folder / "out", light_config(folder)
    killed_dir = folder / "killed"
    killed_dir.mkdir()
    first = start_run(killed_dir, root, out, config)
    assert poll_until(lambda: _finished(out), 240), first.communicate(timeout=5)
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=30)
    (done,) = _finished(out)
    marker = str(killed_dir / "tmp")
    poll_until(lambda: not run_processes(marker), 5.0)
    snapshot = ((out / done / "traces.jsonl").read_bytes(), (out / done / "run.json").read_bytes())
    resumed_dir = folder / "resumed"
    resumed_dir.mkdir()
    second = run_to_end(resumed_dir, root, out, config)
    return Resumed(root, out, config, done, *snapshot, marker, run_processes(marker), second)


def _the_resumed_run_passes_and_keeps_the_finished_problem(resumed: Resumed) -> None:
    assert resumed.second.returncode == 0, resumed.second.stderr + resumed.second.stdout
    assert "Traceback" not in resumed.second.stderr
    assert (resumed.out / resumed.first_problem / "traces.jsonl").read_bytes() == resumed.first_bytes
    assert (resumed.out / resumed.first_problem / "run.json").read_bytes() == resumed.first_record
    assert "3 to evaluate, 1 reused" in resumed.second.stdout


def _no_process_of_the_killed_run_is_left(resumed: Resumed) -> None:
    assert resumed.leftovers == [], resumed.leftovers


def _every_workload_has_exactly_one_trace(resumed: Resumed) -> None:
    for key, source in SUITE.items():
        traces = read_traces(resumed.out / key / "traces.jsonl")
        expected = [w.uuid for w in load_workloads(source / "workload.jsonl")]
        assert [t.workload.uuid for t in traces] == expected, key
        assert all(t.evaluation.status.value == "PASSED" for t in traces), key
        assert not (resumed.out / key / ".traces.partial.jsonl").exists()


def _the_layout_and_the_run_records(resumed: Resumed) -> None:
    for key in SUITE:
        folder = resumed.out / key
        record = RunRecord.model_validate_json((folder / "run.json").read_text())
        assert record.problem == key and record.all_passed and record.solution_origin == "reference"
        assert record.statuses == {"PASSED": record.workloads} and record.device == "cpu"
        solution = json.loads((folder / "solution.json").read_text())
        assert solution["spec"]["entry_point"] == "reference.py::run"
        assert solution["spec"]["destination_passing_style"] is False
        assert record.hashes.solution and record.hashes.config and record.hashes.environment is not None


def _two_folders_with_one_definition_name_are_two_problems(resumed: Resumed) -> None:
    a, b = (read_traces(resumed.out / key / "traces.jsonl") for key in ("L1/linear_backward", "L2/linear_backward"))
    assert {t.definition for t in a} == {t.definition for t in b} == {"linear_backward"}
    summary = DatasetSummary.model_validate_json((resumed.out / "summary.json").read_text())
    keys = [p.problem for p in summary.problems]
    assert keys == sorted(SUITE) and len(set(keys)) == len(SUITE)


def _the_summary(resumed: Resumed) -> None:
    summary = DatasetSummary.model_validate_json((resumed.out / "summary.json").read_text())
    assert summary.totals.problems == 4 and summary.totals.problems_passed == 4
    assert summary.totals.workloads == 12 and summary.totals.statuses == {"PASSED": 12}
    assert [c.category for c in summary.categories] == ["L1", "L2", "Quant"]
    assert summary.totals.median_speedup is not None and summary.totals.median_speedup > 0
    outcomes = {p.problem: p.outcome for p in summary.problems}
    assert outcomes[resumed.first_problem] == "reused" and sorted(outcomes.values()).count("evaluated") == 3
    assert all(p.wall_s and p.wall_s > 0 for p in summary.problems)


def _a_third_run_reuses_everything_and_rerun_evaluates_again(resumed: Resumed, tmp_path: Path) -> None:
    third = run_to_end(tmp_path, resumed.root, resumed.out, resumed.config, "--category", "Quant")
    assert third.returncode == 0 and "0 to evaluate, 1 reused" in third.stdout, third.stderr
    fourth = run_to_end(tmp_path, resumed.root, resumed.out, resumed.config, "--category", "Quant", "--rerun")
    assert fourth.returncode == 0 and "1 to evaluate, 0 reused" in fourth.stdout, fourth.stderr


def _a_changed_config_or_an_edited_traces_file_is_evaluated_again(resumed: Resumed, tmp_path: Path) -> None:
    key = "L1/custom_inputs_matmul"
    (resumed.out / key / "traces.jsonl").write_bytes((resumed.out / key / "traces.jsonl").read_bytes() + b"\n")
    edited = run_to_end(tmp_path, resumed.root, resumed.out, resumed.config, "--category", "L1", "--limit", "1")
    assert edited.returncode == 0 and "1 to evaluate" in edited.stdout, edited.stderr  # L1/custom_inputs_matmul
    stronger = run_to_end(tmp_path, resumed.root, resumed.out, resumed.config, "--category", "L1", "--limit", "1",
                          "--iterations", "4")
    assert stronger.returncode == 0 and "1 to evaluate" in stronger.stdout, stronger.stderr


def _upstreams_traces_json_is_read_too(resumed: Resumed, tmp_path: Path) -> None:
    traces = read_traces(resumed.out / "Quant/softmax" / "traces.jsonl")
    upstream = tmp_path / "traces.json"
    upstream.write_text(json.dumps([t.model_dump(mode="json") for t in traces], indent=2))
    assert [t.model_dump() for t in read_traces(upstream)] == [t.model_dump() for t in traces]


@pytest.mark.slow
def test_a_run_killed_after_its_first_problem_resumes_without_loss(tmp_path: Path):
    resumed = _kill_after_the_first_problem_and_resume(tmp_path)
    _the_resumed_run_passes_and_keeps_the_finished_problem(resumed)
    _no_process_of_the_killed_run_is_left(resumed)
    _every_workload_has_exactly_one_trace(resumed)
    _the_layout_and_the_run_records(resumed)
    _two_folders_with_one_definition_name_are_two_problems(resumed)
    _the_summary(resumed)
    _a_third_run_reuses_everything_and_rerun_evaluates_again(resumed, tmp_path)
    _a_changed_config_or_an_edited_traces_file_is_evaluated_again(resumed, tmp_path)
    _upstreams_traces_json_is_read_too(resumed, tmp_path)
