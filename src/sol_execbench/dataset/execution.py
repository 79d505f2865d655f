"""Evaluating one loaded problem in process, through the evaluator's public function: its workloads
in shards (each one evaluator call under its own timeout), every trace streamed to the problem's
partial file the moment it arrives, the traces in workload order at the end."""

from __future__ import annotations

import re
import tempfile
import time
import warnings
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Protocol

from sol_execbench import evaluate
from sol_execbench.build import BuildFailure, builder_for
from sol_execbench.build.base import write_sources
from sol_execbench.platform import vendor_hint
from sol_execbench.schema import Environment, Evaluation, EvaluationStatus, Trace, Workload

from .blobs import MissingBlob
from .loading import LoadedProblem
from .shards import TimeoutPlan, plan_shards

# The evaluator's default for building a native solution; the prebuild uses the same, so that a
# build the prebuild could not finish is not a different verdict from the evaluation's own.
COMPILE_TIMEOUT_S = 120.0
NOT_EVALUATED_HARDWARE = "not evaluated (blob precheck)"
API_WORKLOADS = "workloads argument"  # how evaluate() names workloads given as objects in its warnings


class TraceSink(Protocol):
    """Where each trace goes the moment it arrives (the problem's partial file, on the host that
    writes the run's files)."""

    def write(self, trace: Trace) -> None: ...


@dataclass(frozen=True)
class EvaluationSettings:
    """What every evaluation of a run is given besides its problem and device."""

    timeouts: TimeoutPlan
    shard_size: int | None
    keep_staging: bool
    env_hash: str | None
    on_log: Callable[[str], None] | None = None
    use_warm_pool: bool = True


@dataclass
class ProblemResult:
    loaded: LoadedProblem
    traces: list[Trace]
    device: str | None
    shards: int
    wall_s: float
    started_at: str
    finished_at: str

    @property
    def timed_out(self) -> list[str]:
        return [t.workload.uuid for t in self.traces
                if t.evaluation is not None and t.evaluation.status == EvaluationStatus.TIMEOUT]


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat()


def prebuild(loaded: LoadedProblem) -> BuildFailure | None:
    """A native solution built into the build cache ahead of its evaluation, through the same
    builder the evaluator calls (its build is then a cache hit). The failure where it failed: a
    compile error that would repeat (``BuildFailure.repeats``) is reported by the evaluation without
    compiling the same sources again; after a timeout or a killed compiler the evaluation builds."""
    solution = loaded.solution
    if not solution.spec.is_native:
        return None
    with tempfile.TemporaryDirectory(prefix="sol-execbench-prebuild-") as folder:
        source_dir = Path(folder) / "solution"
        write_sources(solution, source_dir)
        try:
            builder_for(solution).prepare(solution, source_dir, vendor=vendor_hint(), timeout_s=COMPILE_TIMEOUT_S,
                                          use_cache=True)
        except BuildFailure as exc:
            return exc
    return None


def prebuild_note(key: str, failure: BuildFailure) -> str:
    if failure.repeats:
        return f"{key}: prebuild failed ({failure.status.value}); the evaluation reports it without building again"
    return f"{key}: prebuild failed ({failure.status.value}); the evaluation builds again"


def _blob_trace(loaded: LoadedProblem, workload: Workload, missing: list[MissingBlob], env_hash: str | None) -> Trace:
    roots = "the dataset root, the problem folder and FLASHINFER_TRACE_DIR"
    names = "; ".join(f"input '{m.input}': '{m.path}'" for m in missing)
    evaluation = Evaluation(status=EvaluationStatus.RUNTIME_ERROR, environment=Environment(hardware=NOT_EVALUATED_HARDWARE),
                            timestamp=now_iso(), env_hash=env_hash,
                            log=f"safetensors blob not found by the blob precheck ({names}; searched {roots}): "
                                "not evaluated (--blob-precheck warn); set FLASHINFER_TRACE_DIR to the dataset root")
    return Trace(definition=loaded.definition.name, workload=workload, solution=loaded.solution.name,
                 evaluation=evaluation)


def evaluate_problem_shards(loaded: LoadedProblem, device: str | None, settings: EvaluationSettings,
                            sink: TraceSink, build_failure: BuildFailure | None = None) -> ProblemResult:
    """Every selected workload of the problem gets one trace: from the evaluator, or from the blob
    precheck (``warn``) for a workload whose blob is missing."""
    began, started_at = time.monotonic(), now_iso()
    originals = {w.uuid: w for w in loaded.workloads}
    by_uuid: dict[str, Trace] = {}
    evaluated = loaded.blobs.workloads if loaded.blobs is not None else loaded.workloads
    for workload in list(evaluated):
        missing = loaded.blobs.missing_in(workload.uuid) if loaded.blobs is not None else []
        if missing:
            trace = _blob_trace(loaded, originals[workload.uuid], missing, settings.env_hash)
            by_uuid[workload.uuid] = trace
            sink.write(trace)
    evaluated = [w for w in evaluated if w.uuid not in by_uuid]

    def on_trace(trace: Trace) -> None:
        trace.workload = originals.get(trace.workload.uuid, trace.workload)  # as written, blob paths too
        sink.write(trace)

    # evaluate() checks model workloads again and repeats their warnings as Python warnings, under
    # this name; the run has told them once already.
    warnings.filterwarnings("ignore", message=re.escape(API_WORKLOADS) + ": ", category=UserWarning)
    shards = plan_shards(loaded.problem.key, evaluated, settings.timeouts, settings.shard_size)
    for shard in shards:
        traces = evaluate(loaded.definition, shard.workloads, loaded.solution, loaded.config, device=device,
                          timeout_s=shard.timeout_s, keep_staging=settings.keep_staging, env_hash=settings.env_hash,
                          warnings=list(loaded.warnings), on_trace=on_trace, on_log=settings.on_log,
                          use_warm_pool=settings.use_warm_pool, build_failure=build_failure)
        for trace in traces:
            trace.workload = originals.get(trace.workload.uuid, trace.workload)
            by_uuid[trace.workload.uuid] = trace
    return ProblemResult(loaded, [by_uuid[w.uuid] for w in loaded.workloads], device, len(shards),
                         round(time.monotonic() - began, 3), started_at, now_iso())
