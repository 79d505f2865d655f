"""Environment probe: what a run depended on (host, PyTorch build, GPUs, vendor libraries, variables).

``collect()`` snapshots this host (never raises); ``diff_snapshots`` compares two snapshots;
``environment_hash()`` is the per-process short hash traces carry; ``write_snapshot_sidecar``
writes the snapshot beside an evaluation's output when SOLEXECBENCH_ENV_SNAPSHOT(_PATH) asks.
"""

import importlib
from typing import Any

# Each name is imported from its module on first use: an evaluation reads the environment hash from
# the host cache, and importing the probe's modules (20 to 35 ms) would delay its start for nothing.
_EXPORTS = {"SnapshotDiff": "diff", "diff_snapshots": "diff", "environment_hash": "hashing",
            "snapshot_hash": "hashing", "write_snapshot_sidecar": "sidecar", "SCHEMA_VERSION": "snapshot",
            "cached_snapshot": "snapshot", "collect": "snapshot"}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)
