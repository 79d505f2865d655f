"""Block ``nvidia``: driver, per-device clocks and modes (NVML), and the CUDA libraries in use.

NVML is read through ``pynvml`` (the ``nvidia-ml-py`` package, extra ``[nvidia]``) when it can
be imported, else through ``nvidia-smi --query-gpu``; both give the same raw reading, parsed by
``nvml_parse``. On a host with no NVIDIA driver and no CUDA build of torch the block stays null
with ``present: false`` and adds no partial reason (nothing is missing that should be there).
"""

from __future__ import annotations

import os
from typing import Any, Callable

from ._common import UNREAD, Context, Reasons, error_text, find_tool, run_command, start_vendor_block
from .nvidia_libs import cuda_driver_api_version, probe_libraries
from .nvidia_libs import empty as empty_libraries
from .nvml_parse import SMI_FIELDS, cuda_driver_version, parse_nvidia_smi_csv, parse_reading


def empty() -> dict[str, Any]:
    return {
        "present": False,
        "nvml_source": None,
        "driver_version": None,
        "nvml_version": None,
        "cuda_driver_version": None,
        "devices": [],
        "unsupported": [],
        "libraries": empty_libraries(),
    }

_NVML_ERROR_NOT_SUPPORTED = 3  # nvml.h


def driver_present() -> bool:
    return os.path.exists("/dev/nvidiactl") or os.path.exists("/proc/driver/nvidia/version")


def _text(value: Any) -> Any:
    return value.decode(errors="replace") if isinstance(value, bytes) else value


class _Reader:
    """Calls NVML getters one by one; a failure fills null and a cause (NOT_SUPPORTED is only noted)."""

    def __init__(self, nvml: Any) -> None:
        self.nvml = nvml
        self.causes: list[str] = []
        self.unsupported: list[str] = []
        self.prefix = ""
        """Set to ``devices[i].`` while reading device i, so every cause names its GPU."""

    def get(self, label: str, fn: Callable[..., Any], *args: Any) -> Any:
        label = self.prefix + label
        try:
            return _text(fn(*args))
        except Exception as exc:  # noqa: BLE001 - every NVMLError subclass, missing symbols
            if getattr(exc, "value", None) == _NVML_ERROR_NOT_SUPPORTED:
                self.unsupported.append(label)
            else:
                self.causes.append(f"{label}: {error_text(exc)}")
            return None

    def get_any(self, label: str, fns: tuple[Any, ...], *args: Any) -> Any:
        """The first of ``fns`` (newer API first) that answers; only the last failure is kept."""
        usable = [fn for fn in fns if fn is not None]
        for fn in usable[:-1]:
            try:
                return _text(fn(*args))
            except Exception:  # noqa: BLE001 - e.g. FunctionNotFound on an older driver
                continue
        return self.get(label, usable[-1], *args) if usable else None


def _clock_set(r: _Reader, fn: Any, handle: Any, names: dict[str, int], label: str) -> dict[str, Any]:
    return {name: r.get(f"{label}.{name}", fn, handle, clock) for name, clock in names.items()}


def _read_device(r: _Reader, index: int) -> dict[str, Any]:
    n = r.nvml
    r.prefix = f"devices[{index}]."
    h = r.get("handle", n.nvmlDeviceGetHandleByIndex, index)
    if h is None:
        return {"index": index}
    three = {"sm": n.NVML_CLOCK_SM, "mem": n.NVML_CLOCK_MEM, "graphics": n.NVML_CLOCK_GRAPHICS}
    two = {"graphics": n.NVML_CLOCK_GRAPHICS, "mem": n.NVML_CLOCK_MEM}
    reasons_fns = (getattr(n, "nvmlDeviceGetCurrentClocksEventReasons", None), getattr(n, "nvmlDeviceGetCurrentClocksThrottleReasons", None))
    pci = r.get("pci", n.nvmlDeviceGetPciInfo, h)
    memory = r.get("memory", n.nvmlDeviceGetMemoryInfo, h)
    return {
        "index": index,
        "name": r.get("name", n.nvmlDeviceGetName, h),
        "uuid": r.get("uuid", n.nvmlDeviceGetUUID, h),
        "pci_bus_id": _text(getattr(pci, "busId", None)),
        "vbios_version": r.get("vbios_version", n.nvmlDeviceGetVbiosVersion, h),
        "memory_total_bytes": getattr(memory, "total", None),
        "clocks_mhz": _clock_set(r, n.nvmlDeviceGetClockInfo, h, three, "clocks.current"),
        "max_clocks_mhz": _clock_set(r, n.nvmlDeviceGetMaxClockInfo, h, three, "clocks.max"),
        "application_clocks_mhz": _clock_set(r, n.nvmlDeviceGetApplicationsClock, h, two, "clocks.application"),
        "default_application_clocks_mhz": _clock_set(r, n.nvmlDeviceGetDefaultApplicationsClock, h, two, "clocks.default_application"),
        "throttle_reasons_mask": r.get_any("throttle_reasons", reasons_fns, h),
        "power_limit_mw": r.get("power.limit", n.nvmlDeviceGetPowerManagementLimit, h),
        "default_power_limit_mw": r.get("power.default_limit", n.nvmlDeviceGetPowerManagementDefaultLimit, h),
        "enforced_power_limit_mw": r.get("power.enforced_limit", n.nvmlDeviceGetEnforcedPowerLimit, h),
        "power_draw_mw": r.get("power.draw", n.nvmlDeviceGetPowerUsage, h),
        "temperature_c": r.get("temperature", n.nvmlDeviceGetTemperature, h, n.NVML_TEMPERATURE_GPU),
        "ecc_mode": r.get("ecc", n.nvmlDeviceGetEccMode, h),
        "persistence_mode": r.get("persistence_mode", n.nvmlDeviceGetPersistenceMode, h),
        "mig_mode": r.get("mig", n.nvmlDeviceGetMigMode, h),
        "compute_mode": r.get("compute_mode", n.nvmlDeviceGetComputeMode, h),
        "performance_state": r.get("performance_state", n.nvmlDeviceGetPerformanceState, h),
    }


def read_pynvml() -> tuple[dict[str, Any] | None, list[str], str | None]:
    """A raw reading through pynvml: ``(reading, per-field causes, None)`` or ``(None, [], why not)``."""
    try:
        import pynvml
    except ImportError:
        return None, [], "pynvml is not importable (install the [nvidia] extra: nvidia-ml-py)"
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001
        return None, [], f"nvmlInit failed: {error_text(exc)}"
    try:
        r = _Reader(pynvml)
        count = r.get("device_count", pynvml.nvmlDeviceGetCount) or 0
        cuda_fns = (getattr(pynvml, "nvmlSystemGetCudaDriverVersion_v2", None), getattr(pynvml, "nvmlSystemGetCudaDriverVersion", None))
        raw = {
            "source": "pynvml",
            "driver_version": r.get("driver_version", pynvml.nvmlSystemGetDriverVersion),
            "nvml_version": r.get("nvml_version", pynvml.nvmlSystemGetNVMLVersion),
            "cuda_driver_version": r.get_any("cuda_driver_version", cuda_fns),
            "devices": [_read_device(r, i) for i in range(count)],
        }
        if r.unsupported:
            raw["unsupported"] = sorted(set(r.unsupported))
        return raw, r.causes, None
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def read_nvidia_smi() -> tuple[dict[str, Any] | None, str | None]:
    tool = find_tool("nvidia-smi")
    if tool is None:
        return None, "nvidia-smi is not on PATH"
    query = ",".join(name for name, _ in SMI_FIELDS)
    result = run_command([tool, f"--query-gpu={query}", "--format=csv,noheader,nounits"])
    if not result.ok:
        return None, result.error
    return parse_nvidia_smi_csv(result.stdout), None


def _fill_nvml(block: dict[str, Any], why: Reasons) -> None:
    raw, causes, failure = read_pynvml()
    if raw is None:
        raw, smi_failure = read_nvidia_smi()
        if raw is None:
            why.add("devices", f"{failure}; nvidia-smi fallback: {smi_failure}")
            return
        why.add("nvml_source", f"{failure}; read nvidia-smi instead (no NVML version)")
    for cause in causes:
        why.add("devices", cause)
    block.update(parse_reading(raw))
    block["unsupported"] = raw.get("unsupported", [])


def read_devices() -> tuple[dict[str, Any], list[str]] | None:
    """The driver and device part (NVML; needs no torch), or None on a host without an NVIDIA driver.

    The snapshot starts this before the torch import so that NVML's start-up overlaps it.
    """
    if not driver_present():
        return None
    fields, why = {}, Reasons("nvidia")
    _fill_nvml(fields, why)
    if fields.get("cuda_driver_version") is None:
        fields["cuda_driver_version"] = cuda_driver_version(cuda_driver_api_version())
    return fields, why.lines


def probe(ctx: Context, devices: Any = UNREAD) -> tuple[dict[str, Any], list[str]]:
    """The whole block; ``devices`` is ``read_devices()``'s result when the caller ran it already."""
    block = empty()
    nvml = read_devices() if devices is UNREAD else devices
    why = start_vendor_block(block, "nvidia", nvml, ctx.cuda_build, "CUDA build of torch but no NVIDIA driver (/dev/nvidiactl absent)")
    if why is None:
        return block, []  # not an NVIDIA host: nothing is missing
    block["libraries"], lines = probe_libraries(ctx)
    return block, why.lines + lines
