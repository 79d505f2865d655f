"""The warm pool's fork server: replacement processes forked with their imports made, their exit
statuses reported by the server, and the pool starting its children afresh whenever forking fails."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from sol_execbench import evaluate
from sol_execbench.evaluate.parent.warm_pool import pool_status, start_pool, stop_pool

from .conftest import LIGHT_CONFIG
from .problems import add_definition, fork_server_of, poll_until, process_alive, process_children, solution, workloads


@pytest.fixture
def pool(monkeypatch, tmp_path):
    """A pool of two spares for the CPU, in a short runtime folder of its own; yields its process."""
    runtime = Path(os.path.realpath(os.environ.get("TMPDIR", "/tmp"))) / f"sxf{os.getpid()}{time.monotonic_ns() % 10**6}"
    runtime.mkdir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    monkeypatch.setenv("SOL_EXECBENCH_PHASE_LOG", "1")
    proc = start_pool("cpu", spares=2, idle_timeout_s=120)
    yield proc
    stop_pool("cpu")
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    subprocess.run(["rm", "-rf", str(runtime)], check=False)


def _ready(proc, forking: bool | None = True, timeout: float = 90) -> dict:
    """The pool's status once two children are warm (and it forks, or not, as asked)."""
    deadline = time.monotonic() + timeout
    while True:
        status = pool_status("cpu")
        if status and status["warm"] >= 2 and (forking is None or status.get("forking") is forking):
            return status
        assert proc.poll() is None and time.monotonic() < deadline, f"pool not ready: {status}"
        time.sleep(0.1)


def _evaluate(code: str, sizes=(8,)):
    logs: list[str] = []
    traces = evaluate(add_definition(), workloads(*sizes), solution(code), LIGHT_CONFIG, device="cpu",
                      on_log=logs.append)
    return traces, "".join(logs)


def test_replacements_are_forked_and_their_exits_reported(pool):
    _ready(pool)
    server = fork_server_of(pool.pid)
    assert server is not None
    before = set(process_children(server))
    assert len(before) == 2  # both spares came from the server: it started first, the pool waited for it
    traces, logs = _evaluate("def run(a, b):\n    return a + b\n")
    assert [t.evaluation.status.value for t in traces] == ["PASSED"]
    assert "took the job from the warm pool" in logs
    # The crash of a forked child reaches the trace as its signal: the server reaped it and said so.
    code = "import ctypes\ndef run(a, b):\n    if a.numel() == 16:\n        ctypes.string_at(0)\n    return a + b\n"
    traces, logs = _evaluate(code, sizes=(8, 16))
    assert [t.evaluation.status.value for t in traces] == ["PASSED", "RUNTIME_ERROR"]
    assert "SIGSEGV" in traces[1].evaluation.log
    _ready(pool)
    after = set(process_children(server))
    assert len(after) == 2 and not after & before  # both taken, both replaced by forks
    assert fork_server_of(pool.pid) == server


def test_a_forked_child_that_ends_unhanded_makes_the_pool_start_children_afresh(pool):
    _ready(pool)
    server = fork_server_of(pool.pid)
    victim = next(iter(process_children(server)))
    os.kill(victim, signal.SIGKILL)
    status = _ready(pool, forking=False)
    assert status["warm"] >= 2
    spawned = {pid for pid, cmd in process_children(pool.pid).items() if "warm_child" in cmd}
    assert spawned, "the replacement is a process the pool started itself"
    assert poll_until(lambda: fork_server_of(pool.pid) is None), "the fork server ended"
    traces, logs = _evaluate("def run(a, b):\n    return a + b\n")
    assert [t.evaluation.status.value for t in traces] == ["PASSED"]
    assert "took the job from the warm pool" in logs


def test_a_fork_server_gone_takes_its_waiting_children_with_it(pool):
    _ready(pool)
    server = fork_server_of(pool.pid)
    forked = set(process_children(server))
    os.kill(server, signal.SIGKILL)
    _ready(pool, forking=False)
    # Their exits could no longer be reported: the pool ended them rather than hand one out.
    assert poll_until(lambda: not any(process_alive(pid) for pid in forked)), "the forked children ended"
    _ready(pool, forking=False)
    spawned = lambda: {pid for pid, cmd in process_children(pool.pid).items() if "warm_child" in cmd}  # noqa: E731
    assert poll_until(lambda: len(spawned()) >= 2), "the pool started two children itself"
    traces, _ = _evaluate("def run(a, b):\n    return a + b\n")
    assert [t.evaluation.status.value for t in traces] == ["PASSED"]


def test_forking_can_be_turned_off(pool, monkeypatch):
    _ready(pool)
    stop_pool("cpu")
    pool.wait(timeout=30)
    monkeypatch.setenv("SOL_EXECBENCH_WARM_FORK", "0")
    proc = start_pool("cpu", spares=2, idle_timeout_s=120)
    try:
        _ready(proc, forking=False)
        assert fork_server_of(proc.pid) is None
        traces, logs = _evaluate("def run(a, b):\n    return a + b\n")
        assert [t.evaluation.status.value for t in traces] == ["PASSED"]
        assert "took the job from the warm pool" in logs
    finally:
        stop_pool("cpu")
        proc.wait(timeout=30)


def test_the_fork_server_ends_with_the_pool(pool):
    _ready(pool)
    server = fork_server_of(pool.pid)
    forked = set(process_children(server))
    os.killpg(pool.pid, signal.SIGKILL)  # no shutdown: the pool's life pipe closes
    pool.wait()
    assert poll_until(lambda: not process_alive(server) and not any(process_alive(pid) for pid in forked)), \
        "the fork server and its children ended with the pool"
