"""What ``sol-execbench dataset run`` writes: a run record per problem (``run.json``, the basis of
resume) and the run's ``summary.json``. A problem is named by its path relative to the dataset
root everywhere: definition names and workload uuids repeat across folders."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field

from .base import NonEmptyString, NonNegativeInt, SchemaModel

RUN_RECORD_VERSION = "1"
SUMMARY_VERSION = "1"

ProblemOutcome = Literal["evaluated", "reused", "skipped"]


class RunHashes(SchemaModel):
    """What a problem's results depend on; a later run reuses them only when every field matches."""

    solution: NonEmptyString
    """sha256 of the solution's spec and sources (``Solution.content_hash``)."""
    definition: NonEmptyString
    """sha256 of the definition as loaded."""
    workloads: NonEmptyString
    """sha256 of the workloads evaluated, in order (so ``--max-workloads`` and edits count)."""
    config: NonEmptyString
    """sha256 of the benchmark config after layering (defaults, ``config.json``, ``--config``, flags)."""
    evaluator_version: NonEmptyString
    """The sol-execbench version that evaluated."""
    environment: Optional[str] = None
    """The environment hash (``env probe``); null when it could not be probed."""
    dataset_manifest: Optional[str] = None
    """sha256 of the ``--dataset-manifest`` file, when one was given."""
    ready_subset: Optional[str] = None
    """sha256 of the ``--ready-subset`` file, when one was given."""
    readiness: Optional[str] = None
    """sha256 of the ``--readiness`` file, when one was given."""


class RunRecord(SchemaModel):
    """``<output>/<problem>/run.json``: how the traces beside it were made."""

    schema_version: Literal["1"] = RUN_RECORD_VERSION
    problem: NonEmptyString
    """The problem's path relative to the dataset root (its folder's name when the root is the problem)."""
    definition: NonEmptyString
    solution: NonEmptyString
    solution_origin: NonEmptyString
    """``reference`` (the definition's reference as its own solution) or the ``--solution-name`` file."""
    traces_file: NonEmptyString = "traces.jsonl"
    traces_sha256: NonEmptyString
    """sha256 of the traces file as written: a file changed since does not count as finished."""
    workloads: NonNegativeInt
    statuses: dict[str, NonNegativeInt] = Field(default_factory=dict)
    """Traces per status."""
    all_passed: bool
    wall_s: float = Field(ge=0)
    """Wall time of the problem's evaluation (every shard); orders the next run longest first."""
    shards: NonNegativeInt = 1
    """Evaluator calls the workloads were split into (``--workload-shard-size``, workload timeouts)."""
    device: Optional[str] = None
    """The ``--device`` the evaluations were given (null: the evaluator's default)."""
    started_at: NonEmptyString
    finished_at: NonEmptyString
    hashes: RunHashes


class ProblemSummary(SchemaModel):
    """One problem of a run, in ``summary.json``."""

    problem: NonEmptyString
    """Path relative to the dataset root."""
    category: str
    """The folder path above the problem (empty for a problem at the root)."""
    definition: NonEmptyString
    solution: Optional[str] = None
    outcome: ProblemOutcome
    """``evaluated`` this run, ``reused`` from an earlier run, or ``skipped`` (``note`` says why)."""
    workloads: NonNegativeInt = 0
    statuses: dict[str, NonNegativeInt] = Field(default_factory=dict)
    median_speedup: Optional[float] = None
    """Median ``speedup_factor`` over the PASSED workloads."""
    wall_s: Optional[float] = None
    device: Optional[str] = None
    note: Optional[str] = None


class CategorySummary(SchemaModel):
    """The problems of one category folder, together."""

    category: str
    problems: NonNegativeInt
    problems_passed: NonNegativeInt
    """Problems whose every workload PASSED."""
    workloads: NonNegativeInt
    statuses: dict[str, NonNegativeInt] = Field(default_factory=dict)
    median_speedup: Optional[float] = None
    """Median ``speedup_factor`` over the category's PASSED workloads."""
    wall_s: float = 0.0
    """Sum of the problems' wall times (reused problems count their recorded time)."""


class DatasetSummary(SchemaModel):
    """``<output>/summary.json``: the whole run, per category and per problem."""

    schema_version: Literal["1"] = SUMMARY_VERSION
    root: NonEmptyString
    output: NonEmptyString
    solution_name: Optional[str] = None
    """``--solution-name`` (null: each problem's reference)."""
    started_at: NonEmptyString
    finished_at: NonEmptyString
    wall_s: float = Field(ge=0)
    """Wall time of this run, start to end."""
    stopped: Optional[str] = None
    """Why the run ended early (a signal, ``--timeout-policy fail``); the problems not finished are absent."""
    totals: CategorySummary
    """Every problem together (``category`` is empty)."""
    categories: list[CategorySummary] = Field(default_factory=list)
    problems: list[ProblemSummary] = Field(default_factory=list)
