"""Native builds for real, through the CLI on the CPU: the bundled cpp example passes, a second
evaluation is served by the build cache, and compile errors, compile timeouts, missing compilers,
Python JIT builds and other vendors' languages each end in the right trace."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from sol_execbench.platform import vendor_hint

from .helpers import EXAMPLE, native_solution, run_cli, statuses, write_solution

pytestmark = pytest.mark.slow


def _cli(solution: Path, *extra: str, config: Path | None = None):
    args = [str(EXAMPLE), "--solution", str(solution), "--device", "cpu", *extra]
    return run_cli(*args, *(["--config", str(config)] if config else []))


def test_cpp_example_passes_end_to_end(cpp_example_run):
    traces, output = cpp_example_run
    assert len(traces) == 3, output
    for t in traces:
        ev = t.evaluation
        assert ev.status.value == "PASSED", f"{t.workload.uuid}: {ev.log}"
        assert ev.build.language == "cpp" and ev.build.build_time_s is not None
        assert ev.correctness.max_absolute_error == 0.0


def test_second_evaluation_is_a_cache_hit_without_compiling(cpp_example_run, native_env, light_config_file):
    assert statuses(cpp_example_run[0]) == {"PASSED"}
    entries = [p.parent for p in (native_env / "builds").glob("*/*/manifest.json")]
    libraries = {p: p.stat().st_mtime_ns for e in entries for p in e.glob("*.so")}
    traces, output = _cli(EXAMPLE / "solution_cpp.json", config=light_config_file)
    assert statuses(traces) == {"PASSED"}, output
    for t in traces:
        assert t.evaluation.build.cached is True
        assert t.evaluation.build.build_time_s < 5.0  # a lookup, not a compile
    assert {p: p.stat().st_mtime_ns for p in libraries} == libraries  # nothing was rebuilt


def test_compile_error_carries_the_compilers_first_errors(tmp_path, native_env):
    bad = native_solution("cpp", {"src/main.cpp": '#include "util.h"\nint f(int x) { return x +; }\n',
                                  "src/include/util.h": "#pragma once\n"}, "src/main.cpp::run")
    traces, output = _cli(write_solution(tmp_path / "bad.json", bad))
    assert statuses(traces) == {"COMPILE_ERROR"}, output
    log = traces[0].evaluation.log
    assert "src/main.cpp:2:" in log and "error: expected primary-expression" in log
    assert "return x +;" in log  # the source line gcc quotes
    assert "-isystem" not in log  # no compiler command lines
    assert len(log) < 3000


def _processes_mentioning(text: str) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmdline = fh.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(f"{pid}: {cmdline[:200]}")
    return found


def test_compile_timeout_is_a_timeout_and_stops_the_compiler(native_env):
    traces, output = _cli(EXAMPLE / "solution_cpp.json", "--compile-timeout", "6", "--no-build-cache",
                          "--keep-staging")
    assert statuses(traces) == {"TIMEOUT"}, output
    assert "compile timeout (6 s" in traces[0].evaluation.log  # 6 s: the compilers are running by then
    match = re.search(r"staging directory kept: (\S+)", output)
    assert match, output
    assert _processes_mentioning(match.group(1)) == []  # the worker, ninja and cc1plus were all killed
    shutil.rmtree(match.group(1), ignore_errors=True)


def test_missing_host_compiler_is_named(monkeypatch, native_env, tmp_path):
    monkeypatch.setenv("CXX", "/nonexistent/g++-99")
    sol = native_solution("cpp", {"main.cpp": "int x;\n"}, "main.cpp::run")
    traces, output = _cli(write_solution(tmp_path / "s.json", sol))
    assert statuses(traces) == {"COMPILE_ERROR"}, output
    log = traces[0].evaluation.log
    assert "/nonexistent/g++-99" in log and "CXX" in log and "install g++" in log


@pytest.mark.skipif(vendor_hint() != "cpu", reason="checks the refusal on a host without a GPU")
@pytest.mark.parametrize("name", ["solution_cuda.json", "solution_hip.json"])
def test_gpu_languages_are_not_buildable_on_a_cpu_host(name, native_env):
    traces, output = _cli(EXAMPLE / name)
    assert statuses(traces) == {"COMPILE_ERROR"}, output
    assert "not buildable here" in traces[0].evaluation.log


def test_python_solution_may_not_jit_compile_cpp(tmp_path, native_env, light_config_file):
    code = ("from torch.utils.cpp_extension import load_inline\n"
            "_ext = load_inline(name='sneaky', cpp_sources='int f() { return 1; }', functions=['f'])\n"
            "def run(x, y):\n    return x + y\n")
    sol = {"name": "jit_in_python", "definition": "vector_add_f32", "author": "tests",
           "spec": {"languages": ["pytorch"], "entry_point": "kernel.py::run", "destination_passing_style": False},
           "sources": [{"path": "kernel.py", "content": code}]}
    traces, output = _cli(write_solution(tmp_path / "py.json", sol), config=light_config_file)
    assert statuses(traces) == {"RUNTIME_ERROR"}, output
    log = traces[0].evaluation.log
    assert "load_inline" in log and "native language" in log and "cpp" in log
