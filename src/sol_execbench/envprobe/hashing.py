"""The environment hash: a short, stable digest of a snapshot's configuration fields.

Volatile, identity and ``--extended``-only fields are left out (see ``volatility``), so two
snapshots hash alike exactly when ``env diff`` between them exits 0. ``environment_hash()``
probes once per process and caches the result: traces carry it without a probe per evaluation.
"""

from __future__ import annotations

import functools
import hashlib
import json
from typing import Any

from .snapshot import cached_snapshot
from .volatility import CONFIG, classify, flatten

HASH_LENGTH = 16


def hashed_content(snapshot: dict[str, Any]) -> dict[str, Any]:
    """The flattened ``config`` fields the hash covers (for inspecting what a hash means)."""
    return {path: value for path, value in flatten(snapshot) if classify(path) == CONFIG}


def snapshot_hash(snapshot: dict[str, Any], length: int = HASH_LENGTH) -> str:
    """Hex sha256 prefix over the canonical JSON of ``hashed_content(snapshot)``."""
    text = json.dumps(hashed_content(snapshot), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:length]


@functools.lru_cache(maxsize=1)
def environment_hash() -> str:
    """This process's environment hash (one probe per process, then cached)."""
    return snapshot_hash(cached_snapshot())
