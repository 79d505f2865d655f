"""The environment snapshot: every block, a schema version, a timestamp and the partial reasons.

``collect()`` never raises. Each block is fully shaped (every key present, null when unknown);
what could not be read is one line in ``partial_reasons`` naming the field and the cause.
All blocks run concurrently. torch is not imported here: what only an imported torch can tell
comes from ``torch_facts`` (cached per torch install; computed in a child interpreter on a miss),
so a warm probe costs file reads, NVML and the CUDA driver API, not a torch import.
"""

from __future__ import annotations

import copy
import functools
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from typing import Any, Callable

from sol_execbench import __version__

from . import accelerator, env_vars, host, nvidia, packages, python_env, pytorch_build, rocm
from ._common import Context, error_text
from .torch_facts import TorchFacts

SCHEMA_VERSION = "1.0"
TOOL_NAME = "sol-execbench"

BLOCK_ORDER = ("host", "python", "pytorch_build", "accelerator", "nvidia", "rocm", "packages", "env_vars")
META_KEYS = ("schema_version", "tool", "timestamp", "probe_wall_s", "extended", "partial", "partial_reasons")

_INDEPENDENT: dict[str, Callable[[], tuple[dict, list[str]]]] = {
    "host": host.probe,
    "python": python_env.probe,
    "packages": packages.probe,
    "env_vars": env_vars.probe,
}
_AFTER_TORCH: dict[str, Callable[[Context], tuple[dict, list[str]]]] = {
    "pytorch_build": pytorch_build.probe,
    "accelerator": accelerator.probe,
    "nvidia": nvidia.probe,
    "rocm": rocm.probe,
}
# Parts of the late blocks that need no torch, started with the early ones and handed to them.
_PREFETCH: dict[str, Callable[[], Any]] = {"nvidia": nvidia.read_devices, "rocm": rocm.read_tools}
EMPTY_BLOCKS: dict[str, Callable[[], dict[str, Any]]] = {
    "host": host.empty,
    "python": python_env.empty,
    "pytorch_build": pytorch_build.empty,
    "accelerator": accelerator.empty,
    "nvidia": nvidia.empty,
    "rocm": rocm.empty,
    "packages": packages.empty,
    "env_vars": env_vars.empty,
}


def conform(template: Any, value: Any) -> Any:
    """``value`` with every key of ``template`` present (recursively through dicts); extra keys kept."""
    if not isinstance(template, dict) or not isinstance(value, dict):
        return value
    shaped = {key: conform(default, value[key]) if key in value else default for key, default in template.items()}
    shaped.update({key: item for key, item in value.items() if key not in template})
    return shaped


def _guarded(name: str, fn: Callable[..., tuple[dict, list[str]]], *args: Any) -> tuple[dict[str, Any], list[str]]:
    try:
        block, reasons = fn(*args)
    except Exception as exc:  # noqa: BLE001 - the contract: a broken probe is a reason, never a crash
        return EMPTY_BLOCKS[name](), [f"{name}: probe failed: {error_text(exc)}"]
    return conform(EMPTY_BLOCKS[name](), block), list(reasons)


def _late(fn: Callable[..., tuple[dict, list[str]]], prefetched: Any) -> Callable[[Context], tuple[dict, list[str]]]:
    """``fn(ctx)``, or ``fn(ctx, <prefetched part>)``; a prefetch that raised re-raises inside the block's guard."""
    if prefetched is None:
        return fn
    return lambda ctx: fn(ctx, prefetched.result())


def empty_snapshot(extended: bool = False) -> dict[str, Any]:
    """A snapshot with every block null: the shape every snapshot has."""
    snap: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": TOOL_NAME, "version": __version__},
        "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "probe_wall_s": None,
        "extended": extended,
        "partial": False,
        "partial_reasons": [],
    }
    snap.update({name: EMPTY_BLOCKS[name]() for name in BLOCK_ORDER})
    return snap


def _collect(extended: bool, use_cache: bool) -> dict[str, Any]:
    start = time.perf_counter()
    snap = empty_snapshot(extended)
    results: dict[str, tuple[dict[str, Any], list[str]]] = {}
    # One worker per task: late blocks wait on prefetches and on each other's torch facts, never on a queue.
    with ThreadPoolExecutor(max_workers=len(_INDEPENDENT) + len(_PREFETCH) + len(_AFTER_TORCH)) as pool:
        early = {name: pool.submit(_guarded, name, fn) for name, fn in _INDEPENDENT.items()}
        prefetched = {name: pool.submit(fn) for name, fn in _PREFETCH.items()}
        ctx = Context(facts=TorchFacts(refresh=not use_cache), extended=extended, refresh=not use_cache)
        late = {name: pool.submit(_guarded, name, _late(fn, prefetched.get(name)), ctx) for name, fn in _AFTER_TORCH.items()}
        results.update({name: future.result() for name, future in {**early, **late}.items()})
    for name in BLOCK_ORDER:
        snap[name], lines = results[name]
        snap["partial_reasons"].extend(lines)
    snap["partial"] = bool(snap["partial_reasons"])
    snap["probe_wall_s"] = round(time.perf_counter() - start, 3)
    return snap


def collect(extended: bool = False, use_cache: bool = True) -> dict[str, Any]:
    """Probe this host. Never raises; see the module doc for the contract.

    ``use_cache=False`` (``env probe --no-cache``) recomputes what the caches hold (torch facts,
    library hashes and versions) and stores the fresh results.
    """
    try:
        return _collect(extended, use_cache)
    except Exception as exc:  # noqa: BLE001 - a bug in the assembly itself still yields a shaped snapshot
        snap = empty_snapshot(extended)
        snap.update(partial=True, partial_reasons=[f"snapshot: probe failed: {error_text(exc)}"])
        return snap


@functools.lru_cache(maxsize=2)
def _cached(extended: bool) -> dict[str, Any]:
    return collect(extended)


def cached_snapshot(extended: bool = False) -> dict[str, Any]:
    """One probe per process (for sidecars and trace hashes); a copy, so callers may change it."""
    return copy.deepcopy(_cached(extended))
