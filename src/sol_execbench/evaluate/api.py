"""``sol_execbench.evaluate``: the Python entry point for notebooks and RL loops."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Callable

from sol_execbench.schema import (BenchmarkConfig, Definition, Loaded, Solution, Trace, Workload, load_definition,
                                  load_solution, load_workloads, merge_configs)

from .runner import EvalOptions, evaluate_problem


def _as_model(value: Any, model: type, load: Callable[[Path, Loaded], Any], notes: Loaded) -> Any:
    """A model object as given, validated from a dict, or loaded from a path."""
    if isinstance(value, model):
        return value
    if isinstance(value, dict):
        return model.model_validate(value)
    return load(Path(value), notes)


def _as_workloads(value: Any, notes: Loaded) -> list[Workload]:
    if isinstance(value, (str, Path)):
        return load_workloads(Path(value), notes)
    if isinstance(value, (Workload, dict)):
        value = [value]
    return [w if isinstance(w, Workload) else Workload.model_validate(w) for w in value]


def evaluate(definition: Definition | str | Path | dict, workloads: Any, solution: Solution | str | Path | dict,
             config: BenchmarkConfig | dict | str | Path | None = None, **options: Any) -> list[Trace]:
    """Evaluate a solution on workloads (model objects, dicts or file paths); one trace per workload.

    ``options`` are EvalOptions fields: ``device``, ``timeout_s``, ``compile_timeout_s``,
    ``keep_staging``, ``memory_limit_bytes``, ``dump_failures``, ``use_build_cache``, ``on_trace``.
    """
    notes = Loaded()
    d = _as_model(definition, Definition, load_definition, notes)
    ws = _as_workloads(workloads, notes)
    s = _as_model(solution, Solution, load_solution, notes)
    if isinstance(config, (str, Path)):
        from sol_execbench.schema import load_config

        config = load_config(Path(config), notes)
    cfg = merge_configs(config) if not isinstance(config, BenchmarkConfig) else config
    if s.definition != d.name:
        notes.warnings.append(f"solution is for definition '{s.definition}', evaluating it on '{d.name}'")
    for message in notes.warnings:
        warnings.warn(message, stacklevel=2)
    opts = EvalOptions(**options)
    opts.warnings.extend(notes.warnings)
    return evaluate_problem(d, ws, s, cfg, opts)
