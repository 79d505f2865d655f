"""On a GPU host (skipped elsewhere): the vendor blocks are populated, not just shaped."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu


def test_accelerator_lists_every_visible_gpu(host_snapshot):
    acc = host_snapshot["accelerator"]
    assert acc["vendor"] in ("cuda", "rocm") and acc["device_count"] == len(acc["devices"]) > 0
    assert sum(acc["arch_counts"].values()) == acc["device_count"]
    assert all(d["memory_bytes"] and d["compute_units"] for d in acc["devices"])


def test_vendor_block_is_populated(host_snapshot):
    vendor = host_snapshot["accelerator"]["vendor"]
    if vendor == "cuda":
        nv = host_snapshot["nvidia"]
        assert nv["present"] and nv["driver_version"] and len(nv["devices"]) >= host_snapshot["accelerator"]["device_count"]
        assert nv["devices"][0]["clocks"]["max"]["sm_mhz"]
        for key in ("cudart", "cublas", "cublaslt"):
            lib = nv["libraries"][key]
            assert lib["version"] and lib["sha256"] and lib["location"] in ("loaded", "pip"), key
        assert nv["libraries"]["cublaslt"]["version_from"] == "library_call"
    else:
        rocm = host_snapshot["rocm"]
        assert rocm["present"] and rocm["agents"]["agent_count"]
        assert rocm["libraries"]["hipblaslt"]["sha256"]


def test_no_reason_about_the_vendor_that_is_here_only_for_absent_things(host_snapshot):
    vendor_block = {"cuda": "nvidia", "rocm": "rocm"}[host_snapshot["accelerator"]["vendor"]]
    driver_lines = [r for r in host_snapshot["partial_reasons"] if r.startswith(f"{vendor_block}.devices")]
    assert driver_lines == []
