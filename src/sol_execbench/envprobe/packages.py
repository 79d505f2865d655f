"""Block ``packages``: versions of the Python packages that bring or change kernels."""

from __future__ import annotations

from typing import Any

from sol_execbench.platform.host import TRITON_DISTRIBUTIONS, distribution_version

from ._common import Reasons

# Distribution names as pip knows them; a missing one is reported as null (not installed).
KERNEL_PACKAGES: tuple[str, ...] = (
    "torch",
    "torchvision",
    "torchaudio",
    *TRITON_DISTRIBUTIONS,
    "fbgemm",
    "fbgemm-gpu",
    "fbgemm-gpu-genai",
    "aiter",
    "amd-aiter",
    "flashinfer-python",
    "flashinfer",
    "flash-attn",
    "xformers",
    "nvidia-cutlass-dsl",
    "nvidia-cutlass",
    "cuda-python",
    "cuda-bindings",
    "cupy-cuda12x",
    "tensile",
    "numpy",
    "nvidia-ml-py",
    "amdsmi",
)


def empty() -> dict[str, Any]:
    return {name: None for name in KERNEL_PACKAGES}


def probe() -> tuple[dict[str, Any], list[str]]:
    return {name: distribution_version(name) for name in KERNEL_PACKAGES}, Reasons("packages").lines
