"""The command line's early child: started before the job, it runs the evaluation where a fresh
child would; a run that ends before handing it its job, or a command line killed meanwhile, leaves
no process and no staging folder. Real CLI processes, real signals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from .problems import (CLI, LIGHT_CONFIG, add_definition, cli_env, cli_problem, poll_until, run_processes, solution,
                       staging_left, trace_lines, workloads)

ADD = "def run(a, b):\n    return a + b\n"


def _cli(tmp_path: Path, problem: Path, *extra: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, str(problem), "--config", str(problem / "light.json"), "--device", "cpu", *extra],
                          env=env or cli_env(tmp_path), capture_output=True, text=True, timeout=180)


@pytest.mark.parametrize("deep", [False, True], ids=["tmpdir", "deep-tmpdir"])
def test_the_cli_evaluates_in_the_child_it_started_first(tmp_path: Path, deep: bool):
    """Also where the staging folder's path is too long for a Unix socket beside it."""
    problem = cli_problem(tmp_path, ADD, sizes=(8, 16))
    out = tmp_path / "out.jsonl"
    env = {**cli_env(tmp_path), "SOL_EXECBENCH_PHASE_LOG": "1"}
    if deep:
        env["TMPDIR"] = str(tmp_path / "tmp" / ("d" * 100))
        Path(env["TMPDIR"]).mkdir()
    done = _cli(tmp_path, problem, "-o", str(out), "-v", env=env)
    assert done.returncode == 0, done.stderr
    assert "early child took its job" in done.stderr
    assert done.stderr.index("early child started") < done.stderr.index("early child took its job")
    assert [t["evaluation"]["status"] for t in trace_lines(out)] == ["PASSED", "PASSED"]
    assert poll_until(lambda: run_processes(str(tmp_path / "tmp")) == [], 5.0)
    assert list(Path(env["TMPDIR"]).glob("sol-execbench-*")) == [] if deep else staging_left(tmp_path) == []


def test_a_bad_input_ends_the_early_child_and_removes_its_folder(tmp_path: Path):
    problem = cli_problem(tmp_path, ADD, sizes=(8,))
    (problem / "workload.jsonl").write_text("{not json\n")
    done = _cli(tmp_path, problem)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert poll_until(lambda: run_processes(str(tmp_path / "tmp")) == [], 5.0), run_processes(str(tmp_path / "tmp"))
    assert staging_left(tmp_path) == []


def test_a_run_ending_before_its_child_ends_the_early_child(tmp_path: Path):
    """lock_clocks without locked clocks: every workload fails before any child is needed."""
    problem = cli_problem(tmp_path, ADD, sizes=(8,))
    out = tmp_path / "out.jsonl"
    done = _cli(tmp_path, problem, "--lock-clocks", "-o", str(out))
    assert done.returncode == 1, done.stderr
    assert [t["evaluation"]["status"] for t in trace_lines(out)] == ["RUNTIME_ERROR"]
    assert poll_until(lambda: run_processes(str(tmp_path / "tmp")) == [], 5.0), run_processes(str(tmp_path / "tmp"))
    assert staging_left(tmp_path) == []


HOLDS_AN_EARLY_CHILD = """
import sys, time
from sol_execbench.evaluate.parent.early_child import EarlyChild
child = EarlyChild("cpu", keep_staging=False)
print(child.staging, flush=True)
print(child.socket_path, flush=True)
time.sleep(600)
"""


def test_kill_9_before_the_job_ends_the_early_child_and_removes_its_folder(tmp_path: Path):
    env = cli_env(tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", HOLDS_AN_EARLY_CHILD], env=env, stdout=subprocess.PIPE, text=True)
    staging = Path(holder.stdout.readline().strip())
    socket_path = Path(holder.stdout.readline().strip())
    marker = str(tmp_path / "tmp")
    # The holder, the supervisor and the early child, which then waits on its socket.
    assert poll_until(lambda: len(run_processes(marker)) >= 3 and socket_path.exists()), \
        run_processes(marker)
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=10)
    assert poll_until(lambda: run_processes(marker) == [], 5.0), run_processes(marker)
    assert poll_until(lambda: not staging.exists(), 5.0)


def test_a_socket_left_in_the_runtime_folder_by_a_killed_evaluation_is_removed(tmp_path: Path, monkeypatch):
    """With a staging path too long for a socket beside it, the socket lies in the runtime folder,
    outside what the child's supervisor removes: the next early child removes those of evaluations
    gone, and leaves those of live ones."""
    from sol_execbench.evaluate.parent.early_child import RUNTIME_SOCKET_PREFIX, EarlyChild
    from sol_execbench.platform.host import runtime_dir

    for name, value in cli_env(tmp_path).items():
        monkeypatch.setenv(name, value)
    deep = tmp_path / "tmp" / ("d" * 100)
    deep.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(deep))  # where mkdtemp puts the staging folder
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    orphan = runtime_dir() / f"{RUNTIME_SOCKET_PREFIX}{int(gone.stdout)}-0123456789ab.sock"
    live = runtime_dir() / f"{RUNTIME_SOCKET_PREFIX}{os.getppid()}-0123456789ab.sock"
    orphan.touch()
    live.touch()
    early = EarlyChild("cpu", keep_staging=False)
    try:
        assert early.socket_path.parent == runtime_dir()
        assert not orphan.exists() and live.exists()
    finally:
        early.close()
        live.unlink()
    assert not early.socket_path.exists()


def _evaluate_with(early: Any, workload_sizes: tuple[int, ...]) -> tuple[list[str], list[str]]:
    """The ADD problem evaluated on the CPU with ``early`` offered: its statuses and its -v lines."""
    from sol_execbench.evaluate.api import evaluate

    logs: list[str] = []
    try:
        traces = evaluate(add_definition(), workloads(*workload_sizes), solution(ADD), dict(LIGHT_CONFIG),
                          device="cpu", use_warm_pool=False, early_child=early, on_log=logs.append)
    finally:
        early.close()
    return [t.evaluation.status.value for t in traces], logs


@pytest.mark.parametrize("started_for, variable, why", [
    ("cpu", "CUDA_MODULE_LOADING", "the job's start-up environment differs from the one it started with"),
    (None, None, "it started for device auto, the job is for cpu"),
])
def test_an_early_child_that_does_not_fit_gives_way_to_a_fresh_one_and_says_why(tmp_path: Path, monkeypatch,
                                                                                started_for, variable, why):
    from sol_execbench.evaluate.parent.early_child import EarlyChild

    for name, value in cli_env(tmp_path).items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("CUDA_MODULE_LOADING", raising=False)
    early = EarlyChild(started_for, keep_staging=False)
    if variable is not None:
        monkeypatch.setenv(variable, "EAGER")  # read as torch starts: the early child differs
    statuses, logs = _evaluate_with(early, (8,))
    assert statuses == ["PASSED"]
    assert f"[sol-execbench] early child not used: {why}; a fresh child ran the job" in logs
    assert early.proc.returncode is not None and early.proc.returncode != 0  # ended, never handed its job
    assert not early.staging.exists()


def test_an_early_child_that_fits_runs_the_api_evaluation(tmp_path: Path, monkeypatch):
    from sol_execbench.evaluate.parent.early_child import EarlyChild

    for name, value in cli_env(tmp_path).items():
        monkeypatch.setenv(name, value)
    early = EarlyChild("cpu", keep_staging=False)
    statuses, logs = _evaluate_with(early, (8, 16))
    assert statuses == ["PASSED", "PASSED"]
    assert not any("early child not used" in line for line in logs)
    assert early.handed  # it ran the job; its exit, after it reported the end, is not awaited
    assert poll_until(lambda: early.proc.poll() is not None, 10.0)
    assert not early.staging.exists()


def _own_triton_key(env: dict[str, str] | None = None) -> str:
    """The key a fresh process's Triton computes for its cache."""
    done = subprocess.run([sys.executable, "-c", "from triton.runtime.cache import triton_key; print(triton_key())"],
                          capture_output=True, text=True, timeout=120, check=True, env=env)
    return done.stdout.strip()


def test_the_triton_key_written_ahead_is_the_one_triton_computes(tmp_path: Path):
    """The harness's process writes Triton's key to the run's private folder whatever becomes of
    the driver utilities (no GPU here: their build fails, and is left to the child)."""
    pytest.importorskip("triton")
    from sol_execbench.evaluate.parent.early_child import _TRITON_AHEAD
    from sol_execbench.sandbox import triton_key_file

    path = triton_key_file(tmp_path)
    path.parent.mkdir(parents=True)
    env = dict(os.environ, TRITON_CACHE_DIR=str(tmp_path / "triton"))
    subprocess.run([sys.executable, "-P", "-c", _TRITON_AHEAD, "cuda", str(path)], env=env, cwd=str(tmp_path),
                   timeout=300, check=True, capture_output=True)
    record = json.loads(path.read_text())
    assert record["key"] == _own_triton_key(env)
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no partial file left


KEY_PROBE = """import triton.runtime.cache as cache
import triton.runtime.autotuner as autotuner

def run(a, b):
    if cache.triton_key() != {planted!r} or autotuner.triton_key() != {planted!r}:
        raise RuntimeError("Triton's key is its own: " + cache.triton_key()[:24])
    return a + b
"""


@pytest.mark.parametrize("names_this_triton", [True, False], ids=["this-triton", "another-version"])
def test_the_child_takes_the_triton_key_written_ahead_where_it_names_its_triton(tmp_path: Path, monkeypatch,
                                                                               names_this_triton: bool):
    """Read from the run's private folder before solution code runs, installed where Triton looks
    it up; a record of another Triton is left alone."""
    triton = pytest.importorskip("triton")
    from sol_execbench.evaluate.api import evaluate
    from sol_execbench.evaluate.parent.early_child import EarlyChild
    from sol_execbench.sandbox import triton_key_file

    for name, value in cli_env(tmp_path).items():
        monkeypatch.setenv(name, value)
    planted = f"{triton.__version__}-planted-for-the-test"
    early = EarlyChild("cpu", keep_staging=False)
    path = triton_key_file(early.staging)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"triton": os.path.dirname(os.path.abspath(triton.__file__)),
                                "key": planted if names_this_triton else "0.0.1-" + planted}))
    try:
        traces = evaluate(add_definition(), workloads(8), solution(KEY_PROBE.format(planted=planted)),
                          dict(LIGHT_CONFIG), device="cpu", use_warm_pool=False, early_child=early)
    finally:
        early.close()
    if names_this_triton:
        assert [t.evaluation.status.value for t in traces] == ["PASSED"], traces[0].evaluation.log
    else:
        assert [t.evaluation.status.value for t in traces] == ["RUNTIME_ERROR"]
        assert "Triton's key is its own" in traces[0].evaluation.log


def _driver_utility_keys(cache: Path) -> set[str]:
    """The Triton cache entries holding driver utilities (cuda_utils, hip_utils)."""
    return {entry.name for entry in cache.iterdir() if entry.is_dir()
            and any(f.name.startswith(("cuda_utils", "hip_utils")) for f in entry.iterdir())} if cache.is_dir() else set()


def test_no_triton_driver_build_for_a_cpu_evaluation(tmp_path: Path, monkeypatch):
    from sol_execbench.evaluate.parent.early_child import EarlyChild

    for name, value in cli_env(tmp_path).items():
        monkeypatch.setenv(name, value)
    early = EarlyChild("cpu", keep_staging=False)
    try:
        early.prepare_triton()
        assert early._triton_ahead is None
    finally:
        early.close()
    assert not early.staging.exists()


@pytest.mark.gpu
def test_triton_driver_utilities_built_ahead_are_those_the_child_looks_up(tmp_path: Path):
    """Built by the harness beside the early child, under the key a process of the run's own
    environment computes for them: its first Triton kernel finds them in the cache. Triton's own
    cache key is written beside them."""
    pytest.importorskip("triton")
    from sol_execbench.evaluate.parent.early_child import EarlyChild
    from sol_execbench.sandbox import triton_key_file

    early = EarlyChild(None, keep_staging=False)
    try:
        early.prepare_triton()
        assert early._triton_ahead is not None and early._triton_ahead.wait(timeout=300) == 0
        ahead = _driver_utility_keys(early.staging / "run" / "triton")
        key = json.loads(triton_key_file(early.staging).read_text())["key"]  # the folder goes at close()
    finally:
        early.close()
    assert len(ahead) == 1
    own = tmp_path / "triton"
    subprocess.run([sys.executable, "-c", "import torch, triton; torch.zeros(1, device='cuda'); "
                    "triton.runtime.driver.active.utils"],
                   env=dict(os.environ, TRITON_CACHE_DIR=str(own)), check=True, timeout=300)
    assert _driver_utility_keys(own) == ahead
    assert key == _own_triton_key()


def test_a_child_socket_appears_only_once_it_listens(tmp_path: Path, monkeypatch):
    """The evaluation connects as soon as the path exists: a path seen before ``listen`` would
    have its connection refused, and the child would be discarded for a fresh one."""
    import socket

    from sol_execbench.platform.host import listening_socket

    path = str(tmp_path / ".early-child.sock")
    seen_at_listen: list[bool] = []
    real_listen = socket.socket.listen
    monkeypatch.setattr(socket.socket, "listen",
                        lambda self, *args: seen_at_listen.append(os.path.exists(path)) or real_listen(self, *args))
    with listening_socket(path) as listener:
        assert seen_at_listen == [False]
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.connect(path)
            accepted, _ = listener.accept()
            accepted.close()
        assert oct(os.stat(path).st_mode & 0o777) == oct(0o600)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".early-child.sock"]


def test_sockets_of_processes_gone_are_removed_bound_or_pending():
    """A child killed between binding its socket and listening leaves it under its pending name."""
    import uuid

    from sol_execbench.platform.host import pending_socket_path, remove_orphaned_sockets, runtime_dir

    prefix = f"test-{uuid.uuid4().hex[:8]}-"  # the runtime folder is shared: only this test's files
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    made = []
    for pid in (gone.pid, os.getpid()):
        path = runtime_dir() / f"{prefix}{pid}-0123.sock"
        made += [path, Path(pending_socket_path(str(path)))]
    try:
        for path in made:
            path.touch()
        remove_orphaned_sockets(prefix)
        assert [path.exists() for path in made] == [False, False, True, True]
    finally:
        for path in made:
            path.unlink(missing_ok=True)
