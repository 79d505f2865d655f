"""Library files: numeric version order, the files a process has loaded, a stat-keyed cache of per-file facts.

A library's version and its hash must describe the same file, so callers pick one path with
``best_versioned_file`` or ``loaded_libraries`` and pass that one path to both.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ._common import cache_dir, read_json_cache, write_json_cache

_HASH_CACHE_NAME = "envprobe-file-hashes.json"
_hash_lock = threading.Lock()
_hash_memo: dict[str, dict] | None = None

_VERSION_SUFFIX = re.compile(r"\.so((?:\.\d+)+)$")


def version_key(text: str) -> tuple[int, ...]:
    """Numeric sort key of a dotted version: ``0.10.0`` sorts after ``0.9.0`` (a string sort would not)."""
    return tuple(int(part) for part in re.findall(r"\d+", text))


def so_version(path: str | Path) -> str | None:
    """The version a shared library's file name carries: ``libx.so.12.4.5`` -> ``12.4.5``."""
    match = _VERSION_SUFFIX.search(str(path))
    return match.group(1).lstrip(".") if match else None


def best_versioned_file(lib_dir: Path, soname: str, prefer_versioned: bool = False) -> Path | None:
    """The file ``soname`` names in ``lib_dir``, links resolved.

    By default the plain name wins when it exists (what the loader opens); otherwise, or with
    ``prefer_versioned`` (wheels copy files instead of keeping links, so the plain name may be a
    stale copy), the highest ``soname.X.Y.Z`` by numeric order.
    """
    plain = lib_dir / soname
    try:
        if plain.exists() and not prefer_versioned:
            return plain.resolve()
        versioned = [p for p in lib_dir.glob(f"{soname}.*") if so_version(p) is not None and p.exists()]
    except OSError:
        return None
    if versioned:
        return max(versioned, key=lambda p: version_key(so_version(p) or "")).resolve()
    return plain.resolve() if plain.exists() else None


def loaded_libraries(maps_path: str = "/proc/self/maps") -> list[str]:
    """Paths of the shared objects this process has mapped (empty when /proc is unreadable)."""
    seen: dict[str, None] = {}
    try:
        with open(maps_path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                parts = line.split(None, 5)
                if len(parts) == 6 and ".so" in parts[5]:
                    seen.setdefault(parts[5].strip().removesuffix(" (deleted)"), None)
    except OSError:
        return []
    return list(seen)


def find_loaded(stem: str, loaded: list[str]) -> str | None:
    """The loaded file whose name is ``<stem>.so`` or ``<stem>.so.N...`` (``libcublas`` never matches ``libcublasLt``)."""
    pattern = re.compile(rf"(^|/){re.escape(stem)}\.so(\.\d+)*$")
    for path in loaded:
        if pattern.search(path):
            return path
    return None


def _cache_file() -> Path:
    return cache_dir() / _HASH_CACHE_NAME


def _load_memo() -> dict[str, dict]:
    global _hash_memo
    if _hash_memo is None:
        _hash_memo = read_json_cache(_cache_file())
    return _hash_memo


def _save_memo(memo: dict[str, dict]) -> None:
    write_json_cache(_cache_file(), memo)


def _stamp(real: str) -> dict[str, int] | None:
    try:
        st = os.stat(real)
    except OSError:
        return None
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ino": st.st_ino}


def file_fact(path: str | Path, name: str, compute: Callable[[str], Any], refresh: bool = False) -> Any:
    """``compute(real path)``, kept in the per-file cache under ``name``; ``refresh`` recomputes.

    One cache entry per file, keyed by its resolved path, size, mtime and inode: facts about the
    same bytes (the sha256, a library's version call) share the entry, and a changed file drops
    them all. Exceptions from ``compute`` propagate and a None result is not kept, so a failure
    is retried on the next probe rather than remembered.
    """
    real = os.path.realpath(path)
    stamp = _stamp(real)
    if stamp is not None and not refresh:
        with _hash_lock:
            cached = _load_memo().get(real)
            if isinstance(cached, dict) and name in cached and all(cached.get(k) == v for k, v in stamp.items()):
                return cached[name]
    value = compute(real)
    if value is not None and stamp is not None:
        with _hash_lock:
            memo = _load_memo()
            entry = memo.get(real)
            if not isinstance(entry, dict) or any(entry.get(k) != v for k, v in stamp.items()):
                entry = dict(stamp)
            memo[real] = {**entry, name: value}
            _save_memo(memo)
    return value


def _sha256(real: str) -> str | None:
    digest = hashlib.sha256()
    try:
        with open(real, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 22), b""):
                digest.update(chunk)
    except OSError:
        return None
    return digest.hexdigest()


def sha256_file(path: str | Path, refresh: bool = False) -> str | None:
    """Hex sha256 of ``path`` (links resolved), or None when unreadable.

    Kept in ``~/.cache/sol-execbench/envprobe-file-hashes.json`` (``file_fact``), so a warm probe
    does not re-read half a gigabyte of cuBLASLt.
    """
    return file_fact(path, "sha256", _sha256, refresh)


def filename_fingerprint(folders: dict[str, Path], patterns: tuple[str, ...]) -> tuple[str | None, int]:
    """sha256 over the sorted ``label/name`` of files matching ``patterns`` in each folder, and their count.

    Names only (cheap): a kernel database whose file set changed gets a new fingerprint. The label
    keeps same-named files of two libraries apart. ``(None, 0)`` when no folder holds a match.
    """
    names: set[str] = set()
    for label, folder in folders.items():
        try:
            for pattern in patterns:
                names.update(f"{label}/{p.name}" for p in folder.glob(pattern))
        except OSError:
            continue
    if not names:
        return None, 0
    digest = hashlib.sha256("\n".join(sorted(names)).encode()).hexdigest()
    return digest, len(names)
