"""A run killed at any moment keeps every finished trace and leaves no process behind; -o is
appended to under a lock and never an input; a failed write is one error line. Real CLI
processes and real signals."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from .problems import (KILLS_PARENT, cli_problem, kill_after_first_trace, poll_until, process_alive, run_processes,
                       staging_left, start_cli, trace_lines)


def _start(tmp_path: Path, problem: Path, out: Path, *extra: str) -> subprocess.Popen:
    return start_cli(tmp_path, problem, out, "--no-warm-pool", *extra)


@pytest.mark.parametrize("signum, code", [(signal.SIGKILL, -9), (signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_kill_after_first_trace_keeps_it_and_ends_the_child(tmp_path: Path, signum: int, code: int):
    run, child, parent, stderr = kill_after_first_trace(tmp_path, tmp_path / "out.jsonl", signum, "--no-warm-pool")
    assert run.returncode == code, stderr
    assert parent != run.pid  # the supervisor stands between the CLI and the child
    assert poll_until(lambda: not process_alive(child), 5.0), "the evaluation child outlived the CLI"
    assert poll_until(lambda: staging_left(tmp_path) == [], 5.0), staging_left(tmp_path)


def test_rerun_appends_and_says_what_it_supersedes(tmp_path: Path):
    problem = cli_problem(tmp_path, "def run(a, b):\n    return a + b\n", sizes=(8, 16))
    out = tmp_path / "out.jsonl"
    first = _start(tmp_path, problem, out)
    first.communicate(timeout=120)
    second = _start(tmp_path, problem, out, "--only", "w1-16")
    _, stderr = second.communicate(timeout=120)
    assert first.returncode == 0 and second.returncode == 0, stderr
    assert [t["workload"]["uuid"] for t in trace_lines(out)] == ["w0-8", "w1-16", "w1-16"]
    assert "already holds 2 line(s)" in stderr and "supersede 1 earlier trace" in stderr


def test_two_runs_on_one_output_keep_every_line(tmp_path: Path):
    problem = cli_problem(tmp_path, "def run(a, b):\n    return a + b\n", sizes=(8, 16))
    out = tmp_path / "out.jsonl"
    runs = [_start(tmp_path, problem, out) for _ in range(2)]
    for run in runs:
        run.communicate(timeout=180)
        assert run.returncode == 0
    traces = trace_lines(out)
    assert len(traces) == 4 and [t["workload"]["uuid"] for t in traces] == ["w0-8", "w1-16"] * 2


@pytest.mark.parametrize("name", ["definition.json", "workload.jsonl", "solution.json", "light.json", "kernel.py"])
def test_output_naming_an_input_is_refused(tmp_path: Path, name: str):
    problem = cli_problem(tmp_path, "def run(a, b):\n    return a + b\n", sizes=(8,))
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
    problem = cli_problem(tmp_path, "def run(a, b):\n    return a + b\n", sizes=(8, 16))
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
    problem = cli_problem(tmp_path, SETSID_DAEMON, sizes=(8,))
    run = _start(tmp_path, problem, tmp_path / "out.jsonl")
    run.communicate(timeout=120)
    daemon = int((tmp_path / "hang.pid").read_text())
    assert poll_until(lambda: not process_alive(daemon), 5.0), "the solution's daemon outlived the run"


def test_a_solution_that_kills_its_parent_gets_a_trace(tmp_path: Path):
    problem = cli_problem(tmp_path, KILLS_PARENT, sizes=(8, 64, 16))
    out = tmp_path / "out.jsonl"
    run = _start(tmp_path, problem, out)
    _, stderr = run.communicate(timeout=120)
    assert run.returncode == 1, stderr
    traces = {t["workload"]["uuid"]: t["evaluation"] for t in trace_lines(out)}
    assert traces["w0-8"]["status"] == "PASSED" and traces["w2-16"]["status"] == "PASSED"
    assert traces["w1-64"]["status"] == "RUNTIME_ERROR"
    assert "parent" in traces["w1-64"]["log"]


HANGS = """import time

def run(a, b):
    while True:
        time.sleep(0.1)
"""


@pytest.mark.parametrize("ending", ["timeout", "SIGKILL", "SIGTERM"])
def test_no_process_of_a_hung_run_is_left(tmp_path: Path, ending: str):
    """A hung solution ended by --timeout, or the CLI killed while it hangs: within 5 s no process
    of the run is left (no supervisor, no evaluation child, no zombie of either). Twice each: a
    leftover of the first run must not hide behind the second."""
    problem = cli_problem(tmp_path, HANGS, sizes=(8, 16))
    marker = str(tmp_path / "tmp")  # every process of the run inherits TMPDIR
    for attempt in range(2):
        out = tmp_path / f"out{attempt}.jsonl"
        run = _start(tmp_path, problem, out, "--timeout", "2" if ending == "timeout" else "120")
        if ending != "timeout":
            # Killed while the child hangs: its supervisor and the child both exist by then.
            assert poll_until(lambda: len(run_processes(marker)) >= 3), run_processes(marker)
            time.sleep(1.0)
            run.send_signal(getattr(signal, ending))
        _, stderr = run.communicate(timeout=120)
        assert "Traceback" not in stderr, stderr
        if ending == "timeout":
            assert run.returncode == 1 and {t["evaluation"]["status"] for t in trace_lines(out)} == {"TIMEOUT"}
        assert poll_until(lambda: run_processes(marker) == [], 5.0), run_processes(marker)
        assert poll_until(lambda: staging_left(tmp_path) == [], 5.0), staging_left(tmp_path)


class _Interrupted(BaseException):
    """What a stopped dataset run raises in an evaluation's thread (an asynchronous exception)."""


def test_a_staging_folder_whose_removal_was_cut_short_is_removed_as_the_run_ends(tmp_path: Path, monkeypatch):
    from sol_execbench.evaluate import evaluate
    from sol_execbench.evaluate.parent import runner

    from .problems import LIGHT_CONFIG, add_definition, solution, workloads, write_problem

    root = write_problem(tmp_path / "add", add_definition(), workloads(8), solution("def run(a, b):\n    return a + b\n"))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(runner.tempfile, "tempdir", None)
    real_rmtree = runner.shutil.rmtree

    def cut_short(path, *args, **kwargs):
        if Path(path).name.startswith("sol-execbench-"):
            raise _Interrupted()  # lands in the evaluation's own removal
        return real_rmtree(path, *args, **kwargs)

    monkeypatch.setattr(runner.shutil, "rmtree", cut_short)
    with pytest.raises(_Interrupted):
        evaluate(root / "definition.json", root / "workload.jsonl", root / "solution.json", LIGHT_CONFIG)
    left = [p for p in (tmp_path / "tmp").glob("sol-execbench-*")]
    assert len(left) == 1
    monkeypatch.setattr(runner.shutil, "rmtree", real_rmtree)
    assert runner.remove_live_staging() == left and not left[0].exists()
    assert runner.remove_live_staging() == []
    # a staging folder the user keeps is never removed for them
    evaluate(root / "definition.json", root / "workload.jsonl", root / "solution.json", LIGHT_CONFIG, keep_staging=True)
    kept = [p for p in (tmp_path / "tmp").glob("sol-execbench-*")]
    assert len(kept) == 1 and runner.remove_live_staging() == [] and kept[0].exists()


def test_child_pids_lists_a_child_a_worker_thread_started():
    """Each thread lists only the children it started itself: a child started by a thread that is
    still running is found too, and kill_descendants ends it."""
    import os
    import sys
    import threading

    from sol_execbench.platform.lifetime import child_pids, kill_descendants

    started: dict[str, subprocess.Popen] = {}
    release = threading.Event()

    def start_and_wait() -> None:
        started["child"] = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        release.wait()

    worker = threading.Thread(target=start_and_wait)
    worker.start()
    try:
        assert poll_until(lambda: "child" in started, 10.0)
        child = started["child"]
        assert child.pid in child_pids(os.getpid())
        assert kill_descendants(spare=set(child_pids(os.getpid())) - {child.pid}) >= 1
        assert poll_until(lambda: not process_alive(child.pid), 5.0)  # killed and reaped
    finally:
        release.set()
        worker.join()
        if started["child"].poll() is None:
            started["child"].kill()
            started["child"].wait()
