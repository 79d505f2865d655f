"""The execution closure: every workload of the selected problems and what became of it
(attempted, reused, skipped by the ready subset with its blockers, or selected but without a
trace), so that a run bounded by a ready subset accounts for the whole dataset it was given."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from sol_execbench.files import replace_json
from sol_execbench.schema import FormatError, load_workloads
from sol_execbench.schema.dataset_inputs import ClosureWorkload, ExecutionClosure

from .discovery import DatasetProblem
from .inputs import RunInputs, problem_key


def _blockers(inputs: RunInputs, root: Path, keys: list[str]) -> dict[tuple[str, str | int], list[str]]:
    """(problem, uuid or row) -> why it is not ready: the readiness reasons, else the subset's exclusion."""
    found: dict[tuple[str, str | int], list[str]] = {}
    if inputs.ready_subset is not None:
        for exclusion in inputs.ready_subset.exclusions:
            key = problem_key(exclusion.problem_path, root, keys)
            which = exclusion.workload_uuid if exclusion.workload_uuid is not None else exclusion.row_index
            if key is not None and which is not None:
                found[(key, which)] = [*exclusion.reason_codes, *([exclusion.message] if exclusion.message else [])]
    if inputs.readiness is not None:
        for record in inputs.readiness.workloads:
            key = problem_key(record.problem_path, root, keys)
            which = record.workload_uuid if record.workload_uuid is not None else record.row_index
            if key is not None and which is not None and record.status != "ready":
                found[(key, which)] = [f"{r.code}: {r.message}" if r.message else r.code for r in record.reasons] \
                    or [record.status]
    return found


def build_closure(inputs: RunInputs, root: Path, problems: list[DatasetProblem],
                  outcomes: dict[str, tuple[str, dict[str, str]]]) -> ExecutionClosure:
    """``outcomes``: problem -> (its outcome, uuid -> status of each trace it has)."""
    keys = [p.key for p in problems]
    blockers = _blockers(inputs, root, keys)
    rows: list[ClosureWorkload] = []
    for problem in problems:
        outcome, statuses = outcomes.get(problem.key, ("", {}))
        try:
            workloads = load_workloads(problem.workload_path)
        except FormatError:
            continue  # loaded once already; a file changed during the run is not the closure's to judge
        for row, workload in enumerate(workloads):
            allowed = inputs.selection is None or inputs.selection.allows(problem.key, row, workload)
            if not allowed:
                why = blockers.get((problem.key, workload.uuid)) or blockers.get((problem.key, row)) or \
                    ["not in the ready subset"]
                rows.append(ClosureWorkload(problem=problem.key, workload=workload.uuid, state="skipped", blockers=why))
            elif workload.uuid in statuses:
                state = "reused" if outcome == "reused" else "attempted"
                rows.append(ClosureWorkload(problem=problem.key, workload=workload.uuid, state=state,
                                            status=statuses[workload.uuid]))
            else:
                rows.append(ClosureWorkload(problem=problem.key, workload=workload.uuid, state="missing_trace"))
    return ExecutionClosure(dataset_root=str(root), ready_subset_sha256=inputs.hashes.get("ready_subset"),
                            readiness_sha256=inputs.hashes.get("readiness"),
                            dataset_manifest_sha256=inputs.hashes.get("dataset_manifest"),
                            counts=dict(sorted(Counter(r.state for r in rows).items())), workloads=rows)


def write_closure(path: Path, closure: ExecutionClosure) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_json(path, closure)
