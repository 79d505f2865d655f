"""Triton's cache key, computed ahead of the child by a process of the harness's.

The first time a process compiles a Triton kernel, Triton hashes its own sources and libtriton
into a key for its cache (``triton.runtime.cache.triton_key``: 0.4 s), on the first workload's
critical path in a fresh child. For an evaluation that uses Triton, the command line starts a
process that computes it beside the child's start-up and writes it to the run's private folder
(``EarlyChild.prepare_triton``). The child reads that record before any solution code runs (the
solution may write to the folder later), and installs it in Triton where it names this very Triton
(its folder, and the version the key starts with): the value is the one Triton would compute, for
this run's private cache.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from sol_execbench.sandbox import triton_key_file


def _record(staging: Path) -> dict[str, str] | None:
    try:
        record = json.loads(triton_key_file(staging).read_text())
    except (OSError, ValueError):  # not written (yet): Triton computes its key itself
        return None
    if not isinstance(record, dict) or not all(isinstance(record.get(name), str) for name in ("triton", "key")):
        return None
    return record


def adopt_ahead(staging: Path) -> bool:
    """Install the key written ahead for this run, if there is one for the Triton this process
    imports; whether it was installed."""
    record = _record(staging)
    if record is None:
        return False
    try:
        import triton
        from triton.runtime import autotuner, cache
    except Exception:  # noqa: BLE001  (no Triton here: the solution will say so)
        return False
    if record["triton"] != os.path.dirname(os.path.abspath(triton.__file__)) or \
            not record["key"].startswith(triton.__version__):  # Triton's key opens with its version
        return False
    key = record["key"]

    def triton_key() -> str:
        return key

    # Both names Triton calls it by: the cache module's own, and the autotuner's import of it.
    for module in (cache, autotuner):
        if callable(getattr(module, "triton_key", None)):
            module.triton_key = triton_key
    return True
