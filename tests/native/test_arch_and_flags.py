"""Arch targeting and flag assembly, without compiling: the arch table, LOCAL detection from
recorded nvidia-smi / rocm_agent_enumerator / rocminfo outputs, PYTORCH_ROCM_ARCH, explicit arch
flags, compile_options defaults, the dependency table, and a ROCm toolchain faked from recorded
hipcc output."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from sol_execbench.build import native_arch
from sol_execbench.build.native_arch import (ArchError, choose_archs, cuda_arch_flags, lookup_target,
                                             parse_compute_caps, parse_rocm_agents)
from sol_execbench.build.native_deps import link_flags, relink
from sol_execbench.build.native_plan import PlanError, cache_key, key_material, make_plan
from sol_execbench.schema import Solution

from .helpers import DATA, EXAMPLE, native_solution


@pytest.fixture
def local_gpus(monkeypatch):
    """``local_gpus("cuda", "9.0\\n")``: what the vendor tool prints on this pretend host."""

    def fake(vendor: str, output: str | None) -> None:
        native_arch.detect_local_archs.cache_clear()
        tools = {"cuda": "nvidia-smi", "rocm": "rocm_agent_enumerator"}

        def tool_output(argv):
            return output if os.path.basename(argv[0]) == tools[vendor] else None

        monkeypatch.setattr(native_arch, "_tool_output", tool_output)
        monkeypatch.setattr(native_arch, "_torch_probe", lambda: ())

    yield fake
    native_arch.detect_local_archs.cache_clear()


def test_recorded_vendor_tool_outputs_parse():
    assert parse_compute_caps((DATA / "nvidia_smi_compute_cap_h100.txt").read_text()) == ("sm_90a",)
    assert parse_compute_caps((DATA / "nvidia_smi_compute_cap_mixed.txt").read_text()) == ("sm_90a", "sm_80")
    assert parse_rocm_agents((DATA / "rocm_agent_enumerator_mi300x.txt").read_text()) == ("gfx942",)
    assert parse_rocm_agents((DATA / "rocminfo_mi300x.txt").read_text()) == ("gfx942",)  # no CPU, no generic ISA
    assert parse_rocm_agents("gfx000\ngfx1100\ngfx942:sramecc+:xnack-\n") == ("gfx1100", "gfx942")


def test_named_targets_map_through_one_table():
    assert lookup_target("H100") == ("cuda", "sm_90a") == lookup_target("NVIDIA H100 80GB HBM3")
    assert lookup_target("h200") == ("cuda", "sm_90a")
    assert lookup_target("B200") == ("cuda", "sm_100a")
    assert lookup_target("A100-SXM4-80GB") == ("cuda", "sm_80")
    assert lookup_target("MI300X") == ("rocm", "gfx942") == lookup_target("AMD Instinct MI300X")
    assert lookup_target("MI355X") == ("rocm", "gfx950")
    assert lookup_target("TPUv5") is None
    assert cuda_arch_flags(("sm_90a", "sm_80")) == ["-gencode=arch=compute_90a,code=sm_90a",
                                                    "-gencode=arch=compute_80,code=sm_80"]


def test_local_builds_only_for_the_gpu_present(local_gpus):
    local_gpus("cuda", (DATA / "nvidia_smi_compute_cap_h100.txt").read_text())
    choice = choose_archs("cuda", ["B200", "LOCAL"], [])
    assert choice.archs == ("sm_90a",) and choice.source == "local"
    local_gpus("rocm", (DATA / "rocm_agent_enumerator_mi300x.txt").read_text())
    assert choose_archs("rocm", ["LOCAL"], []).archs == ("gfx942",)


def test_rocminfo_is_the_fallback_on_rocm(local_gpus, monkeypatch):
    local_gpus("rocm", None)
    rocminfo = (DATA / "rocminfo_mi300x.txt").read_text()
    monkeypatch.setattr(native_arch, "_tool_output",
                        lambda argv: rocminfo if os.path.basename(argv[0]) == "rocminfo" else None)
    assert choose_archs("rocm", ["LOCAL"], []).archs == ("gfx942",)


def test_named_targets_when_no_gpu_is_found(local_gpus):
    local_gpus("cuda", None)
    choice = choose_archs("cuda", ["B200", "H100", "MI300X", "LOCAL"], [])
    assert choice.archs == ("sm_100a", "sm_90a") and choice.source == "named"
    assert any("no CUDA GPU found" in n for n in choice.notes)
    with pytest.raises(ArchError, match="no CUDA arch to build for.*H100"):
        choose_archs("cuda", ["LOCAL"], [])
    with pytest.raises(ArchError):
        choose_archs("cuda", ["MI300X"], [])  # names only an AMD part


def test_pytorch_rocm_arch_overrides_and_explicit_flags_win(local_gpus, monkeypatch):
    local_gpus("rocm", "gfx000\ngfx942\n")
    monkeypatch.setenv("PYTORCH_ROCM_ARCH", "gfx90a;gfx950")
    assert choose_archs("rocm", ["LOCAL"], []).archs == ("gfx90a", "gfx950")
    explicit = choose_archs("rocm", ["LOCAL"], ["-O3", "--offload-arch=gfx1100"])
    assert explicit.source == "explicit flags" and explicit.archs == ("gfx1100",)
    local_gpus("cuda", "9.0\n")
    for flags in (["-gencode=arch=compute_80,code=sm_80"], ["-arch=sm_80"], ["-arch", "sm_80"],
                  ["--generate-code", "arch=compute_80,code=sm_80"]):
        assert choose_archs("cuda", ["LOCAL"], flags).archs == (), flags
    assert choose_archs("cpu", ["LOCAL", "H100"], []).archs == ()


def _cuda_solution(**spec) -> Solution:
    return native_solution("cuda_cpp", {"main.cpp": "", "kernel.cu": "", "include/k.cuh": ""}, "main.cpp::run",
                           target_hardware=["H100"], **spec)


@pytest.fixture
def fake_cuda(tmp_path, monkeypatch) -> Path:
    """A CUDA toolkit whose nvcc only answers --version (flag assembly needs no real compiler)."""
    home = tmp_path / "cuda"
    _script(home / "bin" / "nvcc", "echo 'Cuda compilation tools, release 12.8, V12.8.93'")
    (home / "include").mkdir()
    (home / "include" / "cuda_runtime.h").write_text("")
    monkeypatch.setenv("CUDA_HOME", str(home))
    return home


def _script(path: Path, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def test_cuda_flags_defaults_arch_and_include_dirs(fake_cuda):
    plan = make_plan(_cuda_solution(), "cuda")
    assert plan.family == "cuda" and plan.sources == ["main.cpp", "kernel.cu"]
    assert plan.include_dirs == [".", "include"]
    assert plan.cflags == ["-O3"]
    assert plan.cuda_cflags == ["-O3", "--use_fast_math", "-gencode=arch=compute_90a,code=sm_90a"]
    assert plan.ldflags[-1] == "-lcuda" and plan.env["CUDA_HOME"] == str(fake_cuda)
    own = make_plan(_cuda_solution(compile_options={"cflags": [], "cuda_cflags": ["-arch=sm_80"],
                                                    "ld_flags": ["-lm"]}), "cuda")
    assert own.cflags == [] and own.cuda_cflags == ["-arch=sm_80"] and own.ldflags == ["-lm"]


def test_cuda_compiler_version_is_in_the_cache_key(fake_cuda):
    sol = _cuda_solution()
    first = cache_key(key_material(sol, make_plan(sol, "cuda")))
    nvcc = fake_cuda / "bin" / "nvcc"
    _script(nvcc, "echo 'Cuda compilation tools, release 12.9, V12.9.41'")
    os.utime(nvcc, ns=(nvcc.stat().st_atime_ns, nvcc.stat().st_mtime_ns + 10**9))  # versions are memoised by mtime
    second = cache_key(key_material(sol, make_plan(sol, "cuda")))
    assert first != second


def test_key_changes_with_each_input(fake_cuda):
    base = _cuda_solution()
    keys = {cache_key(key_material(base, make_plan(base, "cuda")))}
    variants = [
        _cuda_solution(compile_options={"cuda_cflags": ["-O2"]}),
        _cuda_solution(dependencies=["cublas"]),
        native_solution("cuda_cpp", {"main.cpp": "// changed", "kernel.cu": "", "include/k.cuh": ""},
                        "main.cpp::run", target_hardware=["H100"]),
        native_solution("cuda_cpp", {"main.cpp": "", "kernel.cu": "", "include/k.cuh": ""}, "main.cpp::run",
                        target_hardware=["B200"]),
    ]
    for sol in variants:
        keys.add(cache_key(key_material(sol, make_plan(sol, "cuda"))))
    assert len(keys) == 1 + len(variants)


def test_dependency_table_adds_include_and_link_flags(fake_cuda, tmp_path, monkeypatch):
    cudnn = tmp_path / "cudnn"
    (cudnn / "include").mkdir(parents=True)
    (cudnn / "include" / "cudnn.h").write_text("")
    (cudnn / "lib").mkdir()
    (cudnn / "lib" / "libcudnn.so.9").write_text("")  # as the pip wheel ships it: versioned only
    monkeypatch.setenv("CUDNN_HOME", str(cudnn))
    cutlass = tmp_path / "cutlass"
    (cutlass / "include" / "cutlass").mkdir(parents=True)
    (cutlass / "include" / "cutlass" / "cutlass.h").write_text("")
    (cutlass / "tools" / "util" / "include").mkdir(parents=True)
    monkeypatch.setenv("CUTLASS_DIR", str(cutlass))
    sol = native_solution("cudnn", {"main.cu": ""}, "main.cu::run", target_hardware=["H100"],
                          dependencies=["cutlass", "torch"], compile_options={"ld_flags": ["-lcudnn"]})
    plan = make_plan(sol, "cuda")
    assert str(cudnn / "include") in plan.include_dirs
    assert str(cutlass / "include") in plan.include_dirs and str(cutlass / "tools/util/include") in plan.include_dirs
    assert f"-L{cudnn / 'lib'}" in plan.ldflags and "-l:libcudnn.so.9" in plan.ldflags
    assert "-lcudnn" not in plan.ldflags  # the solution's own -lcudnn is relinked to the versioned file
    assert plan.hints == [] and plan.notes == []


def test_missing_dependency_is_named_in_hints(fake_cuda, monkeypatch):
    for var in ("CUTLASS_DIR", "CUTLASS_PATH"):
        monkeypatch.delenv(var, raising=False)
    sol = native_solution("cutlass", {"main.cu": ""}, "main.cu::run", target_hardware=["H100"],
                          dependencies=["mystery_lib"])
    plan = make_plan(sol, "cuda")
    if any("cutlass" in d for d in plan.include_dirs):
        pytest.skip("a CUTLASS install was found on this machine")
    assert any("cutlass/cutlass.h not found" in h and "CUTLASS_DIR" in h for h in plan.hints)
    assert any("mystery_lib" in n for n in plan.notes)
    with pytest.raises(PlanError, match="AMD \\(ROCm\\) library"):
        make_plan(native_solution("cuda_cpp", {"k.cu": ""}, "k.cu::run", target_hardware=["H100"],
                                  dependencies=["hipblaslt"]), "cuda")


def test_link_flags_prefer_plain_then_versioned(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "libfoo.so").write_text("")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "libbar.so.3").write_text("")
    assert link_flags("foo", [tmp_path / "a"]) == ([f"-L{tmp_path / 'a'}", "-lfoo"], True)
    assert link_flags("bar", [tmp_path / "b"]) == ([f"-L{tmp_path / 'b'}", "-l:libbar.so.3"], True)
    assert link_flags("nothere_zz", [tmp_path]) == (["-lnothere_zz"], False)
    assert relink(["-Wl,--as-needed", "-lnothere_zz"], None) == ["-Wl,--as-needed", "-lnothere_zz"]


@pytest.fixture
def fake_rocm(tmp_path, monkeypatch, local_gpus) -> Path:
    """A ROCm tree: hipcc answering with recorded output, hipBLASLt (versioned lib only), CK headers."""
    root = tmp_path / "rocm"
    _script(root / "bin" / "hipcc", f"cat '{DATA / 'hipcc_version_rocm6.2.txt'}'")
    for header in ("hipblaslt/hipblaslt.h", "ck/ck.hpp", "rocblas/rocblas.h"):
        (root / "include" / header).parent.mkdir(parents=True, exist_ok=True)
        (root / "include" / header).write_text("")
    (root / "lib").mkdir()
    (root / "lib" / "libhipblaslt.so.0").write_text("")
    (root / "lib" / "librocblas.so").write_text("")
    monkeypatch.setenv("ROCM_PATH", str(root))
    monkeypatch.delenv("ROCM_HOME", raising=False)
    monkeypatch.delenv("PYTORCH_ROCM_ARCH", raising=False)
    local_gpus("rocm", (DATA / "rocm_agent_enumerator_mi300x.txt").read_text())
    return root


def _hip_solution(**spec) -> Solution:
    return native_solution("hip_cpp", {"main.cpp": "", "kernel.hip": "", "include/k.h": ""}, "main.cpp::run", **spec)


def test_rocm_plan_from_recorded_tools(fake_rocm):
    plan = make_plan(_hip_solution(dependencies=["ck", "hipblaslt", "rocblas"]), "rocm")
    assert plan.family == "rocm" and plan.arch.archs == ("gfx942",) and plan.arch.source == "local"
    assert plan.env["PYTORCH_ROCM_ARCH"] == "gfx942" and plan.env["ROCM_HOME"] == str(fake_rocm)
    assert "-D__HIP_PLATFORM_AMD__=1" in plan.cflags and plan.cuda_cflags == ["-O3"]
    assert str(fake_rocm / "include") in plan.include_dirs
    assert plan.ldflags == [f"-L{fake_rocm / 'lib'}", "-l:libhipblaslt.so.0", "-lrocblas"]
    assert "HIP version: 6.2.41133" in plan.toolchain.version_string()
    assert plan.hints == []


def test_rocm_arch_override_and_explicit_flags_in_plan(fake_rocm, monkeypatch):
    monkeypatch.setenv("PYTORCH_ROCM_ARCH", "gfx950")
    assert make_plan(_hip_solution(), "rocm").env["PYTORCH_ROCM_ARCH"] == "gfx950"
    plan = make_plan(_hip_solution(compile_options={"cuda_cflags": ["--offload-arch=gfx90a"]}), "rocm")
    assert plan.env["PYTORCH_ROCM_ARCH"] == "gfx90a" and plan.cuda_cflags == ["--offload-arch=gfx90a"]


def test_missing_hipcc_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("ROCM_PATH", str(tmp_path / "no-rocm"))
    if os.path.exists("/opt/rocm/bin/hipcc") or shutil.which("hipcc"):
        pytest.skip("a ROCm install is present")
    with pytest.raises(PlanError, match="missing toolchain: hipcc .*not found.*ROCM_PATH"):
        make_plan(_hip_solution(), "rocm")


def test_missing_nvcc_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "no-cuda"))
    with pytest.raises(PlanError, match="missing toolchain: nvcc .*not found: CUDA_HOME.*no bin/nvcc"):
        make_plan(_cuda_solution(), "cuda")


def test_vendor_mismatch_and_source_rules():
    hip = native_solution("hip_cpp", {"k.hip": ""}, "k.hip::run")
    with pytest.raises(PlanError, match="not buildable here.*AMD GPU"):
        make_plan(hip, "cuda")
    with pytest.raises(PlanError, match="not buildable here.*NVIDIA GPU"):
        make_plan(_cuda_solution(), "rocm")
    with pytest.raises(PlanError, match="host C\\+\\+.*k.cu"):
        make_plan(native_solution("cpp", {"k.cu": ""}, "k.cu::run"), "cpu")
    with pytest.raises(PlanError, match="same object file"):
        make_plan(native_solution("cpp", {"a/util.cpp": "", "b/util.cpp": ""}, "a/util.cpp::run"), "cpu")
    with pytest.raises(PlanError, match="cannot mix"):
        make_plan(native_solution("cuda_cpp", {"k.cu": ""}, "k.cu::run", languages=["cuda_cpp", "hip_cpp"]), "cuda")


def test_bundled_examples_plan_their_headers_folder():
    from sol_execbench.schema import Loaded, load_solution

    sol = load_solution(EXAMPLE / "solution_cpp.json", Loaded())
    plan = make_plan(sol, "cpu")
    assert plan.sources == ["cpp/main.cpp", "cpp/kernel.cpp"] and "cpp/include" in plan.include_dirs
