"""NVIDIA device facts from the CUDA driver API (``libcuda.so.1`` through ctypes), without torch.

``cuInit`` and the ``cuDeviceGet*`` queries create no CUDA context (torch's
``get_device_properties`` does, which costs about half a second), and the driver applies
``CUDA_VISIBLE_DEVICES`` and ``CUDA_DEVICE_ORDER`` exactly as it does for torch, so the devices
come out in torch's order. The record has the shape of ``_torch_worker.device_facts``.
"""

from __future__ import annotations

import ctypes
from typing import Any

from sol_execbench.platform import cuda_arch_name

LIBRARY = "libcuda.so.1"
CUDA_SUCCESS = 0
CUDA_ERROR_NO_DEVICE = 100
ATTRIBUTES = {"compute_units": 16, "l2_bytes": 38, "cc_major": 75, "cc_minor": 76}
"""CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, L2_CACHE_SIZE, COMPUTE_CAPABILITY_MAJOR / MINOR (cuda.h)."""
NAME_LENGTH = 256


class DriverError(RuntimeError):
    """A driver call returned an error (the message names the call and the CUresult)."""


def load() -> Any:
    """The driver library, or None where there is no NVIDIA driver."""
    try:
        return ctypes.CDLL(LIBRARY)
    except OSError:
        return None


def _error_name(lib: Any, status: int) -> str:
    name = ctypes.c_char_p()
    try:
        if lib.cuGetErrorName(status, ctypes.pointer(name)) == CUDA_SUCCESS and name.value:
            return name.value.decode(errors="replace")
    except (AttributeError, TypeError, ctypes.ArgumentError):
        pass
    return f"CUresult {status}"


def _check(lib: Any, status: int, call: str) -> None:
    if status != CUDA_SUCCESS:
        raise DriverError(f"{call} returned {_error_name(lib, status)}")


def _int_out(lib: Any, call: str, *args: Any) -> int:
    value = ctypes.c_int(0)
    _check(lib, getattr(lib, call)(ctypes.pointer(value), *args), call)
    return value.value


def driver_version(lib: Any) -> int | None:
    """``cuDriverGetVersion``: the newest CUDA the driver supports (12040 = 12.4); needs no cuInit."""
    try:
        return _int_out(lib, "cuDriverGetVersion")
    except (DriverError, AttributeError, ctypes.ArgumentError):
        return None


def device_entry(lib: Any, index: int) -> dict[str, Any]:
    """One device's name, arch, memory, SM count and L2 size."""
    device = _int_out(lib, "cuDeviceGet", index)
    name = ctypes.create_string_buffer(NAME_LENGTH)
    _check(lib, lib.cuDeviceGetName(name, NAME_LENGTH, device), "cuDeviceGetName")
    memory = ctypes.c_size_t(0)
    _check(lib, lib.cuDeviceTotalMem_v2(ctypes.pointer(memory), device), "cuDeviceTotalMem_v2")
    attrs = {key: _int_out(lib, "cuDeviceGetAttribute", code, device) for key, code in ATTRIBUTES.items()}
    return {
        "index": index,
        "name": name.value.decode(errors="replace"),
        "arch": cuda_arch_name(attrs["cc_major"], attrs["cc_minor"]),
        "memory_bytes": int(memory.value),
        "compute_units": attrs["compute_units"],
        "l2_bytes": attrs["l2_bytes"],
    }


def device_facts(lib: Any) -> dict[str, Any]:
    """The visible devices. Raises ``DriverError`` (or AttributeError for a missing symbol) when the driver fails.

    ``CUDA_ERROR_NO_DEVICE`` (no GPU, or visibility variables hiding every one) is an answer:
    no devices, as ``torch.cuda.is_available()`` would say.
    """
    version = driver_version(lib)
    status = lib.cuInit(0)
    if status == CUDA_ERROR_NO_DEVICE:
        return {"available": False, "count": 0, "devices": [], "errors": [], "driver_version": version, "source": "driver_api"}
    _check(lib, status, "cuInit")
    count = _int_out(lib, "cuDeviceGetCount")
    devices, errors = [], []
    for index in range(count):
        try:
            devices.append(device_entry(lib, index))
        except DriverError as exc:
            errors.append([index, str(exc)])
    return {"available": count > 0, "count": count, "devices": devices, "errors": errors,
            "driver_version": version, "source": "driver_api"}
