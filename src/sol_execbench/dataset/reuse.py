"""Whether a problem's results from an earlier run stand (seed 000's rule): every workload PASSED,
no ``--rerun``, and a run record beside the very traces file it names whose hashes all match this
run's: solution, definition, workloads, config, evaluator version, environment, and the dataset
manifest, ready subset and readiness where this run gives them."""

from __future__ import annotations

from dataclasses import dataclass

from sol_execbench.sandbox import file_sha256
from sol_execbench.schema import EvaluationStatus, Trace
from sol_execbench.schema.dataset_run import RunHashes, RunRecord

from .loading import LoadedProblem
from .records import read_run_record, read_traces

# Provenance that counts only when this run names it: results made under a readiness report are
# as good for a run that gives none (seed 000: "any requested ... provenance matches").
REQUESTED_ONLY = ("dataset_manifest", "ready_subset", "readiness")


def hashes_match(recorded: RunHashes, current: RunHashes) -> bool:
    for name in RunHashes.model_fields:
        now = getattr(current, name)
        if name in REQUESTED_ONLY and now is None:
            continue
        if getattr(recorded, name) != now:
            return False
    return True


@dataclass(frozen=True)
class Reused:
    record: RunRecord
    traces: list[Trace]


def earlier_results(loaded: LoadedProblem, rerun: bool) -> Reused | None:
    """The earlier results of this problem when they may be reused, else None (evaluate it)."""
    if rerun:
        return None
    record = read_run_record(loaded.out_folder)
    if record is None or not record.all_passed or not hashes_match(record.hashes, loaded.hashes):
        return None
    path = loaded.out_folder / record.traces_file
    try:
        if file_sha256(path) != record.traces_sha256:
            return None  # changed since it was recorded
        traces = read_traces(path)
    except (OSError, ValueError):
        return None
    if [t.workload.uuid for t in traces] != [w.uuid for w in loaded.workloads]:
        return None
    if any(t.evaluation is None or t.evaluation.status != EvaluationStatus.PASSED for t in traces):
        return None
    return Reused(record, traces)
