"""The environment hash: a short, stable digest of a snapshot's configuration fields.

Volatile, identity and ``--extended``-only fields are left out (see ``volatility``), so two
snapshots hash alike exactly when ``env diff`` between them exits 0. ``environment_hash()``
probes once per process and caches the result: traces carry it without a probe per evaluation.
"""

from __future__ import annotations

import functools
import hashlib
import json
from typing import TYPE_CHECKING, Any

from .volatility import CONFIG, classify, flatten

if TYPE_CHECKING:
    from concurrent.futures import Future

HASH_LENGTH = 16


def hashed_content(snapshot: dict[str, Any]) -> dict[str, Any]:
    """The flattened ``config`` fields the hash covers (for inspecting what a hash means)."""
    return {path: value for path, value in flatten(snapshot) if classify(path) == CONFIG}


def snapshot_hash(snapshot: dict[str, Any], length: int = HASH_LENGTH) -> str:
    """Hex sha256 prefix over the canonical JSON of ``hashed_content(snapshot)``."""
    text = json.dumps(hashed_content(snapshot), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def cached_snapshot() -> dict[str, Any]:
    """``snapshot.cached_snapshot``, its modules imported only when a probe runs: a run whose hash
    comes from the host cache never needs them."""
    from .snapshot import cached_snapshot as probe

    return probe()


@functools.lru_cache(maxsize=1)
def environment_hash() -> str:
    """This process's environment hash (one probe per process, then cached)."""
    return snapshot_hash(cached_snapshot())


# -- the host cache ----------------------------------------------------------------------------
# A CLI invocation must not pay a torch import just to stamp its traces. The hash is kept on disk
# beside a fingerprint of what can change it and is cheap to read without importing anything:
# the boot, the interpreter, the install times of the kernel-relevant packages, the driver and
# ROCm versions and the canonical environment variables. Any change re-probes.

_FINGERPRINT_MODULES = ("torch", "triton", "pynvml", "fbgemm_gpu", "aiter", "flashinfer", "cutlass")
_FINGERPRINT_FILES = ("/proc/sys/kernel/random/boot_id", "/proc/driver/nvidia/version", "/opt/rocm/.info/version")


def _module_stamp(name: str) -> str | None:
    import importlib.util
    import os

    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    try:
        return f"{spec.origin}:{os.stat(spec.origin).st_mtime_ns}"
    except OSError:
        return spec.origin


def host_fingerprint() -> str:
    import os
    import sys

    from .env_vars import capture

    parts = {"python": sys.executable, "version": sys.version,
             "modules": {name: _module_stamp(name) for name in _FINGERPRINT_MODULES},
             "files": {}, "env": capture(dict(os.environ))}
    for path in _FINGERPRINT_FILES:
        try:
            parts["files"][path] = open(path).read(4096)
        except OSError:
            parts["files"][path] = None
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def host_cached_environment_hash() -> str | None:
    """The environment hash, re-probed only when the host fingerprint changed. Never raises."""
    from ._common import cache_dir, read_json_cache, write_json_cache

    try:
        fingerprint = host_fingerprint()
        path = cache_dir() / "environment-hash.json"
        stored = read_json_cache(path)
        if stored.get("fingerprint") == fingerprint and isinstance(stored.get("hash"), str):
            return stored["hash"]
        value = environment_hash()
        write_json_cache(path, {"fingerprint": fingerprint, "hash": value})
        return value
    except Exception:  # a hash is a convenience; never fail an evaluation for it
        return None


def environment_hash_beside() -> Future[str | None]:
    """``host_cached_environment_hash()`` on a thread of its own, as a Future:
    a host's first probe (after a reboot or a package change too) imports torch and hashes package
    files, seconds that an evaluation's start-up, or a warm pool's, need not wait for."""
    import threading
    from concurrent.futures import Future

    future: Future[str | None] = Future()

    def run() -> None:
        try:
            future.set_result(host_cached_environment_hash())
        except BaseException as exc:  # noqa: BLE001  (the Future carries it to whoever waits)
            future.set_exception(exc)

    threading.Thread(target=run, name="environment-hash", daemon=True).start()
    return future
