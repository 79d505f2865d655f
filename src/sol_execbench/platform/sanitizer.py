"""Which memory checker runs a GPU program unmodified, per vendor (``--sanitize``)."""

from __future__ import annotations

import os
import shutil

_CUDA_SANITIZER_PATHS = ("/usr/local/cuda/bin/compute-sanitizer", "/opt/nvidia/compute-sanitizer/compute-sanitizer")


def memcheck_command(vendor: str) -> tuple[list[str] | None, str]:
    """(command prefix, tool name) for a memory-checking run, or (None, why not)."""
    if vendor == "cuda":
        exe = shutil.which("compute-sanitizer") or next((p for p in _CUDA_SANITIZER_PATHS if os.path.exists(p)), None)
        if exe is None:
            return None, "compute-sanitizer not found (it ships with the CUDA toolkit)"
        return [exe, "--tool", "memcheck", "--print-limit", "200"], "compute-sanitizer memcheck"
    if vendor == "rocm":
        return None, ("no memory checker runs unmodified programs on ROCm (AddressSanitizer needs an "
                      "instrumented build of the solution and of PyTorch)")
    return None, "no GPU: the memory checker checks device memory"
