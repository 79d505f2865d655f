"""The accelerator block's three ways to the devices: CPU build, CUDA driver API (torch as fallback), ROCm via torch."""

from __future__ import annotations

import ctypes
from typing import Any

import pytest

from sol_execbench.envprobe import accelerator, cuda_driver
from sol_execbench.envprobe._common import Context

H100 = {"name": "NVIDIA H100 80GB HBM3", "memory": 85_045_657_600, "attrs": {16: 132, 38: 52_428_800, 75: 9, 76: 0}}
L40S = {"name": "NVIDIA L40S", "memory": 48_305_799_168, "attrs": {16: 142, 38: 100_663_296, 75: 8, 76: 9}}


class FakeCuda:
    """libcuda.so.1 as ctypes sees it: functions that write through pointers and return a CUresult."""

    def __init__(self, devices: list[dict], init_status: int = 0, driver: int = 13000, name_status: int = 0) -> None:
        self.devices, self.init_status, self.driver, self.name_status = devices, init_status, driver, name_status
        self._names = {100: b"CUDA_ERROR_NO_DEVICE", 999: b"CUDA_ERROR_UNKNOWN", 35: b"CUDA_ERROR_INSUFFICIENT_DRIVER"}

    def cuDriverGetVersion(self, out):
        out.contents.value = self.driver
        return 0

    def cuInit(self, flags):
        return self.init_status

    def cuDeviceGetCount(self, out):
        out.contents.value = len(self.devices)
        return 0

    def cuDeviceGet(self, out, index):
        out.contents.value = index
        return 0

    def cuDeviceGetName(self, buf, length, dev):
        buf.value = self.devices[dev]["name"].encode()[: length - 1]
        return self.name_status if dev == 1 else 0

    def cuDeviceTotalMem_v2(self, out, dev):
        out.contents.value = self.devices[dev]["memory"]
        return 0

    def cuDeviceGetAttribute(self, out, attr, dev):
        out.contents.value = self.devices[dev]["attrs"][attr]
        return 0

    def cuGetErrorName(self, status, out):
        out.contents.value = self._names.get(status, b"CUDA_ERROR_OTHER")
        return 0


class FakeFacts:
    """What ``torch_facts.TorchFacts`` offers the blocks, answering from fixed records."""

    def __init__(self, cuda: str | None = None, hip: str | None = None, build_error: str | None = None,
                 devices: Any = None) -> None:
        self.cuda_version, self.hip_version = cuda, hip
        self.declared = {"cuda": cuda, "hip": hip}
        self.build_error, self.device_record, self.device_calls = build_error, devices, 0

    def build(self):
        return (None, self.build_error) if self.build_error else ({"install_path": "/site/torch"}, None)

    def devices(self):
        self.device_calls += 1
        return (self.device_record, None) if self.device_record else (None, "torch devices facts: child failed")

    def loaded(self):
        return ()


@pytest.fixture
def gpu_hint(monkeypatch):
    monkeypatch.setattr(accelerator, "vendor_hint", lambda: "cuda")


def _use(monkeypatch, lib: Any) -> None:
    monkeypatch.setattr(cuda_driver, "load", lambda: lib)


def test_driver_api_lists_devices_in_torch_shape(monkeypatch, gpu_hint):
    _use(monkeypatch, FakeCuda([H100, H100, L40S]))
    facts = FakeFacts(cuda="13.0")
    block, reasons = accelerator.probe(Context(facts=facts))
    assert reasons == [] and facts.device_calls == 0  # no torch asked
    assert block["vendor"] == "cuda" and block["torch_sees_gpu"] is True and block["device_count"] == 3
    assert block["devices"][0] == {"index": 0, "name": H100["name"], "arch": "sm_90a", "memory_bytes": H100["memory"],
                                   "compute_units": 132, "l2_bytes": 52_428_800}
    assert block["arch_counts"] == {"sm_89": 1, "sm_90a": 2}


def test_no_device_visible_is_an_answer(monkeypatch, gpu_hint):
    _use(monkeypatch, FakeCuda([], init_status=cuda_driver.CUDA_ERROR_NO_DEVICE))
    block, reasons = accelerator.probe(Context(facts=FakeFacts(cuda="12.8")))
    assert block["torch_sees_gpu"] is False and block["device_count"] == 0 and block["devices"] == []
    assert len(reasons) == 1 and "torch sees no GPU" in reasons[0] and "visibility variable" in reasons[0]


def test_a_driver_older_than_torchs_cuda(monkeypatch, gpu_hint):
    _use(monkeypatch, FakeCuda([H100], driver=12040))
    block, reasons = accelerator.probe(Context(facts=FakeFacts(cuda="13.0")))
    assert block["torch_sees_gpu"] is False and block["device_count"] == 0
    assert reasons == [("accelerator.devices: the driver supports CUDA 12.4, older than the CUDA 13.0 torch was built "
                        "with: torch sees no GPU")]


def test_a_failing_driver_api_falls_back_to_torch(monkeypatch, gpu_hint):
    _use(monkeypatch, FakeCuda([H100], init_status=999))
    record = {"available": True, "count": 1, "errors": [], "devices": [{"index": 0, "name": "H100", "arch": "sm_90a",
                                                                         "memory_bytes": 1, "compute_units": 132, "l2_bytes": 2}]}
    facts = FakeFacts(cuda="12.8", devices=record)
    block, reasons = accelerator.probe(Context(facts=facts))
    assert facts.device_calls == 1 and block["devices"] == record["devices"] and reasons == []
    facts.device_record = None
    block, reasons = accelerator.probe(Context(facts=facts))
    assert block["device_count"] is None
    assert reasons == [("accelerator.devices: CUDA driver API failed (DriverError: cuInit returned CUDA_ERROR_UNKNOWN); "
                        "torch fallback: torch devices facts: child failed")]


def test_a_device_that_does_not_answer_is_a_reason(monkeypatch, gpu_hint):
    _use(monkeypatch, FakeCuda([H100, H100], name_status=999))
    block, reasons = accelerator.probe(Context(facts=FakeFacts(cuda="12.8")))
    assert block["device_count"] == 2 and len(block["devices"]) == 1
    assert reasons == ["accelerator.devices[1]: properties unreadable: cuDeviceGetName returned CUDA_ERROR_UNKNOWN"]


def test_no_driver_library(monkeypatch, gpu_hint):
    _use(monkeypatch, None)
    block, reasons = accelerator.probe(Context(facts=FakeFacts(cuda="12.8")))
    assert block["torch_sees_gpu"] is False and len(reasons) == 1


def test_rocm_asks_torch_and_cpu_builds_see_nothing(monkeypatch, gpu_hint):
    _use(monkeypatch, FakeCuda([H100]))  # must not be used for a ROCm or CPU build
    record = {"available": True, "count": 1, "errors": [[1, "boom"]], "devices": [
        {"index": 0, "name": "AMD Instinct MI300X", "arch": "gfx942", "memory_bytes": 1, "compute_units": 304, "l2_bytes": 2}]}
    block, reasons = accelerator.probe(Context(facts=FakeFacts(hip="6.2", devices=record)))
    assert block["vendor"] == "rocm" and block["arch_counts"] == {"gfx942": 1}
    assert reasons == ["accelerator.devices[1]: properties unreadable: boom"]
    block, _ = accelerator.probe(Context(facts=FakeFacts()))
    assert block["torch_sees_gpu"] is False and block["vendor"] is None


def test_torch_that_cannot_be_imported_is_the_only_reason(monkeypatch, gpu_hint):
    _use(monkeypatch, FakeCuda([], init_status=999))
    facts = FakeFacts(cuda="12.8", build_error="torch cannot be imported: ImportError: nope")
    block, reasons = accelerator.probe(Context(facts=facts))
    assert reasons == ["accelerator: torch cannot be imported: ImportError: nope"] and block["device_count"] is None


def test_real_driver_library_when_present():
    lib = cuda_driver.load()
    if lib is None:
        pytest.skip("no libcuda.so.1 on this host")
    try:
        record = cuda_driver.device_facts(lib)
    except cuda_driver.DriverError as exc:
        pytest.skip(f"driver present but not usable here: {exc}")
    assert record["count"] == len(record["devices"]) + len(record["errors"])
    assert isinstance(ctypes.c_int(record["count"]).value, int)
