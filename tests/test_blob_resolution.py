"""Safetensors blobs are found as upstream finds them: relative to the staging directory, then to
FLASHINFER_TRACE_DIR, also after dropping leading path components; the first hit wins."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from sol_execbench.evaluate.child.inputs import InputError, blob_roots, load_blobs, resolve_blob
from sol_execbench.schema import Definition, Workload

from .problems import add_definition

BLOB = "blob/workloads/vector_add/w0.safetensors"


def _touch(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")
    return path


@pytest.fixture
def staging(tmp_path: Path) -> Path:
    (tmp_path / "staging").mkdir()
    return tmp_path / "staging"


@pytest.fixture
def trace_dir(tmp_path: Path, monkeypatch) -> Path:
    root = tmp_path / "flashinfer-trace"
    root.mkdir()
    monkeypatch.setenv("FLASHINFER_TRACE_DIR", str(root))
    return root


def test_roots_are_the_staging_directory_then_the_trace_dir(staging: Path, trace_dir: Path, monkeypatch):
    assert blob_roots(staging) == [staging, trace_dir]
    monkeypatch.delenv("FLASHINFER_TRACE_DIR")
    assert blob_roots(staging) == [staging]


def test_relative_to_the_staging_directory(staging: Path, trace_dir: Path):
    assert resolve_blob(BLOB, blob_roots(staging)) is None
    blob = _touch(staging / BLOB)
    assert resolve_blob(BLOB, blob_roots(staging)) == blob


def test_then_relative_to_the_trace_dir(staging: Path, trace_dir: Path):
    blob = _touch(trace_dir / BLOB)
    assert resolve_blob(BLOB, blob_roots(staging)) == blob


def test_the_staging_directory_wins_over_the_trace_dir(staging: Path, trace_dir: Path):
    _touch(trace_dir / BLOB)
    staged = _touch(staging / BLOB)
    assert resolve_blob(BLOB, blob_roots(staging)) == staged


def test_leading_components_are_dropped(staging: Path, trace_dir: Path):
    # Workloads name blobs from wherever the dataset was laid out: "flashinfer-trace/blob/..." must be
    # found under a FLASHINFER_TRACE_DIR that is the dataset root itself.
    blob = _touch(trace_dir / BLOB)
    assert resolve_blob(f"datasets/flashinfer-trace/{BLOB}", blob_roots(staging)) == blob
    only_name = _touch(staging / "w0.safetensors")
    assert resolve_blob("elsewhere/w0.safetensors", [staging]) == only_name


def test_the_full_path_wins_over_a_shortened_one(staging: Path):
    full = _touch(staging / BLOB)
    _touch(staging / "workloads/vector_add/w0.safetensors")
    _touch(staging / "w0.safetensors")
    assert resolve_blob(BLOB, [staging]) == full


def test_an_absolute_path_is_used_as_is(staging: Path, tmp_path: Path):
    blob = _touch(tmp_path / "abs" / "w0.safetensors")
    assert resolve_blob(str(blob), [staging]) == blob
    assert resolve_blob(str(tmp_path / "abs" / "missing.safetensors"), [staging]) is None


def _blob_problem() -> tuple[Definition, Workload]:
    definition = Definition.model_validate(add_definition())
    workload = Workload.model_validate({
        "uuid": "w", "axes": {"N": 4},
        "inputs": {"a": {"type": "safetensors", "path": BLOB, "tensor_key": "a"}, "b": {"type": "random"}}})
    return definition, workload


def test_load_blobs_reads_the_resolved_file(staging: Path, trace_dir: Path):
    definition, workload = _blob_problem()
    a = torch.arange(4, dtype=torch.float32)
    (trace_dir / BLOB).parent.mkdir(parents=True)
    save_file({"a": a}, str(trace_dir / BLOB))
    blobs = load_blobs(definition, workload, blob_roots(staging))
    assert list(blobs) == ["a"] and torch.equal(blobs["a"], a)


def test_a_missing_blob_names_the_path(staging: Path, trace_dir: Path):
    definition, workload = _blob_problem()
    with pytest.raises(InputError) as info:
        load_blobs(definition, workload, blob_roots(staging))
    assert BLOB in str(info.value) and "FLASHINFER_TRACE_DIR" in str(info.value) and str(trace_dir) in str(info.value)
