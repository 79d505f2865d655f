"""``dataset migrate-flashinfer``: a flashinfer-bench trace set into problem folders of category
``FlashInfer-Bench``, one per definition.

Read: ``definitions/**/*.json`` (one definition each), ``workloads/**/*.jsonl`` (workload traces:
``{"definition", "workload"}`` per line), ``solutions/**/*.json`` and ``traces/**/*.jsonl``. Written per
definition: ``definition.json``; ``workload.jsonl`` with the default tolerance made explicit (the
trace set has none); each solution as ``solution_<name>.json`` in this harness's shape (its
``target_hardware``, which flashinfer-bench does not build for, becomes ``LOCAL``); the
definition's traces, unchanged, as ``flashinfer-traces.jsonl`` (a record of flashinfer-bench's
results, not read by any command here). Safetensors inputs keep their paths, which are relative to
the trace set: point ``FLASHINFER_TRACE_DIR`` at SRC when evaluating.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sol_execbench.schema import ToleranceSpec
from sol_execbench.schema.migration import BlockerCode, BlockerScope, MigrationSource, MigrationSourceKind

from .collect import Migration, MigrationError, ProblemDraft, Record, folder_name, jsonl_text
from .sources import existing_source, json_of, jsonl_of, where

CATEGORY = "FlashInfer-Bench"
TRACES_FILE = "flashinfer-traces.jsonl"
LANGUAGES = {"python": "python", "triton": "triton", "tilelang": "tilelang", "cuda": "cuda_cpp", "cpp": "cpp"}
NATIVE_LANGUAGES = ("cuda", "cpp")
TVM_FFI_DETAIL = ("binds through tvm-ffi (flashinfer-bench's default for C++/CUDA): its entry point takes "
                  "tvm::ffi::TensorView arguments, and only the torch binding builds here; port the entry point "
                  "to a torch extension function and set binding 'torch'")


def migrate_flashinfer(src: Path, revision: str | None = None) -> Migration:
    """Read a trace set (the folder holding definitions/) into a ``Migration``."""
    src = existing_source(src)
    if not (src / "definitions").is_dir():
        raise MigrationError(str(src), "SRC", "is not a flashinfer-bench trace set (it has no definitions/ folder)",
                             "give the folder that holds definitions/, workloads/, solutions/ and traces/")
    migration = Migration(MigrationSource(kind=MigrationSourceKind.FLASHINFER_BENCH, name=src.absolute().name,
                                          revision=revision))
    drafts: list[ProblemDraft] = []
    by_name: dict[str, ProblemDraft] = {}
    for path in _files(src, "definitions", "*.json"):
        definition = json_of(path, src)
        name = _text_field(definition, "name", where(path, src))
        draft = ProblemDraft(category=CATEGORY, name=name, source=where(path, src), definition=definition)
        drafts.append(draft)
        by_name.setdefault(name, draft)  # a later one of the same name is blocked as a duplicate
    for at, line in _lines(src, "workloads"):
        workload = _object_field(line, "workload", at)
        if (draft := _owner(by_name, line, at, BlockerScope.WORKLOAD, migration)) is not None:
            draft.workloads.append(Record(at, workload if "tolerance" in workload else
                                          {**workload, "tolerance": ToleranceSpec().model_dump(mode="json")}))
    for path in _files(src, "solutions", "*.json"):
        solution, at = json_of(path, src), where(path, src)
        if (draft := _owner(by_name, solution, at, BlockerScope.SOLUTION, migration)) is not None:
            draft.solutions.append(_converted_solution(solution, at))
    for at, line in _lines(src, "traces"):
        if (draft := _owner(by_name, line, at, BlockerScope.TRACE, migration)) is not None:
            draft.traces.append(Record(at, line))
    for draft in drafts:
        if draft.traces:
            draft.extra_files[TRACES_FILE] = jsonl_text([record.data for record in draft.traces])
        migration.add(draft)
    return migration


def _files(src: Path, folder: str, pattern: str) -> list[Path]:
    root = src / folder
    return sorted(root.rglob(pattern)) if root.is_dir() else []


def _lines(src: Path, folder: str) -> list[tuple[str, Any]]:
    return [line for path in _files(src, folder, "*.jsonl") for line in jsonl_of(path, src)]


def _text_field(record: Any, name: str, at: str) -> str:
    value = record.get(name) if isinstance(record, dict) else None
    if not isinstance(value, str) or not value:
        raise MigrationError(at, name, f"is {value!r}, not a name" if isinstance(record, dict) else
                             "is missing: the record is not a JSON object", f"give the record a non-empty '{name}'")
    return value


def _object_field(record: Any, name: str, at: str) -> dict[str, Any]:
    _text_field(record, "definition", at)
    value = record.get(name)
    if not isinstance(value, dict):
        raise MigrationError(at, name, f"is {type(value).__name__}, not an object",
                             f"give each line a '{name}' object (a flashinfer-bench workload trace)")
    return value


def _owner(by_name: dict[str, ProblemDraft], record: Any, at: str, scope: BlockerScope,
           migration: Migration) -> ProblemDraft | None:
    """The drafted problem a record belongs to; None (and a blocker) when the trace set lacks its definition."""
    name = _text_field(record, "definition", at)
    if name not in by_name:
        migration.block(BlockerCode.UNKNOWN_DEFINITION, scope, at, f"definition '{name}' is not in definitions/")
        return None
    return by_name[name]


def _converted_solution(solution: dict[str, Any], at: str) -> Record:
    """A flashinfer-bench solution in this harness's shape, or a blocker saying why it has none."""
    name = _text_field(solution, "name", at)
    record = Record(at, None, f"solution_{folder_name(name)}.json")
    spec = solution.get("spec")
    if not isinstance(spec, dict):
        record.blocker = (BlockerCode.SOLUTION_REJECTED, f"field 'spec' is {type(spec).__name__}, not an object")
        return record
    language, binding = spec.get("language"), spec.get("binding")
    if language not in LANGUAGES:
        record.blocker = (BlockerCode.UNSUPPORTED_LANGUAGE, f"language {language!r} has no counterpart here "
                          f"(these have: {', '.join(LANGUAGES)})")
        return record
    if language in NATIVE_LANGUAGES and binding in (None, "tvm-ffi"):
        record.blocker = (BlockerCode.TVM_FFI_BINDING, TVM_FFI_DETAIL)
        return record
    converted_spec = {"languages": [LANGUAGES[language]], "target_hardware": ["LOCAL"],
                      "entry_point": spec.get("entry_point"), "dependencies": spec.get("dependencies") or [],
                      "destination_passing_style": spec.get("destination_passing_style", True)}
    if language in NATIVE_LANGUAGES:
        converted_spec["binding"] = binding
    record.data = {key: solution[key] for key in ("name", "definition", "author") if key in solution}
    record.data.update(spec=converted_spec, sources=solution.get("sources"))
    if solution.get("description") is not None:
        record.data["description"] = solution["description"]
    return record
