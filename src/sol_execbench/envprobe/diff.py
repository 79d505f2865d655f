"""``env diff``: the fields two snapshots disagree on, grouped by block, most timing-relevant first.

The exit code is 1 when any ``config`` field differs and 0 otherwise: two snapshots of one host
taken minutes apart differ only in volatile fields, which the diff lists and marks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .volatility import CONFIG, EXTENDED, classify, flatten

# Blocks in the order a difference is most likely to move a kernel's time.
TIMING_ORDER = ("accelerator", "nvidia", "rocm", "pytorch_build", "env_vars", "packages", "python", "host")
_ABSENT = object()


@dataclass(frozen=True)
class DiffEntry:
    path: str
    a: Any
    b: Any
    kind: str
    """config (a real difference), volatile, identity, or extended."""
    presence: str = "both"
    """both, a_only or b_only."""

    @property
    def block(self) -> str:
        return self.path.split(".", 1)[0].split("[", 1)[0]

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "a": self.a, "b": self.b, "kind": self.kind, "presence": self.presence}


@dataclass(frozen=True)
class SnapshotDiff:
    entries: tuple[DiffEntry, ...]

    @property
    def differs(self) -> bool:
        """True when a non-volatile (``config``) field differs."""
        return any(e.kind == CONFIG for e in self.entries)

    @property
    def exit_code(self) -> int:
        return 1 if self.differs else 0

    def by_block(self) -> list[tuple[str, list[DiffEntry]]]:
        """Entries grouped by block, blocks in ``TIMING_ORDER``, then any other (top-level fields last)."""
        groups: dict[str, list[DiffEntry]] = {}
        for entry in self.entries:
            groups.setdefault(entry.block if entry.block in TIMING_ORDER else "snapshot", []).append(entry)
        order = [*TIMING_ORDER, "snapshot"]
        return [(name, groups[name]) for name in order if name in groups]

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for entry in self.entries:
            counts[entry.kind] = counts.get(entry.kind, 0) + 1
        return counts

    def to_dict(self) -> dict[str, Any]:
        return {
            "differs": self.differs,
            "exit_code": self.exit_code,
            "counts": self.counts(),
            "blocks": [{"block": name, "entries": [e.to_dict() for e in items]} for name, items in self.by_block()],
        }


def _kind(path: str, both_extended: bool) -> str:
    kind = classify(path)
    # A field only --extended fills is no difference when one side did not look.
    return CONFIG if kind == EXTENDED and both_extended else kind


def diff_snapshots(a: dict[str, Any], b: dict[str, Any]) -> SnapshotDiff:
    """Every leaf that differs between ``a`` and ``b``, classified by ``volatility.classify``."""
    flat_a, flat_b = dict(flatten(a)), dict(flatten(b))
    both_extended = bool(a.get("extended")) and bool(b.get("extended"))
    entries = []
    for path in [*flat_a, *(p for p in flat_b if p not in flat_a)]:
        left, right = flat_a.get(path, _ABSENT), flat_b.get(path, _ABSENT)
        if left == right:
            continue
        presence = "a_only" if right is _ABSENT else "b_only" if left is _ABSENT else "both"
        entries.append(
            DiffEntry(
                path=path,
                a=None if left is _ABSENT else left,
                b=None if right is _ABSENT else right,
                kind=_kind(path, both_extended),
                presence=presence,
            )
        )
    return SnapshotDiff(tuple(entries))
