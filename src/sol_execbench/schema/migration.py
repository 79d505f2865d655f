"""Migration manifest: what ``dataset migrate-*`` read, what it wrote, and what it could not carry over.

Deterministic by construction: no timestamps and no absolute paths, lists sorted, so the same input
gives the same bytes. Blockers come from one fixed list (``BlockerCode``); each says what it keeps
out of the output (a whole problem, one workload, one solution or one trace).
"""

from __future__ import annotations

from enum import Enum
from typing import Optional

from pydantic import Field, model_validator

from .base import NonEmptyString, NonNegativeInt, SchemaModel

MIGRATION_MANIFEST_VERSION = "1.0"
MIGRATION_MANIFEST_NAME = "migration-manifest.json"


class MigrationSourceKind(str, Enum):
    """The layout a migration read."""

    SOL_EXECBENCH = "sol-execbench"
    """Upstream SOL-ExecBench: category folders of problem folders."""
    SOL_EXECBENCH_PARQUET = "sol-execbench-parquet"
    """Upstream SOL-ExecBench's parquet export: a row per problem, axes/inputs/outputs/workloads as JSON strings."""
    FLASHINFER_BENCH = "flashinfer-bench"
    """A flashinfer-bench trace set: definitions/, workloads/, solutions/, traces/."""
    KERNELBENCH = "kernelbench"
    """KernelBench problem files: a Model class with get_inputs and get_init_inputs, in level folders."""


class BlockerScope(str, Enum):
    """What a blocker keeps out of the output."""

    PROBLEM = "problem"
    WORKLOAD = "workload"
    SOLUTION = "solution"
    TRACE = "trace"


class BlockerCode(str, Enum):
    """Why something the source holds was not migrated. ``BLOCKER_MEANING`` says each in a sentence."""

    MISSING_FILE = "missing_file"
    DEFINITION_REJECTED = "definition_rejected"
    CONFIG_REJECTED = "config_rejected"
    DUPLICATE_PROBLEM = "duplicate_problem"
    NO_WORKLOADS = "no_workloads"
    SHAPE_DISCOVERY_FAILED = "shape_discovery_failed"
    UNSUPPORTED_VALUE = "unsupported_value"
    WORKLOAD_REJECTED = "workload_rejected"
    UNKNOWN_DEFINITION = "unknown_definition"
    SOLUTION_REJECTED = "solution_rejected"
    UNSUPPORTED_LANGUAGE = "unsupported_language"
    TVM_FFI_BINDING = "tvm_ffi_binding"


BLOCKER_MEANING: dict[BlockerCode, str] = {
    BlockerCode.MISSING_FILE: "a problem folder lacks definition.json or workload.jsonl",
    BlockerCode.DEFINITION_REJECTED: "the definition does not load here (the detail is the loader's message)",
    BlockerCode.CONFIG_REJECTED: "the problem's config.json does not load here",
    BlockerCode.DUPLICATE_PROBLEM: "a second problem of the same category and name; the first one is kept",
    BlockerCode.NO_WORKLOADS: "no workload of the problem could be migrated",
    BlockerCode.SHAPE_DISCOVERY_FAILED: "a KernelBench problem's get_inputs, Model or forward failed on the meta device",
    BlockerCode.UNSUPPORTED_VALUE: "a KernelBench input or output is neither a tensor of a known dtype nor a number",
    BlockerCode.WORKLOAD_REJECTED: "one workload does not load against its definition; the problem keeps the others",
    BlockerCode.UNKNOWN_DEFINITION: "a workload, solution or trace names a definition the source does not have",
    BlockerCode.SOLUTION_REJECTED: "a solution does not load here",
    BlockerCode.UNSUPPORTED_LANGUAGE: "a solution's language has no counterpart here",
    BlockerCode.TVM_FFI_BINDING: "a C++/CUDA solution bound through tvm-ffi; only the torch binding builds here",
}


class Blocker(SchemaModel):
    """One thing of the source that was not migrated, and why."""

    code: BlockerCode
    scope: BlockerScope
    """What it keeps out: the whole problem, or one workload, solution or trace."""
    problem: Optional[str] = None
    """The problem's path below the output root (``L1/001_rmsnorm``); null when the source names no known problem."""
    source: NonEmptyString
    """Where in the source, below SRC: a file, with ``line N`` or ``row N`` where it is one record of it."""
    detail: str
    """What exactly, in a sentence."""


class Tally(SchemaModel):
    """How many records of one kind the source held, and what became of them."""

    seen: NonNegativeInt = 0
    migrated: NonNegativeInt = 0
    blocked: NonNegativeInt = 0

    @model_validator(mode="after")
    def _adds_up(self) -> "Tally":
        if self.seen != self.migrated + self.blocked:
            raise ValueError(f"seen ({self.seen}) must be migrated ({self.migrated}) + blocked ({self.blocked})")
        return self


class MigrationDenominators(SchemaModel):
    """The counts a result over the migrated suite is a fraction of. A blocked problem's workloads count as blocked."""

    problems: Tally = Field(default_factory=Tally)
    workloads: Tally = Field(default_factory=Tally)
    solutions: Tally = Field(default_factory=Tally)
    traces: Tally = Field(default_factory=Tally)


class MigrationSource(SchemaModel):
    kind: MigrationSourceKind
    name: NonEmptyString
    """The last component of SRC (the path itself would make the manifest depend on where it lies)."""
    revision: Optional[str] = None
    """``--source-revision``: the dataset revision or commit the source was taken at, as given."""
    categories: list[str] = Field(default_factory=list)
    """``--category`` as given (sorted); empty means every category."""


class MigratedProblem(SchemaModel):
    path: NonEmptyString
    """Below the output root: ``<category>/<problem>``, the problem's identity."""
    source: NonEmptyString
    migrated: bool
    """False when a problem-scope blocker kept it out (``blockers`` says which)."""
    workloads: NonNegativeInt = 0
    solutions: NonNegativeInt = 0


class MigratedFile(SchemaModel):
    path: NonEmptyString
    """Below the output root, with ``/`` separators."""
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    bytes: NonNegativeInt


class MigrationManifest(SchemaModel):
    """``<out>/migration-manifest.json``: the record of one migration (``--json`` prints it)."""

    schema_version: str = MIGRATION_MANIFEST_VERSION
    tool_version: NonEmptyString
    source: MigrationSource
    denominators: MigrationDenominators
    problems: list[MigratedProblem] = Field(default_factory=list)
    """Every problem seen, sorted by path."""
    blockers: list[Blocker] = Field(default_factory=list)
    files: list[MigratedFile] = Field(default_factory=list)
    """Every file written below the output root, sorted by path (the manifest itself is not among them)."""

    def to_json(self) -> str:
        """The manifest's bytes on disk: field order as declared, two-space indent, a final newline."""
        return self.model_dump_json(indent=2) + "\n"
