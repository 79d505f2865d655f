"""The blob precheck: every safetensors input of the selected workloads is looked up before any
device time is spent, without importing torch (file existence only; the evaluation child checks
the tensors' shapes and dtypes when it loads them).

A path is looked up as the evaluator looks it up (absolute as given; relative: below each root,
also after dropping leading components, first hit wins), below the dataset root, the problem
folder and ``FLASHINFER_TRACE_DIR``. A blob found is handed to the evaluator by its absolute path,
so the evaluation reads the very file the precheck found; traces keep the workload as written."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from sol_execbench.schema import SafetensorsInput, Workload

TRACE_DIR_ENV = "FLASHINFER_TRACE_DIR"


@dataclass(frozen=True)
class MissingBlob:
    problem: str
    workload: str
    input: str
    path: str

    def describe(self) -> str:
        return f"{self.problem}: workload {self.workload} input '{self.input}': {self.path}"


@dataclass(frozen=True)
class BlobCheck:
    """A problem's workloads with every found blob's path made absolute, and the blobs not found."""

    workloads: list[Workload]
    missing: list[MissingBlob]

    def missing_in(self, uuid: str) -> list[MissingBlob]:
        return [m for m in self.missing if m.workload == uuid]


def blob_roots(dataset_root: Path, problem_folder: Path) -> list[Path]:
    roots = [dataset_root, problem_folder]
    extra = os.environ.get(TRACE_DIR_ENV)
    if extra:
        roots.append(Path(extra))
    return roots


def find_blob(path: str, roots: list[Path]) -> Path | None:
    relative = Path(path)
    if relative.is_absolute():
        return relative if relative.is_file() else None
    parts = relative.parts
    for root in roots:
        for start in range(len(parts)):
            candidate = root.joinpath(*parts[start:])
            if candidate.is_file():
                return candidate.resolve()
    return None


def check_blobs(problem: str, workloads: list[Workload], roots: list[Path]) -> BlobCheck:
    checked: list[Workload] = []
    missing: list[MissingBlob] = []
    for workload in workloads:
        inputs = dict(workload.inputs)
        for name, spec in workload.inputs.items():
            if not isinstance(spec, SafetensorsInput):
                continue
            found = find_blob(spec.path, roots)
            if found is None:
                missing.append(MissingBlob(problem, workload.uuid, name, spec.path))
            else:
                inputs[name] = spec.model_copy(update={"path": str(found)})
        checked.append(workload.model_copy(update={"inputs": inputs}) if inputs != workload.inputs else workload)
    return BlobCheck(checked, missing)
