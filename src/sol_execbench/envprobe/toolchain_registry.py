"""The registry of toolchain artifacts sol-execbench knows: compilers, profilers, binary tools,
runtimes, math, collective and kernel libraries, for both vendors.

Everything here is *declared* (written by us from the vendors' documentation): the architectures
an artifact supports and the minimum CUDA/ROCm release. Detection (``toolchain.py``) raises an
entry's evidence from ``declared`` to ``detected``, ``version_verified`` or ``exercised``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .toolchain_detect import (
    Detector,
    Executable,
    NvidiaLibrary,
    PythonPackage,
    RocmLibrary,
    aotriton_bundled,
    composable_kernel_headers,
)

EVIDENCE_LEVELS = ("declared", "detected", "version_verified", "exercised")
ARTIFACT_TYPES = (
    "compiler", "profiler", "binary_tool", "build_tool", "runtime", "driver_tool",
    "math_library", "collective_library", "kernel_library",
)

ARCH_GENERATIONS: dict[str, str] = {
    "sm_70": "Volta", "sm_75": "Turing", "sm_80": "Ampere", "sm_86": "Ampere", "sm_87": "Ampere", "sm_89": "Ada",
    "sm_90": "Hopper", "sm_100": "Blackwell", "sm_103": "Blackwell", "sm_120": "Blackwell",
    "gfx908": "CDNA1", "gfx90a": "CDNA2", "gfx940": "CDNA3", "gfx941": "CDNA3", "gfx942": "CDNA3", "gfx950": "CDNA4",
    "gfx1030": "RDNA2", "gfx1100": "RDNA3", "gfx1101": "RDNA3", "gfx1102": "RDNA3", "gfx1150": "RDNA3.5",
    "gfx1151": "RDNA3.5", "gfx1200": "RDNA4", "gfx1201": "RDNA4",
}
"""Base architecture (no ``a``/``f`` feature suffix, no ``:xnack`` target features) -> hardware generation."""

NVIDIA_ARCHS = tuple(a for a in ARCH_GENERATIONS if a.startswith("sm_"))
NVIDIA_TENSOR_ARCHS = ("sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120")
AMD_ARCHS = tuple(a for a in ARCH_GENERATIONS if a.startswith("gfx"))
AMD_MATRIX_ARCHS = ("gfx90a", "gfx942", "gfx950", "gfx1100", "gfx1101", "gfx1200", "gfx1201")


@dataclass(frozen=True)
class Artifact:
    id: str
    name: str
    vendor: str
    """nvidia, amd, or any (works with both)."""
    artifact_type: str
    detector: Detector
    gpu_archs: tuple[str, ...] = ()
    """Base architectures it supports; empty means not architecture-specific (host tools)."""
    min_cuda_version: str | None = None
    min_rocm_version: str | None = None
    min_version: str | None = None
    """Oldest version of the artifact itself that sol-execbench supports."""

    @property
    def hardware_generations(self) -> list[str]:
        return sorted({ARCH_GENERATIONS[a] for a in self.gpu_archs if a in ARCH_GENERATIONS})

    def declared(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "vendor": self.vendor,
            "artifact_type": self.artifact_type,
            "gpu_archs": list(self.gpu_archs),
            "hardware_generations": self.hardware_generations,
            "min_cuda_version": self.min_cuda_version,
            "min_rocm_version": self.min_rocm_version,
            "min_version": self.min_version,
        }


def _nv(id_: str, name: str, kind: str, detector: Detector, archs: tuple[str, ...] = NVIDIA_ARCHS, **kw: Any) -> Artifact:
    return Artifact(id_, name, "nvidia", kind, detector, archs, min_cuda_version=kw.pop("min_cuda_version", "12.0"), **kw)


def _amd(id_: str, name: str, kind: str, detector: Detector, archs: tuple[str, ...] = AMD_ARCHS, **kw: Any) -> Artifact:
    return Artifact(id_, name, "amd", kind, detector, archs, min_rocm_version=kw.pop("min_rocm_version", "6.0"), **kw)


_CUDA_TOOL = r"V(\d+\.\d+\.\d+)"
REGISTRY: tuple[Artifact, ...] = (
    # compilers
    _nv("nvcc", "NVIDIA CUDA compiler", "compiler", Executable(("nvcc",), version_pattern=_CUDA_TOOL), min_version="12.0"),
    _nv("nvrtc", "NVRTC runtime compiler", "compiler", NvidiaLibrary("nvrtc")),
    _amd("hipcc", "HIP compiler driver", "compiler", Executable(("hipcc",), version_pattern=r"HIP version:\s*(\d[\d.]*)")),
    _amd("amdclang++", "AMD LLVM clang++", "compiler", Executable(("amdclang++",), version_pattern=r"clang version (\d[\d.]*)", rocm_only=True)),
    Artifact("c++", "host C++ compiler", "any", "compiler", Executable(("c++", "g++", "clang++"))),
    Artifact("triton", "Triton", "any", "compiler", PythonPackage("triton", "triton"), NVIDIA_TENSOR_ARCHS + AMD_MATRIX_ARCHS,
             min_version="3.0"),
    _amd("triton-rocm", "Triton (ROCm wheel)", "compiler", PythonPackage("triton-rocm", "triton"), AMD_MATRIX_ARCHS),
    _nv("cutlass-dsl", "CUTLASS CuTe DSL", "compiler", PythonPackage("nvidia-cutlass-dsl", "cutlass"), ("sm_80", "sm_90", "sm_100")),
    # build tools
    _amd("hipconfig", "HIP configuration tool", "build_tool", Executable(("hipconfig",), version_pattern=r"(\d+\.\d+\.\d+)")),
    Artifact("ninja", "Ninja (PyTorch C++ extensions)", "any", "build_tool", Executable(("ninja",))),
    # profilers
    _nv("ncu", "Nsight Compute CLI", "profiler", Executable(("ncu",), version_pattern=r"Version (\d[\d.]*)")),
    _nv("nsys", "Nsight Systems CLI", "profiler", Executable(("nsys",), version_pattern=r"version (\d[\d.]*)")),
    _nv("cupti", "CUPTI", "profiler", NvidiaLibrary("cupti")),
    _amd("rocprofv3", "ROCprofiler-SDK rocprofv3", "profiler", Executable(("rocprofv3",)), min_rocm_version="6.2"),
    _amd("rocprof", "rocprof (legacy)", "profiler", Executable(("rocprof",), version_args=None)),
    _amd("rocprof-compute", "ROCm Compute Profiler", "profiler", Executable(("rocprof-compute",)), min_rocm_version="6.2"),
    # binary tools
    _nv("cuobjdump", "cuobjdump", "binary_tool", Executable(("cuobjdump",), version_pattern=_CUDA_TOOL)),
    _nv("nvdisasm", "nvdisasm", "binary_tool", Executable(("nvdisasm",), version_pattern=_CUDA_TOOL)),
    _amd("roc-obj", "roc-obj code-object extractor", "binary_tool", Executable(("roc-obj",), version_args=None)),
    _amd("roc-obj-ls", "roc-obj-ls", "binary_tool", Executable(("roc-obj-ls",), version_args=None)),
    _amd("llvm-objdump", "ROCm llvm-objdump", "binary_tool", Executable(("llvm-objdump",), version_pattern=r"LLVM version (\d[\d.]*)", rocm_only=True)),
    # runtimes and driver tools
    _nv("cudart", "CUDA runtime", "runtime", NvidiaLibrary("cudart")),
    _nv("nvidia-smi", "NVIDIA driver (nvidia-smi)", "driver_tool",
        Executable(("nvidia-smi",), version_args=("--query-gpu=driver_version", "--format=csv,noheader"))),
    _amd("rocminfo", "rocminfo", "runtime", Executable(("rocminfo",), version_args=None)),
    _amd("rocm_agent_enumerator", "rocm_agent_enumerator", "runtime", Executable(("rocm_agent_enumerator",), version_args=None)),
    _amd("amd-smi", "AMD SMI", "driver_tool", Executable(("amd-smi",), ("version",), r"AMDSMI Tool:\s*(\d[\d.]*)")),
    _amd("rocm-smi", "ROCm SMI (legacy)", "driver_tool", Executable(("rocm-smi",), version_args=None)),
    # math, collective and kernel libraries
    _nv("cublas", "cuBLAS", "math_library", NvidiaLibrary("cublas")),
    _nv("cublaslt", "cuBLASLt", "math_library", NvidiaLibrary("cublaslt")),
    _nv("cudnn", "cuDNN", "math_library", NvidiaLibrary("cudnn"), min_version="9.0"),
    _nv("nccl", "NCCL", "collective_library", NvidiaLibrary("nccl")),
    _amd("hipblaslt", "hipBLASLt", "math_library", RocmLibrary("hipblaslt"), AMD_MATRIX_ARCHS),
    _amd("rocblas", "rocBLAS", "math_library", RocmLibrary("rocblas")),
    _amd("miopen", "MIOpen", "math_library", RocmLibrary("miopen")),
    _amd("rccl", "RCCL", "collective_library", RocmLibrary("rccl")),
    _amd("composable_kernel", "Composable Kernel", "kernel_library", composable_kernel_headers, AMD_MATRIX_ARCHS),
    _amd("aotriton", "AOTriton (bundled with PyTorch)", "kernel_library", aotriton_bundled, ("gfx90a", "gfx942", "gfx950", "gfx1100", "gfx1201")),
    _amd("aiter", "AITER", "kernel_library", PythonPackage("aiter", "aiter"), ("gfx942", "gfx950")),
    Artifact("flashinfer", "FlashInfer", "nvidia", "kernel_library", PythonPackage("flashinfer-python", "flashinfer"),
             ("sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120"), min_cuda_version="12.0"),
    Artifact("fbgemm_gpu", "FBGEMM GPU", "any", "kernel_library", PythonPackage("fbgemm-gpu", "fbgemm_gpu"),
             NVIDIA_TENSOR_ARCHS + ("gfx90a", "gfx942", "gfx950")),
)
