"""``sol_execbench.evaluate``: the Python entry point for notebooks and RL loops."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Callable

from sol_execbench.schema import (BenchmarkConfig, Definition, Loaded, Solution, Trace, Workload, load_definition,
                                  load_solution, load_workloads)
from sol_execbench.schema.loading import check_workload, validate

from .parent.option_checks import check_options
from .parent.problem import layered_config, note_definition_mismatch
from .parent.runner import EvalOptions, evaluate_problem

_PATH_TYPES = (str, Path)


def _as_model(value: Any, model: type, load: Callable[[Path, Loaded], Any], what: str, notes: Loaded) -> Any:
    """A model object as given, validated from a dict, or loaded from a path."""
    if isinstance(value, model):
        return value
    if isinstance(value, dict):
        return validate(model, value, f"{what} argument", what, notes)
    return load(Path(value), notes)


def _as_workloads(value: Any, definition: Definition, notes: Loaded) -> list[Workload]:
    if isinstance(value, _PATH_TYPES):
        return load_workloads(Path(value), notes, definition)
    if isinstance(value, (Workload, dict)):
        value = [value]
    workloads = []
    for i, item in enumerate(value):
        prefix = f"item {i}: "
        workload = item if isinstance(item, Workload) else validate(Workload, item, "workloads argument", "workload",
                                                                    notes, prefix)
        check_workload(definition, workload, "workloads argument", notes, prefix)
        workloads.append(workload)
    return workloads


def evaluate(definition: Definition | str | Path | dict, workloads: Any, solution: Solution | str | Path | dict,
             config: BenchmarkConfig | dict | str | Path | None = None, **options: Any) -> list[Trace]:
    """Evaluate a solution on workloads (model objects, dicts or file paths); one trace per workload.

    Loading follows the command line: files and dicts are validated, keys their format does not
    know and workload axis/input names the definition does not have are reported with
    ``warnings.warn`` (and kept in ``EvalOptions.warnings``); bad files or dicts raise
    ``FormatError`` naming the file (or argument) and field. Model objects are used as given, but
    workloads are still checked against the definition.

    The config is layered as on the command line: defaults, then the ``config.json`` beside the
    definition when ``definition`` is a path (a definition given as an object or dict has no
    directory, so none is read), then ``config`` field by field (a path, a dict, or a
    BenchmarkConfig whose explicitly set fields override).

    ``options`` are EvalOptions fields: ``device``, ``timeout_s``, ``compile_timeout_s``,
    ``keep_staging``, ``memory_limit_bytes``, ``dump_failures``, ``use_build_cache``, ``build_failure`` (a
    BuildFailure of these same sources: reported, not built again), ``on_trace``, and the
    launcher hook ``child_prefix`` (a command prefix for the evaluation child, e.g. a profiler) and
    ``child_env`` (extra variables of its environment); either one bypasses the warm pool.
    """
    check_options(options)
    notes = Loaded()
    d = _as_model(definition, Definition, load_definition, "definition", notes)
    ws = _as_workloads(workloads, d, notes)
    if not ws:
        raise ValueError("workloads is empty: give at least one workload")
    s = _as_model(solution, Solution, load_solution, "solution", notes)
    cfg = layered_config(Path(definition) if isinstance(definition, _PATH_TYPES) else None, config, notes)
    note_definition_mismatch(d, s, notes, solution if isinstance(solution, _PATH_TYPES) else "solution",
                             definition if isinstance(definition, _PATH_TYPES) else "the definition")
    for message in notes.warnings:
        warnings.warn(message, stacklevel=2)
    opts = EvalOptions(**options)
    opts.warnings.extend(notes.warnings)
    return evaluate_problem(d, ws, s, cfg, opts)
