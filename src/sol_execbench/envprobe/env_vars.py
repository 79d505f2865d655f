"""Block ``env_vars``: the variables that change which device, library or kernel runs, for both vendors.

Every name in ``CANONICAL_ENV_VARS`` is always present (null when unset); any other variable
with this tool's prefixes (``SOL_EXECBENCH_``, ``SOLEXECBENCH_``) that is set is added too.
"""

from __future__ import annotations

import os
from typing import Any

from ._common import Reasons

OWN_PREFIXES = ("SOL_EXECBENCH_", "SOLEXECBENCH_")

ENV_VAR_GROUPS: dict[str, tuple[str, ...]] = {
    "visibility": (
        "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
        "GPU_DEVICE_ORDINAL", "HSA_OVERRIDE_GFX_VERSION",
    ),
    "launch": (
        "CUDA_LAUNCH_BLOCKING", "HIP_LAUNCH_BLOCKING", "AMD_SERIALIZE_KERNEL", "AMD_SERIALIZE_COPY",
        "CUDA_MODULE_LOADING", "CUDA_DEVICE_MAX_CONNECTIONS", "CUDA_CACHE_DISABLE", "GPU_MAX_HW_QUEUES",
        "HSA_ENABLE_SDMA", "OMP_NUM_THREADS", "HSA_ENABLE_COREDUMP", "AMD_LOG_LEVEL", "ROCM_DISABLE_CRASH_DUMP",
        "HIP_ENABLE_COREDUMP",
    ),
    "libraries": ("LD_LIBRARY_PATH", "LD_PRELOAD", "CUDA_HOME", "CUDA_PATH", "ROCM_PATH", "HIP_PATH", "HIP_PLATFORM"),
    "build": ("PYTORCH_ROCM_ARCH", "TORCH_CUDA_ARCH_LIST", "TORCH_EXTENSIONS_DIR", "TRITON_CACHE_DIR", "TRITON_INTERPRET"),
    "gemm": (
        "CUBLAS_WORKSPACE_CONFIG", "CUBLASLT_WORKSPACE_SIZE", "NVIDIA_TF32_OVERRIDE", "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE",
        "TORCH_BLAS_PREFER_CUBLASLT", "TORCH_BLAS_PREFER_HIPBLASLT", "TORCH_HIPBLASLT_TUNING_FILE",
        "TORCH_HIPBLASLT_TUNING_OVERRIDE_FILE", "HIPBLASLT_TENSILE_LIBPATH", "ROCBLAS_TENSILE_LIBPATH",
        "PYTORCH_TUNABLEOP_ENABLED", "PYTORCH_TUNABLEOP_TUNING", "PYTORCH_TUNABLEOP_FILENAME",
    ),
    "miopen": (
        "MIOPEN_FIND_MODE", "MIOPEN_FIND_ENFORCE", "MIOPEN_USER_DB_PATH", "MIOPEN_SYSTEM_DB_PATH",
        "MIOPEN_DEBUG_DISABLE_FIND_DB", "MIOPEN_CUSTOM_CACHE_DIR",
    ),
    "attention": ("TORCH_ROCM_FA_PREFER_CK", "TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL", "AOTRITON_INSTALLED_PREFIX"),
    "allocator": ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF", "PYTORCH_NO_CUDA_MEMORY_CACHING"),
    "collectives": (
        "NCCL_DEBUG", "NCCL_ALGO", "NCCL_PROTO", "NCCL_P2P_LEVEL", "NCCL_P2P_DISABLE", "NCCL_IB_HCA", "NCCL_IB_DISABLE",
        "NCCL_SOCKET_IFNAME", "NCCL_NVLS_ENABLE", "RCCL_MSCCL_ENABLE", "RCCL_MSCCLPP_ENABLE",
        "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS",
    ),
    "sol_execbench": (
        "SOLEXECBENCH_ENV_SNAPSHOT", "SOLEXECBENCH_ENV_SNAPSHOT_PATH", "SOL_EXECBENCH_PYTORCH_SRC",
        "SOL_EXECBENCH_GRACEFUL_EXIT", "SOL_EXECBENCH_CLOCKS_LOCKED",
        "SOL_EXECBENCH_GPU_CLK_MHZ", "SOL_EXECBENCH_DRAM_CLK_MHZ", "SOL_EXECBENCH_IMAGE_DIGEST",
        "SOL_EXECBENCH_HOST_ROCM_VERSION", "SOL_EXECBENCH_HOST_DRIVER_VERSION", "SOL_EXECBENCH_RUNTIME_DEVICE_COUNT",
        "SOL_EXECBENCH_RUNTIME_DEVICE_NAME", "SOL_EXECBENCH_RUNTIME_GFX_ARCHITECTURE", "SOL_EXECBENCH_GPU_ACCESSIBLE",
        "SOL_EXECBENCH_DEV_KFD_PRESENT", "SOL_EXECBENCH_DEV_KFD_ACCESSIBLE", "SOL_EXECBENCH_DEV_DRI_PRESENT",
        "SOL_EXECBENCH_DEV_DRI_ACCESSIBLE", "SOL_EXECBENCH_ALLOW_MIXED_VERSION_DEPENDENCIES",
        "SOL_EXECBENCH_ALLOW_UNTESTED_TARGET_SMOKE", "SOL_EXECBENCH_RECORD_CONTAINER_VALIDATION",
        "SOL_EXECBENCH_COMPATIBILITY_ENTRY", "SOL_EXECBENCH_COMPATIBILITY_MATRIX", "FLASHINFER_TRACE_DIR",
    ),
}

CANONICAL_ENV_VARS: tuple[str, ...] = tuple(name for names in ENV_VAR_GROUPS.values() for name in names)

VOLATILE_ENV_VARS = frozenset({"SOLEXECBENCH_ENV_SNAPSHOT", "SOLEXECBENCH_ENV_SNAPSHOT_PATH", "SOL_EXECBENCH_GRACEFUL_EXIT"})
"""Variables that say where this run's outputs go or how the process exits, not what it runs on."""


def empty() -> dict[str, Any]:
    return {name: None for name in CANONICAL_ENV_VARS}


def capture(environ: dict[str, str]) -> dict[str, Any]:
    """The canonical variables (null when unset), then any other set variable with this tool's prefixes."""
    block: dict[str, Any] = {name: environ.get(name) for name in CANONICAL_ENV_VARS}
    for name in sorted(environ):
        if name.startswith(OWN_PREFIXES) and name not in block:
            block[name] = environ[name]
    return block


def probe() -> tuple[dict[str, Any], list[str]]:
    return capture(dict(os.environ)), Reasons("env_vars").lines
