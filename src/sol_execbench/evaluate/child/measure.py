"""Timing one workload (child side): the reference and the solution measured side by side.

Both sides rotate over the same input bank (``input_bank``), each call at a new address; a few of
the solution's calls are audited (``audit``). ``timing.measure`` times both in alternating rounds
and applies the latency rule; this module turns the result into the trace's ``performance`` and
turns tampering into verdicts. Threads, processes and device work launched outside the calls
(activity_watch and the device pass's records) are REWARD_HACK.
"""

from __future__ import annotations

import os
import statistics
import traceback
from pathlib import Path
from typing import Any

import torch

from sol_execbench.schema import (EvaluationStatus as S, Performance, SideRounds, SpeedupInterval, TimingRounds, TimingStats,
                                  Workload)

from .audit import audit_ahead, check_audit, check_content_cache, plan_audits
from .calls import Context, Verdict, check_integrity
from .correctness import RoundTally
from .input_bank import distinct_contents, input_bank
from .inputs import allocate_outputs
from ..phases import phase
from .timing import (FreshArgs, L2Flusher, PairedMeasurement, SideCalls, SideFailed, SideMeasurement, TimingPlan,
                     measure, rounds_per_pass)

# The SM clock's fall over one measurement worth a warning: on an H100, loops whose clock fell by 8
# to 23% (power cap) read a 350 us GEMM 3 to 23% slow; a cool loop's clock moved by about 4%.
CLOCK_FALL_WARN = 0.10


def clock_warning(sm_clock_mhz: tuple[float, ...]) -> str | None:
    """A warning when the SM clock the probe read fell noticeably during the timed calls."""
    if not sm_clock_mhz:
        return None
    top, low, mid = max(sm_clock_mhz), min(sm_clock_mhz), statistics.median(sm_clock_mhz)
    if low >= (1 - CLOCK_FALL_WARN) * top:
        return None
    return (f"the SM clock fell during the timed calls: {low:.0f} to {top:.0f} MHz, median {mid:.0f} MHz (read on "
            "the device after each call): power or thermal capping; the latency holds the slower calls")


def timing_stats(side: SideMeasurement, input_sets: int | None, note: str | None = None) -> TimingStats:
    """The trace's record of one side's rounds."""
    s = side.summary
    stats = TimingStats(method=side.instrument, count=s.count, median_ms=side.latency_ms, mean_ms=s.mean, std_ms=s.std,
                        iqr_ms=s.iqr, min_ms=s.minimum, max_ms=s.maximum, note=note,
                        device_time_ms=side.device_time_ms(), host_time_ms=side.host_time_ms,
                        host_bound=side.host_bound, host_rounds=len(side.host_ms),
                        sync_floor_ms=side.sync_floor_ms, launch_allowance_ms=side.allowance_ms,
                        relative_iqr=round(s.relative_iqr, 6), hold_us=side.hold_us, input_sets=input_sets)
    if side.sm_clock_mhz:
        stats.sm_clock_median_mhz = round(statistics.median(side.sm_clock_mhz), 1)
        stats.sm_clock_min_mhz = round(min(side.sm_clock_mhz), 1)
    return stats


def side_rounds(side: SideMeasurement) -> SideRounds:
    return SideRounds(name=side.name, instrument=side.instrument, device_ms=list(side.device_ms),
                      host_ms=list(side.host_ms), device_call_indices=list(side.device_call_indices),
                      host_call_indices=list(side.host_call_indices),
                      device_opened_round=list(side.device_opened_round), host_opened_round=list(side.host_opened_round),
                      sm_clock_mhz=list(side.sm_clock_mhz),
                      sync_floor_ms=side.sync_floor_ms, launch_allowance_ms=side.allowance_ms, hold_us=side.hold_us,
                      latency_ms=side.latency_ms)


def write_rounds(folder: Path, definition: str, workload: str, paired: PairedMeasurement,
                 interval: SpeedupInterval | None) -> None:
    """``<folder>/<definition>__<workload>__<pid>.json``: the workload's timed calls (``TimingRounds``)."""
    sides = [paired.reference, paired.solution] if paired.reference is not None else [paired.solution]
    record = TimingRounds(definition=definition, workload=workload, sides=[side_rounds(s) for s in sides],
                          speedup=paired.speedup.point if paired.speedup is not None else None,
                          speedup_interval=interval)
    target = Path(folder) / f"{definition}__{workload}__{os.getpid()}.json".replace(os.sep, "_")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(record.model_dump_json(indent=1))


def _peak_bytes(ctx: Context, side: SideCalls) -> int | None:
    """Device memory one call allocates beyond its arguments (a call on fresh arguments)."""
    if not ctx.device.is_gpu:
        return None
    dev = ctx.device.torch_device
    args = side.fresh()
    torch.cuda.synchronize(dev)
    torch.cuda.reset_peak_memory_stats(dev)
    baseline = torch.cuda.memory_allocated(dev)
    side.fn(*args)
    torch.cuda.synchronize(dev)
    return max(0, torch.cuda.max_memory_allocated(dev) - baseline)


def measure_workload(ctx: Context, workload: Workload, blobs: dict[str, torch.Tensor], inputs: list[Any],
                     axes: dict[str, int], tally: RoundTally, warnings: list[str]) -> tuple[Performance, list[str]]:
    cfg, dev = ctx.config, ctx.device
    notes: list[str] = []
    if ctx.flusher is None:
        ctx.flusher = L2Flusher(dev)
    bank = input_bank(ctx, workload, blobs, inputs)
    phase(f"  {workload.uuid}: input bank of {len(bank)} set(s)")
    slots = cfg.warmup_runs + 2 * cfg.iterations + 2
    dps_zeros = allocate_outputs(ctx.definition, axes, ctx.torch_device, poison=False) if ctx.dps else []
    reference_args = FreshArgs(bank, slots=slots) if cfg.benchmark_reference else None
    fresh = FreshArgs([values + dps_zeros for values in bank], slots=slots, share_pools_of=reference_args)
    audits = plan_audits(ctx, workload, blobs, axes, fresh, bank[0], warnings)
    phase(f"  {workload.uuid}: {len(audits)} audited call(s) planned")
    solution = SideCalls("solution", ctx.solution_fn, fresh, [a.keeper for a in audits if a.keeper],
                         audit_ahead=audit_ahead(ctx, workload, blobs, axes, fresh, bank[0], audits, warnings))
    reference = SideCalls("reference", ctx.reference_fn, reference_args) if reference_args is not None else None
    paired, suspicious = _measure_pair(ctx, workload, solution, reference, warnings, notes)
    phase(f"  {workload.uuid}: reference and solution timed")
    try:
        for audit in audits:
            check_audit(ctx, workload, axes, blobs, audit, tally, bank[0], warnings)
    except Verdict as found:
        # A solution the watch caught is still audited, so the verdict names every mechanism that fired.
        if suspicious:
            extra = [found.message] if found.status is S.REWARD_HACK else []
            raise Verdict(S.REWARD_HACK, "; ".join(suspicious + extra), evidence=found.evidence) from None
        raise
    if suspicious:
        raise Verdict(S.REWARD_HACK, "; ".join(suspicious))
    check_content_cache(ctx, workload, blobs, axes, bank, paired.solution, audits, warnings,
                        distinct_sets=min(fresh.input_sets, distinct_contents(bank)))
    phase(f"  {workload.uuid}: audited outputs and content cache checked")
    note = "; ".join(paired.notes) or None
    sol_stats = timing_stats(paired.solution, fresh.input_sets, note)
    perf = Performance(latency_ms=sol_stats.median_ms, solution_timing=sol_stats,
                       peak_memory_bytes=_peak_bytes(ctx, solution))
    if paired.reference is not None and paired.speedup is not None:
        perf.reference_timing = timing_stats(paired.reference, fresh.input_sets, note)
        perf.reference_latency_ms = perf.reference_timing.median_ms
        perf.speedup_factor = paired.speedup.point
        perf.speedup_interval = SpeedupInterval(low=paired.speedup.low, high=paired.speedup.high,
                                                confidence=paired.speedup.confidence, verdict=paired.speedup.verdict,
                                                rounds=paired.speedup.rounds)
        perf.reference_peak_memory_bytes = _peak_bytes(ctx, reference) if reference is not None else None
    if ctx.rounds_dir is not None:
        try:
            write_rounds(ctx.rounds_dir, ctx.definition.name, workload.uuid, paired, perf.speedup_interval)
        except OSError as error:  # a diagnostic output (a full disk): the measurement stands without it
            notes.append(f"the timed calls were not written to {ctx.rounds_dir} ({error.strerror})")
    return perf, notes


def _measure_pair(ctx: Context, workload: Workload, solution: SideCalls, reference: SideCalls | None,
                  warnings: list[str], notes: list[str]) -> tuple[PairedMeasurement, list[str]]:
    """Both sides timed together; a reference that fails is left out (a note), the solution timed alone.
    Also returns what the watch found suspicious (REWARD_HACK once the audits have run)."""
    try:
        return _watched(ctx, workload, solution, reference, warnings)
    except SideFailed as failed:
        if failed.side != "reference":
            raise
        notes.append(f"reference could not be timed: {failed.__cause__}")
        return _watched(ctx, workload, solution, None, warnings)


def _watched(ctx: Context, workload: Workload, solution: SideCalls, reference: SideCalls | None,
             warnings: list[str]) -> tuple[PairedMeasurement, list[str]]:
    """``measure`` with the integrity checks, the clock records and the activity watch around it."""
    cfg = ctx.config
    check_integrity(ctx)
    ctx.hold_device()
    if ctx.clocks is not None:  # before the watch begins: the reading may run nvidia-smi or amd-smi
        ctx.clocks.sample(workload.uuid, "before_timing")
    solution.region = ctx.watch.begin() if ctx.watch is not None else None
    plan = TimingPlan(warmup=cfg.warmup_runs, rounds=rounds_per_pass(cfg.iterations, ctx.device.is_gpu),
                      device=ctx.device, flusher=ctx.flusher,
                      method=cfg.timing.method, cooldown=cfg.timing.cooldown,
                      allowance_ms=cfg.timing.launch_allowance_us / 1e3)
    try:
        paired = measure(solution, reference, plan)
    except SideFailed as failed:
        if failed.side == "reference":
            raise
        cause = failed.__cause__
        if isinstance(cause, SystemExit):
            raise Verdict(S.REWARD_HACK, f"the solution called sys.exit({cause.code!r}) during a timed call") from cause
        tb = "".join(traceback.format_exception(cause)) if cause is not None else ""
        raise Verdict(S.RUNTIME_ERROR, f"solution failed while being timed: {cause}\n{tb}") from cause
    except SystemExit as exc:
        raise Verdict(S.REWARD_HACK, f"the solution called sys.exit({exc.code!r}) during a timed call") from exc
    except Exception as exc:
        raise Verdict(S.RUNTIME_ERROR, f"solution failed while being timed: {exc}\n{traceback.format_exc()}") from exc
    finally:
        findings = solution.region.finish() if solution.region is not None else None
    if ctx.clocks is not None:
        ctx.clocks.sample(workload.uuid, "after_timing")
        warnings.extend(ctx.clocks.warnings_for(workload.uuid))
    check_integrity(ctx)
    suspicious = list(paired.suspicious) + (findings.suspicious if findings else [])
    warnings.extend(list(paired.warnings) + (findings.warnings if findings else []))
    if paired.host_functions:
        warnings.append(f"the solution's calls enqueued {paired.host_functions} host function(s) in stream order")
    if (fell := clock_warning(paired.solution.sm_clock_mhz)) is not None:
        warnings.append(fell)
    return paired, suspicious
