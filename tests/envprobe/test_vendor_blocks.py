"""The ROCm and NVIDIA blocks end to end on stand-ins: a fake ROCm tree with scripted tools, a fake pynvml."""

from __future__ import annotations

import json
import os
import stat
import sys
import types
from pathlib import Path

import pytest

from sol_execbench.envprobe import nvidia, nvidia_libs, rocm, rocm_libs
from sol_execbench.envprobe._common import Context, Reasons


def _script(path: Path, body: str) -> None:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def rocm_tree(tmp_path, monkeypatch, data):
    """A ROCm 6.2 layout built from the recorded headers, with scripted hipconfig/agents/amd-smi."""
    root = tmp_path / "rocm"
    (root / ".info").mkdir(parents=True)
    (root / ".info" / "version").write_text((data / "rocm_info_version.txt").read_text())
    headers = {
        "rocm-core/rocm_version.h": "rocm_version.h",
        "hipblaslt/hipblaslt-version.h": "hipblaslt-version.h",
        "rocblas/internal/rocblas-version.h": "rocblas-version.h",
        "miopen/version.h": "miopen_version.h",
        "rccl/rccl.h": "rccl.h",
        "ck/version.h": "ck_version.h",
    }
    for rel, name in headers.items():
        (root / "include" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "include" / rel).write_text((data / name).read_text())
    (root / "include" / "ck_tile").mkdir()
    lib = root / "lib"
    (lib / "hipblaslt" / "library").mkdir(parents=True)
    (lib / "hipblaslt" / "library" / "TensileLibrary_lazy_gfx942.dat").write_text("")
    (lib / "rocblas" / "library").mkdir(parents=True)
    (lib / "rocblas" / "library" / "Kernels.so-000-gfx942.hsaco").write_text("")
    (lib / "libhipblaslt.so.0.8.60200").write_bytes(b"hipblaslt")
    (lib / "libhipblaslt.so").symlink_to("libhipblaslt.so.0.8.60200")
    (lib / "librocblas.so.4.2.60200").write_bytes(b"rocblas")  # stripped image: no plain name
    (lib / "libMIOpen.so.1.0.60200").write_bytes(b"miopen")
    (root / "share" / "miopen" / "db").mkdir(parents=True)
    (root / "share" / "miopen" / "db" / "gfx942130.kdb").write_text("")
    bin_dir = root / "bin"
    bin_dir.mkdir()
    _script(bin_dir / "rocm_agent_enumerator", f"cat {data / 'rocm_agent_enumerator_mi300x.txt'}\n")
    _script(bin_dir / "hipconfig", f'[ "$1" = --full ] && cat {data / "hipconfig_full.txt"} && exit 0\nexit 1\n')
    _script(bin_dir / "amd-smi", f'cat {data}/amd_smi_"$1"_mi300x.json\n')
    monkeypatch.setenv("ROCM_PATH", str(root))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    torch_dir = tmp_path / "site" / "torch"
    (torch_dir / "lib" / "aotriton.images").mkdir(parents=True)
    for version in ("0.9.2", "0.10.0"):
        (torch_dir / "lib" / f"libaotriton_v2.so.{version}").write_bytes(version.encode())
    monkeypatch.setattr(rocm_libs, "torch_dir", lambda: torch_dir)
    monkeypatch.setenv("AOTRITON_INSTALLED_PREFIX", "/opt/aotriton")
    return root


def test_rocm_block_from_a_rocm_tree(rocm_tree):
    block, reasons = rocm.probe(Context())
    assert block["present"] is True and block["version"] == "6.2.0-66" and block["version_header"] == "6.2.0"
    assert block["hip"]["version"] == "6.2.41133-dd7f95766" and block["hip"]["platform"] == "amd"
    assert block["agents"]["arch_counts"] == {"gfx942": 8}
    libs = block["libraries"]
    assert libs["hipblaslt"]["header_version"] == "0.8.0" and libs["hipblaslt"]["rocm_release_tweak"] == "0a1a6b4e"
    assert libs["hipblaslt"]["file_version"] == "0.8.60200" and len(libs["hipblaslt"]["sha256"]) == 64
    assert libs["hipblaslt"]["location"] == "rocm_path" and libs["hipblaslt"]["kernel_db_files"] == 1
    assert libs["rocblas"]["path"].endswith("librocblas.so.4.2.60200")
    assert libs["miopen"]["kernel_db_files"] == 1 and libs["rccl"]["header_version"] == "2.20.5"
    assert block["composable_kernel"] == {"version": "1.1.0", "commit": "50ee4267e27b875d149e642f4cebd47be1dc3b57",
                                          "ck_tile_present": True}
    assert block["tensile"]["kernel_db_files"] == 2
    aot = block["aotriton"]
    assert aot["bundled_version"] == "0.10.0" and aot["bundled_lib_path"].endswith("libaotriton_v2.so.0.10.0")
    assert aot["bundled_images_dir_present"] is True and aot["installed_prefix"] == "/opt/aotriton"
    assert block["smi"]["tool"] == "amd-smi" and block["smi"]["devices"][1]["perf_level"] == "DETERMINISM"
    assert reasons == ["rocm.libraries.rccl.path: librccl.so not loaded, not in the torch wheel, not in " + str(rocm_tree / "lib")]


def test_rocm_block_reports_what_is_missing(rocm_tree):
    for tool in ("rocm_agent_enumerator", "amd-smi"):
        (rocm_tree / "bin" / tool).unlink()
    _script(rocm_tree / "bin" / "hipconfig", '[ "$1" = --version ] && printf 6.2.41133-dd7f95766 && exit 0\nexit 2\n')
    (rocm_tree / "include" / "ck" / "version.h").unlink()
    block, reasons = rocm.probe(Context())
    assert block["hip"]["version"] == "6.2.41133-dd7f95766" and block["hip"]["platform"] is None
    assert block["agents"]["agent_count"] is None and block["smi"]["devices"] == []
    joined = "\n".join(reasons)
    for needle in ("rocm.hip: ", "only the version was read", "rocm.agents: rocm_agent_enumerator is not on PATH",
                   "rocm.smi: neither amd-smi nor rocm-smi", "rocm.composable_kernel.version:"):
        assert needle in joined


def _fake_pynvml(reading: dict) -> types.ModuleType:
    """A pynvml stand-in answering from a recorded raw reading; a few calls fail the ways NVML does."""
    dev = reading["devices"][0]

    class NVMLError(Exception):
        def __init__(self, value):
            self.value = value
            super().__init__({3: "Not Supported", 13: "Function Not Found"}.get(value, "Unknown Error"))

    def fail(code):
        def call(*_):
            raise NVMLError(code)
        return call

    clocks = {0: "graphics", 1: "sm", 2: "mem"}
    m = types.ModuleType("pynvml")
    m.NVMLError = NVMLError
    m.NVML_CLOCK_GRAPHICS, m.NVML_CLOCK_SM, m.NVML_CLOCK_MEM, m.NVML_TEMPERATURE_GPU = 0, 1, 2, 0
    m.nvmlInit = m.nvmlShutdown = lambda: None
    m.nvmlDeviceGetCount = lambda: 1
    m.nvmlSystemGetDriverVersion = lambda: reading["driver_version"]
    m.nvmlSystemGetNVMLVersion = lambda: reading["nvml_version"]
    m.nvmlSystemGetCudaDriverVersion_v2 = lambda: reading["cuda_driver_version"]
    m.nvmlDeviceGetHandleByIndex = lambda i: f"h{i}"
    m.nvmlDeviceGetName = lambda h: dev["name"].encode()  # older pynvml returns bytes
    m.nvmlDeviceGetUUID = lambda h: dev["uuid"]
    m.nvmlDeviceGetPciInfo = lambda h: types.SimpleNamespace(busId=dev["pci_bus_id"].encode())
    m.nvmlDeviceGetVbiosVersion = lambda h: dev["vbios_version"]
    m.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(total=dev["memory_total_bytes"])
    m.nvmlDeviceGetClockInfo = lambda h, c: dev["clocks_mhz"][clocks[c]]
    m.nvmlDeviceGetMaxClockInfo = lambda h, c: dev["max_clocks_mhz"][clocks[c]]
    m.nvmlDeviceGetApplicationsClock = lambda h, c: dev["application_clocks_mhz"][clocks[c]]
    m.nvmlDeviceGetDefaultApplicationsClock = lambda h, c: dev["default_application_clocks_mhz"][clocks[c]]
    m.nvmlDeviceGetCurrentClocksEventReasons = fail(13)  # older driver: falls back to the throttle name
    m.nvmlDeviceGetCurrentClocksThrottleReasons = lambda h: dev["throttle_reasons_mask"]
    m.nvmlDeviceGetPowerManagementLimit = lambda h: dev["power_limit_mw"]
    m.nvmlDeviceGetPowerManagementDefaultLimit = lambda h: dev["default_power_limit_mw"]
    m.nvmlDeviceGetEnforcedPowerLimit = lambda h: dev["enforced_power_limit_mw"]
    m.nvmlDeviceGetPowerUsage = fail(3)
    m.nvmlDeviceGetTemperature = fail(999)
    m.nvmlDeviceGetEccMode = lambda h: dev["ecc_mode"]
    m.nvmlDeviceGetPersistenceMode = lambda h: dev["persistence_mode"]
    m.nvmlDeviceGetMigMode = fail(3)
    m.nvmlDeviceGetComputeMode = lambda h: dev["compute_mode"]
    m.nvmlDeviceGetPerformanceState = lambda h: dev["performance_state"]
    return m


@pytest.fixture
def nvidia_host(monkeypatch):
    monkeypatch.setattr(nvidia, "driver_present", lambda: True)
    monkeypatch.setattr(nvidia, "probe_libraries", lambda ctx: (nvidia_libs.empty(), []))
    monkeypatch.setattr(nvidia, "cuda_driver_api_version", lambda: 12040)


def test_nvidia_block_through_pynvml(nvidia_host, monkeypatch, recorded):
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml(json.loads(recorded("nvml_h100_reading.json"))))
    block, reasons = nvidia.probe(Context())
    assert block["present"] is True and block["nvml_source"] == "pynvml"
    assert block["driver_version"] == "550.90.07" and block["cuda_driver_version"] == "12.4"
    dev = block["devices"][0]
    assert dev["name"] == "NVIDIA H100 80GB HBM3" and dev["pci_bus_id"] == "00000000:19:00.0"
    assert dev["clocks"]["max"]["sm_mhz"] == 1980 and dev["throttle_reasons"] == ["gpu_idle"]
    assert dev["power"]["draw_w"] is None and dev["mig"] == {"current": None, "pending": None}
    assert block["unsupported"] == ["devices[0].mig", "devices[0].power.draw"]  # NOT_SUPPORTED: noted, no reason
    assert reasons == ["nvidia.devices: devices[0].temperature: NVMLError: Unknown Error"]


def test_nvidia_block_falls_back_to_nvidia_smi(nvidia_host, monkeypatch, tmp_path, data):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    _script(tmp_path / "nvidia-smi", f"cat {data / 'nvidia_smi_query_h100.csv'}\n")
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    block, reasons = nvidia.probe(Context())
    assert block["nvml_source"] == "nvidia-smi" and len(block["devices"]) == 2
    assert block["cuda_driver_version"] == "12.4"  # from cuDriverGetVersion when nvidia-smi cannot say
    assert len(reasons) == 1 and "pynvml is not importable" in reasons[0] and "read nvidia-smi instead" in reasons[0]


def test_nvidia_block_with_nothing_readable(nvidia_host, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setenv("PATH", str(tmp_path))
    block, reasons = nvidia.probe(Context())
    assert block["present"] is True and block["devices"] == []
    assert reasons == ["nvidia.devices: pynvml is not importable (install the [nvidia] extra: nvidia-ml-py); "
                       "nvidia-smi fallback: nvidia-smi is not on PATH"]


def test_nvidia_library_in_a_pip_layout(monkeypatch, tmp_path):
    lib_dir = tmp_path / "site" / "nvidia" / "cublas" / "lib"
    lib_dir.mkdir(parents=True)
    (lib_dir / "libcublasLt.so.12").write_bytes(b"not really a library")
    monkeypatch.setattr(nvidia_libs, "pip_lib_dirs", lambda lib: [lib_dir] if lib.pip_dir == "cublas" else [])
    monkeypatch.setattr(nvidia_libs, "SYSTEM_DIRS", ())
    monkeypatch.setattr(nvidia_libs, "_package_version", lambda lib: None)  # GPU hosts have the real wheel
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    lib = next(lib for lib in nvidia_libs.NVIDIA_LIBS if lib.key == "cublaslt")
    why = Reasons("nvidia")
    entry = nvidia_libs.describe(lib, (), why)
    assert entry["location"] == "pip" and entry["path"] == str(lib_dir / "libcublasLt.so.12")
    assert len(entry["sha256"]) == 64
    assert entry["version"] is None  # the call failed and "12" alone is no version
    assert len(why.lines) == 1 and why.lines[0].startswith("nvidia.libraries.cublaslt.version: version call on")
    missing = nvidia_libs.describe(next(x for x in nvidia_libs.NVIDIA_LIBS if x.key == "nccl"), (), why)
    assert missing["path"] is None and "libnccl.so not loaded" in why.lines[-1]


def test_real_cuda_runtime_version_when_a_toolkit_is_here():
    lib = next(x for x in nvidia_libs.NVIDIA_LIBS if x.key == "cudart")
    path, location = nvidia_libs.locate(lib, ())
    if path is None:
        pytest.skip("no CUDA runtime library on this host")
    entry = nvidia_libs.describe(lib, (), Reasons("nvidia"))
    assert entry["version_from"] == "library_call" and entry["version"].count(".") == 1
    assert entry["sha256"] and os.path.realpath(entry["path"]) == os.path.realpath(path)
