"""Finding a problem's files: a problem directory or explicit paths, the conventional
``solution.json``, and the config layers (defaults < config.json beside the definition < --config)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sol_execbench.schema import (BenchmarkConfig, Definition, Loaded, Solution, Workload, load_config, load_definition,
                                  load_solution, load_workloads, merge_configs)
from sol_execbench.schema.loading import validate

CONFIG_BESIDE_DEFINITION = "config.json"


class UsageProblem(Exception):
    """Wrong or missing arguments (not a file-format problem)."""


@dataclass
class Problem:
    definition: Definition
    workloads: list[Workload]
    solution: Solution
    config: BenchmarkConfig
    warnings: list[str] = field(default_factory=list)
    definition_path: Path | None = None
    source_files: list[Path] = field(default_factory=list)  # read from beside the solution JSON


def resolve_paths(problem_dir: Path | None, definition: Path | None, workload: Path | None,
                  solution: Path | None) -> tuple[Path, Path, Path]:
    if problem_dir is not None:
        if definition is not None or workload is not None:
            given = "--definition" if definition is not None else "--workload"
            raise UsageProblem(f"PROBLEM_DIR '{problem_dir}' and {given} both name the problem: give one of them")
        try:
            problem_dir.exists()
        except (OSError, ValueError) as exc:  # a NUL byte, a name longer than the file system allows
            raise UsageProblem(f"PROBLEM_DIR {str(problem_dir)[:80]!r} is not a usable path: {exc}") from None
        if not problem_dir.exists():
            raise UsageProblem(f"problem directory '{problem_dir}' does not exist")
        if not problem_dir.is_dir():
            raise UsageProblem(f"'{problem_dir}' is not a directory (give a problem directory, or --definition and --workload)")
        definition = definition or problem_dir / "definition.json"
        workload = workload or problem_dir / "workload.jsonl"
        if solution is None:
            conventional = problem_dir / "solution.json"
            if not conventional.exists():
                found = sorted(p.name for p in problem_dir.glob("solution*.json"))
                hint = f" (this directory has {', '.join(found)})" if found else ""
                raise UsageProblem(f"no --solution given and {conventional} does not exist{hint}")
            solution = conventional
    if definition is None or workload is None:
        raise UsageProblem("give a problem directory, or both --definition and --workload")
    if solution is None:
        raise UsageProblem("--solution is required when no problem directory is given")
    return definition, workload, solution


def load_problem(definition_path: Path, workload_path: Path, solution_path: Path, config_path: Path | None = None,
                 only: list[str] | None = None) -> Problem:
    """Load and cross-check a problem. Raises FormatError or UsageProblem with a clear message."""
    notes = Loaded()
    definition = load_definition(definition_path, notes)
    workloads = load_workloads(workload_path, notes, definition)
    solution = load_solution(solution_path, notes)
    config = layered_config(definition_path, config_path, notes)
    note_definition_mismatch(definition, solution, notes, solution_path, definition_path)
    if only:
        known = {w.uuid for w in workloads}
        unknown = [u for u in only if u not in known]
        if unknown:
            raise UsageProblem(f"--only {', '.join(unknown)}: no such workload uuid in {workload_path}")
        workloads = [w for w in workloads if w.uuid in set(only)]
    return Problem(definition, workloads, solution, config, notes.warnings, definition_path, notes.source_files)


def layered_config(definition_path: Path | None, override: Path | dict[str, Any] | BenchmarkConfig | None,
                   notes: Loaded) -> BenchmarkConfig:
    """Defaults, overridden by the config.json beside the definition (when its path is known), overridden
    by ``override`` field by field: a config file, a dict, or a BenchmarkConfig (the fields it was given)."""
    layers: list[dict[str, Any] | BenchmarkConfig] = []
    if definition_path is not None and (beside := definition_path.parent / CONFIG_BESIDE_DEFINITION).is_file():
        layers.append(load_config(beside, notes))
    if isinstance(override, (str, Path)):
        layers.append(load_config(Path(override), notes))
    elif isinstance(override, dict):
        validate(BenchmarkConfig, override, "config argument", "benchmark config", notes)
        layers.append(override)
    elif override is not None:
        layers.append(override)
    return merge_configs(*layers)


def note_definition_mismatch(definition: Definition, solution: Solution, notes: Loaded,
                             solution_source: Path | str = "solution", definition_source: Path | str = "the definition") -> None:
    """Upstream evaluates a solution written for another definition name; so do we, with a warning."""
    if solution.definition != definition.name:
        notes.warnings.append(f"{solution_source}: solution is for definition '{solution.definition}' but "
                              f"{definition_source} defines '{definition.name}'; evaluating anyway")
