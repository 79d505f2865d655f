"""``--profile``: the solution's calls re-run under a profiler after the evaluation, as a sidecar.

A second evaluation child, started through the evaluator's launcher hook (``EvalOptions.child_prefix``,
``child_env``, ``child_task``), runs each workload's calls (``evaluate/child/profile_calls.py``) with
``SOL_EXECBENCH_GRACEFUL_EXIT=1`` so the profiler sees the process end normally and flushes its
records. A profiler that is missing, fails or records no kernels is an attempt with its error;
``auto`` goes on to the next one. The traces are never touched.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sol_execbench.evaluate import EvalOptions, evaluate_problem
from sol_execbench.evaluate.child.driver import GRACEFUL_EXIT_ENV
from sol_execbench.schema import BenchmarkConfig, Definition, IsolationMode, Solution, Trace, Workload
from sol_execbench.schema.profiling import (DEFAULT_PROFILE_CALLS, MARKER_KERNEL, PROFILE_RANGE, KernelLaunch,
                                            ProfilerAttempt, ProfileSidecar, WorkloadProfile, summarize_kernels)

from . import ncu, rocprof

AUTO_ORDER = {"cuda": ("ncu", "torch"), "rocm": ("rocprofv3", "torch"), "cpu": ("torch",)}
_TAIL = 1500


@dataclass
class ProfileRequest:
    tool: str  # torch | ncu | rocprofv3 | auto
    calls: int = DEFAULT_PROFILE_CALLS
    triton_metadata: bool = False  # also read Triton's compiled-kernel metadata in the child


@dataclass
class _Collected:
    messages: dict[str, dict[str, Any]] = field(default_factory=dict)

    def take(self, msg: dict[str, Any]) -> None:
        if msg.get("type") == "profile" and isinstance(msg.get("uuid"), str):
            self.messages[msg["uuid"]] = msg


@dataclass
class ChildOutcome:
    """What one profiling child left: its messages per workload, its traces, the profiler's output folder."""

    messages: dict[str, dict[str, Any]]
    traces: list[Trace]
    output_dir: Path


def tools_for(requested: str, vendor: str) -> tuple[str, ...]:
    return AUTO_ORDER.get(vendor, ("torch",)) if requested == "auto" else (requested,)


def tool_prefix(tool: str, output_dir: Path) -> tuple[list[str] | None, str | None]:
    """(the profiler's command prefix, or None and why not)."""
    if tool == "ncu":
        exe = ncu.find_ncu()
        if exe is None:
            return None, "ncu not found (on PATH, /usr/local/cuda/bin or /opt/nvidia/nsight-compute)"
        return ncu.ncu_command(exe, output_dir / "ncu.csv", PROFILE_RANGE), None
    if tool == "rocprofv3":
        exe = rocprof.find_rocprofv3()
        if exe is None:
            return None, "rocprofv3 not found (on PATH or /opt/rocm/bin)"
        return rocprof.rocprofv3_command(exe, output_dir / "rocprofv3"), None
    return [], None


def tool_version(command: list[str]) -> str | None:
    if not command:
        return None
    try:
        done = subprocess.run([command[0], "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = [line.strip() for line in (done.stdout or done.stderr).splitlines() if line.strip()]
    return lines[-1][:200] if lines else None


def run_profiling_child(definition: Definition, workloads: list[Workload], solution: Solution,
                        config: BenchmarkConfig, base: EvalOptions, tool: str, prefix: list[str], calls: int,
                        output_dir: Path, triton_metadata: bool = False) -> ChildOutcome:
    """One profiling child through the launcher hook. An external profiler runs it unsandboxed
    (as ``--sanitize``'s checker does: its injection reports through files and sockets outside the run)."""
    collected = _Collected()
    options = EvalOptions(device=base.device, timeout_s=base.timeout_s, compile_timeout_s=base.compile_timeout_s,
                          memory_limit_bytes=base.memory_limit_bytes, env_hash=base.env_hash,
                          use_build_cache=base.use_build_cache, use_warm_pool=False,
                          isolation=IsolationMode.OFF if prefix else base.isolation,
                          child_prefix=prefix, child_env={GRACEFUL_EXIT_ENV: "1"},
                          child_task={"tool": tool, "calls": calls, "triton_metadata": triton_metadata},
                          on_message=collected.take)
    traces = evaluate_problem(definition, workloads, solution, config, options)
    return ChildOutcome(collected.messages, traces, output_dir)


def split_marked_calls(launches: list[KernelLaunch], expected: list[tuple[str, int]]) -> tuple[dict[str, list[KernelLaunch]], str | None]:
    """Each workload's launches from a marked kernel list: every call sits between two marker
    launches, workloads in order, ``calls`` each. (launches per uuid, a problem or None)."""
    markers = [i for i, launch in enumerate(launches) if MARKER_KERNEL in launch.name]
    pairs = list(zip(markers[0::2], markers[1::2]))
    found: dict[str, list[KernelLaunch]] = {}
    k = 0
    for uuid, calls in expected:
        mine: list[KernelLaunch] = []
        for _ in range(calls):
            if k >= len(pairs):
                return found, (f"the profiler recorded {len(markers)} marker launch(es) ({MARKER_KERNEL}) for "
                               f"{sum(c for _, c in expected)} call(s): fewer than the two per call expected")
            start, end = pairs[k]
            mine.extend(launches[start + 1:end])
            k += 1
        found[uuid] = mine
    return found, None


def _log_tail(path: Path) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no profiler log)"
    return text[-_TAIL:].strip() or "(empty profiler log)"


def _external_launches(tool: str, output_dir: Path) -> tuple[list[KernelLaunch], list[Any], str | None]:
    """(launches in order, rocprofv3's per-process stats, why there are none)."""
    if tool == "ncu":
        log = output_dir / "ncu.csv"
        launches = [k.as_launch() for k in ncu.parse_ncu_launches(log.read_text(errors="replace"))] if log.exists() else []
        return launches, [], None if launches else f"ncu recorded no kernels: {_log_tail(log)}"
    traces = rocprof.output_files(output_dir / "rocprofv3", "kernel_trace")
    launches = [k for f in traces for k in rocprof.parse_kernel_trace(f.read_text(errors="replace"))]
    stats = [k for f in rocprof.output_files(output_dir / "rocprofv3", "kernel_stats")
             for k in rocprof.parse_kernel_stats(f.read_text(errors="replace"))]
    why = None if launches else f"rocprofv3 recorded no kernels (no *_kernel_trace.csv rows below {output_dir})"
    return launches, stats, why


def _child_failure(outcome: ChildOutcome) -> str:
    failed = [t for t in outcome.traces if t.evaluation is not None and t.evaluation.status.value != "PASSED"]
    if failed:
        return f"the profiled run failed ({failed[0].evaluation.status.value}): {failed[0].evaluation.log[-_TAIL:]}"
    return "the profiled run reported nothing"


def workload_profiles(tool: str, outcome: ChildOutcome,
                      workloads: list[Workload]) -> tuple[list[WorkloadProfile], list[Any], str | None, list[KernelLaunch]]:
    """Per workload, its kernels; rocprofv3's per-process stats; the attempt's error (None: kernels
    recorded); every workload's launches together."""
    ran = [(w.uuid, int(outcome.messages[w.uuid].get("calls", 0))) for w in workloads if w.uuid in outcome.messages]
    per_workload: dict[str, list[KernelLaunch]] = {}
    stats: list[Any] = []
    error = None
    if tool == "torch":
        for uuid, _ in ran:
            per_workload[uuid] = [KernelLaunch(str(name), float(ns)) for call in outcome.messages[uuid].get("per_call", [])
                                  for name, ns in call]
    elif tool in ("ncu", "rocprofv3") and not outcome.messages:
        error = _child_failure(outcome)  # the profiler did not run the program (or it died before any call)
    elif tool in ("ncu", "rocprofv3"):
        launches, stats, error = _external_launches(tool, outcome.output_dir)
        if error is None:
            per_workload, error = split_marked_calls(launches, [(u, c) for u, c in ran if c > 0])
    rows = []
    for w in workloads:
        msg = outcome.messages.get(w.uuid)
        launches = per_workload.get(w.uuid, [])
        kernels = summarize_kernels(launches, msg.get("calls") if msg else None)
        why = (msg.get("error") if msg else None) or (None if kernels else "no kernels were recorded in its calls")
        rows.append(WorkloadProfile(uuid=w.uuid, calls=int(msg.get("calls", 0)) if msg else 0, kernels=kernels,
                                    kernel_us_per_call=sum(k.per_call_us or 0.0 for k in kernels) if kernels else None,
                                    error=why))
    if error is None and not any(r.kernels for r in rows):
        error = "recorded no kernels in the profiled calls" if outcome.messages else _child_failure(outcome)
    return rows, stats, error, [k for w in workloads for k in per_workload.get(w.uuid, [])]


def profile_solution(definition: Definition, workloads: list[Workload], solution: Solution, config: BenchmarkConfig,
                     base: EvalOptions, request: ProfileRequest, vendor: str,
                     traces: list[Trace] | None = None) -> ProfileSidecar:
    """Each tool of the request in turn until one records kernels; the sidecar of what happened."""
    sidecar = ProfileSidecar(requested=request.tool, definition=definition.name, solution=solution.name,
                             device=base.device or vendor, calls_per_workload=request.calls)
    latency = {t.workload.uuid: t.evaluation.performance.latency_ms for t in traces or []
               if t.evaluation is not None and t.evaluation.performance is not None}
    for tool in tools_for(request.tool, vendor):
        staging = Path(tempfile.mkdtemp(prefix=f"sol-execbench-profile-{tool}-"))
        try:
            prefix, missing = tool_prefix(tool, staging)
            if prefix is None:
                sidecar.attempts.append(ProfilerAttempt(tool=tool, ok=False, error=missing))
                continue
            outcome = run_profiling_child(definition, workloads, solution, config, base, tool, prefix, request.calls,
                                          staging, request.triton_metadata)
            rows, stats, error, every = workload_profiles(tool, outcome, workloads)
        finally:
            if not base.keep_staging:
                shutil.rmtree(staging, ignore_errors=True)
        sidecar.attempts.append(ProfilerAttempt(tool=tool, ok=error is None, error=error, command=prefix,
                                                version=tool_version(prefix),
                                                staging=str(staging) if base.keep_staging else None))
        for row in rows:
            row.trace_latency_ms = latency.get(row.uuid)
        sidecar.workloads, sidecar.process_kernels = rows, stats  # a later tool's rows replace a failed one's
        if error is None:
            sidecar.tool = tool
            sidecar.kernels = summarize_kernels(every, sum(r.calls for r in rows))
            break
    return sidecar
