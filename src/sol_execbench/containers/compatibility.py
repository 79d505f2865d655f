"""Compatibility records: one entry per target and wrapper run, and the matrix that keeps the
newest entry of every target. Merging is by target id, newest ``recorded_at`` wins (a tie goes to
the later input), and the output is sorted by target id: the same entries give the same file."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable

from sol_execbench import __version__
from sol_execbench.files import replace_file
from sol_execbench.schema.containers import CompatibilityEntry, CompatibilityMatrix, DockerPreflight
from sol_execbench.schema.loading import FormatError, parse_json, read_text, validate


def now_utc() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def entry_from_preflight(preflight: DockerPreflight, status: str, command: tuple[str, ...] = (),
                         exit_code: int | None = None) -> CompatibilityEntry:
    verdict = preflight.classification
    return CompatibilityEntry(
        target_id=preflight.target.target_id, platform=preflight.target.platform, status=status,
        recorded_at=now_utc(), tool_version=__version__, dry_run=preflight.dry_run, image=preflight.target.image,
        image_digest=preflight.host.image_digest, command=list(command), exit_code=exit_code,
        host_kind=verdict.host_kind, host_status=verdict.host_status, dependency_status=verdict.dependency_status,
        host=preflight.host, dependencies=preflight.dependencies, reasons=verdict.reasons,
    )


def _stamp(entry: CompatibilityEntry) -> datetime:
    try:
        stamp = datetime.fromisoformat(entry.recorded_at.replace("Z", "+00:00"))
    except ValueError:
        return datetime.min.replace(tzinfo=timezone.utc)
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=timezone.utc)


def merge(entries: Iterable[CompatibilityEntry]) -> CompatibilityMatrix:
    """The newest entry of each target, sorted by target id."""
    newest: dict[str, CompatibilityEntry] = {}
    for entry in entries:
        kept = newest.get(entry.target_id)
        if kept is None or _stamp(entry) >= _stamp(kept):
            newest[entry.target_id] = entry
    ordered = [newest[key] for key in sorted(newest)]
    updated = max(ordered, key=_stamp).recorded_at if ordered else None
    return CompatibilityMatrix(updated_at=updated, entries=ordered)


def read_records(path: Path) -> list[CompatibilityEntry]:
    """The entries of a compatibility file: an entry, or a matrix (``FormatError`` otherwise)."""
    data = parse_json(read_text(path), path)
    if isinstance(data, dict) and "entries" in data:
        return validate(CompatibilityMatrix, data, path, "compatibility matrix", None).entries
    return [validate(CompatibilityEntry, data, path, "compatibility entry", None)]


def dump(model: CompatibilityEntry | CompatibilityMatrix) -> str:
    return json.dumps(model.model_dump(mode="json"), indent=2) + "\n"


def write_entry(path: Path, entry: CompatibilityEntry) -> None:
    replace_file(path, dump(entry))


def update_matrix(path: Path, new: Iterable[CompatibilityEntry]) -> CompatibilityMatrix:
    """Merge ``new`` into the matrix at ``path`` (created when missing) and write it back."""
    existing = read_records(path) if path.exists() else []
    matrix = merge([*existing, *new])
    replace_file(path, dump(matrix))
    return matrix


__all__ = ["FormatError", "dump", "entry_from_preflight", "merge", "read_records", "update_matrix", "write_entry"]
