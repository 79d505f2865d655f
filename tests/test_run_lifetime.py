"""A run killed at any moment keeps every finished trace and leaves no process behind; -o is
appended to under a lock and never an input; a failed write is one error line. Real CLI
processes and real signals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import LIGHT_CONFIG
from .problems import add_definition, process_alive, solution, workloads, write_problem

# The second workload (N=64) hangs after writing its process id, so a kill lands after the first trace.
HANGS_ON_SECOND = """import os, time

def run(a, b):
    if a.shape[0] == 64:
        with open(os.environ["HANG_PID_FILE"], "w") as fh:
            fh.write(str(os.getpid()))
        while True:
            time.sleep(0.1)
    return a + b
"""

CLI = [sys.executable, "-c", "from sol_execbench.cli.main import main; main()"]


def _problem(tmp_path: Path, code: str, sizes=(8, 64)) -> Path:
    root = write_problem(tmp_path / "p", add_definition(), workloads(*sizes), solution(code))
    (root / "light.json").write_text(json.dumps(LIGHT_CONFIG))
    return root


def _env(tmp_path: Path) -> dict[str, str]:
    """The solutions here report their pids through a file outside the run, and the lifecycle must hold
    without a sandbox too: the runs are unsandboxed (SOL_EXECBENCH_SANDBOX=none, docs/security.md)."""
    temp = tmp_path / "tmp"
    temp.mkdir(exist_ok=True)
    return {**os.environ, "SOL_EXECBENCH_SANDBOX": "none", "TMPDIR": str(temp),
            "HANG_PID_FILE": str(tmp_path / "hang.pid")}


def _start(tmp_path: Path, problem: Path, out: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([*CLI, str(problem), "--config", str(problem / "light.json"), "--device", "cpu",
                             "--no-warm-pool", "-o", str(out), *extra], env=_env(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _poll(condition, timeout_s: float = 60.0) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.05)
    return False


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _staging_left(tmp_path: Path) -> list[str]:
    return [p.name for p in (tmp_path / "tmp").glob("sol-execbench-*") if p.name != f"sol-execbench-{os.getuid()}"]


@pytest.mark.parametrize("signum, code", [(signal.SIGKILL, -9), (signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_kill_after_first_trace_keeps_it_and_ends_the_child(tmp_path: Path, signum: int, code: int):
    problem = _problem(tmp_path, HANGS_ON_SECOND)
    out = tmp_path / "out.jsonl"
    proc = _start(tmp_path, problem, out)
    pid_file = tmp_path / "hang.pid"
    assert _poll(lambda: pid_file.exists() and pid_file.read_text() and out.exists() and out.stat().st_size > 0), \
        proc.communicate(timeout=5)
    child = int(pid_file.read_text())
    proc.send_signal(signum)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == code, stderr
    assert "Traceback" not in stderr and "Aborted" not in stderr
    traces = _lines(out)
    assert [t["workload"]["uuid"] for t in traces] == ["w0-8"]
    assert traces[0]["evaluation"]["status"] == "PASSED"
    assert _poll(lambda: not process_alive(child), 5.0), "the evaluation child outlived the CLI"
    assert _poll(lambda: _staging_left(tmp_path) == [], 5.0), _staging_left(tmp_path)


def test_rerun_appends_and_says_what_it_supersedes(tmp_path: Path):
    problem = _problem(tmp_path, "def run(a, b):\n    return a + b\n", sizes=(8, 16))
    out = tmp_path / "out.jsonl"
    first = _start(tmp_path, problem, out)
    first.communicate(timeout=120)
    second = _start(tmp_path, problem, out, "--only", "w1-16")
    _, stderr = second.communicate(timeout=120)
    assert first.returncode == 0 and second.returncode == 0, stderr
    assert [t["workload"]["uuid"] for t in _lines(out)] == ["w0-8", "w1-16", "w1-16"]
    assert "already holds 2 line(s)" in stderr and "supersede 1 earlier trace" in stderr


def test_two_runs_on_one_output_keep_every_line(tmp_path: Path):
    problem = _problem(tmp_path, "def run(a, b):\n    return a + b\n", sizes=(8, 16))
    out = tmp_path / "out.jsonl"
    runs = [_start(tmp_path, problem, out) for _ in range(2)]
    for run in runs:
        run.communicate(timeout=180)
        assert run.returncode == 0
    traces = _lines(out)
    assert len(traces) == 4 and [t["workload"]["uuid"] for t in traces] == ["w0-8", "w1-16"] * 2


@pytest.mark.parametrize("name", ["definition.json", "workload.jsonl", "solution.json", "light.json", "kernel.py"])
def test_output_naming_an_input_is_refused(tmp_path: Path, name: str):
    problem = _problem(tmp_path, "def run(a, b):\n    return a + b\n", sizes=(8,))
    # The solution's source is read from kernel.py beside it (empty content): an input too.
    sol = json.loads((problem / "solution.json").read_text())
    (problem / "kernel.py").write_text(sol["sources"][0]["content"])
    sol["sources"][0]["content"] = ""
    (problem / "solution.json").write_text(json.dumps(sol))
    before = (problem / name).read_bytes()
    run = _start(tmp_path, problem, problem / name)
    _, stderr = run.communicate(timeout=60)
    assert run.returncode == 2 and "Traceback" not in stderr, stderr
    assert stderr.count("\n") == 1 and f"--output {problem / name} is an input of this run" in stderr
    assert "give another file" in stderr
    assert (problem / name).read_bytes() == before


def test_full_disk_is_one_error_and_traces_go_to_stdout(tmp_path: Path):
    problem = _problem(tmp_path, "def run(a, b):\n    return a + b\n", sizes=(8, 16))
    run = _start(tmp_path, problem, Path("/dev/full"), "--json")
    stdout, stderr = run.communicate(timeout=120)
    assert "Traceback" not in stderr
    assert stderr.count("cannot write --output /dev/full") == 1
    printed = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    assert {t["workload"]["uuid"] for t in printed} == {"w0-8", "w1-16"}


SETSID_DAEMON = """import os, time

def run(a, b):
    if not os.path.exists(os.environ["HANG_PID_FILE"]):
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                with open(os.environ["HANG_PID_FILE"] + ".tmp", "w") as fh:
                    fh.write(str(os.getpid()))
                os.rename(os.environ["HANG_PID_FILE"] + ".tmp", os.environ["HANG_PID_FILE"])
                while True:
                    time.sleep(0.1)
            os._exit(0)
        while not os.path.exists(os.environ["HANG_PID_FILE"]):
            time.sleep(0.01)
    return a + b
"""


def test_setsid_daemon_of_a_solution_is_ended_with_the_run(tmp_path: Path):
    problem = _problem(tmp_path, SETSID_DAEMON, sizes=(8,))
    run = _start(tmp_path, problem, tmp_path / "out.jsonl")
    run.communicate(timeout=120)
    daemon = int((tmp_path / "hang.pid").read_text())
    assert _poll(lambda: not process_alive(daemon), 5.0), "the solution's daemon outlived the run"


KILLS_PARENT = """import os, signal

def run(a, b):
    if a.shape[0] == 64:
        os.kill(os.getppid(), signal.SIGKILL)
    return a + b
"""


def test_a_solution_that_kills_its_parent_gets_a_trace(tmp_path: Path):
    problem = _problem(tmp_path, KILLS_PARENT, sizes=(8, 64, 16))
    out = tmp_path / "out.jsonl"
    run = _start(tmp_path, problem, out)
    _, stderr = run.communicate(timeout=120)
    assert run.returncode == 1, stderr
    traces = {t["workload"]["uuid"]: t["evaluation"] for t in _lines(out)}
    assert traces["w0-8"]["status"] == "PASSED" and traces["w2-16"]["status"] == "PASSED"
    assert traces["w1-64"]["status"] == "RUNTIME_ERROR"
    assert "parent" in traces["w1-64"]["log"]
