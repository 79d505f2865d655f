"""Parent side of an evaluation: stage, build, run the child (restarting after crashes), turn
whatever happened into one trace per workload."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from sol_execbench.build import BuildFailure, builder_for
from sol_execbench.build.base import write_sources
from sol_execbench.platform import host_memory_bytes, vendor_hint
from sol_execbench.schema import (BenchmarkConfig, Definition, DeviceRecord, Environment, Evaluation,
                                  EvaluationStatus as S, SanitizerReport, Solution, Trace, Workload)

from .process import ChildRun, describe_exit, run_child, tail
from .sanitize import run_sanitizer

CLOCKS_LOCKED_ENV = "SOL_EXECBENCH_CLOCKS_LOCKED"
DEFAULT_MEMORY_FRACTION = 0.8


def default_memory_limit() -> int | None:
    total = host_memory_bytes()
    return int(total * DEFAULT_MEMORY_FRACTION) if total else None


@dataclass
class EvalOptions:
    """How to run an evaluation (the CLI flags that are not BenchmarkConfig fields)."""

    device: str | None = None
    timeout_s: float = 600.0
    compile_timeout_s: float = 120.0
    keep_staging: bool = False
    memory_limit_bytes: int | None = field(default_factory=default_memory_limit)
    dump_failures: Path | None = None
    env_hash: str | None = None
    output_path: Path | None = None  # where -o writes; the no-trace sidecar goes beside it
    use_build_cache: bool = True
    use_warm_pool: bool = True  # take a pre-started child from `sol-execbench worker start` when one fits
    sanitize: bool = False  # also run one call per workload under a memory checker (--sanitize)
    warnings: list[str] = field(default_factory=list)  # carried into every trace
    on_trace: Callable[[Trace], None] | None = None
    on_log: Callable[[str], None] | None = None  # -v: the child's output after each run


@dataclass
class _State:
    definition: Definition
    solution: Solution
    options: EvalOptions
    traces: dict[str, Trace] = field(default_factory=dict)
    hardware: str | None = None
    device: DeviceRecord | None = None
    sanitizer: dict[str, SanitizerReport] = field(default_factory=dict)

    def add(self, trace: Trace) -> None:
        report = self.sanitizer.get(trace.workload.uuid)
        if report is not None and trace.evaluation is not None:
            trace.evaluation.sanitizer = report
            if report.errors:
                trace.evaluation.warnings.append(f"--sanitize: {report.tool} found {report.errors} problem(s): "
                                                 f"{report.findings[0]}")
        self.traces[trace.workload.uuid] = trace
        if self.options.on_trace:
            self.options.on_trace(trace)

    def fail(self, workload: Workload, status: S, log: str) -> None:
        evaluation = Evaluation(status=status, environment=Environment(hardware=self.hardware or _host_hardware()),
                                timestamp=datetime.now(timezone.utc).isoformat(), log=log, device=self.device,
                                env_hash=self.options.env_hash, warnings=list(self.options.warnings))
        self.add(Trace(definition=self.definition.name, workload=workload, solution=self.solution.name,
                       evaluation=evaluation))


def _host_hardware() -> str:
    return {"cuda": "NVIDIA GPU (not probed)", "rocm": "AMD GPU (not probed)"}.get(vendor_hint(), "CPU")


def evaluate_problem(definition: Definition, workloads: list[Workload], solution: Solution,
                     config: BenchmarkConfig, options: EvalOptions | None = None) -> list[Trace]:
    """Evaluate ``solution`` on ``workloads``; one trace per workload, in order. Never raises for
    anything the solution does."""
    options = options or EvalOptions()
    state = _State(definition, solution, options)
    staging = Path(tempfile.mkdtemp(prefix="sol-execbench-"))
    try:
        _run(state, workloads, config, staging)
    finally:
        if options.keep_staging:
            options.warnings.append(f"staging directory kept: {staging}")
        else:
            shutil.rmtree(staging, ignore_errors=True)
    return [state.traces[w.uuid] for w in workloads]


def _run(state: _State, workloads: list[Workload], config: BenchmarkConfig, staging: Path) -> None:
    opts = state.options
    if config.lock_clocks and os.environ.get(CLOCKS_LOCKED_ENV) != "1":
        for w in workloads:
            state.fail(w, S.RUNTIME_ERROR, f"lock_clocks is set but GPU clocks are not locked ({CLOCKS_LOCKED_ENV} "
                                           f"is '{os.environ.get(CLOCKS_LOCKED_ENV, '')}', expected '1'; with it set, "
                                           "the clocks are also measured under load)")
        return
    source_dir = staging / "solution"
    write_sources(state.solution, source_dir)
    began = time.monotonic()
    try:
        outcome = builder_for(state.solution).prepare(state.solution, source_dir, vendor=vendor_hint(),
                                                      timeout_s=opts.compile_timeout_s, use_cache=opts.use_build_cache)
    except BuildFailure as exc:
        for w in workloads:
            state.fail(w, exc.status, exc.message)
        return
    job: dict[str, Any] = {
        "definition": state.definition.model_dump(mode="json"), "solution": state.solution.model_dump(mode="json"),
        "config": config.model_dump(mode="json"), "device": opts.device, "staging_dir": str(staging),
        "dump_dir": str(opts.dump_failures.resolve()) if opts.dump_failures else None, "env_hash": opts.env_hash,
        "warnings": opts.warnings, "build_time_s": outcome.build_time_s if outcome.build_time_s else None,
        "build_cached": outcome.cached, "build_artifacts": outcome.artifacts,
    }
    if opts.sanitize:
        state.sanitizer = run_sanitizer(job, workloads, staging, opts.device, opts.timeout_s)
    deadline = time.monotonic() + opts.timeout_s if opts.sanitize else began + opts.timeout_s
    _run_children(state, workloads, job, staging, deadline)


def _run_children(state: _State, workloads: list[Workload], job: dict[str, Any], staging: Path, deadline: float) -> None:
    opts = state.options
    pending = list(workloads)
    log_path = staging / "child.log"
    produced_any = False
    while pending:
        job["workloads"] = [w.model_dump(mode="json") for w in pending]
        job_path = staging / "job.json"
        job_path.write_text(json.dumps(job))
        in_progress: list[str] = []

        def on_message(msg: dict[str, Any]) -> None:
            if msg.get("type") == "ready":
                state.hardware = msg.get("hardware")
                dev = msg.get("device") or {}
                state.device = DeviceRecord(vendor=dev.get("vendor", "unknown"), index=dev.get("index"),
                                            name=dev.get("name", "unknown"), arch=dev.get("arch"))
            elif msg.get("type") == "start":
                in_progress[:] = [msg["uuid"]]
            elif msg.get("type") == "trace":
                in_progress.clear()

        start_size = log_path.stat().st_size if log_path.exists() else 0
        run = run_child(job_path, log_path, timeout_s=max(0.0, deadline - time.monotonic()),
                        memory_limit_bytes=opts.memory_limit_bytes, env_extra={}, on_message=on_message,
                        warm_device=opts.device, use_warm=opts.use_warm_pool)
        if opts.on_log:
            opts.on_log(_read_from(log_path, start_size))
        produced = _collect(state, pending, run)
        produced_any = produced_any or produced > 0
        pending = [w for w in pending if w.uuid not in state.traces]
        if not pending:
            break
        if not _settle_failure(state, pending, run, in_progress, log_path):
            break
        pending = [w for w in pending if w.uuid not in state.traces]
    if not produced_any:
        _write_no_trace_sidecar(state, staging, log_path)


def _read_from(path: Path, offset: int) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            return fh.read().decode(errors="replace")
    except OSError:
        return ""


def _collect(state: _State, pending: list[Workload], run: ChildRun) -> int:
    """Turn the child's trace messages into traces; a forged line taints everything it sent."""
    by_uuid = {w.uuid: w for w in pending}
    count = 0
    for msg in run.messages:
        if msg.get("type") != "trace":
            continue
        trace = Trace.model_validate(msg["trace"])
        if trace.workload.uuid not in by_uuid:
            continue
        trace.workload = by_uuid[trace.workload.uuid]  # the workload as the user wrote it
        if run.forged:
            state.fail(trace.workload, S.REWARD_HACK, _forged_note(run))
        else:
            state.add(trace)
        count += 1
    return count


def _forged_note(run: ChildRun) -> str:
    return (f"{len(run.forged)} unsigned message(s) appeared on the trace channel (forged traces); first: "
            f"{run.forged[0][:160]!r}")


def _settle_failure(state: _State, pending: list[Workload], run: ChildRun, in_progress: list[str],
                    log_path: Path) -> bool:
    """Record why the child stopped early. True when a fresh child should go on with the rest."""
    log_tail, lines = tail(log_path)
    fatal = next((m for m in run.messages if m.get("type") == "fatal"), None)
    crash = next((m for m in run.messages if m.get("type") == "crash"), None)
    if run.forged:
        for w in pending:
            state.fail(w, S.REWARD_HACK, _forged_note(run))
        return False
    if run.timed_out:
        for w in pending:
            where = "while this workload was running" if w.uuid in in_progress else "before this workload started"
            state.fail(w, S.TIMEOUT, f"evaluation timeout ({state.options.timeout_s:g} s) reached {where}")
        return False
    if fatal is not None:
        for w in pending:
            state.fail(w, S(fatal["status"]), fatal.get("log", ""))
        return False
    reason = describe_exit(run)
    if crash is not None:
        reason = f"the evaluation raised: {crash.get('log', '')}"
    elif run.returncode == 0 and in_progress:  # a clean exit mid-workload: os._exit(0) / sys.exit(0)
        early = next(w for w in pending if w.uuid == in_progress[0])
        state.fail(early, S.REWARD_HACK, f"the evaluation process exited with status 0 while this workload was being "
                                         "evaluated (os._exit or sys.exit in the solution): an early exit cannot produce "
                                         f"a result\n--- child output (last of {lines} lines) ---\n{log_tail}")
        return True
    detail = f"{reason}\n--- child output (last of {lines} lines) ---\n{log_tail}"
    if not in_progress:  # died before reaching a workload: every one would die the same way
        for w in pending:
            state.fail(w, S.RUNTIME_ERROR, detail)
        return False
    crashed = next(w for w in pending if w.uuid == in_progress[0])
    state.fail(crashed, S.RUNTIME_ERROR, detail)
    return True


def _write_no_trace_sidecar(state: _State, staging: Path, log_path: Path) -> None:
    """A bounded diagnostic (not trace JSONL) when the child produced no trace at all."""
    log_tail, lines = tail(log_path, 16000)
    payload = {"kind": "sol-execbench no-trace diagnostic", "definition": state.definition.name,
               "solution": state.solution.name, "child_output_lines": lines, "child_output_tail": log_tail,
               "note": "not canonical trace JSONL; the traces for this run were made by the parent"}
    opts = state.options
    if opts.output_path is not None:
        target = opts.output_path.with_name(opts.output_path.name + ".no-trace.json")
    elif opts.keep_staging:
        target = staging / "no-trace.json"
    else:
        target = Path(tempfile.gettempdir()) / f"sol-execbench-no-trace-{state.solution.name}-{os.getpid()}.json"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(payload, indent=2))
        opts.warnings.append(f"no trace came from the evaluation child; diagnostic written to {target}")
    except OSError:
        pass
