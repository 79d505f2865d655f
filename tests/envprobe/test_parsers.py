"""Parsers against recorded outputs (tests/data/envprobe; see its README for provenance)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sol_execbench.envprobe import files, host, rocm, rocm_libs, rocm_smi
from sol_execbench.envprobe.extended import count_symbols
from sol_execbench.envprobe.nvidia_libs import cudnn_version, nccl_version
from sol_execbench.envprobe.nvml_parse import cuda_driver_version, parse_nvidia_smi_csv, parse_reading, throttle_reasons
from sol_execbench.envprobe.pytorch_build import parse_build_settings, parse_config


def test_torch_config_cuda_build(recorded):
    parsed = parse_config(recorded("torch_config_cuda_2.5.1_cu124.txt"))
    flags = parsed["build_flags"]
    assert flags["USE_CUDA"] is True and flags["USE_CUDNN"] is True and flags["USE_NCCL"] is True
    assert flags["USE_ROCM"] is False and flags["USE_CUSPARSELT"] is True
    assert flags["USE_FBGEMM"] is True and flags["USE_ROCM_CK_SDPA"] is False and flags["USE_ROCM_CK_GEMM"] is False
    assert flags["USE_XPU"] is None  # this build does not list it
    assert parsed["cudnn_version"] == "9.1.0" and parsed["build_type"] == "Release" and parsed["miopen_version"] is None


def test_torch_config_rocm_build(recorded):
    parsed = parse_config(recorded("torch_config_rocm_2.9.1_rocm7.txt"))
    flags = parsed["build_flags"]
    assert flags["USE_ROCM"] is True and flags["USE_CUDA"] is False
    assert flags["USE_ROCM_CK_SDPA"] is True and flags["USE_ROCM_CK_GEMM"] is True
    assert flags["USE_FBGEMM"] is True and flags["USE_FBGEMM_GENAI"] is True
    assert parsed["miopen_version"] == "3.5.1" and parsed["cudnn_version"] is None


def test_torch_config_cpu_build_captured_here(recorded):
    text = recorded("torch_config_cpu_2.13.txt")
    settings = parse_build_settings(text)
    assert settings["TORCH_VERSION"] == "2.13.0" and "-DUSE_FBGEMM" in settings["CXX_FLAGS"]
    flags = parse_config(text)["build_flags"]
    assert flags["USE_CUDA"] is False and flags["USE_ROCM"] is False and flags["USE_FBGEMM"] is True


def test_torch_config_unreadable_gives_nulls():
    parsed = parse_config("garbage")
    assert set(parsed["build_flags"].values()) == {None}


def test_rocm_agent_enumerator_filters_host_agent(recorded):
    mi300x = rocm.parse_agents(recorded("rocm_agent_enumerator_mi300x.txt"))
    assert mi300x == {"agent_count": 8, "gfx_targets": ["gfx942"], "arch_counts": {"gfx942": 8}}
    mixed = rocm.parse_agents(recorded("rocm_agent_enumerator_mixed.txt"))
    assert mixed == {"agent_count": 7, "gfx_targets": ["gfx1100", "gfx942"], "arch_counts": {"gfx1100": 1, "gfx942": 6}}
    assert rocm.parse_agents("gfx000\n")["gfx_targets"] is None


def test_hipconfig(recorded):
    full = rocm.parse_hipconfig_full(recorded("hipconfig_full.txt"))
    assert full["version"] == "6.2.41133-dd7f95766"
    assert (full["platform"], full["compiler"], full["runtime"]) == ("amd", "clang", "rocclr")
    assert full["hip_path"] == "/opt/rocm-6.2.0"
    assert full["clang_version"].startswith("AMD clang version 18.0.0git")
    assert rocm.parse_hipconfig_version(recorded("hipconfig_version.txt")) == "6.2.41133-dd7f95766"


def test_rocm_version_files(recorded):
    assert rocm.parse_info_version(recorded("rocm_info_version.txt")) == "6.2.0-66"
    assert rocm_libs.parse_version_header(recorded("rocm_version.h"), "ROCM_VERSION_") == ("6.2.0", None)


@pytest.mark.parametrize(
    "name, prefix, expected",
    [
        ("hipblaslt-version.h", "HIPBLASLT_VERSION_", ("0.8.0", "0a1a6b4e")),
        ("rocblas-version.h", "ROCBLAS_VERSION_", ("4.2.0", "0a1a6b4e")),
        ("miopen_version.h", "MIOPEN_VERSION_", ("3.2.0", "0a1a6b4e")),
        ("rccl.h", "NCCL_", ("2.20.5", None)),
        ("ck_version.h", "CK_VERSION_", ("1.1.0", None)),
    ],
)
def test_library_version_headers(recorded, name, prefix, expected):
    assert rocm_libs.parse_version_header(recorded(name), prefix) == expected


def test_amd_smi_static_and_metric(recorded):
    devices = rocm_smi.parse_amd_smi(recorded("amd_smi_static_mi300x.json"), recorded("amd_smi_metric_mi300x.json"))
    assert [d["index"] for d in devices] == [0, 1]
    first, second = devices
    assert first["market_name"] == "AMD Instinct MI300X" and first["gfx_target"] == "gfx942"
    assert first["compute_units"] == 304 and first["power_cap_w"] == 750
    assert (first["compute_partition"], first["memory_partition"]) == ("SPX", "NPS1")
    assert first["clocks"] == {"current": {"gfx_mhz": 132, "mem_mhz": 900}, "max": {"gfx_mhz": 2100, "mem_mhz": 1300},
                               "gfx_clk_locked": False}
    assert first["perf_level"] == "AUTO" and first["clocks_pinned"] is False
    assert second["perf_level"] == "DETERMINISM" and second["clocks_pinned"] is True
    assert second["clocks"]["gfx_clk_locked"] is True and second["temperature_hotspot_c"] == 41


def test_amd_smi_newer_wrapped_shape_and_bare_numbers():
    metric = json.dumps({"gpu_data": [{"gpu": 0, "clock": {"gfx_0": {"clk": 2100, "max_clk": 2100}}, "perf_level": "auto"}]})
    (dev,) = rocm_smi.parse_amd_smi(None, metric)
    assert dev["clocks"]["current"]["gfx_mhz"] == 2100 and dev["perf_level"] == "AUTO"
    assert dev["market_name"] is None  # static part absent: null, not an error


def test_rocm_smi(recorded):
    devices = rocm_smi.parse_rocm_smi(recorded("rocm_smi_perflevel_clocks.json"))
    assert [d["index"] for d in devices] == [0, 1]
    assert devices[0]["clocks"]["current"] == {"gfx_mhz": 132, "mem_mhz": 900}
    assert devices[0]["perf_level"] == "AUTO" and devices[1]["clocks_pinned"] is True
    assert devices[0]["power_cap_w"] == 750


def test_nvml_reading(recorded):
    block = parse_reading(json.loads(recorded("nvml_h100_reading.json")))
    assert block["driver_version"] == "550.90.07" and block["cuda_driver_version"] == "12.4"
    dev = block["devices"][0]
    assert dev["clocks"]["max"]["sm_mhz"] == 1980 and dev["clocks"]["application_clocks_changed"] is False
    assert dev["throttle_reasons"] == ["gpu_idle"] and dev["power"]["limit_w"] == 700.0
    assert dev["ecc"] == {"current": True, "pending": True} and dev["mig"] == {"current": False, "pending": False}
    assert dev["persistence_mode"] is True and dev["compute_mode"] == "default" and dev["performance_state"] == "P0"


def test_nvidia_smi_csv_matches_the_nvml_reading(recorded):
    from_smi = parse_reading(parse_nvidia_smi_csv(recorded("nvidia_smi_query_h100.csv")))
    from_nvml = parse_reading(json.loads(recorded("nvml_h100_reading.json")))
    assert from_smi["nvml_source"] == "nvidia-smi" and from_smi["driver_version"] == "550.90.07"
    a, b = from_smi["devices"][0], from_nvml["devices"][0]
    for key in ("name", "uuid", "pci_bus_id", "clocks", "throttle_reasons", "ecc", "persistence_mode", "compute_mode"):
        assert a[key] == b[key], key
    assert a["memory_total_bytes"] == 81559 * 1024 * 1024
    second = from_smi["devices"][1]
    assert second["mig"] == {"current": False, "pending": False} and second["compute_mode"] == "exclusive_process"
    assert second["clocks"]["application_clocks_changed"] is True and second["throttle_reasons"] == ["sw_power_cap"]
    assert from_smi["devices"][0]["mig"] == {"current": None, "pending": None}  # [N/A]


def test_throttle_reasons_and_version_codes():
    assert throttle_reasons(0) == [] and throttle_reasons(None) is None
    assert throttle_reasons(0x1 | 0x40) == ["gpu_idle", "hw_thermal_slowdown"]
    assert throttle_reasons(0x1000) == ["bit_0x1000"]
    assert cuda_driver_version(12040) == "12.4" and cuda_driver_version(13000) == "13.0"
    assert cudnn_version(90100) == "9.1.0" and cudnn_version(8902) == "8.9.2"
    assert nccl_version(22105) == "2.21.5" and nccl_version(2708) == "2.7.8"


def test_numeric_version_order(tmp_path: Path):
    for version in ("0.9.0", "0.10.0", "0.8.2"):
        (tmp_path / f"libaotriton_v2.so.{version}").write_bytes(version.encode())
    (tmp_path / "libaotriton_v2.so").write_bytes(b"stale copy")
    best = files.best_versioned_file(tmp_path, "libaotriton_v2.so", prefer_versioned=True)
    assert best.name == "libaotriton_v2.so.0.10.0"  # a string sort would pick 0.9.0
    assert files.best_versioned_file(tmp_path, "libaotriton_v2.so").name == "libaotriton_v2.so"
    assert files.best_versioned_file(tmp_path, "libmissing.so") is None
    assert files.version_key("0.10.0") > files.version_key("0.9.0")


def test_loaded_libraries_and_find_loaded(tmp_path: Path):
    maps = tmp_path / "maps"
    maps.write_text(
        "7f0000-7f1000 r-xp 00000000 08:01 1 /site/nvidia/cublas/lib/libcublasLt.so.12\n"
        "7f1000-7f2000 r-xp 00000000 08:01 2 /site/nvidia/cublas/lib/libcublas.so.12\n"
        "7f2000-7f3000 r-xp 00000000 00:00 0 [vdso]\n"
    )
    loaded = files.loaded_libraries(str(maps))
    assert files.find_loaded("libcublas", loaded).endswith("libcublas.so.12")
    assert files.find_loaded("libcublasLt", loaded).endswith("libcublasLt.so.12")
    assert files.find_loaded("libcudnn", loaded) is None
    assert files.loaded_libraries(str(tmp_path / "nope")) == []


def test_sha256_cache_is_keyed_on_stat(tmp_path: Path, isolated_cache):
    lib = tmp_path / "libx.so.1"
    lib.write_bytes(b"one")
    first = files.sha256_file(lib)
    assert first == files.sha256_file(lib) and (isolated_cache / "envprobe-file-hashes.json").exists()
    lib.write_bytes(b"two!")  # new size and mtime: the cache entry no longer applies
    assert files.sha256_file(lib) != first
    assert files.sha256_file(tmp_path / "missing") is None


def test_kernel_db_fingerprint_namespaces_libraries(tmp_path: Path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    (a / "TensileLibrary_gfx942.dat").write_text("")
    (b / "TensileLibrary_gfx942.dat").write_text("")
    digest, count = files.filename_fingerprint({"hipblaslt": a, "rocblas": b}, ("*.dat",))
    assert count == 2 and len(digest) == 64
    assert files.filename_fingerprint({"x": tmp_path / "none"}, ("*.dat",)) == (None, 0)


def test_host_parsers():
    assert host.parse_os_release('NAME="Ubuntu"\nVERSION_ID="22.04"\nPRETTY_NAME="Ubuntu 22.04.4 LTS"\n') == "Ubuntu 22.04.4 LTS"
    assert host.parse_os_release('NAME="Alpine"\nVERSION_ID=3.19\n') == "Alpine 3.19"
    cid = "a" * 64
    assert host.container_id(f"0::/system.slice/docker-{cid}.scope\n") == cid
    assert host.container_id("0::/\n", f"/var/lib/docker/containers/{cid}/hostname /etc/hostname") == cid
    assert host.container_type({"KUBERNETES_SERVICE_HOST": "10.0.0.1"}) == "kubernetes"


def test_nm_symbol_counts():
    out = "0000 T ck::tensor_operation::device::Gemm()\n0001 T ck_tile::FmhaFwd()\n0002 T cutlass::gemm::Kernel()\n0003 T foo\n0004 T mock::x()\n"
    assert count_symbols(out) == {"ck": 1, "ck_tile": 1, "cutlass": 1, "flash": 0}
