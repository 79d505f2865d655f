"""The environment sidecar written beside an evaluation's traces.

``SOLEXECBENCH_ENV_SNAPSHOT_PATH=<file>`` writes the snapshot to that file;
``SOLEXECBENCH_ENV_SNAPSHOT=1`` writes it next to ``--output`` (``traces.jsonl`` ->
``traces.env.json``). The two names have no underscore after SOL, as in the configuration
reference. The snapshot is the process's cached one, so many evaluations cost one probe.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from .hashing import cached_snapshot

SNAPSHOT_FLAG = "SOLEXECBENCH_ENV_SNAPSHOT"
SNAPSHOT_PATH = "SOLEXECBENCH_ENV_SNAPSHOT_PATH"
_TRUE = {"1", "true", "yes", "on"}

log = logging.getLogger(__name__)


def sidecar_path(output_path: str | Path | None, explicit_path: str | Path | None = None) -> Path | None:
    """Where the sidecar goes, or None when none is asked for (or no ``--output`` to sit beside)."""
    explicit = explicit_path or os.environ.get(SNAPSHOT_PATH)
    if explicit:
        return Path(explicit)
    if os.environ.get(SNAPSHOT_FLAG, "").strip().lower() in _TRUE and output_path:
        output = Path(output_path)
        return output.with_name(f"{output.stem}.env.json")
    return None


def write_snapshot_sidecar(output_path: str | Path | None, explicit_path: str | Path | None = None) -> Path | None:
    """Write the snapshot where ``sidecar_path`` says; the path written, or None. Never raises."""
    target = sidecar_path(output_path, explicit_path)
    if target is None:
        return None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(cached_snapshot(), indent=2, default=str) + "\n")
    except OSError as exc:
        log.warning("environment sidecar not written to %s: %s", target, exc)
        return None
    return target
