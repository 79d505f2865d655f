"""The installed torch's facts without importing torch here: ``torch/version.py`` and on-disk caches.

Two records come from an imported torch (``_torch_worker``, in a child interpreter):

- ``build``: version, config (``torch.__config__.show()``), arch flags, C++ ABI and the shared
  objects ``import torch`` maps. A pure function of the installed torch, so it is cached in
  ``envprobe-torch-build.json`` keyed by a stamp of the install (path, size and mtime of
  ``torch/version.py``, ``torch/_C*.so``, ``torch/lib/libtorch_cuda.so`` / ``libtorch_hip.so``)
  and the loader variables (``LD_LIBRARY_PATH``, ``LD_PRELOAD``) that decide which files it maps.
- ``devices``: the GPUs torch sees (ROCm builds, and CUDA builds whose driver API failed). It also
  depends on the hardware and the visibility variables, so its key adds those (boot id, driver
  versions, the KFD topology's GPU ids, ``*_VISIBLE_DEVICES``...) to the install stamp.

A record is computed only on a miss (or with ``refresh``), kept per process as well, and never
kept when it failed: a failure is retried by the next probe. ``FORMAT`` is part of every key so
a change of the records' shape retires the old ones.
"""

from __future__ import annotations

import ast
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

from . import _torch_worker
from ._common import (
    cache_dir,
    read_json_cache,
    read_text,
    rocm_root,
    run_command,
    torch_dir,
    write_json_cache,
)

FORMAT = 1
TORCH_TIMEOUT_S = 60.0
"""Time box of the child interpreter (a cold ``import torch`` from a slow disk takes tens of seconds)."""
CACHE_FILES = {_torch_worker.BUILD: "envprobe-torch-build.json", _torch_worker.DEVICES: "envprobe-torch-devices.json"}
LOADER_VARS = ("LD_LIBRARY_PATH", "LD_PRELOAD")
VISIBILITY_VARS = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
                   "GPU_DEVICE_ORDINAL", "HSA_OVERRIDE_GFX_VERSION")
NO_TORCH = "torch cannot be imported: ModuleNotFoundError: No module named 'torch'"

_process_memo: dict[tuple[str, str], tuple[Any, dict[str, Any]]] = {}
"""(mode, torch path) -> (key, record): what this process computed or read, for repeated probes."""
_memo_lock = threading.Lock()


def read_version_file(torch_path: Path) -> dict[str, Any] | None:
    """The constants of ``torch/version.py`` (``__version__``, ``git_version``, ``cuda``, ``hip``, ``debug``)."""
    text = read_text(torch_path / "version.py")
    if text is None:
        return None
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    values: dict[str, Any] = {}
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else getattr(node, "target", None)
        value = getattr(node, "value", None)
        if isinstance(target, ast.Name) and isinstance(value, ast.Constant):
            values[target.id] = value.value
    return values or None


def _file_stamp(path: Path) -> list[Any] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return [str(path), st.st_size, st.st_mtime_ns]


def install_stamp(torch_path: Path) -> list[Any]:
    """What changes when torch is reinstalled or rebuilt: path, size and mtime of its defining files."""
    candidates = [torch_path / "version.py", *sorted(torch_path.glob("_C*.so")),
                  torch_path / "lib" / "libtorch_cuda.so", torch_path / "lib" / "libtorch_hip.so"]
    return [stamp for stamp in map(_file_stamp, candidates) if stamp is not None]


def hardware_stamp() -> dict[str, Any]:
    """Cheap reads that change when the GPUs, their partitioning or the driver change (or on reboot)."""
    reads = {
        "boot_id": read_text("/proc/sys/kernel/random/boot_id"),
        "nvidia_driver": read_text("/proc/driver/nvidia/version"),
        "amdgpu": read_text("/sys/module/amdgpu/version"),
        "rocm": read_text(rocm_root() / ".info" / "version"),
    }
    try:
        nvidia_gpus = sorted(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        nvidia_gpus = []
    kfd = []
    for node in sorted(Path("/sys/class/kfd/kfd/topology/nodes").glob("*")):
        kfd.append([node.name, read_text(node / "gpu_id"), read_text(node / "name")])
    return {**reads, "nvidia_gpus": nvidia_gpus, "kfd_nodes": kfd}


def cache_key(mode: str, torch_path: Path) -> Any:
    """The key a ``mode`` record is stored under (JSON round-tripped, so it compares with a stored one)."""
    key: dict[str, Any] = {
        "format": FORMAT,
        "install": install_stamp(torch_path),
        "loader": {name: os.environ.get(name) for name in LOADER_VARS},
    }
    if mode == _torch_worker.DEVICES:
        key["visibility"] = {name: os.environ.get(name) for name in VISIBILITY_VARS}
        key["hardware"] = hardware_stamp()
    return json.loads(json.dumps(key))


def run_worker(mode: str, timeout: float = TORCH_TIMEOUT_S) -> tuple[dict[str, Any] | None, str | None]:
    """``_torch_worker.main(mode)`` in a child interpreter with this process's ``sys.path``."""
    code = ("import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
            "from sol_execbench.envprobe._torch_worker import main; sys.exit(main(sys.argv[2]))")
    result = run_command([sys.executable, "-c", code, json.dumps(sys.path), mode], timeout=timeout)
    lines = [line for line in result.stdout.splitlines() if line.startswith(_torch_worker.MARKER)]
    if not lines:
        return None, f"torch {mode} facts: {result.error or 'the child interpreter printed no result'}"
    try:
        record = json.loads(lines[-1][len(_torch_worker.MARKER):])
    except ValueError:
        return None, f"torch {mode} facts: the child interpreter printed malformed JSON"
    if not isinstance(record, dict) or record.get("error"):
        return None, str(record.get("error") if isinstance(record, dict) else "not a JSON object")
    return record, None


def _load(mode: str, torch_path: Path, key: Any, refresh: bool) -> dict[str, Any] | None:
    if refresh:
        return None
    with _memo_lock:
        memo = _process_memo.get((mode, str(torch_path)))
    if memo is not None and memo[0] == key:
        return memo[1]
    slot = read_json_cache(cache_dir() / CACHE_FILES[mode]).get(str(torch_path))
    if isinstance(slot, dict) and slot.get("key") == key and isinstance(slot.get("record"), dict):
        return slot["record"]
    return None


def _store(mode: str, torch_path: Path, key: Any, record: dict[str, Any]) -> None:
    with _memo_lock:
        _process_memo[(mode, str(torch_path))] = (key, record)
        # One slot per torch install: switching between two environments does not evict the other.
        path = cache_dir() / CACHE_FILES[mode]
        data = read_json_cache(path)
        data[str(torch_path)] = {"key": key, "record": record}
        write_json_cache(path, data)


class TorchFacts:
    """The installed torch, described once per probe. Thread-safe: blocks ask concurrently."""

    def __init__(self, refresh: bool = False) -> None:
        self.refresh = refresh
        self.path = torch_dir()
        self.declared = read_version_file(self.path) if self.path is not None else None
        """``torch/version.py``'s constants, read on every probe (no import)."""
        self._locks = {mode: threading.Lock() for mode in CACHE_FILES}
        self._results: dict[str, tuple[dict[str, Any] | None, str | None]] = {}

    @property
    def cuda_version(self) -> str | None:
        return (self.declared or {}).get("cuda")

    @property
    def hip_version(self) -> str | None:
        return (self.declared or {}).get("hip")

    def build(self) -> tuple[dict[str, Any] | None, str | None]:
        """``(build record, None)`` or ``(None, why torch could not tell)``."""
        return self._get(_torch_worker.BUILD)

    def devices(self) -> tuple[dict[str, Any] | None, str | None]:
        """``(devices record, None)`` or ``(None, why)``; starts CUDA/HIP only in the child, on a miss."""
        return self._get(_torch_worker.DEVICES)

    def loaded(self) -> tuple[str, ...]:
        """The shared objects ``import torch`` maps (recorded by the child), those that still exist."""
        record, _ = self.build()
        return tuple(path for path in (record or {}).get("loaded") or () if os.path.exists(path))

    def _get(self, mode: str) -> tuple[dict[str, Any] | None, str | None]:
        with self._locks[mode]:  # the first block to ask computes; the others wait for its answer
            if mode not in self._results:
                self._results[mode] = self._read(mode)
            return self._results[mode]

    def _read(self, mode: str) -> tuple[dict[str, Any] | None, str | None]:
        if self.path is None:
            return None, NO_TORCH
        key = cache_key(mode, self.path)
        record = _load(mode, self.path, key, self.refresh)
        if record is not None:
            return record, None
        record, error = run_worker(mode)
        if record is not None and not record.get("errors"):  # a device that failed to answer is asked again
            _store(mode, self.path, key, record)
        return record, error


def clear_process_memo() -> None:
    """Forget what this process read or computed (tests; the on-disk caches stay)."""
    with _memo_lock:
        _process_memo.clear()
