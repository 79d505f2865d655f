"""What a native build will do, decided in the parent before anything is compiled.

``make_plan`` checks the solution can be built here (vendor, toolchain), picks the sources, include
dirs, flags, archs and dependency flags, and ``cache_key`` hashes everything that changes the result.
Every refusal is a ``PlanError`` whose message becomes a COMPILE_ERROR trace.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from sol_execbench.schema import CompileOptions, Language, Solution

from .native_arch import ArchChoice, ArchError, choose_archs, cuda_arch_flags
from .native_deps import relink, resolve_dependencies
from .toolchain import Toolchain, ToolchainMissing, find_toolchain

EXTENSION_NAME = "benchmark_kernel"  # upstream's module name; sources use TORCH_EXTENSION_NAME
KEY_VERSION = "1"  # bump when the build recipe changes in a way the other inputs do not show

FAMILY: dict[Language, str] = {Language.CUDA_CPP: "cuda", Language.CUTLASS: "cuda", Language.CUDNN: "cuda",
                               Language.CUBLAS: "cuda", Language.HIP_CPP: "rocm", Language.CPP: "cpu"}
VENDOR_NAMES = {"cuda": "an NVIDIA GPU with the CUDA toolkit", "rocm": "an AMD GPU with ROCm", "cpu": "a CPU"}


@dataclass(frozen=True)
class FlagDefaults:
    cflags: tuple[str, ...]
    cuda_cflags: tuple[str, ...]
    ld_flags: tuple[str, ...]


# Used for each of compile_options' fields the solution leaves out (None); a list, even empty, replaces them.
DEFAULT_FLAGS: dict[str, FlagDefaults] = {
    "cuda": FlagDefaults(("-O3",), ("-O3", "--use_fast_math"), ("-lcuda",)),
    "rocm": FlagDefaults(("-O3",), ("-O3",), ()),
    "cpu": FlagDefaults(("-O3",), (), ()),
}
# Always added: host C++ files of a HIP build include HIP headers, which need the platform macro.
REQUIRED_CFLAGS: dict[str, tuple[str, ...]] = {"rocm": ("-D__HIP_PLATFORM_AMD__=1", "-DUSE_ROCM=1")}

COMPILED_SUFFIXES = frozenset({".cu", ".cpp", ".cc", ".cxx", ".c", ".hip"})
DEVICE_SUFFIXES = frozenset({".cu", ".hip"})
HEADER_SUFFIXES = frozenset({".h", ".hpp", ".hh", ".hxx", ".cuh", ".inl", ".inc", ".ipp", ".tpp"})


class PlanError(Exception):
    """The solution cannot be built here; the message says why and what to do."""


@dataclass
class BuildPlan:
    family: str  # cuda, rocm or cpu
    sources: list[str]  # relative paths of the files compiled
    include_dirs: list[str]  # relative (solution folders) or absolute (dependencies)
    cflags: list[str]
    cuda_cflags: list[str]
    ldflags: list[str]
    arch: ArchChoice
    toolchain: Toolchain
    env: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    hints: list[str] = field(default_factory=list)
    name: str = EXTENSION_NAME

    def describe(self) -> str:
        archs = ", ".join(self.arch.archs) or ("host only" if self.family == "cpu" else "from the solution's flags")
        return f"{self.family} build of {len(self.sources)} file(s) for {archs} ({self.arch.source})"


def family_of(languages: list[Language]) -> str:
    families = {FAMILY[lang] for lang in languages if lang in FAMILY}
    if {"cuda", "rocm"} <= families:
        raise PlanError("a solution cannot mix CUDA languages with hip_cpp; split it into one solution per vendor")
    for family in ("cuda", "rocm", "cpu"):
        if family in families:
            return family
    raise PlanError(f"no native language among {[lang.value for lang in languages]}")


def check_buildable(family: str, vendor: str, languages: list[Language]) -> None:
    if family == "cpu" or family == vendor:
        return
    names = ", ".join(lang.value for lang in languages)
    raise PlanError(f"not buildable here: {names} needs {VENDOR_NAMES[family]}, and this host is "
                    f"{VENDOR_NAMES.get(vendor, vendor)}"
                    + (" (a CUDA solution does not run on AMD GPUs; write a hip_cpp solution)" if vendor == "rocm" else "")
                    + (" (a HIP solution is for AMD GPUs; use the cuda_cpp solution here)" if vendor == "cuda" else ""))


def _pick_sources(solution: Solution, family: str) -> tuple[list[str], list[str]]:
    paths = [PurePosixPath(s.path) for s in solution.sources]
    compiled = [p for p in paths if p.suffix.lower() in COMPILED_SUFFIXES]
    if not compiled:
        raise PlanError(f"no compilable source among {[str(p) for p in paths]} "
                        f"(expected one of {sorted(COMPILED_SUFFIXES)})")
    device = [str(p) for p in compiled if p.suffix.lower() in DEVICE_SUFFIXES]
    if family == "cpu" and device:
        raise PlanError(f"language cpp is host C++, but {device} need a device compiler: declare cuda_cpp or hip_cpp")
    if family == "cuda" and any(p.suffix.lower() == ".hip" for p in compiled):
        raise PlanError("a .hip source is HIP C++: declare hip_cpp (for AMD GPUs), or rename it .cu for cuda_cpp")
    objects: dict[str, str] = {}
    for p in compiled:  # torch names each object after its file's stem (+ .cuda for device files)
        obj = p.stem + (".cuda" if p.suffix.lower() in DEVICE_SUFFIXES else "")
        if obj in objects:
            raise PlanError(f"sources '{objects[obj]}' and '{p}' would compile to the same object file; rename one")
        objects[obj] = str(p)
    headers = {str(p.parent) for p in paths if p.suffix.lower() in HEADER_SUFFIXES}
    include_dirs = ["."] + sorted(h for h in headers if h != ".")
    return [str(p) for p in compiled], include_dirs


def _flags(options: CompileOptions | None, family: str) -> tuple[list[str], list[str], list[str]]:
    options = options or CompileOptions()
    defaults = DEFAULT_FLAGS[family]
    cflags = list(defaults.cflags if options.cflags is None else options.cflags)
    cuda_cflags = list(defaults.cuda_cflags if options.cuda_cflags is None else options.cuda_cflags)
    ldflags = list(defaults.ld_flags if options.ld_flags is None else options.ld_flags)
    return cflags + list(REQUIRED_CFLAGS.get(family, ())), cuda_cflags, ldflags


def make_plan(solution: Solution, vendor: str) -> BuildPlan:
    """The build of ``solution`` on a host of ``vendor`` (cuda, rocm, cpu). Raises PlanError."""
    languages = list(solution.spec.languages)
    family = family_of(languages)
    check_buildable(family, vendor, languages)
    try:
        toolchain = find_toolchain(family)
    except ToolchainMissing as exc:
        raise PlanError(f"missing toolchain: {exc}") from None
    sources, include_dirs = _pick_sources(solution, family)
    cflags, cuda_cflags, ldflags = _flags(solution.spec.compile_options, family)
    try:
        arch = choose_archs(family, list(solution.spec.target_hardware), cuda_cflags + cflags)
        deps = resolve_dependencies(list(solution.spec.dependencies), languages, family, toolchain.toolkit_home)
    except (ArchError, ValueError) as exc:
        raise PlanError(str(exc)) from None
    env = {"MAX_JOBS": os.environ.get("MAX_JOBS") or str(_cores()),
           "PATH": os.pathsep.join([os.path.dirname(toolchain.ninja), os.environ.get("PATH", "")])}
    if family == "cuda":
        cuda_cflags += cuda_arch_flags(arch.archs)
        env["CUDA_HOME"] = toolchain.toolkit_home or ""
    elif family == "rocm":
        env["ROCM_HOME"] = toolchain.toolkit_home or ""
        if arch.archs:  # torch's hipcc rule takes its --offload-arch list from here
            env["PYTORCH_ROCM_ARCH"] = ";".join(arch.archs)
    return BuildPlan(family=family, sources=sources, include_dirs=include_dirs + deps.include_dirs,
                     cflags=cflags, cuda_cflags=cuda_cflags,
                     ldflags=relink(ldflags + deps.ldflags, toolchain.toolkit_home),
                     arch=arch, toolchain=toolchain, env=env, notes=[*arch.notes, *deps.notes], hints=deps.hints)


def _cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def torch_version() -> str:
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        raise PlanError("torch is not installed: native solutions are built as PyTorch C++ extensions") from None


def key_material(solution: Solution, plan: BuildPlan) -> dict[str, Any]:
    """Everything that changes the built library (the cache key is its sha256)."""
    spec = solution.spec
    return {
        "key_version": KEY_VERSION,
        "sources": sorted([s.path, s.content] for s in solution.sources),
        "languages": [lang.value for lang in spec.languages],
        "entry_point": spec.entry_point,
        "binding": (spec.binding.value if spec.binding else "torch"),
        "dependencies": list(spec.dependencies),
        "flags": {"cflags": plan.cflags, "cuda_cflags": plan.cuda_cflags, "ldflags": plan.ldflags,
                  "include_dirs": plan.include_dirs},
        "arch": plan.arch.key(),
        "compiler": plan.toolchain.version_string(),
        "host_compiler_for_nvcc": os.environ.get("CC") if plan.family == "cuda" else None,  # torch passes -ccbin $CC
        "toolkit_home": plan.toolchain.toolkit_home,
        "torch": torch_version(),
        "python": f"{sys.version.split()[0]} {sysconfig.get_config_var('EXT_SUFFIX')}",
        "vendor": plan.family,
        "machine": platform.machine(),
    }


def cache_key(material: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()
