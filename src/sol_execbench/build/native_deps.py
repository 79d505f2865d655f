"""Library dependencies of native solutions: the one table of their include and link flags.

A name in ``spec.dependencies`` (or implied by the language: ``cutlass``, ``cudnn``, ``cublas``)
adds include directories and link flags. Libraries are looked up where they are usually installed
(the toolkit, a pip package such as nvidia-cudnn-cu12, the system library dirs); a library that only
ships a versioned file (``libcudnn.so.9``, as pip wheels do) is linked by that file name. What is
not found is still tried, and a hint naming it goes into the log if the build then fails.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from sol_execbench.schema import Language

_SYSTEM_LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
                    "/usr/local/lib")
_SYSTEM_INCLUDE_DIRS = ("/usr/include", "/usr/local/include")


@dataclass(frozen=True)
class Dependency:
    vendor: str  # "cuda" or "rocm"
    header: str | None = None  # a header whose presence shows the library is installed
    libs: tuple[str, ...] = ()  # link names: "cudnn" -> -lcudnn
    homes: tuple[str, ...] = ()  # environment variables naming an install root
    pip_module: str | None = None  # pip package holding include/ and lib/ (nvidia.cudnn)
    include_subdirs: tuple[str, ...] = ("include",)
    install_hint: str = ""


# The one table. ROCm libraries live under ROCM_PATH; CUDA ones under CUDA_HOME or a pip package.
DEPENDENCIES: dict[str, Dependency] = {
    "cublas": Dependency("cuda", "cublas_v2.h", ("cublas",), ("CUBLAS_HOME",), "nvidia.cublas",
                         install_hint="part of the CUDA toolkit; or 'pip install nvidia-cublas-cu12'"),
    "cublaslt": Dependency("cuda", "cublasLt.h", ("cublasLt",), ("CUBLAS_HOME",), "nvidia.cublas",
                           install_hint="part of the CUDA toolkit; or 'pip install nvidia-cublas-cu12'"),
    "cudnn": Dependency("cuda", "cudnn.h", ("cudnn",), ("CUDNN_HOME", "CUDNN_PATH"), "nvidia.cudnn",
                        install_hint="'pip install nvidia-cudnn-cu12' (torch's CUDA wheels bring it) or set CUDNN_HOME"),
    "cutlass": Dependency("cuda", "cutlass/cutlass.h", (), ("CUTLASS_DIR", "CUTLASS_PATH"), "cutlass_library",
                          include_subdirs=("include", "tools/util/include", "source/include",
                                           "source/tools/util/include"),
                          install_hint="set CUTLASS_DIR to a CUTLASS checkout or 'pip install nvidia-cutlass'"),
    "ck": Dependency("rocm", "ck/ck.hpp", (), ("CK_DIR",),
                     install_hint="install composable_kernel (ROCm package 'composablekernel-dev') or set CK_DIR"),
    "hipblaslt": Dependency("rocm", "hipblaslt/hipblaslt.h", ("hipblaslt",),
                            install_hint="install the ROCm package 'hipblaslt-dev'"),
    "hipblas": Dependency("rocm", "hipblas/hipblas.h", ("hipblas",), install_hint="install 'hipblas-dev'"),
    "rocblas": Dependency("rocm", "rocblas/rocblas.h", ("rocblas",), install_hint="install 'rocblas-dev'"),
}
LANGUAGE_DEPENDENCIES: dict[Language, str] = {Language.CUTLASS: "cutlass", Language.CUDNN: "cudnn",
                                              Language.CUBLAS: "cublas"}
# Names solutions list that the torch extension already provides.
PROVIDED = frozenset({"torch", "pytorch", "libtorch", "pybind11", "cuda", "cudart", "cuda_runtime", "hip", "rocm",
                      "hip_runtime", "c10", "aten"})
_ALIASES = {"composable_kernel": "ck", "composablekernel": "ck", "cublas_lt": "cublaslt", "cudnn_frontend": "cudnn"}


@dataclass
class DependencyFlags:
    include_dirs: list[str] = field(default_factory=list)
    ldflags: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # always logged
    hints: list[str] = field(default_factory=list)  # shown with a failed build: what may be missing


def _pip_root(module: str | None) -> Path | None:
    if not module:
        return None
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    locations = list(spec.submodule_search_locations or []) if spec else []
    return Path(locations[0]) if locations else None


def _roots(dep: Dependency, toolkit_home: str | None) -> list[Path]:
    roots = [Path(os.environ[v]) for v in dep.homes if os.environ.get(v)]
    pip = _pip_root(dep.pip_module)
    if pip:
        roots.append(pip)
    if dep.vendor == "rocm":
        roots.append(Path(os.environ.get("ROCM_PATH") or os.environ.get("ROCM_HOME") or toolkit_home or "/opt/rocm"))
    elif toolkit_home:
        roots.append(Path(toolkit_home))
    return roots


def _lib_dirs(roots: list[Path]) -> list[Path]:
    dirs = [r / sub for r in roots for sub in ("lib", "lib64")]
    return [d for d in dirs if d.is_dir()]


def nvidia_pip_lib_dirs() -> list[Path]:
    """lib/ folders of the nvidia-* pip wheels (nvidia/cudnn/lib, nvidia/cublas/lib, ...)."""
    root = _pip_root("nvidia")
    return sorted(p for p in root.glob("*/lib") if p.is_dir()) if root else []


def link_flags(name: str, search: list[Path]) -> tuple[list[str], bool]:
    """Flags that link library ``name`` from the first dir holding it, and whether it was found.

    ``libX.so`` -> ``-L dir -lX``; only ``libX.so.N`` (pip wheels) -> ``-L dir -l:libX.so.N``. The
    system library dirs are searched last and need no ``-L``."""
    for directory in [*search, *(Path(d) for d in _SYSTEM_LIB_DIRS)]:
        plain = directory / f"lib{name}.so"
        versioned = sorted(glob.glob(str(directory / f"lib{name}.so.*")), key=len)
        if not (plain.exists() or versioned):
            continue
        lib = f"-l{name}" if plain.exists() else f"-l:{Path(versioned[0]).name}"
        flags = [] if str(directory) in _SYSTEM_LIB_DIRS else [f"-L{directory}"]
        if "site-packages" in str(directory) or "dist-packages" in str(directory):
            flags.append(f"-Wl,-rpath,{directory}")  # the child finds it without LD_LIBRARY_PATH
        return flags + [lib], True
    return [f"-l{name}"], False


def _has_header(header: str, include_dirs: list[str], toolkit_home: str | None) -> bool:
    dirs = [*include_dirs, *(_SYSTEM_INCLUDE_DIRS), *([f"{toolkit_home}/include"] if toolkit_home else [])]
    return any(os.path.exists(os.path.join(d, header)) for d in dirs)


def resolve_one(name: str, dep: Dependency, toolkit_home: str | None, out: DependencyFlags) -> None:
    roots = _roots(dep, toolkit_home)
    includes = [str(r / sub) for r in roots for sub in dep.include_subdirs if (r / sub).is_dir()]
    out.include_dirs.extend(i for i in includes if i not in out.include_dirs)
    if dep.header and not _has_header(dep.header, includes, toolkit_home):
        searched = [v for v in dep.homes] + ([dep.pip_module] if dep.pip_module else [])
        out.hints.append(f"dependency '{name}': header {dep.header} not found (looked in {', '.join(searched) or 'the toolkit'} "
                         f"and the system include dirs); {dep.install_hint}")
    search = _lib_dirs(roots) + nvidia_pip_lib_dirs()
    for lib in dep.libs:
        flags, found = link_flags(lib, search)
        out.ldflags.extend(flags)
        if not found:
            out.hints.append(f"dependency '{name}': lib{lib}.so not found; {dep.install_hint}")


def resolve_dependencies(names: list[str], languages: list[Language], vendor: str,
                         toolkit_home: str | None) -> DependencyFlags:
    """Include dirs and link flags for the solution's dependencies on ``vendor``. Raises ValueError for a
    library of the other vendor."""
    out = DependencyFlags()
    wanted = [LANGUAGE_DEPENDENCIES[lang] for lang in languages if lang in LANGUAGE_DEPENDENCIES]
    wanted += [_ALIASES.get(n.strip().lower(), n.strip().lower()) for n in names]
    for name in dict.fromkeys(wanted):
        dep = DEPENDENCIES.get(name)
        if dep is None:
            if name not in PROVIDED:
                out.notes.append(f"dependency '{name}' has no entry in the dependency table; no flags added for it")
            continue
        if dep.vendor != vendor:
            other = "NVIDIA (CUDA)" if dep.vendor == "cuda" else "AMD (ROCm)"
            raise ValueError(f"dependency '{name}' is an {other} library; it cannot be used in a {vendor} build")
        resolve_one(name, dep, toolkit_home, out)
    return out


_LINK_NAME = re.compile(r"^-l([A-Za-z0-9_+.-]+)$")


def relink(ldflags: list[str], toolkit_home: str | None) -> list[str]:
    """Rewrite ``-lX`` flags whose library only exists as a versioned file (``-lcuda`` with only
    libcuda.so.1 installed, ``-lcudnn`` from a pip wheel), searching the flags' own ``-L`` dirs, the
    toolkit and the nvidia pip wheels. Other flags pass unchanged; repeated ``-L``/rpath are dropped."""
    search = [Path(f[2:]) for f in ldflags if f.startswith("-L") and len(f) > 2]
    if toolkit_home:
        search += [Path(toolkit_home) / sub for sub in ("lib64", "lib")]
    search = [d for d in search if d.is_dir()] + nvidia_pip_lib_dirs()
    if toolkit_home and (Path(toolkit_home) / "lib64" / "stubs").is_dir():
        search.append(Path(toolkit_home) / "lib64" / "stubs")  # libcuda.so for linking on a driverless host
    out: list[str] = []
    for flag in ldflags:
        match = _LINK_NAME.match(flag.strip())
        for item in link_flags(match.group(1), search)[0] if match else [flag]:
            if item not in out or not item.startswith(("-L", "-Wl,-rpath")):
                out.append(item)
    return out
