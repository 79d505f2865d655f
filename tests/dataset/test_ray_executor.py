"""``--executor ray`` on the CPU: a small suite run by the local executor and by Ray gives the same
files, records and summary; either run's finished problems are reused by the other; a run attached
to a started Ray head (``--ray-address``) evaluates what is missing there. Ray's start-up is the cost,
so one test item makes the runs and checks each point with a helper of its own; SIGTERM to a run
attached to the head ends the evaluation its task was running. The bad-input paths
(no Ray, no head at the address, flags that do not go with Ray) need no Ray instance."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from sol_execbench.dataset.discovery import DatasetUsageError
from sol_execbench.dataset.options import RunOptions, check_combination
from sol_execbench.dataset.ray_executor import RAY_EXTRA
from sol_execbench.schema.dataset_run import DatasetSummary, RunRecord
from sol_execbench.schema.trace_files import read_traces

from ..problems import poll_until, process_alive, run_processes
from .conftest import CONFORMANCE, add_problem, build_suite, dataset_command, light_config, run_env

SUITE = {"L1/linear_backward": CONFORMANCE / "samples" / "linear_backward",
         "L2/linear_backward": CONFORMANCE / "examples" / "pytorch" / "linear_backward"}
KEYS = ("L1/add", *SUITE)
# Ray's sockets live below its temp folder, whose path must stay short (the tests' TMPDIR is long);
# token authentication is for shared clusters, not a head the test starts for itself.
RAY_ENV = {"RAY_TMPDIR": "/tmp", "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}


def _env(folder: Path, **extra: str) -> dict[str, str]:
    folder.mkdir(parents=True, exist_ok=True)
    return {**run_env(folder), **RAY_ENV, **extra}


def _run(folder: Path, root: Path, out: Path, config: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(dataset_command(root, out, config, *extra), env=_env(folder), capture_output=True,
                          text=True, timeout=240)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class RayHead:
    """``ray start --head --block`` on two CPUs; ended by SIGTERM to that one process, which stops
    everything it started."""

    def __init__(self, folder: Path):
        self.port = _free_port()
        command = [sys.executable, "-c", "from ray.scripts.scripts import main; main()", "start", "--head",
                   f"--port={self.port}", "--num-cpus=2", "--num-gpus=0", "--include-dashboard=false", "--block",
                   "--disable-usage-stats"]
        self.process = subprocess.Popen(command, env=_env(folder), stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, start_new_session=True)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def wait_until_up(self) -> bool:
        def answers() -> bool:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return True
            except OSError:
                return False
        return poll_until(answers, 60)

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=60)


@dataclass
class Runs:
    root: Path
    config: Path
    local_out: Path
    ray_out: Path
    local: subprocess.CompletedProcess
    ray: subprocess.CompletedProcess
    ray_marker: str  # in the environment of every process of the Ray run
    leftovers: list[str]  # processes of the Ray run (its local Ray instance too) still there after it


def _suite(folder: Path) -> Path:
    root = build_suite(folder / "suite", SUITE)
    add_problem(root, "L1/add")
    return root


def _local_and_ray_runs(folder: Path) -> Runs:
    root, config = _suite(folder), light_config(folder)
    local_out, ray_out = folder / "out-local", folder / "out-ray"
    local = _run(folder / "local", root, local_out, config)
    ray = _run(folder / "ray", root, ray_out, config, "--executor", "ray")
    marker = str(folder / "ray" / "tmp")
    poll_until(lambda: not run_processes(marker), 10.0)
    return Runs(root, config, local_out, ray_out, local, ray, marker, run_processes(marker))


def _both_pass(runs: Runs) -> None:
    for result in (runs.local, runs.ray):
        assert result.returncode == 0, result.stderr + result.stdout
        assert "Traceback" not in result.stderr and "3 to evaluate, 0 reused" in result.stdout, result.stdout
    assert "serial on Ray (local instance): " in runs.ray.stdout, runs.ray.stdout


def _the_ray_run_leaves_no_process(runs: Runs) -> None:
    assert runs.leftovers == [], runs.leftovers


def _the_same_files(runs: Runs) -> None:
    def files(out: Path) -> list[str]:
        return sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert files(runs.local_out) == files(runs.ray_out)
    for key in KEYS:
        local, ray = (read_traces(out / key / "traces.jsonl") for out in (runs.local_out, runs.ray_out))
        assert [(t.definition, t.solution, t.workload.uuid, t.evaluation.status.value) for t in local] == \
               [(t.definition, t.solution, t.workload.uuid, t.evaluation.status.value) for t in ray], key
        assert (runs.local_out / key / "solution.json").read_bytes() == (runs.ray_out / key / "solution.json").read_bytes()


def _the_same_run_records(runs: Runs) -> None:
    for key in KEYS:
        local, ray = (RunRecord.model_validate_json((out / key / "run.json").read_text())
                      for out in (runs.local_out, runs.ray_out))
        assert local.hashes == ray.hashes, key  # what reuse compares: the same on both executors
        assert (local.problem, local.workloads, local.statuses, local.all_passed) == \
               (ray.problem, ray.workloads, ray.statuses, ray.all_passed)
        assert local.device == "cpu" and ray.device.endswith(" cpu"), ray.device  # the node, then the device


def _the_same_summary(runs: Runs) -> None:
    local, ray = (DatasetSummary.model_validate_json((out / "summary.json").read_text())
                  for out in (runs.local_out, runs.ray_out))
    assert local.totals.statuses == ray.totals.statuses == {"PASSED": 8}
    assert [(p.problem, p.outcome, p.workloads) for p in local.problems] == \
           [(p.problem, p.outcome, p.workloads) for p in ray.problems]
    assert [c.category for c in local.categories] == [c.category for c in ray.categories] == ["L1", "L2"]
    assert ray.stopped is None and all(p.wall_s and p.wall_s > 0 for p in ray.problems)


def _reruns_reuse_the_other_executors_results(runs: Runs, folder: Path) -> None:
    before = {key: (runs.ray_out / key / "traces.jsonl").read_bytes() for key in KEYS}
    local_again = _run(folder / "local-again", runs.root, runs.ray_out, runs.config)
    assert local_again.returncode == 0 and "0 to evaluate, 3 reused" in local_again.stdout, local_again.stderr
    assert before == {key: (runs.ray_out / key / "traces.jsonl").read_bytes() for key in KEYS}
    # on a head started apart from the run: the local run's results stand, the one removed is evaluated there
    (runs.local_out / "L1/add" / "run.json").unlink()
    head = RayHead(folder / "head")
    try:
        assert head.wait_until_up()
        attached = _run(folder / "attached", runs.root, runs.local_out, runs.config, "--executor", "ray",
                        "--ray-address", head.address)
        stopped = _sigterm_while_a_task_hangs(folder / "stopped", head.address, runs.config)
    finally:
        head.stop()
    assert attached.returncode == 0, attached.stderr + attached.stdout
    assert "1 to evaluate, 2 reused" in attached.stdout and f"Ray ({head.address})" in attached.stdout
    record = RunRecord.model_validate_json((runs.local_out / "L1/add" / "run.json").read_text())
    assert record.all_passed and record.device.endswith(" cpu")
    assert not stopped.hung_alive, f"the hung evaluation (pid {stopped.hung_pid}) outlived the stopped run"
    assert stopped.result.returncode == 143 and "stopped by SIGTERM" in stopped.result.stderr, stopped.result.stderr
    assert "Traceback" not in stopped.result.stderr, stopped.result.stderr
    summary = DatasetSummary.model_validate_json((stopped.out / "summary.json").read_text())
    assert summary.stopped and not (stopped.out / "L1/hangs" / "run.json").exists()


@dataclass
class Stopped:
    out: Path
    result: subprocess.CompletedProcess
    hung_pid: int
    hung_alive: bool  # 15 s after the run ended


def _sigterm_while_a_task_hangs(folder: Path, address: str, config: Path) -> Stopped:
    """A run on the head whose one problem hangs in its evaluation, stopped by SIGTERM: it ends the
    task's evaluation on the worker (a process of the Ray head, not of the run)."""
    pid_file = folder / "hung.pid"
    reference = (f"import os, time\n\ndef run(a, b):\n    open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
                 "    time.sleep(300)\n    return a + b\n")
    root = add_problem(folder / "suite", "L1/hangs", reference=reference).parent.parent
    out = folder / "out"
    run = subprocess.Popen(dataset_command(root, out, config, "--executor", "ray", "--ray-address", address),
                           env=_env(folder / "run"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert poll_until(lambda: pid_file.exists() and pid_file.read_text(), 120), run.communicate(timeout=30)
    hung = int(pid_file.read_text())
    run.send_signal(signal.SIGTERM)
    stdout, stderr = run.communicate(timeout=60)
    alive = not poll_until(lambda: not process_alive(hung), 15.0)
    return Stopped(out, subprocess.CompletedProcess(run.args, run.returncode, stdout, stderr), hung, alive)


def test_ray_runs_like_the_local_executor_and_resumes_either(tmp_path: Path):
    pytest.importorskip("ray")
    runs = _local_and_ray_runs(tmp_path)
    _both_pass(runs)
    _the_ray_run_leaves_no_process(runs)
    _the_same_files(runs)
    _the_same_run_records(runs)
    _the_same_summary(runs)
    _reruns_reuse_the_other_executors_results(runs, tmp_path)


def _one_error_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 2, result.stderr + result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def test_no_head_at_the_address_exits_2_with_one_line(tmp_path: Path):
    pytest.importorskip("ray")
    root, config = add_problem(tmp_path / "suite", "L1/add").parent.parent, light_config(tmp_path)
    nobody = _run(tmp_path / "a", root, tmp_path / "out", config, "--executor", "ray", "--ray-address",
                  f"127.0.0.1:{_free_port()}")
    assert "--ray-address 127.0.0.1:" in _one_error_line(nobody) and "no Ray head answers there" in nobody.stderr
    malformed = _run(tmp_path / "b", root, tmp_path / "out", config, "--executor", "ray", "--ray-address", "headnode")
    assert "give HOST:PORT" in _one_error_line(malformed)
    assert not (tmp_path / "out" / "L1").exists()


def test_without_ray_installed_the_run_says_how_to_install_it(tmp_path: Path):
    """A ``ray`` package that cannot be imported, first on the path, stands for Ray not installed."""
    shadow = tmp_path / "shadow" / "ray"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('No module named ray')\n")
    root, config = add_problem(tmp_path / "suite", "L1/add").parent.parent, light_config(tmp_path)
    env = _env(tmp_path / "run")
    env["PYTHONPATH"] = str(tmp_path / "shadow") + os.pathsep + env["PYTHONPATH"]
    result = subprocess.run(dataset_command(root, tmp_path / "out", config, "--executor", "ray"), env=env,
                            capture_output=True, text=True, timeout=120)
    assert RAY_EXTRA in _one_error_line(result)


@pytest.mark.parametrize(("fields", "names"), [
    ({"execution_mode": "pipeline"}, "--execution-mode pipeline"),
    ({"gpu_jobs": "2"}, "--gpu-jobs 2"),
    ({"device": "cuda:1"}, "--device cuda:1"),
    ({"executor": "local", "ray_address": "head:6379"}, "--ray-address goes with --executor ray"),
])
def test_flags_that_do_not_go_with_ray_are_refused(tmp_path: Path, fields: dict, names: str):
    options = RunOptions(root=tmp_path, **{"executor": "ray", **fields})
    with pytest.raises(DatasetUsageError, match=names):
        check_combination(options)

