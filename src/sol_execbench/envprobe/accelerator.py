"""Block ``accelerator``: the GPUs torch sees, each described by ``platform.current``."""

from __future__ import annotations

from collections import Counter
from typing import Any

from sol_execbench.platform import current, vendor_hint

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


def device_entry(index: int) -> dict[str, Any]:
    info = current(str(index))
    return {
        "index": index,
        "name": info.name,
        "arch": info.arch,
        "memory_bytes": info.memory_bytes,
        "compute_units": info.compute_units,
        "l2_bytes": info.l2_bytes,
    }


def probe(ctx: Context) -> tuple[dict[str, Any], list[str]]:
    block, why = empty(), Reasons("accelerator")
    hint = vendor_hint()
    block["vendor_hint"] = hint
    torch = ctx.torch
    if torch is None:
        why.add("", ctx.torch_error or "torch is not importable")
        return block, why.lines
    try:
        available = bool(torch.cuda.is_available())
        count = int(torch.cuda.device_count()) if available else 0
    except Exception as exc:  # noqa: BLE001
        why.add("devices", f"torch.cuda could not count devices: {error_text(exc)}")
        return block, why.lines
    block.update(torch_sees_gpu=available, device_count=count)
    if not available:
        if hint != "cpu":
            why.add("devices", f"the host looks like a {hint} host but torch sees no GPU "
                    "(a CPU build of torch, or a visibility variable hiding every device?)")
        return block, why.lines
    block["vendor"] = "rocm" if getattr(torch.version, "hip", None) else "cuda"
    for index in range(count):
        try:
            block["devices"].append(device_entry(index))
        except Exception as exc:  # noqa: BLE001
            why.add(f"devices[{index}]", f"properties unreadable: {error_text(exc)}")
    block["arch_counts"] = dict(sorted(Counter(d["arch"] for d in block["devices"]).items())) or None
    return block, why.lines
