"""Environment probe: what a run depended on (host, PyTorch build, GPUs, vendor libraries, variables).

``collect()`` snapshots this host (never raises); ``diff_snapshots`` compares two snapshots;
``environment_hash()`` is the per-process short hash traces carry; ``write_snapshot_sidecar``
writes the snapshot beside an evaluation's output when SOLEXECBENCH_ENV_SNAPSHOT(_PATH) asks.
"""

from .diff import SnapshotDiff, diff_snapshots
from .hashing import environment_hash, snapshot_hash
from .sidecar import write_snapshot_sidecar
from .snapshot import SCHEMA_VERSION, cached_snapshot, collect

__all__ = [
    "SCHEMA_VERSION", "SnapshotDiff", "cached_snapshot", "collect", "diff_snapshots", "environment_hash",
    "snapshot_hash", "write_snapshot_sidecar",
]
