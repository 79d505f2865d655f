"""Solution: a candidate implementation of a definition, with its sources and build spec."""

from __future__ import annotations

import hashlib
import json
from enum import Enum
from pathlib import PurePosixPath
from typing import Optional

from pydantic import Field, field_validator, model_validator

from .base import FieldError, NonEmptyString, SchemaModel


class Language(str, Enum):
    """Solution languages. Python-family ones are imported; native ones are compiled."""

    PYTORCH = "pytorch"
    PYTHON = "python"
    TRITON = "triton"
    CUTE_DSL = "cute_dsl"
    CUTILE = "cutile"
    CUDNN_FRONTEND = "cudnn_frontend"
    TILELANG = "tilelang"
    CUDA_CPP = "cuda_cpp"
    CUTLASS = "cutlass"
    CUDNN = "cudnn"
    CUBLAS = "cublas"
    HIP_CPP = "hip_cpp"
    CPP = "cpp"


PYTHON_LANGUAGES = frozenset(
    {
        Language.PYTORCH,
        Language.PYTHON,
        Language.TRITON,
        Language.CUTE_DSL,
        Language.CUTILE,
        Language.CUDNN_FRONTEND,
        Language.TILELANG,
    }
)
NATIVE_LANGUAGES = frozenset(set(Language) - PYTHON_LANGUAGES)
_NATIVE_SUFFIXES = {".cu", ".cpp", ".cc", ".cxx", ".c", ".h", ".hpp", ".cuh", ".hip"}


def normalise_source_path(path: str) -> str:
    """A source path as the plain relative path it names: ``./kernel.py`` and ``a/./b.py`` are
    ``kernel.py`` and ``a/b.py`` (so that two spellings of one file are one source, and the staged
    file lands where the entry point says). Refused: NUL, absolute paths, ``..``, empty components
    (``a//b``, a trailing ``/``), a path that names a folder (``.``, ``a/.``) and components longer
    than a file name may be. Backslashes are separators, as on the system that wrote them."""
    if "\0" in path:
        raise ValueError(f"source path {path!r} contains a NUL byte")
    unified = path.replace("\\", "/")
    parts = unified.split("/")
    if unified.startswith("/") or ":" in parts[0]:
        raise ValueError(f"source path '{path}' must be relative")
    if "" in parts:
        raise ValueError(f"source path '{path}' has an empty component: give a file path like 'kernel.py'")
    if parts[-1] == ".":
        raise ValueError(f"source path '{path}' names a folder ('.'): give a file path like 'kernel.py'")
    if any(len(part.encode()) > 255 for part in parts):
        raise ValueError(f"source path '{path[:60]}...' has a component longer than 255 bytes (the file system's limit)")
    if ".." in parts:
        raise ValueError(f"source path '{path}' must not contain '..'")
    return "/".join(part for part in parts if part != ".")


class Binding(str, Enum):
    TORCH = "torch"


class SourceFile(SchemaModel):
    """One source file. Empty ``content`` is filled from the file of that path beside the solution JSON."""

    path: NonEmptyString
    content: str = ""

    @field_validator("path")
    @classmethod
    def _safe_relative(cls, path: str) -> str:
        return normalise_source_path(path)


class CompileOptions(SchemaModel):
    """Compiler and linker flags for native solutions; ``None`` means the builder's defaults."""

    cflags: Optional[list[str]] = None
    """Host C++ compiler flags."""
    cuda_cflags: Optional[list[str]] = None
    """Device compiler flags (nvcc or hipcc)."""
    ld_flags: Optional[list[str]] = None
    """Linker flags."""


class BuildSpec(SchemaModel):
    languages: list[Language] = Field(min_length=1)
    target_hardware: list[NonEmptyString] = Field(default_factory=lambda: ["LOCAL"])
    """Hardware the solution is meant for: LOCAL (the GPU present) or a named part (B200, H100, MI300X...)."""
    entry_point: NonEmptyString
    """``file::function``, e.g. ``kernel.py::run``."""
    dependencies: list[NonEmptyString] = Field(default_factory=list)
    destination_passing_style: bool = True
    """True: outputs are preallocated and passed after the inputs. False: the function returns them."""
    binding: Optional[Binding] = None
    compile_options: Optional[CompileOptions] = None

    @model_validator(mode="after")
    def _check(self) -> "BuildSpec":
        if self.entry_point.count("::") != 1:
            raise ValueError(f"entry_point '{self.entry_point}' must look like 'file::function'")
        # Spelled as the sources are ('./kernel.py::run' names the source 'kernel.py').
        entry_file, symbol = self.entry_point.split("::")
        self.entry_point = f"{normalise_source_path(entry_file)}::{symbol}"
        native = [lang.value for lang in self.languages if lang in NATIVE_LANGUAGES]
        python = [lang.value for lang in self.languages if lang in PYTHON_LANGUAGES]
        if native and python:
            raise ValueError(f"native languages {native} cannot be mixed with Python languages {python}")
        suffix = PurePosixPath(self.entry_file).suffix
        if python and suffix != ".py":
            raise ValueError(f"Python languages need a .py entry file, got '{self.entry_file}'")
        if native and suffix not in _NATIVE_SUFFIXES:
            raise ValueError(f"native languages need a C/C++/CUDA/HIP entry file, got '{self.entry_file}'")
        return self

    @property
    def entry_file(self) -> str:
        return self.entry_point.split("::")[0]

    @property
    def entry_symbol(self) -> str:
        return self.entry_point.split("::")[1]

    @property
    def is_native(self) -> bool:
        return any(lang in NATIVE_LANGUAGES for lang in self.languages)


class Solution(SchemaModel):
    name: NonEmptyString
    definition: NonEmptyString
    """Name of the definition it solves (a mismatch is warned about, not refused)."""
    author: NonEmptyString = "unknown"
    spec: BuildSpec
    sources: list[SourceFile] = Field(min_length=1)
    description: Optional[str] = None

    @model_validator(mode="after")
    def _check_sources(self) -> "Solution":
        seen: dict[str, int] = {}
        for i, src in enumerate(self.sources):
            if src.path in seen:
                raise FieldError(f"sources.{i}.path", f"source path '{src.path}' appears twice (also sources.{seen[src.path]})")
            seen[src.path] = i
        folders = {str(parent) for p in seen for parent in PurePosixPath(p).parents if str(parent) != "."}
        clash = sorted(set(seen) & folders)
        if clash:
            raise FieldError(f"sources.{seen[clash[0]]}.path",
                             f"source path '{clash[0]}' is both a file and the folder of another source: rename one")
        if self.spec.entry_file not in seen:
            raise ValueError(f"entry file '{self.spec.entry_file}' is not among the sources {sorted(seen)}")
        return self

    def content_hash(self) -> str:
        """Stable hash of everything that changes what the solution builds or runs."""
        payload = json.dumps(
            {"spec": self.spec.model_dump(mode="json"), "sources": [[s.path, s.content] for s in self.sources]},
            sort_keys=True,
        )
        return hashlib.sha256(payload.encode()).hexdigest()
