"""Triton's kernel launchers, built ahead by warm processes for argument types earlier runs used.

Triton (3.6 on the H100 machine) compiles one small C module per sequence of kernel argument
types, its launcher, with the host's C compiler (``gcc -O3``) into its cache: 0.29 s of a Triton
solution's first call. A sandboxed run has a Triton cache of its own, empty, so every such run
paid it. Here:

- the evaluation child has Triton note the argument types of each kernel it compiles, in a record
  in the run's private folder (``record_kernels``);
- after the run, the command line reads that record as untrusted data, keeps well-formed type
  names only, and adds them to a wanted list in the tool's cache (``learn``);
- a warm child, before it takes a job (no solution code has run in it), has Triton generate the
  launcher's C source from those types and compiles it into the tool's cache (``build_wanted``):
  nothing a solution wrote is compiled or loaded there;
- a child on private caches copies the built launchers into its Triton cache before the solution
  is loaded (``install``), where Triton finds one under the key it computes from its own source.

The tool's cache is outside a sandboxed run's writable folders, and protected (REWARD_HACK) in an
unsandboxed one. A Triton whose launcher is built another way is left alone (``_generator`` is
None there), and so are AMD's launchers.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import inspect
import json
import os
import re
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sol_execbench.files import replace_file

LAUNCHER_NAME = "__triton_launcher"  # the module name Triton's CUDA backend builds its launchers under
MAX_TYPES = 256  # argument types of one kernel
MAX_PER_RUN = 8  # kernels a run's record may add to the wanted list
MAX_WANTED = 32  # the wanted list keeps the newest
MAX_BUILT = 64  # built launchers the tool's cache keeps (the newest), and a child copies
RECORD_BYTES = 1 << 16

_SCALARS = frozenset({"constexpr", "nvTmaDesc", "i1", "i8", "i16", "i32", "i64", "u1", "u8", "u16", "u32",
                      "u64", "fp16", "bf16", "fp32", "f32", "fp64"})
_POINTER = re.compile(r"\*k?[a-z0-9]{1,16}")
# Only the element type (a pointer's) and the number of dimensions of a descriptor reach the C source.
_TENSOR_DESCRIPTOR = re.compile(r"tensordesc<[a-z0-9]{1,16}\[[0-9]{1,6}(, ?[0-9]{1,6}){0,4}\][A-Za-z0-9_,.:=#<> \[\]-]{0,200}")
_FOLDER = re.compile(r"[A-Z2-7]{52}")  # Triton's cache folder: a sha256 in base32, unpadded


def _valid_type(value: Any, depth: int = 0) -> str | tuple | None:
    """``value`` as a Triton argument type (a tuple of them for a tuple argument), or None."""
    if isinstance(value, str):
        ok = value in _SCALARS or _POINTER.fullmatch(value) or _TENSOR_DESCRIPTOR.fullmatch(value)
        return value if ok else None
    if isinstance(value, (list, tuple)) and depth < 3 and len(value) <= MAX_TYPES:
        items = tuple(_valid_type(v, depth + 1) for v in value)
        return None if any(i is None for i in items) else items
    return None


def _count_descriptors(types: tuple) -> int:
    return sum(1 for t in types if isinstance(t, str) and t.startswith("tensordesc"))


@dataclass(frozen=True)
class LauncherTypes:
    """What a kernel's launcher depends on: its argument types in order (Triton's names; a tuple
    argument as a tuple), and for each tensor-descriptor argument whether it became a TMA
    descriptor (None: the kernel has no such metadata)."""

    signature: tuple
    tensor_maps: tuple[bool, ...] | None = None

    @classmethod
    def parse(cls, data: Any) -> "LauncherTypes | None":
        """From a record's entry (untrusted): None unless every type is one Triton names."""
        if not isinstance(data, dict) or not isinstance(data.get("signature"), list):
            return None
        if len(data["signature"]) > MAX_TYPES:
            return None
        signature = _valid_type(data["signature"])
        maps = data.get("tensor_maps")
        if signature is None or not (maps is None or (isinstance(maps, list) and all(isinstance(m, bool) for m in maps))):
            return None
        if maps is not None and len(maps) != _count_descriptors(signature):
            return None
        return cls(signature, None if maps is None else tuple(maps))

    def to_json(self) -> dict[str, Any]:
        return {"signature": list(self.signature), "tensor_maps": None if self.tensor_maps is None else list(self.tensor_maps)}

    @property
    def ident(self) -> str:
        return hashlib.sha256(json.dumps(self.to_json(), sort_keys=True).encode()).hexdigest()[:24]


def store_dir() -> Path:
    """The tool's launcher store (``wanted/``, ``built/``), in the tool's cache."""
    from sol_execbench.platform.host import cache_root

    return cache_root() / "triton-launchers"


def record_file(staging: Path) -> Path:
    """Where, in a run's private folder, the child notes its kernels' argument types."""
    return staging / "run" / "triton-launchers.jsonl"


# -- the child: note each compiled kernel's types ---------------------------------------------------

def record_kernels(staging: Path) -> bool:
    """Have Triton note, in the run's record, the argument types of each kernel it compiles or finds
    in its cache; whether the note was set up (Triton imports, and no other listener is set)."""
    try:
        from triton import knobs
    except Exception:  # noqa: BLE001  (no Triton here)
        return False
    compilation = getattr(knobs, "compilation", None)
    if compilation is None or not hasattr(compilation, "listener") or compilation.listener is not None:
        return False
    path = record_file(staging)
    noted: set[str] = set()

    def note(*, src: Any = None, metadata: Any = None, **_: Any) -> None:
        try:
            signature = getattr(src, "signature", None)
            if not isinstance(signature, dict) or len(noted) >= MAX_PER_RUN:
                return
            maps = metadata.get("tensordesc_meta") if isinstance(metadata, dict) else None
            entry = {"signature": list(signature.values()),
                     "tensor_maps": None if maps is None else [m is not None for m in maps]}
            line = json.dumps(entry, default=str)
            if line not in noted:
                noted.add(line)
                with open(path, "a") as fh:
                    fh.write(line + "\n")
        except Exception:  # noqa: BLE001  (a note that fails costs later runs that launcher, nothing else)
            pass

    compilation.listener = note
    return True


# -- the command line: learn what a run noted ------------------------------------------------------

def learn(staging: Path, store: Path) -> int:
    """Add the well-formed entries of the run's record (untrusted) to the wanted list; how many.
    The run wrote its folder: a record that is not a plain file (a link, a pipe) is not read."""
    try:
        fd = os.open(record_file(staging), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return 0
    with os.fdopen(fd, "rb") as fh:
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return 0
            text = fh.read(RECORD_BYTES).decode("utf-8", "replace")
        except OSError:
            return 0
    wanted = store / "wanted"
    added = 0
    for line in text.splitlines()[:MAX_PER_RUN]:
        try:
            types = LauncherTypes.parse(json.loads(line))
        except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
            continue
        if types is None:
            continue
        target = wanted / f"{types.ident}.json"
        try:
            if target.exists():
                os.utime(target)  # wanted again: among the newest
            else:
                replace_file(target, json.dumps(types.to_json()))
        except OSError:
            continue
        added += 1
    _keep_newest(wanted, MAX_WANTED)
    return added


# -- a warm child, before its job: build what is wanted ----------------------------------------------

@dataclass(frozen=True)
class _Generator:
    """This Triton's launcher generator and build step, where they are those this module knows."""

    driver: Any  # triton.backends.nvidia.driver
    build: Any  # triton.runtime.build
    cache: Any  # triton.runtime.cache

    def source(self, types: LauncherTypes) -> str:
        maps = None if types.tensor_maps is None else [{} if m else None for m in types.tensor_maps]
        return self.driver.make_launcher({}, dict(enumerate(types.signature)), maps)

    def folder(self, source: str) -> str:
        """The folder of Triton's cache that ``compile_module_from_src`` looks in for this source."""
        key = hashlib.sha256((source + self.build.platform_key()).encode("utf-8")).hexdigest()
        return self.cache._base32(key)

    def file_name(self) -> str:
        import sysconfig

        return LAUNCHER_NAME + sysconfig.get_config_var("EXT_SUFFIX")

    def compile(self, source: str, target: Path) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, LAUNCHER_NAME + ".c")
            with open(path, "w") as fh:
                fh.write(source)
            built = self.build._build(LAUNCHER_NAME, path, tmp, self.driver.library_dirs(),
                                      self.driver.include_dirs, self.driver.libraries, [])
            replace_file(target, Path(built).read_bytes())


@functools.cache
def _generator() -> _Generator | None:
    """Triton's CUDA launcher generator, where this Triton builds launchers as 3.6 does: the key of
    ``compile_module_from_src`` and its cache folder, ``make_launcher(constants, signature,
    tensordesc_meta)`` and ``_build``'s arguments; else None."""
    try:
        from triton.backends.nvidia import driver
        from triton.runtime import build, cache

        keyed = "sha256((src + platform_key())" in inspect.getsource(build.compile_module_from_src) and \
            "(_base32(key))" in inspect.getsource(cache.get_cache_manager) and callable(getattr(cache, "_base32", None))
        named = f'name="{LAUNCHER_NAME}"' in inspect.getsource(driver.CudaLauncher)
        made = list(inspect.signature(driver.make_launcher).parameters) == ["constants", "signature", "tensordesc_meta"]
        built = list(inspect.signature(build._build).parameters)[:7] == [
            "name", "src", "srcdir", "library_dirs", "include_dirs", "libraries", "ccflags"]
        if keyed and named and made and built and callable(getattr(driver, "library_dirs", None)):
            return _Generator(driver, build, cache)
    except Exception:  # noqa: BLE001  (no Triton, another Triton, or no CUDA backend)
        pass
    return None


def build_wanted(store: Path, limit: int = MAX_PER_RUN) -> int:
    """Build up to ``limit`` wanted launchers not yet in the store, newest first; how many were built.
    A wanted entry that does not generate or compile is dropped."""
    wanted = _newest(store / "wanted", MAX_WANTED)
    if not wanted:
        return 0
    generator = _generator()
    if generator is None:
        return 0
    built = 0
    for path in wanted:
        if built >= limit:
            break
        try:
            types = LauncherTypes.parse(json.loads(path.read_text()))
        except (OSError, ValueError):
            types = None
        try:
            if types is None:
                raise ValueError("not launcher types")
            source = generator.source(types)
            target = store / "built" / generator.folder(source) / generator.file_name()
            if target.exists():
                continue
            generator.compile(source, target)
            built += 1
        except Exception:  # noqa: BLE001  (types this Triton does not generate, or a compiler failure)
            with contextlib.suppress(OSError):
                path.unlink()
    if built:
        _keep_newest(store / "built", MAX_BUILT)
    return built


class WantedWatch:
    """Builds what is wanted whenever the wanted list has changed since the last look (a warm
    child's idle moments): one ``stat`` when nothing changed, at most ``limit`` builds a look."""

    def __init__(self, store: Path):
        self.store = store
        self.seen: int | None = None

    def build_new(self, limit: int) -> int:
        try:
            stamp = (self.store / "wanted").stat().st_mtime_ns
        except OSError:
            return 0
        if stamp == self.seen:
            return 0
        built = build_wanted(self.store, limit)
        if built < limit:  # nothing left to build for the list as it is
            self.seen = stamp
        return built


# -- a child on private caches: copy what is built ---------------------------------------------------

def install(store: Path, triton_cache: Path) -> int:
    """Copy the store's built launchers (the newest ``MAX_BUILT``) into ``triton_cache`` where
    Triton looks for them; how many were copied. Copies, never links: the run may write its cache."""
    copied = 0
    for entry in _newest(store / "built", MAX_BUILT):
        if not _FOLDER.fullmatch(entry.name):
            continue
        try:
            files = [f for f in entry.iterdir() if f.name.startswith(LAUNCHER_NAME + ".") and f.is_file()]
        except OSError:
            continue
        for source in files:
            target = triton_cache / entry.name / source.name
            if target.exists():
                continue
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, target)
                copied += 1
            except OSError:
                continue
    return copied


# -- files ------------------------------------------------------------------------------------------

def _newest(folder: Path, count: int) -> list[Path]:
    """The ``count`` newest entries of ``folder`` (by modification time), newest first."""
    try:
        entries = [(e.stat().st_mtime_ns, e) for e in folder.iterdir() if not e.name.startswith(".")]
    except OSError:
        return []
    return [e for _, e in sorted(entries, key=lambda pair: pair[0], reverse=True)[:count]]


def _keep_newest(folder: Path, count: int) -> None:
    keep = set(_newest(folder, count))
    try:
        entries = list(folder.iterdir())
    except OSError:
        return
    for entry in entries:
        if entry in keep or entry.name.startswith("."):  # a file being written (replace_file's temporary)
            continue
        if entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                entry.unlink()
