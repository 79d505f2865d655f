"""Small problems written by tests: a definition, workloads and a solution from Python source."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from sol_execbench.platform.host import process_alive  # noqa: F401  (re-exported: the tests' liveness check)
from sol_execbench.platform.lifetime import child_pids

ADD_REFERENCE = """import torch

def run(a, b):
    return a + b
"""


def add_definition(n: str = "N", dtype: str = "float32") -> dict[str, Any]:
    return {
        "name": "vector_add",
        "axes": {n: {"type": "var"}},
        "inputs": {"a": {"shape": [n], "dtype": dtype}, "b": {"shape": [n], "dtype": dtype}},
        "outputs": {"c": {"shape": [n], "dtype": dtype}},
        "reference": ADD_REFERENCE,
    }


def workloads(*sizes: int, axis: str = "N") -> list[dict[str, Any]]:
    return [{"uuid": f"w{i}-{s}", "axes": {axis: s}, "inputs": {"a": {"type": "random"}, "b": {"type": "random"}}}
            for i, s in enumerate(sizes)]


def solution(code: str, *, dps: bool = False, name: str = "candidate", language: str = "pytorch",
             definition: str = "vector_add") -> dict[str, Any]:
    return {
        "name": name, "definition": definition, "author": "tests",
        "spec": {"languages": [language], "entry_point": "kernel.py::run", "destination_passing_style": dps},
        "sources": [{"path": "kernel.py", "content": code}],
    }


def write_problem(root: Path, definition: dict, wls: list[dict], sol: dict | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "definition.json").write_text(json.dumps(definition, indent=1))
    (root / "workload.jsonl").write_text("".join(json.dumps(w) + "\n" for w in wls))
    if sol is not None:
        (root / "solution.json").write_text(json.dumps(sol, indent=1))
    return root


# -- running the command line as its own process (lifecycle tests: real signals, real files) --------

CLI = [sys.executable, "-c", "from sol_execbench.cli.main import main; main()"]
LIGHT_CONFIG = {"warmup_runs": 1, "iterations": 3, "correctness_rounds": 2}


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


KILLS_PARENT = """import os, signal, time

def run(a, b):
    if a.shape[0] == 64:
        os.kill(os.getppid(), signal.SIGKILL)
        time.sleep(60)  # the parent's death ends this process meanwhile, during this workload
    return a + b
"""

# The warm pool is a warm child's grandparent where the child was forked by the pool's fork server:
# the solution walks up its ancestors to the process running the pool's module.
KILLS_POOL = """import os, signal, time

def _pool():
    pid = os.getppid()
    for _ in range(4):
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            if b"warm_pool" in fh.read():
                return pid
        with open(f"/proc/{pid}/stat", "rb") as fh:
            pid = int(fh.read().rsplit(b")", 1)[1].split()[1])
    raise RuntimeError("no warm pool among this process's ancestors")

def run(a, b):
    if a.shape[0] == 64:
        os.kill(_pool(), signal.SIGKILL)
        time.sleep(60)  # the pool's death ends this process meanwhile, during this workload
    return a + b
"""


def cli_problem(tmp_path: Path, code: str, sizes=(8, 64)) -> Path:
    """The add problem with ``code`` as its solution and ``light.json`` beside it."""
    root = write_problem(tmp_path / "p", add_definition(), workloads(*sizes), solution(code))
    (root / "light.json").write_text(json.dumps(LIGHT_CONFIG))
    return root


def cli_env(tmp_path: Path) -> dict[str, str]:
    """The solutions of lifecycle tests report their pids through a file outside the run, and the
    lifecycle must hold without a sandbox too: the runs are unsandboxed (docs/security.md). Every
    process of a run inherits TMPDIR, which names this test's folder: see ``run_processes``."""
    temp = tmp_path / "tmp"
    temp.mkdir(exist_ok=True)
    return {**os.environ, "SOL_EXECBENCH_SANDBOX": "none", "SOL_EXECBENCH_ALLOW_CPU_TIMING": "1",
            "TMPDIR": str(temp), "HANG_PID_FILE": str(tmp_path / "hang.pid")}


def start_cli(tmp_path: Path, problem: Path, out: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([*CLI, str(problem), "--config", str(problem / "light.json"), "--device", "cpu",
                             "-o", str(out), *extra], env=cli_env(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def poll_until(condition, timeout_s: float = 60.0) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.05)
    return False


def trace_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def run_processes(marker: str) -> list[str]:
    """``pid state command`` of every process (zombies included) whose environment at start
    holds ``marker``: the processes of one test's run, whoever else uses the machine."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                if marker.encode() not in fh.read():
                    continue
            with open(f"/proc/{entry}/stat", "rb") as fh:
                state = fh.read().rsplit(b")", 1)[1].split()[0].decode()
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                command = fh.read().replace(b"\0", b" ").decode(errors="replace")[:160]
        except (OSError, IndexError):
            continue
        found.append(f"{entry} {state} {command}")
    return found


def parent_pid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return int(fh.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def kill_after_first_trace(tmp_path: Path, out: Path, signum: int,
                           *extra: str) -> tuple[subprocess.Popen, int, int | None, str]:
    """Run the HANGS_ON_SECOND problem, send ``signum`` to the CLI once the first trace is in
    ``out`` and the second workload hangs; the finished CLI, the hung child's pid, its parent's
    pid as it was before the signal, and the CLI's stderr."""
    problem = cli_problem(tmp_path, HANGS_ON_SECOND)
    run = start_cli(tmp_path, problem, out, *extra)
    pid_file = tmp_path / "hang.pid"
    assert poll_until(lambda: pid_file.exists() and pid_file.read_text() and out.exists() and out.stat().st_size > 0), \
        run.communicate(timeout=5)
    child = int(pid_file.read_text())
    parent = parent_pid(child)
    run.send_signal(signum)
    _, stderr = run.communicate(timeout=30)
    assert "Traceback" not in stderr and "Aborted" not in stderr, stderr
    assert [(t["workload"]["uuid"], t["evaluation"]["status"]) for t in trace_lines(out)] == [("w0-8", "PASSED")]
    return run, child, parent, stderr


def staging_left(tmp_path: Path) -> list[str]:
    """Staging folders left in the TMPDIR of ``cli_env`` (the per-user runtime folder aside)."""
    return [p.name for p in (tmp_path / "tmp").glob("sol-execbench-*") if p.name != f"sol-execbench-{os.getuid()}"]


def process_children(pid: int) -> dict[int, str]:
    """The live children of ``pid`` and their command lines."""
    found = {}
    for child in child_pids(pid):
        try:
            if process_alive(child):
                found[child] = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            pass
    return found


def fork_server_of(pool_pid: int) -> int | None:
    """The warm pool's fork server (``evaluate/child/warm_fork.py``), if one runs."""
    return next((pid for pid, cmd in process_children(pool_pid).items() if "warm_fork" in cmd), None)
