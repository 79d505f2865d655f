"""Block ``accelerator``: the GPUs torch sees, read without importing torch where possible.

- CPU build of torch: torch sees no GPU, whatever the host has.
- CUDA build: the CUDA driver API (``cuda_driver``; no CUDA context), which honours the visibility
  variables as torch does. A driver older than torch's CUDA major means torch sees no GPU. When
  the driver API itself fails, torch is asked (in a child interpreter, cached: ``torch_facts``).
- ROCm build: torch, in the child interpreter, cached under the install, hardware and visibility
  stamps (``torch_facts``); ``rocm.agents`` has what ``rocm_agent_enumerator`` lists.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from sol_execbench.platform import vendor_hint

from . import cuda_driver
from ._common import Context, Reasons, error_text


def empty() -> dict[str, Any]:
    return {
        "vendor": None,
        "vendor_hint": None,
        "torch_sees_gpu": None,
        "device_count": None,
        "arch_counts": None,
        "devices": [],
    }


def _none_visible(**extra: Any) -> dict[str, Any]:
    return {"available": False, "count": 0, "devices": [], "errors": [], **extra}


def _torch_devices(ctx: Context, why: Reasons, after: str = "") -> dict[str, Any] | None:
    record, error = ctx.facts.devices()
    if record is None:
        why.add("devices", f"{after}{error}")
    return record


def _too_old(record: dict[str, Any], torch_cuda: str) -> str | None:
    """Why torch cannot use the GPUs the driver lists: a driver older than torch's CUDA major."""
    version = record.get("driver_version")
    try:
        needed = int(str(torch_cuda).split(".")[0])
    except ValueError:
        return None
    if version is None or version // 1000 >= needed:
        return None
    return (f"the driver supports CUDA {version // 1000}.{(version % 1000) // 10}, older than the CUDA {torch_cuda} "
            "torch was built with: torch sees no GPU")


def _cuda_devices(ctx: Context, why: Reasons) -> dict[str, Any] | None:
    lib = cuda_driver.load()
    if lib is None:
        return _none_visible(source="driver_api")  # no NVIDIA driver: torch sees no GPU either
    try:
        record = cuda_driver.device_facts(lib)
    except (cuda_driver.DriverError, AttributeError, OSError) as exc:
        return _torch_devices(ctx, why, f"CUDA driver API failed ({error_text(exc)}); torch fallback: ")
    too_old = _too_old(record, ctx.facts.cuda_version)
    if too_old:
        why.add("devices", too_old)
        return _none_visible(source="driver_api", explained=True)
    return record


def read_devices(ctx: Context, why: Reasons) -> dict[str, Any] | None:
    """``{available, count, devices, errors}`` as torch would report them, or None (reason added)."""
    if ctx.hip_build:
        return _torch_devices(ctx, why)
    if ctx.cuda_build:
        return _cuda_devices(ctx, why)
    return _none_visible()  # a CPU build never sees a GPU


def probe(ctx: Context) -> tuple[dict[str, Any], list[str]]:
    block, why = empty(), Reasons("accelerator")
    hint = vendor_hint()
    block["vendor_hint"] = hint
    devices_why = Reasons("accelerator")
    found = read_devices(ctx, devices_why) if ctx.facts is not None else None
    record, error = ctx.build_facts()  # after the device read: on a cold probe both wait on a child
    if record is None:
        why.add("", error or "torch is not importable")
        return block, why.lines
    why.lines.extend(devices_why.lines)
    if found is None:
        return block, why.lines
    block.update(torch_sees_gpu=bool(found["available"]), device_count=int(found["count"]))
    if not found["available"]:
        if hint != "cpu" and not found.get("explained"):
            why.add("devices", f"the host looks like a {hint} host but torch sees no GPU "
                    "(a CPU build of torch, or a visibility variable hiding every device?)")
        return block, why.lines
    block["vendor"] = "rocm" if ctx.hip_build else "cuda"
    block["devices"] = [dict(device) for device in found["devices"]]
    for index, message in found.get("errors") or []:
        why.add(f"devices[{index}]", f"properties unreadable: {message}")
    block["arch_counts"] = dict(sorted(Counter(d["arch"] for d in block["devices"]).items())) or None
    return block, why.lines
