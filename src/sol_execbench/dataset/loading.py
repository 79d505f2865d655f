"""Loading one problem of a run: definition, workloads (those the run selects), the solution to
evaluate, the layered benchmark config, the blob precheck, and the hashes its results depend on.
Every bad file is a DatasetUsageError naming it; nothing here imports torch."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from sol_execbench.evaluate import UsageProblem, load_problem
from sol_execbench.files import replace_file
from sol_execbench.schema import (
    DTYPES,
    BenchmarkConfig,
    Definition,
    FormatError,
    Solution,
    Workload,
    load_definition,
    merge_configs,
)
from sol_execbench.schema.dataset_run import RunHashes

from .blobs import BlobCheck, blob_roots, check_blobs
from .discovery import DatasetProblem, DatasetUsageError
from .records import read_run_record, sha256_json
from .solutions import REFERENCE_ORIGIN, GeneratedSolution, reference_solution, wrapped_python_file

GENERATED_SOLUTION_FILE = "solution.json"

# (problem key, 0-based row, workload) -> whether the run attempts it (the ready subset's rule)
WorkloadFilter = Callable[[str, int, Workload], bool]


@dataclass(frozen=True)
class LoadContext:
    """What every problem of a run is loaded with."""

    dataset_root: Path
    output: Path
    solution_name: str | None
    config_path: Path | None
    config_overrides: dict[str, object]
    max_workloads: int | None
    blob_precheck: str
    fixed_hashes: dict[str, str | None]
    """The hashes shared by every problem (evaluator version, environment, manifest, subset, readiness)."""
    workload_filter: WorkloadFilter | None = None
    generated_solution: GeneratedSolution | None = None


@dataclass
class LoadedProblem:
    problem: DatasetProblem
    out_folder: Path
    definition: Definition
    workloads: list[Workload]
    solution: Solution
    solution_origin: str
    config: BenchmarkConfig
    hashes: RunHashes
    blobs: BlobCheck | None
    warnings: list[str] = field(default_factory=list)
    last_wall_s: float | None = None
    """The wall time the previous run recorded for this problem, if any (orders the run)."""

    @property
    def input_bytes(self) -> int:
        return sum(_workload_input_bytes(self.definition, w) for w in self.workloads)


@dataclass(frozen=True)
class SkippedProblem:
    problem: DatasetProblem
    definition: str
    reason: str


def _format_error(exc: FormatError) -> DatasetUsageError:
    return DatasetUsageError(f"{exc.path}: {exc.message}")


def _solution_path(problem: DatasetProblem, definition: Definition, ctx: LoadContext,
                   out_folder: Path) -> tuple[Path, str] | str:
    """The solution file to load and its origin, or why the problem is skipped. A generated
    solution (the reference, a wrapped ``.py``, the caller's) is written to the problem's output folder."""
    name = ctx.solution_name
    if name is not None:
        given = problem.folder / name
        if not given.is_file():
            return f"no {name} in {problem.folder}"
        if given.suffix == ".json":
            return given, name
        try:
            code = given.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise DatasetUsageError(f"{given}: cannot be read as UTF-8 text ({exc})") from None
        solution, origin = wrapped_python_file(definition, given, code), name
    elif ctx.generated_solution is not None:
        solution, origin = ctx.generated_solution.make(definition), ctx.generated_solution.origin
    else:
        solution, origin = reference_solution(definition), REFERENCE_ORIGIN
    target = out_folder / GENERATED_SOLUTION_FILE
    data = solution.model_dump_json(indent=2).encode() + b"\n"
    out_folder.mkdir(parents=True, exist_ok=True)
    if not target.is_file() or target.read_bytes() != data:
        replace_file(target, data)
    return target, origin


def load_for_run(problem: DatasetProblem, ctx: LoadContext) -> LoadedProblem | SkippedProblem:
    out_folder = ctx.output / problem.key
    try:
        definition = load_definition(problem.definition_path)
        chosen = _solution_path(problem, definition, ctx, out_folder)
        if isinstance(chosen, str):
            return SkippedProblem(problem, definition.name, chosen)
        solution_path, origin = chosen
        loaded = load_problem(problem.definition_path, problem.workload_path, solution_path, ctx.config_path)
    except FormatError as exc:
        raise _format_error(exc) from None
    except UsageProblem as exc:
        raise DatasetUsageError(str(exc)) from None
    config = merge_configs(loaded.config, ctx.config_overrides)
    workloads = _selected_workloads(problem.key, loaded.workloads, ctx)
    if not workloads:
        return SkippedProblem(problem, definition.name, "none of its workloads is in the ready subset")
    hashes = RunHashes(solution=loaded.solution.content_hash(), definition=sha256_json(loaded.definition),
                       workloads=sha256_json([w.model_dump(mode="json") for w in workloads]),
                       config=sha256_json(config), **ctx.fixed_hashes)
    blobs = None
    if ctx.blob_precheck != "off":
        blobs = check_blobs(problem.key, workloads, blob_roots(ctx.dataset_root, problem.folder))
    previous = read_run_record(out_folder)
    return LoadedProblem(problem, out_folder, loaded.definition, workloads, loaded.solution, origin, config, hashes,
                         blobs, list(loaded.warnings), previous.wall_s if previous else None)


def _selected_workloads(key: str, workloads: list[Workload], ctx: LoadContext) -> list[Workload]:
    if ctx.workload_filter is not None:
        workloads = [w for row, w in enumerate(workloads) if ctx.workload_filter(key, row, w)]
    if ctx.max_workloads is not None:
        workloads = workloads[:ctx.max_workloads]
    return workloads


def _workload_input_bytes(definition: Definition, workload: Workload) -> int:
    """Bytes of the workload's tensor inputs (0 when the shapes cannot be resolved)."""
    try:
        axes = definition.resolve_axes(workload.axes)
    except (ValueError, KeyError):
        return 0
    total = 0
    for spec in definition.inputs.values():
        shape = definition.shape_of(spec, axes)
        if shape is not None:
            total += math.prod(shape) * DTYPES[spec.dtype].bits // 8
    return total
