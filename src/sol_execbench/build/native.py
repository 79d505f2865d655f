"""The native builder: CUDA C++ (cuda_cpp, cutlass, cudnn, cublas), HIP C++ (hip_cpp) and host C++
(cpp), each built as a PyTorch C++ extension (``binding: torch``, ``PYBIND11_MODULE``).

``prepare`` (parent) plans the build, looks the plan's key up in the build cache and, on a miss,
compiles in a separate process group under the compile timeout. ``load`` (child) imports the
library the parent handed over and returns the entry symbol.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sol_execbench.schema import EvaluationStatus as S, IsolationMode, Solution

from .base import BuildFailure, BuildOutcome, register
from .cache import BuildCache, CacheEntry, LockTimeout
from .compile_run import CompileJob, compile_extension, file_sha256
from .native_plan import EXTENSION_NAME, FAMILY, PlanError, cache_key, key_material, make_plan


class NativeBuilder:
    languages = frozenset(FAMILY)

    def __init__(self, cache: BuildCache | None = None):
        self._cache = cache  # None: the default location, read when a build starts (env may change)

    def prepare(self, solution: Solution, source_dir: Path, *, vendor: str, timeout_s: float,
                use_cache: bool, isolation: IsolationMode = IsolationMode.AUTO) -> BuildOutcome:
        began = time.monotonic()
        deadline = began + timeout_s
        try:
            plan = make_plan(solution, vendor)
            key = cache_key(key_material(solution, plan))
        except PlanError as exc:
            raise BuildFailure(S.COMPILE_ERROR, str(exc)) from None
        notes = [plan.describe(), *plan.notes]
        cache = self._cache or BuildCache()
        if use_cache and not _usable(cache, notes):
            use_cache = False
        job = CompileJob(plan, solution, source_dir, deadline, timeout_s, isolation)
        warnings: list[str] = []
        if use_cache:
            library, cached = self._cached_build(cache, key, job, warnings)
            notes.append(f"build cache {'hit' if cached else 'miss'}: {library.parent}")
        else:
            build_dir = Path(tempfile.mkdtemp(prefix="native-build-", dir=source_dir.parent))
            library = compile_extension(job, build_dir)
            cached = False
            notes.append("built without the build cache")
        return BuildOutcome(build_time_s=round(time.monotonic() - began, 3), cached=cached, log="\n".join(notes),
                            artifacts={"library": str(library), "key": key, "module": plan.name,
                                       "sha256": file_sha256(library)}, warnings=warnings)

    def _cached_build(self, cache: BuildCache, key: str, job: CompileJob, warnings: list[str]) -> tuple[Path, bool]:
        entry = _verified(cache, key, warnings)
        if entry is not None:
            return entry.library, True
        plan, solution = job.plan, job.solution
        try:
            with cache.locked(key, job.deadline):
                entry = _verified(cache, key, warnings)  # built by another evaluation while we waited
                if entry is not None:
                    return entry.library, True
                build_dir = cache.new_build_dir(key)
                began = time.monotonic()
                try:
                    library = compile_extension(job, build_dir)
                except BaseException:
                    shutil.rmtree(build_dir, ignore_errors=True)
                    raise
                manifest = {"solution": solution.name, "build": plan.describe(), "compile_s": round(time.monotonic() - began, 3),
                            "compiler": plan.toolchain.version_string(), "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
                return cache.publish(key, build_dir, library, manifest).library, False
        except LockTimeout as exc:
            raise BuildFailure(S.TIMEOUT, f"compile timeout ({job.timeout_s:g} s, --compile-timeout) reached while "
                                          f"waiting: {exc}") from None

    def load(self, solution: Solution, source_dir: Path, artifacts: dict[str, Any]) -> Callable[..., Any]:
        library = artifacts.get("library")
        if not library or not Path(library).is_file():
            raise BuildFailure(S.COMPILE_ERROR, f"the native build left no library to load ({library!r})")
        if artifacts.get("sha256") and file_sha256(Path(library)) != artifacts["sha256"]:
            raise BuildFailure(S.COMPILE_ERROR, f"the library {library} changed after the build was checked "
                                                "(its sha256 differs); it was not loaded")
        module = load_extension(Path(library), artifacts.get("module", EXTENSION_NAME), artifacts.get("key", ""))
        fn = getattr(module, solution.spec.entry_symbol, None)
        if not callable(fn):
            raise BuildFailure(S.COMPILE_ERROR, f"the built module defines no '{solution.spec.entry_symbol}' "
                                                f"(PYBIND11_MODULE must m.def(\"{solution.spec.entry_symbol}\", ...))")
        return fn


def _verified(cache: BuildCache, key: str, warnings: list[str]) -> CacheEntry | None:
    """The cache entry of ``key`` if its library is the one that was built (the sha256 its manifest
    recorded); a changed one is removed, to be rebuilt, and the change reported."""
    entry = cache.lookup(key)
    if entry is None:
        return None
    recorded, actual = entry.manifest.get("sha256"), file_sha256(entry.library)
    if recorded == actual:
        return entry
    warnings.append(f"build cache entry {entry.directory} was rebuilt: its library's sha256 {actual[:16]} is not the "
                    f"{(recorded or 'unrecorded')[:16]} its manifest recorded when it was built")
    cache.discard(key)
    return None


def _usable(cache: BuildCache, notes: list[str]) -> bool:
    try:
        cache.root.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=cache.root, prefix=".probe-"):
            return True
    except OSError as exc:
        notes.append(f"build cache {cache.root} is not writable ({exc}); building without it")
        return False


def load_extension(library: Path, name: str, key: str) -> Any:
    """Import the extension at ``library`` under a unique module name (its init is PyInit_<name>)."""
    import torch  # noqa: F401  (the extension's libtorch symbols come from torch)

    module_name = f"_sol_execbench_native_{key[:16] or 'x'}.{name}"
    loader = importlib.machinery.ExtensionFileLoader(module_name, str(library))
    spec = importlib.util.spec_from_file_location(module_name, str(library), loader=loader)
    try:
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
    except ImportError as exc:
        raise BuildFailure(S.COMPILE_ERROR, f"the built library does not load: {exc}") from None
    sys.modules[module_name] = module
    return module


register(NativeBuilder())
