"""The NVIDIA libraries torch runs with: the real file, its version (asked of the library), its hash.

Files are found where the loader put them when torch was imported (``/proc/self/maps`` of the
child interpreter ``torch_facts`` records, cached with the build record), else in the
``nvidia-*`` pip packages, else in the CUDA toolkit. The version comes from the library's own
call (``cublasLtGetVersion``, ``cudnnGetVersion`` ...) made on that same file, so version and
hash describe one file; ``torch.utils.collect_env`` instead reads cuDNN from ldconfig and CUDA
from nvcc, which misreports pip installs.
"""

from __future__ import annotations

import ctypes
import os
import site
import sys
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Callable

from . import cuda_driver
from ._common import Context, Reasons, error_text, run_parts
from .files import best_versioned_file, file_fact, find_loaded, sha256_file, so_version
from .packages import distribution_version

SYSTEM_DIRS = ("/usr/local/cuda/lib64", "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64")


def _int_out(lib: ctypes.CDLL, func: str, *args: int) -> int:
    value = ctypes.c_int(0)
    status = getattr(lib, func)(*args, ctypes.byref(value))
    if status != 0:
        raise OSError(f"{func} returned status {status}")
    return value.value


def _size_t(lib: ctypes.CDLL, func: str) -> int:
    fn = getattr(lib, func)
    fn.restype = ctypes.c_size_t
    return int(fn())


def _runtime_style(code: int) -> str:
    return f"{code // 1000}.{(code % 1000) // 10}"


def _five_digit(code: int) -> str:
    return f"{code // 10000}.{(code % 10000) // 100}.{code % 100}"


def cudnn_version(code: int) -> str:
    """cudnnGetVersion(): 90100 -> 9.1.0 (cuDNN 9 encoding); 8902 -> 8.9.2 (cuDNN 8 encoding)."""
    return _five_digit(code) if code >= 90000 else f"{code // 1000}.{(code % 1000) // 100}.{code % 100}"


def nccl_version(code: int) -> str:
    """ncclGetVersion(): 22105 -> 2.21.5 (2.9 and later); 2708 -> 2.7.8 (older encoding)."""
    return _five_digit(code) if code >= 20900 else f"{code // 1000}.{(code % 1000) // 100}.{code % 100}"


def _nvrtc(lib: ctypes.CDLL) -> str:
    major, minor = ctypes.c_int(0), ctypes.c_int(0)
    if lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)) != 0:
        raise OSError("nvrtcVersion failed")
    return f"{major.value}.{minor.value}"


def _cublas(lib: ctypes.CDLL) -> str:
    return ".".join(str(_int_out(lib, "cublasGetProperty", part)) for part in (0, 1, 2))


@dataclass(frozen=True)
class NvLib:
    key: str
    stem: str
    pip_dir: str
    dist: str
    version_call: Callable[[ctypes.CDLL], str] | None
    may_load: bool
    """Whether the probe may dlopen the file itself when torch has not loaded it."""


NVIDIA_LIBS: tuple[NvLib, ...] = (
    NvLib("cudart", "libcudart", "cuda_runtime", "nvidia-cuda-runtime",
          lambda lib: _runtime_style(_int_out(lib, "cudaRuntimeGetVersion")), True),
    NvLib("cublas", "libcublas", "cublas", "nvidia-cublas", _cublas, True),
    NvLib("cublaslt", "libcublasLt", "cublas", "nvidia-cublas",
          lambda lib: _five_digit(_size_t(lib, "cublasLtGetVersion")), True),
    NvLib("cudnn", "libcudnn", "cudnn", "nvidia-cudnn",
          lambda lib: cudnn_version(_size_t(lib, "cudnnGetVersion")), True),
    NvLib("nccl", "libnccl", "nccl", "nvidia-nccl", lambda lib: nccl_version(_int_out(lib, "ncclGetVersion")), True),
    NvLib("cupti", "libcupti", "cuda_cupti", "nvidia-cuda-cupti", None, False),
    NvLib("nvrtc", "libnvrtc", "cuda_nvrtc", "nvidia-cuda-nvrtc", _nvrtc, True),
)


def empty_library() -> dict[str, Any]:
    return {"version": None, "version_from": None, "path": None, "location": None, "sha256": None, "package_version": None}


def empty() -> dict[str, Any]:
    return {lib.key: empty_library() for lib in NVIDIA_LIBS}


def pip_lib_dirs(lib: NvLib) -> list[Path]:
    """``site-packages/nvidia/<pkg>/lib`` (CUDA 12 wheels) and ``nvidia/cu13/lib`` (CUDA 13 wheels)."""
    roots = [*site.getsitepackages(), site.getusersitepackages(), *sys.path]
    dirs: list[Path] = []
    for root in dict.fromkeys(r for r in roots if r):
        for sub in (lib.pip_dir, "cu13", "cu12"):
            candidate = Path(root) / "nvidia" / sub / "lib"
            if candidate.is_dir() and candidate not in dirs:
                dirs.append(candidate)
    return dirs


def locate(lib: NvLib, loaded: tuple[str, ...]) -> tuple[str | None, str | None]:
    """``(path, location)`` of the file this process uses or would use: loaded, pip or system."""
    hit = find_loaded(lib.stem, list(loaded))
    if hit:
        return hit, "loaded"
    for location, dirs in (("pip", pip_lib_dirs(lib)), ("system", [Path(d) for d in _system_dirs()])):
        for folder in dirs:
            found = best_versioned_file(folder, f"{lib.stem}.so")
            if found is not None:
                return str(found), location
    return None, None


def _system_dirs() -> list[str]:
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    return ([os.path.join(home, "lib64")] if home else []) + list(SYSTEM_DIRS)


def _package_version(lib: NvLib) -> str | None:
    for suffix in ("-cu12", "-cu13", "-cu11", ""):
        version = distribution_version(lib.dist + suffix)
        if version:
            return version
    return None


def _call_version(lib: NvLib, path: str) -> str:
    # A file already mapped by this process is found by dlopen and not loaded twice.
    return lib.version_call(ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL))  # type: ignore[misc]


def library_version(lib: NvLib, path: str, refresh: bool = False) -> str:
    """The version the library reports of itself, kept with its sha256 in the per-file cache.

    The cache (same path, size, mtime and inode key) is what lets a warm probe skip the dlopen of
    half a gigabyte of cuBLASLt; the answer is still the library's own (``version_from`` stays
    ``library_call``). A failed call raises and is not kept.
    """
    return file_fact(path, f"version_call:{lib.key}", lambda real: _call_version(lib, real), refresh)


def describe(lib: NvLib, loaded: tuple[str, ...], why: Reasons, refresh: bool = False) -> dict[str, Any]:
    entry = empty_library()
    entry["package_version"] = _package_version(lib)
    path, location = locate(lib, loaded)
    if path is None:
        why.add(f"libraries.{lib.key}", f"{lib.stem}.so not loaded and not found in nvidia pip packages or CUDA dirs")
        return entry
    entry.update(path=path, location=location, sha256=sha256_file(path, refresh))
    if lib.version_call is not None and (location == "loaded" or lib.may_load):
        try:
            entry.update(version=library_version(lib, path, refresh), version_from="library_call")
        except (OSError, AttributeError, ValueError) as exc:
            why.add(f"libraries.{lib.key}.version", f"version call on {path} failed: {error_text(exc)}")
    if entry["version"] is None:
        from_name = so_version(path)
        from_name = from_name if from_name and "." in from_name else None  # a bare soname major says little
        source = "file_name" if from_name else ("package" if entry["package_version"] else None)
        entry.update(version=from_name or entry["package_version"], version_from=source)
    if entry["sha256"] is None:
        why.add(f"libraries.{lib.key}.sha256", f"{path} could not be read")
    return entry


def probe_libraries(ctx: Context) -> tuple[dict[str, Any], list[str]]:
    """Every library of ``NVIDIA_LIBS``, described concurrently (hashing releases the GIL)."""
    loaded = ctx.libraries()
    return run_parts("nvidia", {lib.key: partial(describe, lib, loaded, refresh=ctx.refresh) for lib in NVIDIA_LIBS})


def cuda_driver_api_version() -> int | None:
    """cuDriverGetVersion() of libcuda.so.1 (needs no cuInit), or None without a driver."""
    lib = cuda_driver.load()
    return cuda_driver.driver_version(lib) if lib is not None else None
