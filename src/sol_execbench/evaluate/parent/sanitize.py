"""``--sanitize``: one call per workload under a memory checker, findings per workload (parent side).

A separate child runs the same job with one correctness round, no warm-up, one timed call (the
events method: the profiler and the checker both want the profiling interface) and no
reference timing, under ``compute-sanitizer --tool memcheck`` on NVIDIA, with PyTorch's caching
allocator off and destination outputs without guard bands, so each tensor is an allocation of its
own exact size and a write past it is an access memcheck can see. Findings are read from
the child's log; the part of the log after a workload's ``start`` message and before the next
one's is that workload's. The main evaluation is unaffected: this run only adds reports.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sol_execbench.platform import vendor_hint
from sol_execbench.platform.sanitizer import memcheck_command
from sol_execbench.schema import SanitizerReport, Workload

from .process import describe_exit, run_child

_PREFIX = "========= "
_NOT_FINDINGS = ("COMPUTE-SANITIZER", "ERROR SUMMARY", "Saved host backtrace", "Host Frame", "Device Frame",
                 "LEAK SUMMARY", "Leaked ")


def parse_findings(text: str) -> list[str]:
    """First line of each finding in compute-sanitizer output."""
    found = []
    for line in text.splitlines():
        if not line.startswith(_PREFIX):
            continue
        body = line[len(_PREFIX):]
        if not body.strip() or body[0].isspace() or body.startswith(_NOT_FINDINGS):
            continue
        found.append(body.strip()[:200])
    return found


def sanitize_job(job: dict[str, Any]) -> dict[str, Any]:
    config = dict(job["config"])
    config.update(warmup_runs=0, iterations=1, correctness_rounds=1, benchmark_reference=False,
                  lock_clocks=False, timing={"method": "events"})
    # No guard bands: an output must be an allocation of its own exact size for memcheck to see a
    # write past its end (a canary band would absorb it). No sandbox: compute-sanitizer's injection
    # reports through files and sockets outside the run (under Landlock it ran and reported nothing).
    return {**job, "config": config, "dump_dir": None, "rounds_dir": None, "guard_outputs": False, "isolation": {"mode": "off"}}


def _segments(log: str, starts: list[tuple[str, int]]) -> dict[str, str]:
    data = log.encode(errors="replace")
    out = {}
    for k, (uuid, offset) in enumerate(starts):
        end = starts[k + 1][1] if k + 1 < len(starts) else len(data)
        out[uuid] = data[offset:end].decode(errors="replace")
    return out


def run_sanitizer(job: dict[str, Any], workloads: list[Workload], staging: Path, device: str | None,
                  timeout_s: float) -> dict[str, SanitizerReport]:
    """A report per workload uuid (``ran=False`` with the reason when no checker applies)."""
    vendor = "cpu" if device == "cpu" else vendor_hint()
    wrapper, tool = memcheck_command(vendor)
    if wrapper is None:
        return {w.uuid: SanitizerReport(tool="none", ran=False, note=tool) for w in workloads}
    job_path, log_path = staging / "sanitize-job.json", staging / "sanitize.log"
    job_path.write_text(json.dumps({**sanitize_job(job), "workloads": [w.model_dump(mode="json") for w in workloads]}))
    log_path.write_bytes(b"")
    starts: list[tuple[str, int]] = []

    def on_message(msg: dict[str, Any]) -> None:
        if msg.get("type") == "start":
            starts.append((msg["uuid"], log_path.stat().st_size))

    # PyTorch's caching allocator carves tensors out of large blocks, so an access past a tensor's end
    # usually stays inside a live allocation; with caching off each tensor is its own cudaMalloc.
    run = run_child(job_path, log_path, timeout_s=timeout_s, memory_limit_bytes=None,
                    env_extra={"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"},
                    on_message=on_message, wrapper=wrapper)
    segments = _segments(log_path.read_text(errors="replace"), starts)
    finished = run.returncode == 0 and not run.timed_out
    reports = {}
    for w in workloads:
        if w.uuid not in segments:
            reports[w.uuid] = SanitizerReport(tool=tool, ran=False, note=f"the checked run did not reach this workload "
                                                                         f"({describe_exit(run)})")
            continue
        findings = parse_findings(segments[w.uuid])
        note = None if finished else f"the checked run ended early: {describe_exit(run)}"
        reports[w.uuid] = SanitizerReport(tool=tool, ran=True, errors=len(findings), findings=findings[:50], note=note)
    return reports
