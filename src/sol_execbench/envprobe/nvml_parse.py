"""Parsers for NVIDIA device readings: raw NVML values -> the ``nvidia`` block's device entries.

The runners in ``nvidia.py`` produce a *raw reading* (plain JSON: what NVML returned, integers in
NVML's units); ``nvidia-smi --query-gpu`` CSV is turned into the same raw shape. Tests feed
recorded raw readings straight to ``parse_reading``.
"""

from __future__ import annotations

import re
from typing import Any

from sol_execbench.platform.clocks import NVML_REASON_BITS

# nvmlClocksEventReasons bit -> name: one table, in the platform layer that also samples clocks.
THROTTLE_REASON_BITS: dict[int, str] = NVML_REASON_BITS
COMPUTE_MODES = {0: "default", 1: "exclusive_thread", 2: "prohibited", 3: "exclusive_process"}

# nvidia-smi --query-gpu fields, in order, and the raw key each fills.
SMI_FIELDS: tuple[tuple[str, str], ...] = (
    ("index", "index"),
    ("name", "name"),
    ("uuid", "uuid"),
    ("pci.bus_id", "pci_bus_id"),
    ("driver_version", "driver_version"),
    ("vbios_version", "vbios_version"),
    ("memory.total", "memory_total_mib"),
    ("clocks.sm", "clock_sm"),
    ("clocks.mem", "clock_mem"),
    ("clocks.gr", "clock_graphics"),
    ("clocks.max.sm", "max_clock_sm"),
    ("clocks.max.mem", "max_clock_mem"),
    ("clocks.max.gr", "max_clock_graphics"),
    ("clocks.applications.graphics", "app_clock_graphics"),
    ("clocks.applications.memory", "app_clock_mem"),
    ("clocks.default_applications.graphics", "default_app_clock_graphics"),
    ("clocks.default_applications.memory", "default_app_clock_mem"),
    ("clocks_throttle_reasons.active", "throttle_reasons_mask"),
    ("power.limit", "power_limit_w"),
    ("power.default_limit", "default_power_limit_w"),
    ("enforced.power.limit", "enforced_power_limit_w"),
    ("power.draw", "power_draw_w"),
    ("temperature.gpu", "temperature_c"),
    ("ecc.mode.current", "ecc_current"),
    ("ecc.mode.pending", "ecc_pending"),
    ("persistence_mode", "persistence_mode"),
    ("mig.mode.current", "mig_current"),
    ("mig.mode.pending", "mig_pending"),
    ("compute_mode", "compute_mode"),
    ("pstate", "pstate"),
)


def empty_device() -> dict[str, Any]:
    return {
        "index": None,
        "name": None,
        "uuid": None,
        "pci_bus_id": None,
        "vbios_version": None,
        "memory_total_bytes": None,
        "clocks": {
            "current": {"sm_mhz": None, "mem_mhz": None, "graphics_mhz": None},
            "max": {"sm_mhz": None, "mem_mhz": None, "graphics_mhz": None},
            "application": {"graphics_mhz": None, "mem_mhz": None},
            "default_application": {"graphics_mhz": None, "mem_mhz": None},
            "application_clocks_changed": None,
        },
        "throttle_reasons": None,
        "power": {"limit_w": None, "default_limit_w": None, "enforced_limit_w": None, "draw_w": None},
        "temperature_c": None,
        "ecc": {"current": None, "pending": None},
        "persistence_mode": None,
        "mig": {"current": None, "pending": None},
        "compute_mode": None,
        "performance_state": None,
    }


def throttle_reasons(mask: int | None) -> list[str] | None:
    """Names of the set bits of a clocks-event-reasons mask (unknown bits as ``bit_0x...``)."""
    if mask is None:
        return None
    names = [name for bit, name in THROTTLE_REASON_BITS.items() if mask & bit]
    known = sum(THROTTLE_REASON_BITS)
    names.extend(f"bit_{1 << i:#x}" for i in range(64) if mask & ~known & (1 << i))
    return names


def cuda_driver_version(code: int | None) -> str | None:
    """``12040`` -> ``12.4`` (cudaDriverGetVersion / nvmlSystemGetCudaDriverVersion encoding)."""
    if not code:
        return None
    return f"{code // 1000}.{(code % 1000) // 10}"


def _watts(milliwatts: Any) -> float | None:
    return round(milliwatts / 1000.0, 3) if isinstance(milliwatts, (int, float)) else None


def _enabled(value: Any) -> bool | None:
    return bool(value) if isinstance(value, int) else None


def _pair(value: Any) -> dict[str, bool | None]:
    if isinstance(value, (list, tuple)) and len(value) == 2:
        return {"current": _enabled(value[0]), "pending": _enabled(value[1])}
    return {"current": None, "pending": None}


def _clock_group(raw: dict[str, Any], key: str, names: tuple[str, ...]) -> dict[str, Any]:
    values = raw.get(key) or {}
    return {f"{name}_mhz": values.get(name) for name in names}


def parse_device(raw: dict[str, Any]) -> dict[str, Any]:
    """One raw NVML device reading -> one ``nvidia.devices[]`` entry (fully shaped)."""
    dev = empty_device()
    for key in ("index", "name", "uuid", "pci_bus_id", "vbios_version", "memory_total_bytes", "temperature_c"):
        dev[key] = raw.get(key)
    clocks = dev["clocks"]
    clocks["current"] = _clock_group(raw, "clocks_mhz", ("sm", "mem", "graphics"))
    clocks["max"] = _clock_group(raw, "max_clocks_mhz", ("sm", "mem", "graphics"))
    clocks["application"] = _clock_group(raw, "application_clocks_mhz", ("graphics", "mem"))
    clocks["default_application"] = _clock_group(raw, "default_application_clocks_mhz", ("graphics", "mem"))
    app, default = clocks["application"], clocks["default_application"]
    if None not in (*app.values(), *default.values()):
        clocks["application_clocks_changed"] = app != default
    dev["throttle_reasons"] = throttle_reasons(raw.get("throttle_reasons_mask"))
    dev["power"] = {
        "limit_w": _watts(raw.get("power_limit_mw")),
        "default_limit_w": _watts(raw.get("default_power_limit_mw")),
        "enforced_limit_w": _watts(raw.get("enforced_power_limit_mw")),
        "draw_w": _watts(raw.get("power_draw_mw")),
    }
    dev["ecc"] = _pair(raw.get("ecc_mode"))
    dev["mig"] = _pair(raw.get("mig_mode"))
    dev["persistence_mode"] = _enabled(raw.get("persistence_mode"))
    mode = raw.get("compute_mode")
    dev["compute_mode"] = COMPUTE_MODES.get(mode, f"mode_{mode}") if isinstance(mode, int) else None
    pstate = raw.get("performance_state")
    dev["performance_state"] = f"P{pstate}" if isinstance(pstate, int) and 0 <= pstate < 32 else None
    return dev


def parse_reading(raw: dict[str, Any]) -> dict[str, Any]:
    """A whole raw reading -> the NVML part of the ``nvidia`` block."""
    return {
        "nvml_source": raw.get("source"),
        "driver_version": raw.get("driver_version"),
        "nvml_version": raw.get("nvml_version"),
        "cuda_driver_version": cuda_driver_version(raw.get("cuda_driver_version")),
        "devices": [parse_device(d) for d in raw.get("devices") or []],
    }


def _smi_value(text: str) -> str | None:
    text = text.strip()
    return None if not text or text.startswith("[") or text in ("N/A", "[N/A]") else text


def _smi_number(text: str | None, scale: float = 1.0) -> int | None:
    if text is None:
        return None
    try:
        return int(round(float(text) * scale))
    except ValueError:
        return None


def _smi_flag(text: str | None) -> int | None:
    return {"enabled": 1, "disabled": 0}.get((text or "").lower())


def _smi_device(values: dict[str, str | None]) -> dict[str, Any]:
    n = _smi_number
    mode_names = {v.replace("_", "").lower(): k for k, v in COMPUTE_MODES.items()}
    pstate = re.fullmatch(r"P(\d+)", values.get("pstate") or "")
    mask = values.get("throttle_reasons_mask")
    return {
        "index": n(values["index"]),
        "name": values["name"],
        "uuid": values["uuid"],
        "pci_bus_id": values["pci_bus_id"],
        "vbios_version": values["vbios_version"],
        "memory_total_bytes": n(values["memory_total_mib"], 1024 * 1024),
        "clocks_mhz": {"sm": n(values["clock_sm"]), "mem": n(values["clock_mem"]), "graphics": n(values["clock_graphics"])},
        "max_clocks_mhz": {"sm": n(values["max_clock_sm"]), "mem": n(values["max_clock_mem"]), "graphics": n(values["max_clock_graphics"])},
        "application_clocks_mhz": {"graphics": n(values["app_clock_graphics"]), "mem": n(values["app_clock_mem"])},
        "default_application_clocks_mhz": {"graphics": n(values["default_app_clock_graphics"]), "mem": n(values["default_app_clock_mem"])},
        "throttle_reasons_mask": int(mask, 16) if mask and re.fullmatch(r"0x[0-9a-fA-F]+", mask) else None,
        "power_limit_mw": n(values["power_limit_w"], 1000),
        "default_power_limit_mw": n(values["default_power_limit_w"], 1000),
        "enforced_power_limit_mw": n(values["enforced_power_limit_w"], 1000),
        "power_draw_mw": n(values["power_draw_w"], 1000),
        "temperature_c": n(values["temperature_c"]),
        "ecc_mode": [_smi_flag(values["ecc_current"]), _smi_flag(values["ecc_pending"])],
        "persistence_mode": _smi_flag(values["persistence_mode"]),
        "mig_mode": [_smi_flag(values["mig_current"]), _smi_flag(values["mig_pending"])],
        "compute_mode": mode_names.get((values["compute_mode"] or "").replace("_", "").lower()),
        "performance_state": int(pstate.group(1)) if pstate else None,
    }


def parse_nvidia_smi_csv(text: str) -> dict[str, Any]:
    """``nvidia-smi --query-gpu=<SMI_FIELDS> --format=csv,noheader,nounits`` -> a raw reading."""
    devices, driver = [], None
    for line in text.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(SMI_FIELDS):
            continue
        values = {key: _smi_value(cell) for (_, key), cell in zip(SMI_FIELDS, cells, strict=True)}
        driver = driver or values["driver_version"]
        devices.append(_smi_device(values))
    return {"source": "nvidia-smi", "driver_version": driver, "nvml_version": None, "cuda_driver_version": None, "devices": devices}
