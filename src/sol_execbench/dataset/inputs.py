"""The files that bound and label a run besides the problems: ``--ready-subset`` (which workloads
may be attempted), ``--readiness`` (why the others may not) and ``--dataset-manifest`` (where the
dataset came from). Each one's sha256 joins the run records' hashes, so results made under another
subset, readiness or manifest are not reused."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from sol_execbench.sandbox import file_sha256
from sol_execbench.schema import FormatError, Workload
from sol_execbench.schema.dataset_inputs import Readiness, ReadySubset
from sol_execbench.schema.loading import load_model

from .discovery import DatasetUsageError
from .loading import WorkloadFilter
from .options import RunOptions


@dataclass(frozen=True)
class ReadySelection:
    """Problem path -> the uuids and rows the ready subset lists for it."""

    uuids: dict[str, set[str]]
    rows: dict[str, set[int]]

    def allows(self, key: str, row: int, workload: Workload) -> bool:
        return workload.uuid in self.uuids.get(key, ()) or row in self.rows.get(key, ())


@dataclass
class RunInputs:
    ready_subset: ReadySubset | None = None
    readiness: Readiness | None = None
    hashes: dict[str, str | None] = field(default_factory=dict)
    selection: ReadySelection | None = None

    @property
    def workload_filter(self) -> WorkloadFilter | None:
        return self.selection.allows if self.selection is not None else None


def problem_key(path: str, root: Path, keys: list[str]) -> str | None:
    """The problem a file names by ``path``: relative to the root, absolute below it, or a longer
    path ending in the problem's path (a subset written from another working folder)."""
    given = PurePosixPath(path.replace("\\", "/"))
    if given.is_absolute():
        try:
            given = PurePosixPath(Path(path).resolve().relative_to(root).as_posix())
        except ValueError:
            pass
    text = str(given).strip("/")
    if text in keys:
        return text
    return next((k for k in keys if text.endswith(f"/{k}")), None)


def _load(model, path: Path, what: str):
    try:
        return load_model(model, path, what)
    except FormatError as exc:
        raise DatasetUsageError(f"{exc.path}: {exc.message}") from None


def _manifest_hash(path: Path) -> str:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise DatasetUsageError(f"{path}: not a JSON file ({exc}); --dataset-manifest takes a migration manifest "
                                "JSON") from None
    if not isinstance(data, dict):
        raise DatasetUsageError(f"{path}: a dataset manifest must be a JSON object, got {type(data).__name__}")
    return file_sha256(path)


def _selection(subset: ReadySubset, path: Path, root: Path, keys: list[str]) -> ReadySelection:
    uuids: dict[str, set[str]] = {}
    rows: dict[str, set[int]] = {}
    for index, ref in enumerate(subset.problems):
        key = problem_key(ref.problem_path, root, keys)
        if key is None:
            raise DatasetUsageError(f"{path}: field 'problems.{index}.problem_path': no problem '{ref.problem_path}' "
                                    f"below {root}; give the dataset root the subset was made for")
        uuids.setdefault(key, set()).update(w.uuid for w in ref.workloads if w.uuid is not None)
        rows.setdefault(key, set()).update(w.row_index for w in ref.workloads if w.uuid is None and w.row_index is not None)
    return ReadySelection(uuids, rows)


def read_run_inputs(options: RunOptions, root: Path, keys: list[str]) -> RunInputs:
    inputs = RunInputs(hashes={"dataset_manifest": None, "ready_subset": None, "readiness": None})
    if options.dataset_manifest is not None:
        inputs.hashes["dataset_manifest"] = _manifest_hash(options.dataset_manifest)
    if options.ready_subset is not None:
        inputs.ready_subset = _load(ReadySubset, options.ready_subset, "ready subset")
        inputs.selection = _selection(inputs.ready_subset, options.ready_subset, root, keys)
        inputs.hashes["ready_subset"] = file_sha256(options.ready_subset)
    if options.readiness is not None:
        inputs.readiness = _load(Readiness, options.readiness, "readiness report")
        inputs.hashes["readiness"] = file_sha256(options.readiness)
    return inputs
