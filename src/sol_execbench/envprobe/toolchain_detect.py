"""How each kind of toolchain artifact is found on this host: ``(path, version)`` or ``(None, None)``.

Detectors never raise and never import torch; every command is time-boxed.
"""

from __future__ import annotations

import importlib.util
import os
import re
from dataclasses import dataclass
from typing import Callable

from ._common import SHORT_TIMEOUT_S, Reasons, find_tool, rocm_root, run_command
from .nvidia_libs import NVIDIA_LIBS
from .nvidia_libs import describe as describe_nvidia_lib
from .packages import distribution_version
from .rocm_libs import ROCM_LIBS, aotriton, composable_kernel
from .rocm_libs import describe as describe_rocm_lib

Found = tuple[str | None, str | None]
_ANY_VERSION = re.compile(r"(\d+\.\d+(?:\.\d+)*)")


def parse_version(text: str, pattern: str | None) -> str | None:
    """The version in a tool's ``--version`` output: ``pattern``'s group 1, else the first dotted number."""
    match = re.search(pattern, text, re.M) if pattern else _ANY_VERSION.search(text)
    return match.group(1) if match else None


def _search_dirs() -> tuple[str, ...]:
    root = rocm_root()
    return (str(root / "bin"), str(root / "llvm" / "bin"), "/usr/local/cuda/bin")


@dataclass(frozen=True)
class Executable:
    names: tuple[str, ...]
    version_args: tuple[str, ...] | None = ("--version",)
    version_pattern: str | None = None
    rocm_only: bool = False
    """Look only in ``$ROCM_PATH/bin`` and ``$ROCM_PATH/llvm/bin`` (a system tool of that name is another tool)."""

    def _find(self, name: str) -> str | None:
        if not self.rocm_only:
            return find_tool(name, _search_dirs())
        root = rocm_root()
        candidates = [root / "llvm" / "bin" / name, root / "bin" / name]
        return next((str(c) for c in candidates if c.is_file() and os.access(c, os.X_OK)), None)

    def __call__(self) -> Found:
        path = next((p for p in (self._find(n) for n in self.names) if p), None)
        if path is None or self.version_args is None:
            return path, None
        result = run_command([path, *self.version_args], timeout=SHORT_TIMEOUT_S)
        # Some tools print their version and exit non-zero; read whatever they printed.
        return path, parse_version(result.stdout + "\n" + result.stderr, self.version_pattern)


@dataclass(frozen=True)
class PythonPackage:
    dist: str
    module: str

    def __call__(self) -> Found:
        version = distribution_version(self.dist)
        if version is None:
            return None, None
        try:
            spec = importlib.util.find_spec(self.module)
        except (ImportError, ValueError):
            spec = None
        return (spec.origin if spec and spec.origin else None), version


@dataclass(frozen=True)
class NvidiaLibrary:
    key: str

    def __call__(self) -> Found:
        lib = next(lib for lib in NVIDIA_LIBS if lib.key == self.key)
        entry = describe_nvidia_lib(lib, (), Reasons("toolchain"))
        return entry["path"], entry["version"]


@dataclass(frozen=True)
class RocmLibrary:
    key: str

    def __call__(self) -> Found:
        lib = next(lib for lib in ROCM_LIBS if lib.key == self.key)
        entry = describe_rocm_lib(lib, (), Reasons("toolchain"))
        return entry["path"], entry["header_version"] or entry["file_version"]


def composable_kernel_headers() -> Found:
    block = composable_kernel(Reasons("toolchain"))
    if block["version"] is None and not block["ck_tile_present"]:
        return None, None
    return str(rocm_root() / "include" / "ck"), block["version"]


def aotriton_bundled() -> Found:
    block = aotriton()
    return block["bundled_lib_path"], block["bundled_version"]


Detector = Callable[[], Found]
