"""The warm pool's children die with it; `worker stop` says whether a pool was running; a CLI killed
while a warm child runs its job keeps its finished traces and leaves the pool serving; a solution
that kills the pool gets a trace and leaves no warm child behind."""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from sol_execbench.cli.main import _register, cli
from sol_execbench.evaluate.parent.warm_pool import CHILD_SOCKET_PREFIX, pool_status, server_socket_path, start_pool
from sol_execbench.platform.host import pending_socket_path, runtime_dir, session_processes
from sol_execbench.platform.lifetime import child_pids

from .problems import (KILLS_POOL, cli_problem, fork_server_of, kill_after_first_trace, poll_until, process_alive, run_processes,
                       staging_left, start_cli, trace_lines)

_register()


def test_kill_9_of_the_pool_ends_its_warm_children(warm_pool):
    """Their sockets stay behind in the runtime folder until the next pool starts there; so may the
    pool's own, or its pending name (killed between bind and listen), which the next pool replaces."""
    children = child_pids(warm_pool.pid)
    assert children
    sockets = list(runtime_dir().glob(f"{CHILD_SOCKET_PREFIX}{warm_pool.pid}-*.sock"))
    assert sockets
    os.kill(warm_pool.pid, signal.SIGKILL)
    warm_pool.wait(timeout=10)
    assert poll_until(lambda: not any(process_alive(pid) for pid in children), 5.0), "a warm child outlived its pool"
    result = CliRunner().invoke(cli, ["worker", "stop"])
    assert "no warm pool was running" in result.output
    assert all(path.exists() for path in sockets)
    server = server_socket_path(None)
    pending = Path(pending_socket_path(str(server)))
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as bound_only:
        bound_only.bind(str(pending))
    assert server.exists() and pending.exists()
    start_pool(None, spares=1, idle_timeout_s=60)
    assert poll_until(lambda: pool_status(None) is not None, 60.0)
    assert not any(path.exists() for path in sockets) and not pending.exists()


def test_worker_stop_says_whether_a_pool_was_running(warm_pool):
    first = CliRunner().invoke(cli, ["worker", "stop"])
    assert "stopped the warm pool" in first.output
    warm_pool.wait(timeout=30)
    second = CliRunner().invoke(cli, ["worker", "stop"])
    assert "no warm pool was running" in second.output


@pytest.mark.parametrize("signum, code", [(signal.SIGKILL, -9), (signal.SIGTERM, 143)])
def test_kill_of_the_cli_during_a_warm_evaluation(tmp_path: Path, warm_cpu_pool, signum: int, code: int):
    """The finished trace stays, the warm child that ran the job ends, the pool keeps serving."""
    run, child, parent, stderr = kill_after_first_trace(tmp_path, tmp_path / "out.jsonl", signum)
    assert run.returncode == code, stderr
    assert parent in (warm_cpu_pool.pid, fork_server_of(warm_cpu_pool.pid)), "the job did not run in a warm child"
    # The warm child and all it started end (its channel's reader is gone); nothing of the run stays.
    assert poll_until(lambda: not session_processes(child), 5.0), "the warm child outlived the CLI"
    assert poll_until(lambda: run_processes(str(tmp_path / "tmp")) == [], 5.0), run_processes(str(tmp_path / "tmp"))
    assert poll_until(lambda: staging_left(tmp_path) == [], 5.0), staging_left(tmp_path)
    # The pool keeps serving: the next evaluation takes a warm child of it and passes.
    assert warm_cpu_pool.poll() is None and pool_status("cpu")
    again = start_cli(tmp_path, cli_problem(tmp_path, "def run(a, b):\n    return a + b\n", sizes=(8,)),
                      tmp_path / "again.jsonl", "-v")
    _, stderr = again.communicate(timeout=120)
    assert again.returncode == 0, stderr
    assert "took the job from the warm pool" in stderr


def test_a_solution_that_kills_the_pool_gets_a_trace_and_no_warm_child_stays(tmp_path: Path, warm_cpu_pool):
    """The solution ends the pool (its parent, or its parent's parent through the fork server). The
    evaluation child dies with it at once (its pipe from the pool closes; the solution's 60 s sleep
    would otherwise outlast the wait below); the CLI survives with a trace naming what happened, the
    other workloads still run, and the pool's other warm children end with it."""
    problem = cli_problem(tmp_path, KILLS_POOL, sizes=(8, 64, 16))
    out = tmp_path / "out.jsonl"
    pool_marker = os.environ["XDG_RUNTIME_DIR"]  # every process of this pool inherits it
    run = start_cli(tmp_path, problem, out)
    _, stderr = run.communicate(timeout=45)
    assert run.returncode == 1 and "Traceback" not in stderr, stderr
    traces = {t["workload"]["uuid"]: t["evaluation"] for t in trace_lines(out)}
    assert traces["w0-8"]["status"] == "PASSED" and traces["w2-16"]["status"] == "PASSED", traces
    assert traces["w1-64"]["status"] == "RUNTIME_ERROR"
    assert "warm pool" in traces["w1-64"]["log"] and "parent" in traces["w1-64"]["log"], traces["w1-64"]["log"]
    warm_cpu_pool.wait(timeout=10)
    assert poll_until(lambda: run_processes(pool_marker) == [], 5.0), run_processes(pool_marker)


def test_worker_start_caches_the_hosts_environment_probe_while_the_pool_warms(tmp_path, monkeypatch):
    """A host's first evaluation would otherwise wait for the probe at its end (torch's import and the
    package hashes); after `worker start` the host's cache holds the hash an evaluation stamps."""
    import shutil
    import tempfile

    from sol_execbench.envprobe.hashing import host_cached_environment_hash
    from sol_execbench.evaluate.parent.warm_pool import stop_pool

    runtime = tempfile.mkdtemp(prefix="sxw", dir="/tmp")  # Unix socket paths are limited to 107 bytes
    monkeypatch.setenv("XDG_RUNTIME_DIR", runtime)
    monkeypatch.setenv("SOL_EXECBENCH_CACHE_DIR", str(tmp_path / "cache"))
    cached = tmp_path / "cache" / "environment-hash.json"
    try:
        result = CliRunner().invoke(cli, ["worker", "start", "--device", "cpu", "--spares", "1", "--idle-timeout", "60"])
        assert result.exit_code == 0 and "warm pool ready" in result.output, result.output
        assert cached.exists()
        assert f'"{host_cached_environment_hash()}"' in cached.read_text()
    finally:
        stop_pool("cpu")
        shutil.rmtree(runtime, ignore_errors=True)
