"""A problem's results on disk: ``traces.jsonl`` and ``run.json`` in ``<output>/<problem>/``.

While a problem is evaluated its traces are appended to ``.traces.partial.jsonl``, each fsynced as
it comes. When the problem is done the traces file and then the run record are each written to a
temporary file, fsynced and renamed into place: a problem whose record names the traces file's
hash is finished; anything else (a kill at any moment) is evaluated again by the next run.

Traces are read through ``schema.trace_files`` (ours and upstream's ``traces.json``)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path
from typing import Any, Iterator

from pydantic import BaseModel

from sol_execbench.files import replace_file, replace_json
from sol_execbench.schema import Trace
from sol_execbench.schema.dataset_run import RunRecord
from sol_execbench.schema.trace_files import TRACES_FILE

RUN_RECORD_FILE = "run.json"
PARTIAL_TRACES_FILE = ".traces.partial.jsonl"


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_json(value: Any) -> str:
    """Of a model or plain JSON value, in canonical form (sorted keys, no spaces)."""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    return sha256_bytes(json.dumps(value, sort_keys=True, separators=(",", ":")).encode())


def read_run_record(folder: Path) -> RunRecord | None:
    """The record beside the traces, or None when it is missing or unreadable (then the problem
    counts as not finished)."""
    try:
        return RunRecord.model_validate_json((folder / RUN_RECORD_FILE).read_bytes())
    except (OSError, ValueError):
        return None


def traces_bytes(traces: list[Trace]) -> bytes:
    return b"".join(trace.model_dump_json().encode() + b"\n" for trace in traces)


def commit_problem(folder: Path, traces: list[Trace], record: RunRecord) -> None:
    """The finished problem: traces first, then the record that names their hash (a kill between
    the two leaves a problem that is evaluated again)."""
    folder.mkdir(parents=True, exist_ok=True)
    replace_file(folder / TRACES_FILE, traces_bytes(traces))
    with contextlib.suppress(OSError):  # before the record: a finished problem has no partial file
        (folder / PARTIAL_TRACES_FILE).unlink()
    replace_json(folder / RUN_RECORD_FILE, record)


class PartialTraces:
    """The traces of a problem being evaluated, on disk as each arrives (whole lines, fsynced)."""

    def __init__(self, folder: Path):
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / PARTIAL_TRACES_FILE
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND | os.O_CLOEXEC,
                                       0o644)
        self.failed: OSError | None = None

    def write(self, trace: Trace) -> None:
        """Called on the evaluator's channel thread: a write error is kept, not raised (the
        traces still come back from the evaluation, and the commit reports the disk)."""
        if self._fd is None or self.failed is not None:
            return
        data = memoryview(trace.model_dump_json().encode() + b"\n")
        try:
            while data:
                data = data[os.write(self._fd, data):]
            os.fsync(self._fd)
        except OSError as exc:
            self.failed = exc

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


@contextlib.contextmanager
def partial_traces(folder: Path) -> Iterator[PartialTraces]:
    sink = PartialTraces(folder)
    try:
        yield sink
    finally:
        sink.close()
