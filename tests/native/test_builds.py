"""Real compiles through the native builder's API (prepare in the parent, load as the child would),
on small extensions so they stay cheap: the cache key, cache hits, concurrent builds of one key,
builds without the cache, link errors, a missing entry symbol, and nvcc's own errors."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest

from sol_execbench.build import BuildFailure, builder_for
from sol_execbench.build.base import write_sources
from sol_execbench.build.native import NativeBuilder
from sol_execbench.schema import Solution

from .helpers import native_solution, tiny_solution

pytestmark = pytest.mark.slow


def _prepare(solution: Solution, stage: Path, *, vendor: str = "cpu", use_cache: bool = True,
             timeout_s: float = 300.0):
    source_dir = stage / "solution"
    write_sources(solution, source_dir)
    builder = builder_for(solution)
    assert isinstance(builder, NativeBuilder)
    return builder, source_dir, builder.prepare(solution, source_dir, vendor=vendor, timeout_s=timeout_s,
                                                use_cache=use_cache)


def test_cache_key_cache_hit_and_rebuild_on_flag_change(tmp_path, fresh_cache):
    one = tiny_solution(["-O2", "-DOFFSET=1"])
    builder, src, cold = _prepare(one, tmp_path / "a")
    assert cold.cached is False and Path(cold.artifacts["library"]).is_relative_to(fresh_cache)
    assert builder.load(one, src, cold.artifacts)(41) == 42

    _, _, warm = _prepare(one, tmp_path / "b")
    assert warm.cached is True and warm.artifacts == cold.artifacts
    assert warm.build_time_s < cold.build_time_s

    two = tiny_solution(["-O2", "-DOFFSET=2"])  # one flag changed: a new key, a new build
    builder, src, rebuilt = _prepare(two, tmp_path / "c")
    assert rebuilt.cached is False and rebuilt.artifacts["key"] != cold.artifacts["key"]
    assert builder.load(two, src, rebuilt.artifacts)(41) == 43
    assert len(list(fresh_cache.glob("*/*/manifest.json"))) == 2


def test_no_build_cache_builds_fresh_beside_the_sources(tmp_path, fresh_cache):
    sol = tiny_solution(["-DOFFSET=5"])
    builder, src, out = _prepare(sol, tmp_path / "a", use_cache=False)
    assert out.cached is False and Path(out.artifacts["library"]).is_relative_to(tmp_path / "a")
    assert builder.load(sol, src, out.artifacts)(1) == 6
    assert not fresh_cache.exists() or not list(fresh_cache.glob("*/*/manifest.json"))


def test_concurrent_evaluations_share_one_build(tmp_path, fresh_cache):
    sol = tiny_solution(["-DOFFSET=7"])
    outcomes, errors = [], []

    def build(i: int) -> None:
        try:
            outcomes.append(_prepare(sol, tmp_path / f"s{i}")[2])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=build, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(o.cached for o in outcomes) == [False, True, True]  # one compiled, two waited and reused
    assert len({o.artifacts["library"] for o in outcomes}) == 1


def test_link_error_and_missing_symbol_are_compile_errors(tmp_path, fresh_cache):
    unlinkable = tiny_solution(compile_options={"ld_flags": ["-lsol_execbench_no_such_lib"]})
    with pytest.raises(BuildFailure) as info:
        _prepare(unlinkable, tmp_path / "a")
    assert info.value.status.value == "COMPILE_ERROR"
    assert "cannot find -lsol_execbench_no_such_lib" in info.value.message

    wrong_entry = native_solution("cpp", {"module.c": tiny_solution().sources[0].content}, "module.c::forward")
    with pytest.raises(BuildFailure) as info:
        _prepare(wrong_entry, tmp_path / "b")
    assert info.value.status.value == "COMPILE_ERROR"
    assert "defines no 'forward'" in info.value.message and "'run'" in info.value.message
    assert not list(fresh_cache.glob("*/*/manifest.json"))  # failed builds are not cached


@pytest.mark.skipif(shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists(),
                    reason="needs nvcc")
def test_nvcc_syntax_error_surfaces_as_compile_error(tmp_path, fresh_cache):
    # vendor="cuda" as on an NVIDIA host; the named target spares the GPU lookup. The CPU build of
    # torch cannot link CUDA code, but nvcc fails before the link.
    bad = native_solution("cuda_cpp", {"kernel.cu": "__global__ void k(float* x) { x[0] = 1.0f }\n"},
                          "kernel.cu::run", target_hardware=["H100"])
    with pytest.raises(BuildFailure) as info:
        _prepare(bad, tmp_path / "a", vendor="cuda")
    message = info.value.message
    assert info.value.status.value == "COMPILE_ERROR"
    assert 'kernel.cu(1): error: expected a ";"' in message and "sm_90a" in message and "nvcc" in message
