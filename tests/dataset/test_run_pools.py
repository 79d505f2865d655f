"""A local run evaluates in children of a warm pool: one started with ``worker start`` where it
answers, else pools of the run's own, which no other run sees and which end with the run (the real
command line, its own process)."""

from __future__ import annotations

import os
import subprocess
import tempfile

import pytest

from sol_execbench.evaluate.parent.warm_pool import POOL_NAME_ENV, pool_status

from ..problems import poll_until, run_processes
from .conftest import SUITE, build_suite, light_config, run_env, start_run

SMALL = dict(list(SUITE.items())[:2])


def _most_handed_out(run: subprocess.Popen, monkeypatch: pytest.MonkeyPatch, pool_name: str | None) -> int:
    """The most children the pool had handed out at once while the run went on (a handed-out child
    leaves the count when its evaluation ends)."""
    most = 0

    def look() -> bool:
        nonlocal most
        if pool_name:
            monkeypatch.setenv(POOL_NAME_ENV, pool_name)
        status = pool_status("cpu")
        monkeypatch.delenv(POOL_NAME_ENV, raising=False)
        most = max(most, status["handed_out"] if status else 0)
        return run.poll() is not None

    poll_until(look, 300)
    return most


def test_a_run_starts_a_pool_of_its_own_and_it_ends_with_the_run(tmp_path, monkeypatch):
    root = build_suite(tmp_path / "suite", SMALL)
    runtime = tempfile.mkdtemp(prefix="sxp", dir="/tmp")  # short: socket paths have a length limit
    monkeypatch.setenv("XDG_RUNTIME_DIR", runtime)
    env = run_env(tmp_path)
    run = start_run(tmp_path, root, tmp_path / "out", light_config(tmp_path), env=env)
    assert _most_handed_out(run, monkeypatch, f"run{run.pid}") >= 1
    assert pool_status("cpu") is None  # under the shared name there was never a pool
    out, err = run.communicate(timeout=60)
    assert run.returncode == 0, out + err
    assert poll_until(lambda: not run_processes(env["TMPDIR"]), 5.0), run_processes(env["TMPDIR"])
    left = os.listdir(os.path.join(runtime, f"sol-execbench-{os.getuid()}"))
    assert not [p for p in left if p.endswith(".sock")]
    assert not [p for p in left if p.startswith("pool-run")], left  # nor the logs its pools left empty


def test_a_pool_started_with_worker_start_serves_the_run_and_outlives_it(tmp_path, monkeypatch, warm_cpu_pool):
    root = build_suite(tmp_path / "suite", SMALL)
    before = pool_status("cpu")
    # the pool's processes started under this environment (PYTHONPATH included): the run keeps it
    env = run_env(tmp_path)
    env.pop("PYTHONPATH")
    env.update({"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {})
    run = start_run(tmp_path, root, tmp_path / "out", light_config(tmp_path), env=env)
    assert _most_handed_out(run, monkeypatch, None) >= 1
    out, err = run.communicate(timeout=60)
    assert run.returncode == 0, out + err
    after = pool_status("cpu")
    assert after is not None and after["pid"] == before["pid"]
