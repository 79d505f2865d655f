"""Whether a problem's results from an earlier run stand (seed 000's rule): every workload PASSED,
no ``--rerun``, and a run record beside the very traces file it names whose hashes all match this
run's: solution, definition, workloads, config, evaluator version, environment, and the dataset
manifest, ready subset and readiness where this run gives them."""

from __future__ import annotations

from dataclasses import dataclass

from sol_execbench.sandbox import file_sha256
from sol_execbench.schema import EvaluationStatus, Trace
from sol_execbench.schema.dataset_run import RunHashes, RunRecord
from sol_execbench.schema.trace_files import read_traces

from .loading import LoadedProblem
from .records import read_run_record

# Provenance that counts only when this run names it: results made under a readiness report are
# as good for a run that gives none (seed 000: "any requested ... provenance matches").
REQUESTED_ONLY = ("dataset_manifest", "ready_subset", "readiness")


def hash_mismatch(recorded: RunHashes, current: RunHashes) -> str | None:
    """The first hash that differs, named, or None when the records agree."""
    for name in RunHashes.model_fields:
        now = getattr(current, name)
        if name in REQUESTED_ONLY and now is None:
            continue
        if getattr(recorded, name) != now:
            return f"the {name.replace('_', ' ')} hash changed"
    return None


@dataclass(frozen=True)
class Reused:
    record: RunRecord
    traces: list[Trace]


def earlier_results(loaded: LoadedProblem, rerun: bool) -> Reused | str | None:
    """The earlier results of this problem when they may be reused; else why it is evaluated again
    (None when it was never finished)."""
    if rerun:
        return "--rerun"
    record = read_run_record(loaded.out_folder)
    if record is None:
        return None
    if not record.all_passed:
        return "not every workload PASSED"
    changed = hash_mismatch(record.hashes, loaded.hashes)
    if changed:
        return changed
    path = loaded.out_folder / record.traces_file
    try:
        if file_sha256(path) != record.traces_sha256:
            return f"{record.traces_file} changed since it was written"
        traces = read_traces(path)
    except (OSError, ValueError):
        return f"{record.traces_file} is missing or unreadable"
    if [t.workload.uuid for t in traces] != [w.uuid for w in loaded.workloads] or \
            any(t.evaluation is None or t.evaluation.status != EvaluationStatus.PASSED for t in traces):
        return f"{record.traces_file} does not hold a PASSED trace of each workload"
    return Reused(record, traces)
