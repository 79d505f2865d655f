"""Expensive probes, run only with ``--extended``, each under its own time box.

``nm`` over the PyTorch GPU library (400 MB to 1 GB) takes tens of seconds; it tells which
kernel libraries were compiled into the wheel (Composable Kernel on ROCm, CUTLASS and
FlashAttention on CUDA) rather than which are installed on the system.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ._common import EXTENDED_TIMEOUT_S, Reasons, find_tool, run_command

SYMBOL_NAMESPACES = {"ck": "ck", "ck_tile": "ck_tile", "cutlass": "cutlass", "flash": "flash"}
_NAMESPACE_RE = {name: re.compile(rf"(?<!\w){ns}::") for name, ns in SYMBOL_NAMESPACES.items()}
GPU_LIBRARIES = ("libtorch_hip.so", "libtorch_cuda.so")


def empty() -> dict[str, Any]:
    return {"library": None, "counts": {name: None for name in SYMBOL_NAMESPACES}}


def count_symbols(nm_output: str) -> dict[str, int]:
    """Defined symbols per kernel-library namespace in demangled ``nm`` output (a symbol counts once per namespace)."""
    counts = dict.fromkeys(SYMBOL_NAMESPACES, 0)
    for line in nm_output.splitlines():
        for name, pattern in _NAMESPACE_RE.items():
            if pattern.search(line):
                counts[name] += 1
    return counts


def bundled_symbols(torch_path: Path, why: Reasons) -> dict[str, Any]:
    """Kernel-library symbol counts in the torch wheel's GPU library (``nm -DC --defined-only``)."""
    block = empty()
    library = next((torch_path / "lib" / n for n in GPU_LIBRARIES if (torch_path / "lib" / n).exists()), None)
    if library is None:
        return block  # a CPU build has no GPU library: nothing to count
    block["library"] = str(library)
    nm = find_tool("nm")
    if nm is None:
        why.add("bundled_symbols", "nm (binutils) is not on PATH")
        return block
    result = run_command([nm, "-DC", "--defined-only", str(library)], timeout=EXTENDED_TIMEOUT_S)
    if not result.ok:
        why.add("bundled_symbols", result.error or "nm failed")
        return block
    block["counts"] = count_symbols(result.stdout)
    return block
