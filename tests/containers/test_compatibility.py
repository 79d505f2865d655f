"""Compatibility records: entries written by runs, merged into a matrix by target id (newest wins),
the same entries always giving the same file."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from sol_execbench.containers.compatibility import dump, merge, read_records
from sol_execbench.schema.containers import CompatibilityEntry, CompatibilityMatrix

from .conftest import HOST_READY, REPO, clean_environ

SMOKE = ["sol-execbench", "examples/softmax"]


def entry(target_id: str, recorded_at: str, status: str = "run_succeeded") -> CompatibilityEntry:
    return CompatibilityEntry(target_id=target_id, platform="rocm" if target_id.startswith("rocm") else "cuda",
                              status=status, recorded_at=recorded_at, tool_version="test")


def test_merge_keeps_the_newest_entry_of_each_target_in_target_order():
    a_old = entry("rocm-7.1.1-ubuntu-24.04-container", "2026-11-20T10:00:00+00:00", "run_failed")
    a_new = entry("rocm-7.1.1-ubuntu-24.04-container", "2026-11-25T09:00:00+00:00", "container_validated")
    a_new_in_other_zone = entry("rocm-7.1.1-ubuntu-24.04-container", "2026-11-25T10:30:00+02:00", "run_succeeded")
    b = entry("cuda-12.8-ubuntu-24.04-container", "2026-11-21T00:00:00+00:00")
    matrix = merge([a_new, b, a_old, a_new_in_other_zone])
    assert [e.target_id for e in matrix.entries] == ["cuda-12.8-ubuntu-24.04-container", "rocm-7.1.1-ubuntu-24.04-container"]
    assert matrix.entries[1].status == "container_validated"  # 10:30+02:00 is 08:30 UTC, older than 09:00 UTC
    assert matrix.updated_at == a_new.recorded_at
    tie = entry("cuda-12.8-ubuntu-24.04-container", b.recorded_at, "run_failed")
    assert merge([b, tie]).entries[0].status == "run_failed"  # a tie goes to the later input
    assert dump(merge([a_old, b, a_new])) == dump(merge([a_new, a_old, b])) == dump(merge([b, a_new, a_old]))


def test_compat_command_merges_entries_and_matrices(tmp_path, docker_cli):
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    first.write_text(dump(entry("rocm-7.0.2-ubuntu-24.04-container", "2026-11-24T00:00:00+00:00")))
    second.write_text(dump(merge([entry("rocm-7.0.2-ubuntu-24.04-container", "2026-11-25T00:00:00+00:00", "run_failed"),
                                  entry("cuda-13.0-ubuntu-24.04-container", "2026-11-23T00:00:00+00:00")])))
    code, out, _ = docker_cli(["compat", str(first), str(second)], clean_environ())
    printed = CompatibilityMatrix.model_validate_json(out)
    assert code == 0 and [(e.target_id, e.status) for e in printed.entries] == [
        ("cuda-13.0-ubuntu-24.04-container", "run_succeeded"), ("rocm-7.0.2-ubuntu-24.04-container", "run_failed")]
    matrix = tmp_path / "matrix.json"
    assert docker_cli(["compat", str(second), "-o", str(matrix)], clean_environ())[0] == 0
    assert docker_cli(["compat", str(first), "-o", str(matrix)], clean_environ())[0] == 0  # older: the matrix keeps run_failed
    assert matrix.read_text() == out


@pytest.mark.parametrize("content, needle", [("{", "malformed JSON"), ('{"target_id": "x"}', "field 'platform'"),
                                             ('{"entries": [{"status": "great"}]}', "entries.0")])
def test_a_bad_compatibility_file_is_one_error_line(tmp_path, docker_cli, content, needle):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    code, out, err = docker_cli(["compat", str(bad)], clean_environ())
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and str(bad) in err and needle in err


def test_an_unwritable_record_is_one_error_line(tmp_path, docker_cli):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    code, _, err = docker_cli(["preflight", "--dry-run", "--compatibility-entry", str(blocker / "entry.json")], clean_environ())
    assert code == 2 and len(err.strip().splitlines()) == 1 and "cannot be written" in err


def test_preflight_only_records_its_verdict(tmp_path, docker_cli):
    entry_path, matrix_path = tmp_path / "entry.json", tmp_path / "matrix.json"
    env = clean_environ(**{**HOST_READY, "SOL_EXECBENCH_DEV_KFD_PRESENT": "0"})
    code, out, _ = docker_cli(["preflight", "--dry-run", "--compatibility-entry", str(entry_path),
                               "--compatibility-matrix", str(matrix_path)], env)
    json.loads(out)
    recorded = read_records(entry_path)[0]
    assert code == 1 and recorded.status == "preflight_failed" and recorded.dry_run is True
    assert recorded.host_status == "runtime_unavailable" and read_records(matrix_path) == [recorded]


def _fake_docker(tmp_path, exit_code: int) -> dict[str, str]:
    """A `docker` that logs its arguments, answers every command and exits ``docker run`` with
    ``exit_code``: the wrapper's real run path without a daemon."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    (folder / "docker").write_text(f'#!/bin/sh\necho "$*" >> {tmp_path}/docker.log\n'
                                   f'[ "$1" = run ] && exit {exit_code}\nexit 0\n')
    (folder / "docker").chmod(0o755)
    return {"PATH": f"{folder}:{os.environ['PATH']}", "SOL_EXECBENCH_HOST_PYTHON": "python3"}


@pytest.mark.parametrize("exit_code, status", [(0, "container_validated"), (3, "run_failed")])
def test_a_real_run_records_its_outcome(tmp_path, exit_code, status):
    matrix = tmp_path / "matrix.json"
    env = clean_environ(**HOST_READY, **_fake_docker(tmp_path, exit_code))
    result = subprocess.run([str(REPO / "scripts" / "run_docker.sh"), "--allow-untested-target-smoke",
                             "--record-container-validation", "--compatibility-matrix", str(matrix), "--", *SMOKE],
                            env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == exit_code, result.stderr
    logged = (tmp_path / "docker.log").read_text().splitlines()
    assert logged[-1].startswith("run --rm") and logged[-1].endswith(" ".join(SMOKE))
    (recorded,) = read_records(matrix)
    assert (recorded.status, recorded.exit_code, recorded.command, recorded.dry_run) == (status, exit_code, SMOKE, False)


def test_a_refused_smoke_run_runs_nothing_and_says_why(tmp_path):
    entry_path = tmp_path / "entry.json"
    env = clean_environ(**HOST_READY, **_fake_docker(tmp_path, 0))
    result = subprocess.run([str(REPO / "scripts" / "run_docker.sh"), "--compatibility-entry", str(entry_path), "--", *SMOKE],
                            env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and "--allow-untested-target-smoke" in result.stderr
    assert not any(line.startswith("run ") for line in (tmp_path / "docker.log").read_text().splitlines())
    assert read_records(entry_path)[0].status == "smoke_refused"
