"""Every status, provoked for real through the evaluator (child process and all)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from safetensors.torch import load_file

from sol_execbench import evaluate

from .conftest import LIGHT_CONFIG
from .problems import add_definition, poll_until, solution, workloads

ADD = "def run(a, b):\n    return a + b\n"


def status_of(traces) -> list[str]:
    return [t.evaluation.status.value for t in traces]


def run(code: str, *sizes: int, dps: bool = False, definition: dict | None = None, config: dict | None = None,
        language: str = "pytorch", **options):
    return evaluate(definition or add_definition(), workloads(*(sizes or (16,))),
                    solution(code, dps=dps, language=language), config or LIGHT_CONFIG, **options)


@pytest.mark.parametrize("code,status,words", [
    ("def run(a, b):\n    return (a + b)[:-1]\n", "INCORRECT_SHAPE", "shape"),
    ("def run(a, b):\n    return (a + b).double()\n", "INCORRECT_DTYPE", "dtype"),
    ("def run(a, b):\n    return a - b\n", "INCORRECT_NUMERICAL", "matched ratio"),
    ("def run(a, b):\n    raise ValueError('boom from the solution')\n", "RUNTIME_ERROR", "boom from the solution"),
    ("def run(a, b)\n    return a + b\n", "COMPILE_ERROR", "syntax"),
    ("import torch\ndef run(a, b):\n    return (a + b).as_subclass(type('Lazy', (torch.Tensor,), {}))\n",
     "REWARD_HACK", "plain torch.Tensor"),
    ("import sol_execbench.evaluate.child.timing as t\nt.measure = lambda *a, **k: None\ndef run(a, b):\n    return a + b\n",
     "REWARD_HACK", "measure"),
])
def test_status_is_provoked(code: str, status: str, words: str):
    (trace,) = run(code)
    assert trace.evaluation.status.value == status
    assert words in trace.evaluation.log
    if status == "INCORRECT_NUMERICAL":
        assert trace.evaluation.correctness.max_absolute_error > 0


def test_missing_dsl_package_is_compile_error_naming_it():
    (trace,) = run(ADD, language="cute_dsl")
    assert trace.evaluation.status.value == "COMPILE_ERROR"
    assert "nvidia-cutlass-dsl" in trace.evaluation.log


def test_invalid_reference():
    d = add_definition()
    d["reference"] = "def run(a, b):\n    raise RuntimeError('reference is broken')\n"
    (trace,) = run(ADD, definition=d)
    assert trace.evaluation.status.value == "INVALID_REFERENCE"
    assert "reference is broken" in trace.evaluation.log


NAN_AT_ZERO = "def run(a, b):\n    c = a + b\n    c[0] = float('nan')\n    return c\n"


@pytest.mark.parametrize("code", [NAN_AT_ZERO, "def run(a, b):\n    return (a + b)[:-1]\n"])
def test_a_reference_that_is_not_finite_is_invalid_whatever_the_solution_returns(code: str):
    """The same NaN on both sides, and a solution of the wrong shape (whose outputs are never
    compared with the reference's): the reference is searched either way."""
    d = add_definition()
    d["reference"] = NAN_AT_ZERO
    (trace,) = run(code, definition=d)
    assert trace.evaluation.status.value == "INVALID_REFERENCE"
    assert "not finite" in trace.evaluation.log and "NaN" in trace.evaluation.log


def test_allowed_minus_inf_in_the_reference_passes_where_the_solution_matches():
    d = add_definition()
    minus_inf = "def run(a, b):\n    c = a + b\n    c[1] = float('-inf')\n    return c\n"
    d["reference"] = minus_inf
    wls = workloads(16)
    wls[0]["tolerance"] = {"allow_negative_inf": True}
    (trace,) = evaluate(d, wls, solution(minus_inf), LIGHT_CONFIG)
    assert trace.evaluation.status.value == "PASSED", trace.evaluation.log


def test_unwritten_destination_elements_fail():
    code = "def run(a, b, c):\n    c[: c.shape[0] // 2] = (a + b)[: c.shape[0] // 2]\n"
    (trace,) = run(code, dps=True)
    assert trace.evaluation.status.value == "INCORRECT_NUMERICAL"
    assert trace.evaluation.correctness.has_nan


def test_destination_passing_style_passes():
    (trace,) = run("def run(a, b, c):\n    c.copy_(a + b)\n", dps=True)
    assert trace.evaluation.status.value == "PASSED", trace.evaluation.log


def test_timeout_keeps_finished_workloads(tmp_path: Path):
    code = "import time\ndef run(a, b):\n    if a.numel() > 100:\n        time.sleep(600)\n    return a + b\n"
    traces = run(code, 8, 1000, 8, timeout_s=20)
    assert status_of(traces) == ["PASSED", "TIMEOUT", "TIMEOUT"]
    assert "while this workload was running" in traces[1].evaluation.log
    assert "before this workload started" in traces[2].evaluation.log


def test_segfault_costs_one_workload_and_the_rest_go_on(tmp_path: Path):
    code = ("import ctypes\ndef run(a, b):\n    if a.numel() == 1000:\n        ctypes.string_at(0)\n"
            "    return a + b\n")
    seen = []
    traces = run(code, 8, 1000, 8, on_trace=seen.append)
    assert status_of(traces) == ["PASSED", "RUNTIME_ERROR", "PASSED"]
    assert "SIGSEGV" in traces[1].evaluation.log
    assert [t.workload.uuid for t in seen][:1] == ["w0-8"]  # delivered as it happened, before the crash


def test_exit_during_import_gives_every_workload_a_trace_and_a_sidecar(tmp_path: Path):
    code = "import os\nprint('about to leave')\nos._exit(3)\n"
    out = tmp_path / "traces.jsonl"
    traces = run(code, 8, 16, output_path=out)
    assert status_of(traces) == ["RUNTIME_ERROR", "RUNTIME_ERROR"]
    assert "exited with code 3" in traces[0].evaluation.log and "about to leave" in traces[0].evaluation.log
    sidecar = json.loads(out.with_name("traces.jsonl.no-trace.json").read_text())
    assert "about to leave" in sidecar["stdout_tail"] and sidecar["stdout_lines"] >= 1
    assert sidecar["child_runs"][0]["returncode"] == 3


def test_host_memory_limit_ends_runaway_allocation():
    code = ("import time\nblocks = []\ndef run(a, b):\n    for _ in range(400):\n"
            "        blocks.append(bytearray(64 * 2**20))\n        time.sleep(0.005)\n    return a + b\n")
    (trace,) = run(code, memory_limit_bytes=1536 * 2**20)
    assert trace.evaluation.status.value == "RUNTIME_ERROR"
    assert "host memory limit exceeded" in trace.evaluation.log


def test_lock_clocks_without_locked_clocks(monkeypatch):
    monkeypatch.delenv("SOL_EXECBENCH_CLOCKS_LOCKED", raising=False)
    (trace,) = run(ADD, config={**LIGHT_CONFIG, "lock_clocks": True})
    assert trace.evaluation.status.value == "RUNTIME_ERROR"
    assert "clocks are not locked" in trace.evaluation.log


def test_the_cpu_times_without_any_setting_and_says_so(monkeypatch):
    monkeypatch.delenv("SOL_EXECBENCH_ALLOW_CPU_TIMING", raising=False)
    (trace,) = run(ADD)
    assert trace.evaluation.status.value == "PASSED", trace.evaluation.log
    timing = trace.evaluation.performance.solution_timing
    assert timing.method == "cpu" and timing.device_time_ms is None and timing.host_bound is True


def test_dump_failures_reproduces_the_failure(tmp_path: Path):
    dump = tmp_path / "dumps"
    (trace,) = run("def run(a, b):\n    return a + b + (a > 1.5).float()\n", 4096, dump_failures=dump)
    assert trace.evaluation.status.value == "INCORRECT_NUMERICAL"
    folder = dump / "vector_add" / "w0-4096"
    note = json.loads((folder / "failure.json").read_text())
    tensors = load_file(str(folder / "tensors.safetensors"))
    a, b = tensors["input.a"], tensors["input.b"]
    assert (tensors["reference.c"] - (a + b)).abs().max() == 0
    index = tuple(note["worst"]["index"])
    assert a[index] > 1.5 and abs(note["worst"]["solution_value"] - note["worst"]["reference_value"] - 1) < 1e-5
    assert isinstance(note["seed"], int)


def test_processes_the_solution_leaves_behind_are_killed_even_in_groups_of_their_own(tmp_path: Path):
    """A helper process moved to a process group of its own (as ninja does with every command)
    escapes a group kill; the whole session of the evaluation child is killed instead."""
    import os

    pid_file = tmp_path / "helper.pid"
    helper = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(300)"
    code = ("import os, subprocess, sys, time\n"
            f"subprocess.Popen([sys.executable, '-c', {helper!r}], process_group=0)\n"
            "def run(a, b):\n"
            f"    for _ in range(200):  # the helper is up before the evaluation can end\n"
            f"        if os.path.exists({str(pid_file)!r}):\n            break\n        time.sleep(0.05)\n"
            "    return a + b\n")
    # isolation off: the helper reports its pid in a file outside the run, which the sandbox refuses
    traces = evaluate(add_definition(), workloads(8), solution(code), LIGHT_CONFIG, timeout_s=60, isolation="off")
    assert traces[0].evaluation.status.value == "PASSED", traces[0].evaluation.log
    pid = int(pid_file.read_text())

    def state() -> list[bytes]:
        with open(f"/proc/{pid}/stat", "rb") if os.path.exists(f"/proc/{pid}") else open(os.devnull, "rb") as fh:
            return fh.read().rsplit(b")", 1)[-1].split()[:1]

    # The run kills the child's session as the evaluation ends and does not wait for the exits: a
    # helper just sent SIGKILL may still be running (R) for a moment on a loaded host.
    assert poll_until(lambda: state() in ([], [b"Z"]), 10), f"helper {pid} still running: {state()}"
