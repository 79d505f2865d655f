"""Finding the compilers a native build needs, and their version strings (part of the cache key).

Everything here runs in the parent without importing torch: a missing tool is reported before a
compile process is started, naming the tool and how to get it.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

_VERSION_TIMEOUT_S = 20.0


class ToolchainMissing(Exception):
    """A compiler or build tool is not installed; the message names it and how to get it."""


@dataclass(frozen=True)
class Toolchain:
    family: str  # "cuda", "rocm" or "cpu"
    cxx: str  # host C++ compiler as torch will call it ($CXX or c++)
    device_compiler: str | None  # nvcc or hipcc
    toolkit_home: str | None  # CUDA_HOME / ROCM_HOME the compile process uses
    ninja: str

    def version_string(self) -> str:
        """Versions of every compiler involved, one line each (for the cache key and the log)."""
        parts = [f"cxx: {_version(self.cxx)}"]
        if self.device_compiler:
            parts.append(f"device: {_version(self.device_compiler)}")
        return "\n".join(parts)


def _first_existing(*candidates: str | None) -> str | None:
    return next((c for c in candidates if c and os.path.exists(c)), None)


def find_cxx() -> str:
    raw = os.environ.get("CXX", "c++")
    words = shlex.split(raw) or ["c++"]
    found = shutil.which(words[-1])  # "ccache g++" -> the compiler itself must exist
    if found is None:
        origin = f"$CXX is '{raw}'" if "CXX" in os.environ else "'c++' is not on PATH"
        raise ToolchainMissing(f"host C++ compiler not found ({origin}): install g++ "
                               f"(e.g. 'apt-get install g++') or point CXX at a C++17 compiler")
    return raw


def find_ninja() -> str:
    """The ninja binary: on PATH, else the one the ``ninja`` pip package ships (its bin dir may not be
    on PATH when the package was installed with ``pip --target``)."""
    found = shutil.which("ninja")
    if found:
        return found
    try:
        spec = importlib.util.find_spec("ninja")
    except (ImportError, ValueError):
        spec = None
    for location in (spec.submodule_search_locations or []) if spec else []:
        candidate = os.path.join(location, "data", "bin", "ninja")
        if os.access(candidate, os.X_OK):
            return candidate
    raise ToolchainMissing("'ninja' not found on PATH: native builds use it to compile in parallel "
                           "('pip install ninja')")


def _cuda_home_candidates() -> list[str]:
    env = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if env:
        return [env]
    candidates = []
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates.append(str(Path(os.path.realpath(nvcc)).parent.parent))
        candidates.append(str(Path(nvcc).parent.parent))
    candidates.append("/usr/local/cuda")
    return candidates


def find_cuda() -> tuple[str, str]:
    """(CUDA_HOME, nvcc). The home must hold bin/nvcc; one with include/cuda_runtime.h is preferred."""
    homes = [h for h in _cuda_home_candidates() if os.path.exists(os.path.join(h, "bin", "nvcc"))]
    if not homes:
        env = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
        where = (f"CUDA_HOME/CUDA_PATH is '{env}', which has no bin/nvcc" if env
                 else "not on PATH, and /usr/local/cuda/bin/nvcc does not exist")
        raise ToolchainMissing(f"nvcc (the CUDA compiler) not found: {where}; install the CUDA toolkit "
                               f"(https://developer.nvidia.com/cuda-downloads) and set CUDA_HOME")
    with_headers = [h for h in homes if os.path.exists(os.path.join(h, "include", "cuda_runtime.h"))]
    home = (with_headers or homes)[0]
    return home, os.path.join(home, "bin", "nvcc")


def find_rocm() -> tuple[str, str]:
    """(ROCM_HOME, hipcc), the way torch looks: ROCM_HOME/ROCM_PATH, hipcc on PATH, /opt/rocm."""
    env = os.environ.get("ROCM_HOME") or os.environ.get("ROCM_PATH")
    homes: list[str] = [env] if env else []
    hipcc = shutil.which("hipcc")
    if not env and hipcc:
        root = Path(os.path.realpath(hipcc)).parent.parent
        homes.append(str(root.parent if root.name == "hip" else root))
    homes.append("/opt/rocm")
    for home in homes:
        compiler = _first_existing(os.path.join(home, "bin", "hipcc"), os.path.join(home, "hip", "bin", "hipcc"))
        if compiler:
            return home, compiler
    looked = ", ".join(dict.fromkeys(homes))
    raise ToolchainMissing(f"hipcc (the HIP compiler) not found: looked in ROCM_HOME/ROCM_PATH, PATH and /opt/rocm "
                           f"({looked}); install ROCm (https://rocm.docs.amd.com) and set ROCM_PATH")


def find_toolchain(family: str) -> Toolchain:
    """The tools a build of ``family`` (cuda, rocm, cpu) needs. Raises ToolchainMissing."""
    home = compiler = None  # the device compiler first: its absence is the most telling
    if family == "cuda":
        home, compiler = find_cuda()
    elif family == "rocm":
        home, compiler = find_rocm()
    cxx = find_cxx()
    ninja = find_ninja()
    return Toolchain(family=family, cxx=cxx, device_compiler=compiler, toolkit_home=home, ninja=ninja)


def _version(command: str) -> str:
    words = shlex.split(command)
    exe = shutil.which(words[-1]) or words[-1]
    try:
        mtime = os.stat(exe).st_mtime_ns
    except OSError:
        mtime = 0
    return _version_of(tuple(words[:-1] + [exe]), mtime)


@functools.lru_cache(maxsize=16)
def _version_of(argv: tuple[str, ...], _mtime: int) -> str:
    try:
        done = subprocess.run([*argv, "--version"], capture_output=True, text=True, timeout=_VERSION_TIMEOUT_S,
                              check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{argv[-1]} (version unreadable: {exc})"
    lines = [line.strip() for line in (done.stdout or done.stderr).splitlines() if line.strip()]
    # nvcc prints a banner then "Cuda compilation tools, release 13.0, V13.0.88"; keep what identifies it.
    keep = [line for line in lines if "release" in line.lower() or "version" in line.lower()] or lines[:1]
    return f"{argv[-1]}: {' | '.join(keep[:3])}"
