"""The one reader of trace files (no torch): a traces file, and every trace of a run directory
keyed by problem path and workload uuid.

Ours is ``traces.jsonl`` (one trace per line); upstream's runner writes ``traces.json`` (a JSON
array). Both names and both shapes are read; where a folder holds both, ``traces.jsonl`` is the
one read."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from .trace import Trace

TRACES_FILE = "traces.jsonl"
UPSTREAM_TRACES_FILE = "traces.json"


class TraceFileError(ValueError):
    """A trace source that cannot be read; the message names the file, the place and the fix."""


def traces_file(folder: Path) -> Path | None:
    """The problem's traces file: ours, else upstream's name."""
    for name in (TRACES_FILE, UPSTREAM_TRACES_FILE):
        if (folder / name).is_file():
            return folder / name
    return None


def _items(path: Path, text: str) -> tuple[list[tuple[int, object]], str]:
    if text.lstrip().startswith("["):
        try:
            values = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TraceFileError(f"{path}: not JSON ({exc.msg} at line {exc.lineno}); give a JSON array of traces "
                                 "or one trace per line") from None
        return list(enumerate(values, start=1)), "item"
    items = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                items.append((number, json.loads(line)))
            except json.JSONDecodeError as exc:
                raise TraceFileError(f"{path}: line {number} is not JSON ({exc.msg}); give one trace per line") from None
    return items, "line"


def read_traces(path: Path) -> list[Trace]:
    """Traces from JSONL (one per line) or a JSON array of traces (upstream's ``traces.json``).

    Raises TraceFileError (a ValueError) naming the file and line when a trace does not parse,
    OSError when the file cannot be read."""
    items, where = _items(path, path.read_text(encoding="utf-8"))
    traces = []
    for number, item in items:
        try:
            traces.append(Trace.model_validate(item))
        except ValidationError as exc:
            error = exc.errors()[0]
            field = ".".join(str(part) for part in error["loc"])
            raise TraceFileError(f"{path}: {where} {number} is not a trace: {field + ': ' if field else ''}"
                                 f"{error['msg']}") from None
    return traces


TraceKey = tuple[str, str]
"""(problem, workload uuid)."""


@dataclass(frozen=True)
class TraceSet:
    """Every trace of a source, keyed by (problem, workload uuid).

    In a run directory the problem is the traces file's folder relative to the directory (the
    dataset runner's problem path; the directory's own name where it holds the file itself). In a
    flat file it is the trace's definition name: a flat file carries no path."""

    source: Path
    flat: bool
    traces: dict[TraceKey, Trace]
    files: tuple[Path, ...]


def _run_directory_files(folder: Path) -> list[tuple[str, Path]]:
    found = []
    for candidate in sorted(folder.rglob("*")):
        if candidate.name not in (TRACES_FILE, UPSTREAM_TRACES_FILE) or not candidate.is_file():
            continue
        chosen = traces_file(candidate.parent)
        if chosen != candidate:  # traces.json beside traces.jsonl: the latter is read
            continue
        relative = candidate.parent.relative_to(folder)
        found.append((relative.as_posix() if relative.parts else folder.resolve().name, candidate))
    return found


def _keyed(source: Path, keyed: list[tuple[TraceKey, Trace]], flat: bool) -> dict[TraceKey, Trace]:
    traces: dict[TraceKey, Trace] = {}
    duplicates = []
    for key, trace in keyed:
        if key in traces:
            duplicates.append(key)
        traces[key] = trace
    if duplicates:
        named = ", ".join(f"{p}/{u}" for p, u in dict.fromkeys(duplicates))
        what = "definition/workload uuid" if flat else "problem/workload uuid"
        raise TraceFileError(f"{source}: {len(duplicates)} duplicate key(s) ({what}): {named}; one trace per workload "
                             f"is compared{' (a run directory keys on problem path)' if flat else ''}: drop the "
                             "duplicates")
    return traces


def read_trace_set(source: Path) -> TraceSet:
    """The traces of a file or a run directory. Raises TraceFileError naming the source and the fix:
    no traces found, a trace that does not parse, or two traces of one key."""
    if source.is_dir():
        files = _run_directory_files(source)
        if not files:
            raise TraceFileError(f"{source}: no {TRACES_FILE} or {UPSTREAM_TRACES_FILE} below it; give a trace file "
                                 "or a dataset run's output directory")
        keyed = [((problem, trace.workload.uuid), trace) for problem, path in files for trace in read_traces(path)]
        return TraceSet(source, False, _keyed(source, keyed, False), tuple(path for _, path in files))
    if not source.is_file():
        raise TraceFileError(f"{source}: no such file or directory; give a trace file or a run directory")
    keyed = [((trace.definition, trace.workload.uuid), trace) for trace in read_traces(source)]
    return TraceSet(source, True, _keyed(source, keyed, True), (source,))
