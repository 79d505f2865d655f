"""The toolchain registry and its evidence levels, the doctor's checks, the contract document."""

from __future__ import annotations

import json

import pytest

from sol_execbench.cli.diagnostics_cmd import EVIDENCE_CHOICES
from sol_execbench.envprobe import doctor, toolchain
from sol_execbench.envprobe.contract import build_contract
from sol_execbench.envprobe.toolchain_detect import Executable, parse_version
from sol_execbench.envprobe.toolchain_registry import ARCH_GENERATIONS, ARTIFACT_TYPES, EVIDENCE_LEVELS, REGISTRY, Artifact
from sol_execbench.schema import STATUS_MEANING


def test_registry_is_consistent():
    ids = [a.id for a in REGISTRY]
    assert len(ids) == len(set(ids))
    for artifact in REGISTRY:
        assert artifact.vendor in ("nvidia", "amd", "any") and artifact.artifact_type in ARTIFACT_TYPES
        assert set(artifact.gpu_archs) <= set(ARCH_GENERATIONS), artifact.id
    for needed in ("nvcc", "hipcc", "ncu", "nsys", "rocprofv3", "cuobjdump", "roc-obj", "cublas", "hipblaslt"):
        assert needed in ids
    generations = {g for a in REGISTRY for g in a.hardware_generations}
    assert {"Hopper", "Blackwell", "Ampere", "CDNA3", "CDNA4", "RDNA3", "RDNA4"} <= generations
    assert EVIDENCE_CHOICES == EVIDENCE_LEVELS


def _artifact(min_version=None):
    return Artifact("tool", "a tool", "any", "compiler", lambda: (None, None), min_version=min_version)


def test_evidence_levels():
    level = toolchain.evidence_level
    assert level(_artifact(), None, None, {}) == "declared"
    assert level(_artifact(), "/bin/tool", None, {}) == "detected"
    assert level(_artifact("2.0"), "/bin/tool", "1.9", {}) == "detected"
    assert level(_artifact("2.0"), "/bin/tool", "2.10", {}) == "version_verified"
    assert level(_artifact(), "/bin/tool", "3.1", {"tool": {"version": "3.1"}}) == "exercised"
    assert level(_artifact(), "/bin/tool", "3.2", {"tool": {"version": "3.1"}}) == "version_verified"


def test_exercised_record_round_trip(isolated_cache):
    toolchain.record_exercised("tool", "3.1")
    entry = toolchain.detect(Artifact("tool", "t", "any", "compiler", lambda: ("/bin/tool", "3.1")), toolchain._exercised_records())
    assert entry["evidence_level"] == "exercised" and entry["found"] is True


def test_detect_reports_old_versions_and_detector_bugs():
    old = toolchain.detect(Artifact("t", "t", "any", "compiler", lambda: ("/bin/t", "1.0"), min_version="2.0"), {})
    assert old["evidence_level"] == "detected" and "older than the supported minimum 2.0" in old["problem"]
    broken = toolchain.detect(Artifact("t", "t", "any", "compiler", lambda: 1 / 0), {})
    assert broken["found"] is False and broken["problem"].startswith("detection failed: ZeroDivisionError")


def test_filters():
    entries = toolchain.registry_entries()
    pick = lambda **kw: {e["id"] for e in toolchain.select(entries, toolchain.Filters(**kw))}  # noqa: E731
    hopper = pick(gpu_arch="sm_90a")
    assert "nvcc" in hopper and "hipcc" not in hopper and "c++" in hopper  # host tools serve any arch
    assert "aiter" in pick(gpu_arch="gfx942:sramecc+:xnack-") and "aiter" not in pick(gpu_arch="gfx1100")
    rocm_61 = pick(rocm_version="6.1")
    assert "hipcc" in rocm_61 and "rocprofv3" not in rocm_61 and "nvcc" not in rocm_61 and "triton" in rocm_61
    assert "rocprofv3" in pick(rocm_version="6.2")
    assert pick(artifact_types=("profiler",)) >= {"ncu", "nsys", "rocprofv3"}
    assert pick(evidence_level="declared") == {e["id"] for e in entries} and pick(evidence_level="detected") == set()
    assert "nvcc" not in pick(hardware_generation="RDNA4")


def test_version_parsing_of_tool_outputs():
    nvcc = "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 12.4, V12.4.131\nBuild cuda_12.4.r12.4/compiler.34097967_0"
    assert parse_version(nvcc, r"V(\d+\.\d+\.\d+)") == "12.4.131"
    assert parse_version("HIP version: 6.2.41133-dd7f95766\nAMD clang version 18.0.0git", r"HIP version:\s*(\d[\d.]*)") == "6.2.41133"
    assert parse_version("NVIDIA Nsight Systems version 2024.2.3.38-242334140272v0", r"version (\d[\d.]*)") == "2024.2.3.38"
    assert parse_version("c++ (Debian 12.2.0-14) 12.2.0", None) == "12.2.0"
    assert parse_version("no digits", None) is None


def test_executable_detector_finds_a_tool_and_reads_its_version(tmp_path, monkeypatch):
    tool = tmp_path / "faketool"
    tool.write_text("#!/bin/sh\necho 'faketool version 4.5.6'\nexit 1\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    assert Executable(("faketool",), version_pattern=r"version (\S+)")() == (str(tool), "4.5.6")
    assert Executable(("faketool",), version_args=None)() == (str(tool), None)
    assert Executable(("no-such-tool-xyz",))() == (None, None)


def test_doctor_flags_an_unwritable_cache(monkeypatch, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    (cache,) = [c for c in doctor.check_cache_dirs() if c.name == "writable:sol-execbench cache"]
    assert cache.status == "fail" and cache.fix and "XDG_CACHE_HOME" in cache.fix


def test_doctor_says_how_torch_bytecode_is_kept(monkeypatch, tmp_path):
    """A torch installed without bytecode: written beside it where Python may, else kept in the
    tool's cache (ok), else compiled in every evaluation process (warn, with a fix); with its own
    bytecode, loaded compiled."""
    import importlib.util
    import os
    import sys
    from types import SimpleNamespace

    package = tmp_path / "torch"
    package.mkdir()
    (package / "__init__.py").write_text("")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: SimpleNamespace(origin=str(package / "__init__.py")))
    monkeypatch.setenv("SOL_EXECBENCH_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("PYTHONPYCACHEPREFIX", "PYTHONDONTWRITEBYTECODE", "SOL_EXECBENCH_BYTECODE_CACHE"):
        monkeypatch.delenv(name, raising=False)
    check = doctor.check_bytecode()
    assert check.status == "ok" and "beside it on first use" in check.detail
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    check = doctor.check_bytecode()
    assert check.status == "ok" and str(tmp_path / "cache" / "pycache") in check.detail and "(0 files" in check.detail
    monkeypatch.setenv("SOL_EXECBENCH_BYTECODE_CACHE", "0")
    check = doctor.check_bytecode()
    assert check.status == "warn" and check.fix and "compileall" in check.fix
    compiled = package / "__pycache__" / f"__init__.{sys.implementation.cache_tag}.pyc"
    os.makedirs(compiled.parent)
    compiled.write_bytes(b"")
    check = doctor.check_bytecode()
    assert check.status == "ok" and "load compiled" in check.detail


def test_doctor_gpu_checks_without_torch_or_gpu():
    assert doctor.check_gpu(None, "cpu").status == "fail"
    (torch_check,) = doctor.check_torch(None, "torch cannot be imported: boom", "cpu")
    assert torch_check.status == "fail" and "boom" in torch_check.detail


def test_doctor_report_shape():
    report = doctor.doctor_report()
    assert report["status"] in doctor.STATUS_ORDER and set(report["can_evaluate"]) == {"cpu", "gpu"}
    statuses = [c["status"] for c in report["checks"]]
    assert report["status"] == max(statuses, key=doctor.STATUS_ORDER.index)
    assert all(c["fix"] for c in report["checks"] if c["status"] != "ok")


def test_contract_statuses_and_schemas():
    doc = build_contract([{"name": "x", "help": "", "params": []}])
    assert [s["status"] for s in doc["trace_statuses"]] == [s.value for s in STATUS_MEANING]
    assert doc["trace_statuses"][0]["meaning"] == STATUS_MEANING[next(iter(STATUS_MEANING))]
    assert doc["env_snapshot"]["shape"]["timestamp"] is None and "nvidia" in doc["env_snapshot"]["blocks"]
    assert doc["cli_commands"] == [{"name": "x", "help": "", "params": []}]
    rule = doc["latency_rule"]
    assert "max(device time, host time - launch allowance)" in rule["text"] and rule["launch_allowance_us"] > 0
    assert "SpeedupInterval" in json.dumps(doc["formats"]["trace"])  # the speedup's interval is a trace field


@pytest.mark.parametrize("arch, base", [("sm_90a", "sm_90"), ("sm_100f", "sm_100"), ("gfx942:xnack-", "gfx942"), ("GFX1201", "gfx1201")])
def test_base_arch(arch, base):
    assert toolchain.base_arch(arch) == base


def test_doctor_clock_check_on_an_nvidia_host(monkeypatch, recorded):
    import json

    raw = json.loads(recorded("nvml_h100_reading.json"))
    raw["devices"][1]["application_clocks_mhz"]["graphics"] = 1410  # someone locked GPU 1
    monkeypatch.setattr(doctor.nvidia, "read_pynvml", lambda: (raw, [], None))
    check = doctor.check_clocks("cuda")
    assert check.status == "ok" and "GPU(s) [1]" in check.detail and "SM 1410 MHz" in check.detail
    for dev in raw["devices"]:
        dev["application_clocks_mhz"] = dict(dev["default_application_clocks_mhz"])
    floating = doctor.check_clocks("cuda")
    assert floating.status == "warn" and "nvidia-smi -lgc" in floating.fix


def test_doctor_clock_check_on_an_amd_host(monkeypatch, recorded):
    from sol_execbench.envprobe import rocm_smi

    devices = rocm_smi.parse_amd_smi(None, recorded("amd_smi_metric_mi300x.json"))
    monkeypatch.setattr(doctor.rocm_smi, "read_smi", lambda: ({"tool": "amd-smi", "devices": devices}, None))
    check = doctor.check_clocks("rocm")
    assert check.status == "warn" and "AUTO" in check.detail and "DETERMINISM" in check.detail
