"""The build child is sandboxed and the build cache checks what it serves (issue 23): the compile
worker writes only its build folder, each entry's manifest records its library's sha256, and a
library changed after it was built is rebuilt and reported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sol_execbench.build import builder_for
from sol_execbench.build.base import write_sources
from sol_execbench.sandbox import file_sha256
from sol_execbench.sandbox.landlock import abi_version

from .helpers import tiny_solution

pytestmark = pytest.mark.slow
ABI, WHY_NO_LANDLOCK = abi_version()


def _prepare(solution, stage: Path):
    source_dir = stage / "solution"
    write_sources(solution, source_dir)
    builder = builder_for(solution)
    return builder, source_dir, builder.prepare(solution, source_dir, vendor="cpu", timeout_s=300.0, use_cache=True)


def test_manifest_records_the_library_digest_and_a_changed_library_is_rebuilt(tmp_path, fresh_cache):
    solution = tiny_solution(["-DOFFSET=11"])
    builder, src, cold = _prepare(solution, tmp_path / "a")
    library = Path(cold.artifacts["library"])
    manifest = json.loads((library.parent / "manifest.json").read_text())
    assert manifest["sha256"] == file_sha256(library) == cold.artifacts["sha256"]

    with open(library, "ab") as fh:  # what a solution outside any sandbox could do to a cached build
        fh.write(b"planted")
    builder, src, again = _prepare(solution, tmp_path / "b")
    assert again.cached is False
    assert any("was rebuilt" in w and "sha256" in w for w in again.warnings), again.warnings
    assert file_sha256(Path(again.artifacts["library"])) == again.artifacts["sha256"]
    assert builder.load(solution, src, again.artifacts)(1) == 12


def test_a_library_changed_after_the_check_is_not_loaded(tmp_path, fresh_cache):
    from sol_execbench.build import BuildFailure

    solution = tiny_solution(["-DOFFSET=12"])
    builder, src, outcome = _prepare(solution, tmp_path / "a")
    with open(outcome.artifacts["library"], "ab") as fh:
        fh.write(b"planted")
    with pytest.raises(BuildFailure, match="changed after the build was checked"):
        builder.load(solution, src, outcome.artifacts)


@pytest.mark.skipif(ABI < 1, reason=f"needs Landlock ({WHY_NO_LANDLOCK})")
def test_compile_worker_runs_under_landlock(tmp_path, fresh_cache):
    _, _, outcome = _prepare(tiny_solution(["-DOFFSET=13"]), tmp_path / "a")
    log = (Path(outcome.artifacts["library"]).parent / "build.log").read_text()
    assert f"build sandbox: landlock {ABI}" in log, log


@pytest.mark.skipif(ABI < 1, reason=f"needs Landlock ({WHY_NO_LANDLOCK})")
def test_honest_cpp_solution_passes_under_the_sandbox(cpp_example_run):
    traces, output = cpp_example_run
    for trace in traces:
        assert trace.evaluation.status.value == "PASSED", output
        assert trace.evaluation.isolation.mechanism == "landlock" and trace.evaluation.isolation.filesystem


OVERWRITE_CACHED_LIBRARY = '''
import os
from pathlib import Path

def run(a, b):
    from sol_execbench.build.cache import cache_root
    for library in Path(cache_root()).rglob("*.so"):
        try:
            with open(library, "r+b") as fh:
                fh.write(b"planted")
        except OSError:
            pass
    return a + b
'''


@pytest.mark.skipif(ABI < 1, reason=f"needs Landlock ({WHY_NO_LANDLOCK})")
def test_overwriting_a_cached_library_is_refused_and_a_reward_hack(tmp_path, fresh_cache, monkeypatch):
    from tests.problems import add_definition, solution, workloads, write_problem

    from .helpers import run_cli

    _, _, built = _prepare(tiny_solution(["-DOFFSET=14"]), tmp_path / "a")
    library = Path(built.artifacts["library"])
    before = file_sha256(library)
    root = write_problem(tmp_path / "p", add_definition(), workloads(16), solution(OVERWRITE_CACHED_LIBRARY))
    (root / "light.json").write_text(json.dumps({"warmup_runs": 1, "iterations": 3, "correctness_rounds": 2}))
    monkeypatch.setenv("SOL_EXECBENCH_ALLOW_CPU_TIMING", "1")
    traces, output = run_cli(str(root), "--config", str(root / "light.json"), "--device", "cpu", "--no-warm-pool")
    assert [t.evaluation.status.value for t in traces] == ["REWARD_HACK"], output
    assert str(library) in traces[0].evaluation.log and "cache" in traces[0].evaluation.log
    assert file_sha256(library) == before
