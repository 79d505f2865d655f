"""The warm pool's children die with it; `worker stop` says whether a pool was running."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time

import pytest
from click.testing import CliRunner

from sol_execbench.cli.main import _register, cli
from sol_execbench.evaluate.warm_pool import pool_status, start_pool, stop_pool
from sol_execbench.platform.lifetime import child_pids

from .problems import process_alive

_register()


@pytest.fixture
def pool(monkeypatch, cpu_timing):
    runtime = tempfile.mkdtemp(prefix="sxl", dir="/tmp")
    monkeypatch.setenv("XDG_RUNTIME_DIR", runtime)
    proc = start_pool(None, spares=1, idle_timeout_s=120)
    deadline = time.monotonic() + 90
    while not ((status := pool_status(None)) and status["warm"] >= 1):
        if time.monotonic() > deadline:
            pytest.fail("the warm pool did not get ready")
        time.sleep(0.1)
    yield proc
    stop_pool(None)
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=30)
    shutil.rmtree(runtime, ignore_errors=True)


def test_kill_9_of_the_pool_ends_its_warm_children(pool):
    children = child_pids(pool.pid)
    assert children
    os.kill(pool.pid, signal.SIGKILL)
    pool.wait(timeout=10)
    deadline = time.monotonic() + 5
    while any(process_alive(pid) for pid in children) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(process_alive(pid) for pid in children), "a warm child outlived its pool"
    result = CliRunner().invoke(cli, ["worker", "stop"])
    assert "no warm pool was running" in result.output


def test_worker_stop_says_whether_a_pool_was_running(pool):
    first = CliRunner().invoke(cli, ["worker", "stop"])
    assert "stopped the warm pool" in first.output
    pool.wait(timeout=30)
    second = CliRunner().invoke(cli, ["worker", "stop"])
    assert "no warm pool was running" in second.output
