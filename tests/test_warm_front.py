"""The warm command line: the default pool keeps a process with the evaluation command imported; a
command line hands it its command and exits with its status, signals passed on, nothing lost."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from sol_execbench.cli.main import COMMAND_MODULES, _register, cli
from sol_execbench.cli.warm_front import evaluates
from sol_execbench.evaluate.parent.child_env import front_socket_path, package_identity
from sol_execbench.evaluate.parent.warm_pool import pool_status, stop_pool
from sol_execbench.schema.warm_pool import WorkerStatus

from .problems import (CLI, cli_env, cli_problem, kill_after_first_trace, poll_until, process_alive, staging_left,
                       trace_lines)

_register()
ADD = "def run(a, b):\n    return a + b\n"
_FRONT_LINE = re.compile(r"run by the warm pool's command-line process \(pid (\d+)\)")


def _front_waiting() -> bool:
    status = pool_status(None)
    return bool(status and status.get("front"))


def _front_pid(stderr: str) -> int | None:
    found = _FRONT_LINE.search(stderr)
    return int(found.group(1)) if found else None


def _run(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], env=env or cli_env(tmp_path), cwd=tmp_path, capture_output=True, text=True,
                          timeout=180)


def test_which_command_lines_a_front_may_run():
    commands = set(COMMAND_MODULES)
    assert evaluates(["problem_dir", "--solution", "s.json"], commands)
    assert evaluates(["evaluate", "problem_dir"], commands) and evaluates(["--definition", "d.json"], commands)
    assert not evaluates(["problem_dir", "--no-warm-pool"], commands)
    assert not any(evaluates(argv, commands) for argv in ([], ["--help"], ["--version"], ["worker", "stop"],
                                                          ["dataset", "run", "root"]))


def test_an_evaluation_runs_in_the_pools_command_line_process(warm_pool, tmp_path):
    """Arguments relative to the command line's folder, its environment (TMPDIR holds the staging),
    its streams and exit status; the front ends with its command and the pool starts the next."""
    assert poll_until(_front_waiting, 60), "the pool started no front"
    cli_problem(tmp_path, ADD)
    done = _run(tmp_path, "p", "--config", "p/light.json", "-o", "out.jsonl", "-v")
    assert done.returncode == 0, done.stderr
    front = _front_pid(done.stderr)
    assert front is not None and front != os.getpid(), done.stderr
    assert "took the job from the warm pool" in done.stderr  # the front took a warm child in turn
    assert "PASSED" in done.stdout and "Traceback" not in done.stderr
    assert [t["evaluation"]["status"] for t in trace_lines(tmp_path / "out.jsonl")] == ["PASSED", "PASSED"]
    assert staging_left(tmp_path) == []
    assert poll_until(lambda: not process_alive(front), 30), "the front outlived its command"
    assert poll_until(_front_waiting, 60), "no next front"

    # Bad input: exit 2 and one line on the command line's stderr, from the next front.
    bad = _run(tmp_path, "p", "--solution", "p/missing.json", "-v")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr, bad.stderr
    assert "missing.json" in bad.stderr and _front_pid(bad.stderr) not in (None, front)

    # Asked not to: the command line runs its command itself; the waiting front stays.
    assert poll_until(_front_waiting, 60)
    for args, extra_env in ((("--no-warm-pool",), {}), ((), {"SOL_EXECBENCH_WARM_FRONT": "0"})):
        itself = _run(tmp_path, "p", "--config", "p/light.json", "-v", *args, env={**cli_env(tmp_path), **extra_env})
        assert itself.returncode == 0 and _front_pid(itself.stderr) is None, itself.stderr
    assert _front_waiting()


def test_a_signal_to_the_command_line_stops_the_run_in_the_front(warm_pool, tmp_path):
    """SIGTERM is passed on: the run stops in order (143, the finished trace kept); SIGKILL closes
    the connection, and the front stops the run as SIGTERM would: nothing outlives it."""
    assert poll_until(_front_waiting, 60)
    (tmp_path / "term").mkdir()
    run, child, _, stderr = kill_after_first_trace(tmp_path / "term", tmp_path / "term.jsonl", signal.SIGTERM, "-v")
    front = _front_pid(stderr)
    assert front is not None and run.returncode == 143 and "stopped by SIGTERM" in stderr, stderr
    assert poll_until(lambda: not process_alive(child) and not process_alive(front), 30)
    assert staging_left(tmp_path / "term") == []

    assert poll_until(_front_waiting, 60)
    (tmp_path / "kill").mkdir()
    run, child, _, stderr = kill_after_first_trace(tmp_path / "kill", tmp_path / "kill.jsonl", signal.SIGKILL, "-v")
    front = _front_pid(stderr)  # the front wrote it to the stderr the killed command line handed over
    assert run.returncode == -signal.SIGKILL and front is not None, stderr
    assert poll_until(lambda: not process_alive(child) and not process_alive(front), 30)
    assert poll_until(lambda: staging_left(tmp_path / "kill") == [], 30)
    assert poll_until(_front_waiting, 60)


def _fronts(pool_pid: int) -> list[int]:
    """The pool's children that run the front module."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if b"sol_execbench.cli.warm_front" in cmdline and ppid == pool_pid:
            found.append(int(entry))
    return found


def _send_request(request: dict) -> dict:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(str(front_socket_path()))
        socket.send_fds(conn, [json.dumps(request).encode() + b"\n"], [0, 1, 2])
        return json.loads(conn.recv(65536))


_AS_SANDBOXED = """import ctypes, sys
ctypes.CDLL(None).prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS, as every sandboxed child runs
from sol_execbench.cli.warm_front import run_in_front
print(run_in_front(["--version"]))
"""


def test_the_front_serves_no_sandboxed_process_nor_another_install(warm_pool, tmp_path):
    assert poll_until(_front_waiting, 60)
    (waiting,) = _fronts(warm_pool.pid)
    refused = subprocess.run([sys.executable, "-c", _AS_SANDBOXED], capture_output=True, text=True, timeout=60)
    assert refused.stdout.strip() == "None", refused.stderr  # so the command line would run it itself
    request = {"argv": ["--version"], "cwd": str(tmp_path), "env": {}, "umask": 0o22, "streams": [],
               "python": sys.executable, "package": "/elsewhere/sol_execbench", "version": "0"}
    reply = _send_request(request)
    assert reply["ok"] is False and "another interpreter" in reply["reason"]
    assert _fronts(warm_pool.pid) == [waiting] and _front_waiting()  # still waiting for its command line

    # The same install, from a folder that is gone by the time the front takes over: refused, so the
    # command line runs the command itself (and says what is wrong); the next front waits.
    for broken, why in (({"cwd": str(tmp_path / "gone")}, "gone"), ({"streams": [{}]}, "could not be taken over")):
        reply = _send_request({**request, **package_identity(), **broken})  # a malformed one likewise
        assert reply["ok"] is False and why in reply["reason"], reply
        assert poll_until(lambda pid=waiting: not process_alive(pid), 10) and poll_until(_front_waiting, 60)
        (waiting,) = _fronts(warm_pool.pid)

    shown = CliRunner().invoke(cli, ["worker", "status"])
    shown_status = WorkerStatus.model_validate_json(shown.output)
    assert shown.exit_code == 0 and shown_status.front is True
    if not _on_nvidia_gpu():
        assert shown_status.turned_away == 0  # no launch level is judged off NVIDIA GPUs

    stop_pool(None)
    warm_pool.wait(timeout=30)
    assert poll_until(lambda: not process_alive(waiting), 10) and not front_socket_path().exists()
    gone = CliRunner().invoke(cli, ["worker", "status"])
    assert gone.exit_code == 1 and json.loads(gone.output) == {"running": False}


def _on_nvidia_gpu() -> bool:
    """Where the pool's warm children judge their launch level (warm_child: the device's vendor)."""
    from sol_execbench.platform import current

    return current(None).vendor == "cuda"


def test_a_pool_for_a_named_device_keeps_no_front(warm_cpu_pool):
    status = pool_status("cpu")
    assert status["front"] is False and not front_socket_path().exists() and _fronts(warm_cpu_pool.pid) == []
