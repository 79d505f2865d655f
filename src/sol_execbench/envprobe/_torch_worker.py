"""What only an imported torch can tell, asked in a short child interpreter (``torch_facts`` starts it).

The probing process does not import torch: ``import torch`` costs about two seconds and CUDA or
HIP initialisation more. On a cache miss ``torch_facts`` runs ``main`` here in a fresh
interpreter with the parent's ``sys.path`` and reads one marked JSON line from its stdout. A
fresh interpreter also makes ``loaded`` mean the same thing on every host and every run: the
shared objects ``import torch`` maps by itself, which are the ones an evaluation child maps.
"""

from __future__ import annotations

import sys
from typing import Any

MARKER = "SOL_EXECBENCH_TORCH_FACTS "
BUILD = "build"
DEVICES = "devices"


def build_facts(torch: Any) -> dict[str, Any]:
    """The build-time facts of the imported torch, raw; ``pytorch_build`` parses them."""
    from pathlib import Path

    from sol_execbench.envprobe._common import error_text
    from sol_execbench.envprobe.files import loaded_libraries

    version = getattr(torch, "version", None)
    facts: dict[str, Any] = {
        "version": str(getattr(torch, "__version__", "")) or None,
        "git_version": getattr(version, "git_version", None),
        "cuda": getattr(version, "cuda", None),
        "hip": getattr(version, "hip", None),
        "debug": getattr(version, "debug", None),
        "install_path": str(Path(torch.__file__).parent),
        "cxx11_abi": getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", None),
        "config": None,
        "config_error": None,
        "arch_flags": None,
        "loaded": loaded_libraries(),
    }
    try:
        facts["config"] = torch.__config__.show()
    except Exception as exc:  # noqa: BLE001 - reported as a reason by pytorch_build
        facts["config_error"] = f"torch.__config__.show() failed: {error_text(exc)}"
    arch_flags = getattr(torch._C, "_cuda_getArchFlags", None)
    try:
        facts["arch_flags"] = arch_flags() if callable(arch_flags) else None
    except Exception:  # noqa: BLE001 - CPU builds raise or return None
        facts["arch_flags"] = None
    return facts


def device_facts(torch: Any) -> dict[str, Any]:
    """The GPUs torch sees and their properties (initialises CUDA/HIP: only ever in the child)."""
    from sol_execbench.envprobe._common import error_text
    from sol_execbench.platform import current

    try:
        available = bool(torch.cuda.is_available())
        count = int(torch.cuda.device_count()) if available else 0
    except Exception as exc:  # noqa: BLE001
        return {"error": f"torch.cuda could not count devices: {error_text(exc)}"}
    devices, errors = [], []
    for index in range(count):
        try:
            info = current(str(index))
        except Exception as exc:  # noqa: BLE001
            errors.append([index, error_text(exc)])
            continue
        devices.append({"index": index, "name": info.name, "arch": info.arch, "memory_bytes": info.memory_bytes,
                        "compute_units": info.compute_units, "l2_bytes": info.l2_bytes})
    return {"available": available, "count": count, "devices": devices, "errors": errors, "source": "torch"}


def compute(mode: str) -> dict[str, Any]:
    """``build_facts`` or ``device_facts`` of a freshly imported torch, or ``{"error": cause}``; never raises."""
    from sol_execbench.envprobe._common import error_text, import_torch

    torch, error = import_torch()
    if torch is None:
        return {"error": error}
    try:
        return build_facts(torch) if mode == BUILD else device_facts(torch)
    except Exception as exc:  # noqa: BLE001 - the parent turns it into a reason
        return {"error": f"torch {mode} facts failed: {error_text(exc)}"}


def main(mode: str) -> int:
    import json

    sys.stdout.write(MARKER + json.dumps(compute(mode), default=str) + "\n")
    sys.stdout.flush()
    return 0
