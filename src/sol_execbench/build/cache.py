"""The content-addressed build cache of native solutions.

Layout under ``cache_root()``::

    <key[:2]>/<key>/            one finished build: the library, manifest.json, build.log
    locks/<key>.lock            flock'ed while a build of <key> runs
    tmp/<key[:16]>-XXXX/        a build in progress (renamed to <key[:2]>/<key> when it succeeds)

An entry directory appears only by an atomic rename of a finished build, so a reader never sees a
half-written one. Builders of the same key serialise on the lock file; the second one finds the
first one's entry when it gets the lock and compiles nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MANIFEST = "manifest.json"
_POLL_S = 0.1


BUILD_CACHE_DIR_ENV = "SOL_EXECBENCH_BUILD_CACHE_DIR"


def cache_root() -> Path:
    """``$SOL_EXECBENCH_BUILD_CACHE_DIR`` (builds alone elsewhere, e.g. on a larger disk), else
    ``builds`` under the tool's cache: ``$SOL_EXECBENCH_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/sol-execbench``, else ``~/.cache/sol-execbench``."""
    from sol_execbench.platform.host import cache_root as tool_cache_root

    if os.environ.get(BUILD_CACHE_DIR_ENV):
        return Path(os.environ[BUILD_CACHE_DIR_ENV]).expanduser()
    return tool_cache_root() / "builds"


class LockTimeout(Exception):
    """Another process kept building the same key past our deadline."""


@dataclass(frozen=True)
class CacheEntry:
    directory: Path
    library: Path
    manifest: dict[str, Any]


class BuildCache:
    def __init__(self, root: Path | None = None):
        self.root = root or cache_root()

    def entry_dir(self, key: str) -> Path:
        return self.root / key[:2] / key

    def lookup(self, key: str) -> CacheEntry | None:
        directory = self.entry_dir(key)
        try:
            manifest = json.loads((directory / MANIFEST).read_text())
        except (OSError, ValueError):
            return None
        library = directory / str(manifest.get("library", ""))
        if manifest.get("key") != key or not library.is_file():
            return None
        return CacheEntry(directory, library, manifest)

    @contextlib.contextmanager
    def locked(self, key: str, deadline: float) -> Iterator[None]:
        """Hold the build lock of ``key``; waits for another builder until ``deadline`` (monotonic)."""
        locks = self.root / "locks"
        locks.mkdir(parents=True, exist_ok=True)
        with open(locks / f"{key}.lock", "a+") as handle:
            while True:
                try:
                    fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise LockTimeout(f"another evaluation is building the same solution ({locks / key}.lock)") from None
                    time.sleep(_POLL_S)
            try:
                self._sweep(key)  # under the lock, any leftover build of this key is a dead one
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    def _sweep(self, key: str) -> None:
        tmp = self.root / "tmp"
        if tmp.is_dir():
            for stale in tmp.glob(f"{key[:16]}-*"):
                shutil.rmtree(stale, ignore_errors=True)

    def discard(self, key: str) -> None:
        """Remove an entry (one whose library no longer matches its manifest)."""
        shutil.rmtree(self.entry_dir(key), ignore_errors=True)

    def new_build_dir(self, key: str) -> Path:
        tmp = self.root / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f"{key[:16]}-", dir=tmp))

    def publish(self, key: str, build_dir: Path, library: Path, manifest: dict[str, Any]) -> CacheEntry:
        """Move a finished build into place (atomic rename; same file system)."""
        from sol_execbench.sandbox import file_sha256

        # Checked before each use (native.py): a library changed after it was built is rebuilt.
        record = {**manifest, "key": key, "library": library.name, "sha256": file_sha256(library)}
        (build_dir / MANIFEST).write_text(json.dumps(record, indent=2))
        for obj in build_dir.glob("*.o"):  # objects are not needed once the library is linked
            obj.unlink(missing_ok=True)
        target = self.entry_dir(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists() and self.lookup(key) is None:  # a broken entry (no manifest or library)
            shutil.rmtree(target, ignore_errors=True)
        try:
            os.rename(build_dir, target)
        except OSError:  # an entry appeared meanwhile (e.g. a cache shared without locks): keep it
            shutil.rmtree(build_dir, ignore_errors=True)
        entry = self.lookup(key)
        if entry is None:
            raise OSError(f"build cache entry {target} could not be written")
        return entry
