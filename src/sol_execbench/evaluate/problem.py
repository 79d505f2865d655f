"""Finding a problem's files: a problem directory or explicit paths, the conventional
``solution.json``, and the config layers (defaults < config.json beside the definition < --config)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sol_execbench.schema import (BenchmarkConfig, Definition, FormatError, Loaded, Solution, Workload, load_config,
                                  load_definition, load_solution, load_workloads, merge_configs)


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


def resolve_paths(problem_dir: Path | None, definition: Path | None, workload: Path | None,
                  solution: Path | None) -> tuple[Path, Path, Path]:
    if problem_dir is not None:
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
    workloads = load_workloads(workload_path, notes)
    solution = load_solution(solution_path, notes)
    layers: list[dict[str, Any] | None] = []
    beside = definition_path.parent / "config.json"
    if beside.is_file():
        layers.append(load_config(beside, notes))
    if config_path is not None:
        layers.append(load_config(config_path, notes))
    config = merge_configs(*layers)
    if solution.definition != definition.name:
        notes.warnings.append(f"{solution_path}: solution is for definition '{solution.definition}' but "
                              f"{definition_path} defines '{definition.name}'; evaluating anyway")
    if only:
        known = {w.uuid for w in workloads}
        unknown = [u for u in only if u not in known]
        if unknown:
            raise UsageProblem(f"--only {', '.join(unknown)}: no such workload uuid in {workload_path}")
        workloads = [w for w in workloads if w.uuid in set(only)]
    _check_custom_inputs(definition, workloads, workload_path)
    return Problem(definition, workloads, solution, config, notes.warnings, definition_path)


def _check_custom_inputs(definition: Definition, workloads: list[Workload], path: Path) -> None:
    for w in workloads:
        if any(getattr(i, "type", None) == "custom" for i in w.inputs.values()) and not definition.custom_inputs_entrypoint:
            raise FormatError(path, f"workload '{w.uuid}' has custom inputs but the definition has no "
                                    "custom_inputs_entrypoint")
        missing = [a for a, spec in definition.axes.items() if spec.type == "var" and a not in w.axes]
        if missing:
            raise FormatError(path, f"workload '{w.uuid}' gives no value for axes {missing}")
