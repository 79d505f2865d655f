"""Files a dataset run reads besides the problems: timeout overrides, a ready subset and a
readiness report (the shapes the ROCm port's dataset tools write; keys they hold beyond these are
kept), and the execution closure the run writes from them."""

from __future__ import annotations

from typing import Annotated, Literal, Optional

from pydantic import Field

from .base import NonEmptyString, NonNegativeInt, SchemaModel

Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]
CLOSURE_VERSION = "1"


class TimeoutOverrides(SchemaModel):
    """``--timeout-overrides``: seconds per evaluator call (a shard) instead of ``--timeout``."""

    default: Optional[Seconds] = None
    """Replaces ``--timeout`` for every problem."""
    problems: dict[NonEmptyString, Seconds] = Field(default_factory=dict)
    """By problem path relative to the dataset root (``L1/rmsnorm``)."""
    workloads: dict[NonEmptyString, Seconds] = Field(default_factory=dict)
    """By ``<problem path>:<uuid>``, or by a bare ``<uuid>`` in every problem; such a workload runs
    as a shard of its own under this timeout."""


class ReadyWorkloadRef(SchemaModel):
    uuid: Optional[str] = None
    row_index: Optional[NonNegativeInt] = None
    """0-based line of the workload among the workload file's non-blank lines (used when no uuid)."""


class ReadyProblemRef(SchemaModel):
    problem_path: NonEmptyString
    """Relative to the dataset root (an absolute path below the root is accepted too)."""
    category: Optional[str] = None
    problem_id: Optional[str] = None
    workloads: list[ReadyWorkloadRef] = Field(default_factory=list)


class ReadySubsetExclusion(SchemaModel):
    problem_path: NonEmptyString
    workload_uuid: Optional[str] = None
    row_index: Optional[NonNegativeInt] = None
    reason_codes: list[str] = Field(default_factory=list)
    message: str = ""


class ReadySubset(SchemaModel):
    """``--ready-subset``: the workloads a run may attempt; every other workload is skipped and
    accounted for in the execution closure."""

    schema_version: Optional[str] = None
    dataset_root: Optional[str] = None
    problems: list[ReadyProblemRef]
    exclusions: list[ReadySubsetExclusion] = Field(default_factory=list)


class ReadinessReason(SchemaModel):
    code: NonEmptyString
    message: str = ""


class ReadinessRecord(SchemaModel):
    problem_path: NonEmptyString
    workload_uuid: Optional[str] = None
    row_index: Optional[NonNegativeInt] = None
    status: NonEmptyString
    """``ready``, or why not (``blocked``, ...)."""
    reasons: list[ReadinessReason] = Field(default_factory=list)


class Readiness(SchemaModel):
    """``--readiness``: per workload, whether it can run here and why not; its reasons become the
    blockers of the closure's skipped workloads."""

    schema_version: Optional[str] = None
    workloads: list[ReadinessRecord]


ClosureState = Literal["attempted", "reused", "skipped", "missing_trace"]


class ClosureWorkload(SchemaModel):
    problem: NonEmptyString
    workload: NonEmptyString
    """The workload's uuid."""
    state: ClosureState
    """``attempted`` this run, ``reused`` from an earlier run, ``skipped`` (not in the ready subset),
    ``missing_trace`` (selected, but the run has no trace for it)."""
    status: Optional[str] = None
    """The trace's status, for attempted and reused workloads."""
    blockers: list[str] = Field(default_factory=list)
    """For skipped workloads: the readiness reasons (``code: message``), else the ready subset's."""


class ExecutionClosure(SchemaModel):
    """``--execution-closure`` (default ``<output>/execution_closure.json`` with ``--ready-subset``):
    every workload of the selected problems, and what became of it."""

    schema_version: Literal["1"] = CLOSURE_VERSION
    dataset_root: NonEmptyString
    ready_subset_sha256: Optional[str] = None
    readiness_sha256: Optional[str] = None
    dataset_manifest_sha256: Optional[str] = None
    counts: dict[str, NonNegativeInt] = Field(default_factory=dict)
    """Workloads per state."""
    workloads: list[ClosureWorkload] = Field(default_factory=list)
