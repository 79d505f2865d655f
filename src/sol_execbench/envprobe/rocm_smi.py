"""AMD device clocks, power cap, partitions and performance determinism, from amd-smi or rocm-smi.

Parsers take the tools' JSON text and tolerate the shapes different ROCm releases print: a list
of per-GPU objects or ``{"gpu_data": [...]}``, values as ``{"value": 2100, "unit": "MHz"}`` or
bare numbers, and ``"N/A"`` for what a device does not report.
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ._common import find_tool, rocm_root, run_command

DETERMINISM_LEVELS = {"DETERMINISM", "STABLE_STD", "STABLE_PEAK", "STABLE_MIN_SCLK", "STABLE_MIN_MCLK", "MANUAL"}
"""Performance levels that pin clocks (anything but AUTO/LOW/HIGH)."""


def empty_device() -> dict[str, Any]:
    return {
        "index": None,
        "market_name": None,
        "gfx_target": None,
        "compute_units": None,
        "vbios_version": None,
        "driver_version": None,
        "compute_partition": None,
        "memory_partition": None,
        "perf_level": None,
        "clocks_pinned": None,
        "power_cap_w": None,
        "clocks": {
            "current": {"gfx_mhz": None, "mem_mhz": None},
            "max": {"gfx_mhz": None, "mem_mhz": None},
            "gfx_clk_locked": None,
        },
        "socket_power_w": None,
        "temperature_hotspot_c": None,
    }


def empty() -> dict[str, Any]:
    return {"tool": None, "devices": []}


def _value(item: Any) -> float | int | None:
    if isinstance(item, dict):
        item = item.get("value")
    if isinstance(item, (int, float)) and not isinstance(item, bool):
        return item
    if isinstance(item, str):
        match = re.fullmatch(r"\s*\(?(-?\d+(?:\.\d+)?)\s*(?:[a-zA-Z%]*)\)?\s*", item)
        if match:
            number = float(match.group(1))
            return int(number) if number.is_integer() else number
    return None


def _text(item: Any) -> str | None:
    return item if isinstance(item, str) and item.strip() and item.strip() != "N/A" else None


def _gpu_list(text: str) -> list[dict[str, Any]]:
    data = json.loads(text)
    if isinstance(data, dict):
        data = data.get("gpu_data", [data])
    return [d for d in data if isinstance(d, dict)] if isinstance(data, list) else []


def _perf_fields(level: str | None) -> dict[str, Any]:
    normal = level.upper() if level else None
    return {"perf_level": normal, "clocks_pinned": (normal in DETERMINISM_LEVELS) if normal else None}


def _static_fields(dev: dict[str, Any], static: dict[str, Any]) -> None:
    asic, vbios = static.get("asic") or {}, static.get("vbios") or {}
    partition, limit = static.get("partition") or {}, static.get("limit") or {}
    dev.update(
        market_name=_text(asic.get("market_name")),
        gfx_target=_text(asic.get("target_graphics_version")),
        compute_units=_value(asic.get("num_compute_units")),
        vbios_version=_text(vbios.get("version")),
        driver_version=_text((static.get("driver") or {}).get("version")),
        compute_partition=_text(partition.get("compute_partition") or partition.get("accelerator_partition")),
        memory_partition=_text(partition.get("memory_partition")),
        power_cap_w=_value(limit.get("max_power") or limit.get("power_cap")),
    )


def _metric_fields(dev: dict[str, Any], metric: dict[str, Any]) -> None:
    clock = metric.get("clock") or {}
    gfx, mem = clock.get("gfx_0") or {}, clock.get("mem_0") or {}
    dev["clocks"] = {
        "current": {"gfx_mhz": _value(gfx.get("clk")), "mem_mhz": _value(mem.get("clk"))},
        "max": {"gfx_mhz": _value(gfx.get("max_clk")), "mem_mhz": _value(mem.get("max_clk"))},
        "gfx_clk_locked": {"ENABLED": True, "DISABLED": False}.get(str(gfx.get("clk_locked")).upper()),
    }
    power, temperature = metric.get("power") or {}, metric.get("temperature") or {}
    dev["socket_power_w"] = _value(power.get("socket_power"))
    dev["temperature_hotspot_c"] = _value(temperature.get("hotspot"))
    dev.update(_perf_fields(_text(metric.get("perf_level"))))


def parse_amd_smi(static_text: str | None, metric_text: str | None) -> list[dict[str, Any]]:
    """``amd-smi static --json`` and ``amd-smi metric --json`` -> device entries (either may be None)."""
    statics = _gpu_list(static_text) if static_text else []
    metrics = _gpu_list(metric_text) if metric_text else []
    by_index: dict[int, dict[str, Any]] = {}
    for items, fill in ((statics, _static_fields), (metrics, _metric_fields)):
        for position, item in enumerate(items):
            index = int(item.get("gpu", position))
            fill(by_index.setdefault(index, {**empty_device(), "index": index}), item)
    return [by_index[i] for i in sorted(by_index)]


def parse_rocm_smi(text: str) -> list[dict[str, Any]]:
    """``rocm-smi --showperflevel --showclocks --showmaxpower --json`` -> device entries."""
    data = json.loads(text)
    devices = []
    for card, fields in sorted(data.items(), key=lambda kv: int(re.sub(r"\D", "", kv[0]) or 0)):
        if not card.startswith("card") or not isinstance(fields, dict):
            continue
        dev = {**empty_device(), "index": int(re.sub(r"\D", "", card) or 0)}
        dev["clocks"]["current"] = {
            "gfx_mhz": _value(fields.get("sclk clock speed:")),
            "mem_mhz": _value(fields.get("mclk clock speed:")),
        }
        cap = next((v for k, v in fields.items() if k.startswith("Max Graphics Package Power")), None)
        dev["power_cap_w"] = _value(cap)
        dev.update(_perf_fields(_text(fields.get("Performance Level"))))
        devices.append(dev)
    return devices


def _bin_dirs() -> tuple[str, ...]:
    return (str(rocm_root() / "bin"),)


def read_smi() -> tuple[dict[str, Any], str | None]:
    """The ``rocm.smi`` sub-block from amd-smi (preferred) or rocm-smi, and why it is empty if so."""
    block = empty()
    amd_smi = find_tool("amd-smi", _bin_dirs())
    if amd_smi:
        with ThreadPoolExecutor(max_workers=2) as pool:
            static, metric = pool.map(lambda sub: run_command([amd_smi, sub, "--json"]), ("static", "metric"))
        if static.ok or metric.ok:
            try:
                block["devices"] = parse_amd_smi(static.stdout if static.ok else None, metric.stdout if metric.ok else None)
                block["tool"] = "amd-smi"
                failed = [r.error for r in (static, metric) if not r.ok]
                return block, ("; ".join(e for e in failed if e) or None)
            except (ValueError, TypeError, AttributeError) as exc:
                return block, f"amd-smi printed JSON this parser does not know: {exc}"
    rocm_smi = find_tool("rocm-smi", _bin_dirs())
    if rocm_smi is None:
        return block, "neither amd-smi nor rocm-smi is on PATH or in $ROCM_PATH/bin"
    result = run_command([rocm_smi, "--showperflevel", "--showclocks", "--showmaxpower", "--json"])
    if not result.ok:
        return block, result.error
    try:
        block.update(tool="rocm-smi", devices=parse_rocm_smi(result.stdout))
    except (ValueError, AttributeError) as exc:
        return block, f"rocm-smi printed JSON this parser does not know: {exc}"
    return block, None
