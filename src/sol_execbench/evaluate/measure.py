"""Timing one workload (child side): the input bank, the timed calls, the audited call.

- Input bank: the timed calls rotate over several distinct input sets (deterministic seeds, as
  many as memory and a time budget allow), so a cache keyed by content misses; FreshArgs also
  gives every call a new address, so a cache keyed by pointer misses.
- Audit: one timed call, at a position drawn from the OS's random source, gets a further input
  set made from a secret seed. Its outputs are kept and checked against the reference after
  timing. A mismatch is REWARD_HACK when the solution behaves differently when timed (it now
  fails inputs it passed in the correctness rounds, or passes the audited inputs when re-run
  untimed); otherwise it is INCORRECT_NUMERICAL (wrong on some inputs).
- Threads, processes and device work launched outside the calls (activity_watch and the device
  method's records) are REWARD_HACK.
"""

from __future__ import annotations

import os
import secrets
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable

import torch

from sol_execbench.platform.host import host_loaded
from sol_execbench.schema import CustomInput, EvaluationStatus as S, Performance, RandomInput, Workload

from . import host_recheck
from .calls import (Context, Verdict, check_integrity, clone_values, compare_outputs, normalize_result,
                    output_problems, reference_call, round_seed, solution_call)
from .correctness import RoundTally
from .inputs import allocate_outputs, make_inputs, seed_all
from .phases import phase
from .timing import CallKeeper, FreshArgs, L2Flusher, Measurement, time_calls

CPU_TIMING_ENV = "SOL_EXECBENCH_ALLOW_CPU_TIMING"
BANK_MAX_SETS = 64
BANK_TIME_BUDGET_S = 1.0
BANK_MEMORY_FRACTION = 0.2  # of free device memory (GPU), or of BANK_CPU_BYTES on the CPU
BANK_CPU_BYTES = 512 * 2**20
_BANK_SEED_OFFSET = 1_000_000  # bank seeds never coincide with correctness-round seeds


def _tensor_bytes(values: list[Any]) -> int:
    return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))


def _varies(ctx: Context, workload: Workload) -> bool:
    """Whether a new seed gives new input contents (random or custom inputs, not only blobs/scalars)."""
    return any(isinstance(workload.inputs.get(n), (RandomInput, CustomInput)) or n not in workload.inputs
               for n in ctx.definition.inputs)


def input_bank(ctx: Context, workload: Workload, blobs: dict[str, torch.Tensor], first: list[Any]) -> list[list[Any]]:
    """Distinct input sets for the timed calls, none of them seen in the correctness rounds (a
    content-keyed cache must miss); ``first`` alone when new seeds give no new contents."""
    cfg = ctx.config
    if not _varies(ctx, workload):
        return [first]
    want = min(BANK_MAX_SETS, cfg.warmup_runs + cfg.iterations)
    if ctx.device.is_gpu:
        free, _ = torch.cuda.mem_get_info(ctx.device.torch_device)
        budget = int(free * BANK_MEMORY_FRACTION)
    else:
        budget = BANK_CPU_BYTES
    want = max(1, min(want, budget // max(1, _tensor_bytes(first))))
    bank: list[list[Any]] = []
    began = time.perf_counter()
    for k in range(want):
        if bank and time.perf_counter() - began > BANK_TIME_BUDGET_S:
            break
        seed_all(round_seed(cfg.seed, workload.uuid, _BANK_SEED_OFFSET + k))
        bank.append(make_inputs(ctx.definition, workload, ctx.torch_device, blobs, ctx.custom_inputs_fn))
    return bank


@dataclass
class AuditSet:
    """A secret input set for one timed call, and a private copy for the reference."""

    values: list[Any]
    pristine: list[Any]

    @classmethod
    def make(cls, ctx: Context, workload: Workload, blobs: dict[str, torch.Tensor]) -> "AuditSet":
        seed_all(secrets.randbits(63))
        values = make_inputs(ctx.definition, workload, ctx.torch_device, blobs, ctx.custom_inputs_fn)
        return cls(values, clone_values(values))


def _keeper_for(ctx: Context, fresh: FreshArgs, audit: AuditSet, dps_zeros: list[Any]) -> CallKeeper | None:
    cfg = ctx.config
    call_index = cfg.warmup_runs + secrets.randbelow(cfg.iterations)
    if not fresh.substitute(call_index, audit.values + dps_zeros):
        ctx.warnings.append("the audited timed call was skipped: a fresh input set did not match the first's layout")
        return None
    return CallKeeper(call_index, dps_outputs=len(dps_zeros))


def measure_workload(ctx: Context, workload: Workload, blobs: dict[str, torch.Tensor], inputs: list[Any],
                     axes: dict[str, int], tally: RoundTally, warnings: list[str]) -> tuple[Performance, list[str]]:
    cfg, dev = ctx.config, ctx.device
    notes: list[str] = []
    if not dev.is_gpu and os.environ.get(CPU_TIMING_ENV) != "1":
        raise Verdict(S.RUNTIME_ERROR, f"correct on {cfg.correctness_rounds} round(s), but no GPU is visible: "
                      f"timing on the CPU needs {CPU_TIMING_ENV}=1 (a test/debug setting, not a GPU measurement)")
    if not dev.is_gpu:
        notes.append("timed on the CPU (SOL_EXECBENCH_ALLOW_CPU_TIMING=1): host clock, not a GPU measurement")
    if ctx.flusher is None:
        ctx.flusher = L2Flusher(dev)
    bank = input_bank(ctx, workload, blobs, inputs)
    phase(f"  {workload.uuid}: input bank of {len(bank)} set(s)")
    dps_zeros = allocate_outputs(ctx.definition, axes, ctx.torch_device, poison=False) if ctx.dps else []
    audit = AuditSet.make(ctx, workload, blobs)
    fresh = FreshArgs([values + dps_zeros for values in bank], slots=cfg.warmup_runs + cfg.iterations + 1)
    keeper = _keeper_for(ctx, fresh, audit, dps_zeros)
    if keeper is not None:
        keeper.inspect = lambda args, result: _inspect_audited(ctx, args, result)
    sol, sol_peak = _timed_solution(ctx, workload, fresh, keeper, warnings)
    phase(f"  {workload.uuid}: solution timed")
    _check_audit(ctx, workload, axes, blobs, audit, keeper, tally)
    if host_recheck.applies(sol):
        known = len(sol.warnings)
        host_recheck.recheck(sol, _solution_once(ctx, workload, axes, blobs), dev)
        warnings.extend(sol.warnings[known:])
        check_integrity(ctx)
    stats = sol.stats()
    perf = Performance(latency_ms=stats.median_ms, solution_timing=stats, peak_memory_bytes=sol_peak)
    if cfg.benchmark_reference:
        _time_reference(ctx, bank, perf, notes, _contended(ctx, workload))
        phase(f"  {workload.uuid}: reference timed")
    return perf, notes


def _contended(ctx: Context, workload: Workload) -> bool:
    """Other processes on the GPU, or more runnable threads than cores: wall-clock host spans
    then hold waits that are not the solution's (see timing.choose_latency)."""
    return (ctx.clocks is not None and ctx.clocks.shared(workload.uuid)) or host_loaded()


def _timed_solution(ctx: Context, workload: Workload, fresh: FreshArgs, keeper: CallKeeper | None,
                    warnings: list[str]) -> tuple[Measurement, int | None]:
    check_integrity(ctx)
    if ctx.clocks is not None:  # before the watch begins: the reading may run nvidia-smi or amd-smi
        ctx.clocks.sample(workload.uuid, "before_timing")
    region = ctx.watch.begin() if ctx.watch is not None else None
    try:
        sol, peak = _timed(ctx, ctx.solution_fn, fresh, keeper, region, _contended(ctx, workload))
    except SystemExit as exc:
        raise Verdict(S.REWARD_HACK, f"the solution called sys.exit({exc.code!r}) during a timed call") from exc
    except Exception as exc:
        raise Verdict(S.RUNTIME_ERROR, f"solution failed while being timed: {exc}\n{traceback.format_exc()}") from exc
    finally:
        findings = region.finish() if region is not None else None
    if ctx.clocks is not None:
        ctx.clocks.sample(workload.uuid, "after_timing")
        warnings.extend(ctx.clocks.warnings_for(workload.uuid))
    check_integrity(ctx)
    suspicious = list(sol.suspicious) + (findings.suspicious if findings else [])
    if suspicious:
        raise Verdict(S.REWARD_HACK, "; ".join(suspicious))
    warnings.extend(sol.warnings + (findings.warnings if findings else []))
    return sol, peak


def _timed(ctx: Context, fn: Callable[..., Any], fresh: FreshArgs, keeper: CallKeeper | None,
           region: Any, contended: bool) -> tuple[Measurement, int | None]:
    """Time ``fn``; also the peak device memory it allocated beyond its arguments."""
    dev, cfg = ctx.device, ctx.config
    baseline = None
    if dev.is_gpu:
        torch.cuda.synchronize(dev.torch_device)
        torch.cuda.reset_peak_memory_stats(dev.torch_device)
        baseline = torch.cuda.memory_allocated(dev.torch_device)
    m = time_calls(fn, fresh, warmup=cfg.warmup_runs, iterations=cfg.iterations, device=dev, flusher=ctx.flusher,
                   method=cfg.timing.method, keeper=keeper, region=region, contended=contended,
                   cooldown=cfg.timing.cooldown)
    peak = None
    if dev.is_gpu and baseline is not None:
        peak = max(0, torch.cuda.max_memory_allocated(dev.torch_device) - baseline)
    return m, peak


def _time_reference(ctx: Context, bank: list[list[Any]], perf: Performance, notes: list[str], contended: bool) -> None:
    cfg = ctx.config
    try:
        ref, ref_peak = _timed(ctx, ctx.reference_fn, FreshArgs(bank, slots=cfg.warmup_runs + cfg.iterations + 1),
                               None, None, contended)
        host_recheck.recheck(ref, _reference_once(ctx, bank), ctx.device)
        stats = ref.stats()
        perf.reference_latency_ms = stats.median_ms
        perf.reference_timing, perf.reference_peak_memory_bytes = stats, ref_peak
        perf.speedup_factor = perf.reference_latency_ms / perf.latency_ms if perf.latency_ms > 0 else 0.0
    except Exception as exc:
        notes.append(f"reference could not be timed: {exc}")


# -- re-checking a host-bound verdict without the profiler (host_recheck) ---------------------------

def _solution_once(ctx: Context, workload: Workload, axes: dict[str, int],
                   blobs: dict[str, torch.Tensor]) -> host_recheck.CallOnce:
    def once(k: int) -> tuple[float, str | None]:
        seed_all(secrets.randbits(63))  # inputs no cache has seen
        inputs = make_inputs(ctx.definition, workload, ctx.torch_device, blobs, ctx.custom_inputs_fn)
        pristine = clone_values(inputs)
        outputs = allocate_outputs(ctx.definition, axes, ctx.torch_device, poison=True) if ctx.dps else []
        result, wall = host_recheck.timed_call(ctx.solution_fn, inputs + outputs, ctx.flusher, ctx.device)
        produced = clone_values(list(outputs) if ctx.dps else normalize_result(ctx, result))  # as it finished
        check = compare_outputs(ctx, workload.tolerance, produced, reference_call(ctx, pristine, axes))
        return wall, None if check.status is None else f"call {k}'s outputs were wrong: {check.message}"
    return once


def _reference_once(ctx: Context, bank: list[list[Any]]) -> host_recheck.CallOnce:
    def once(k: int) -> tuple[float, str | None]:
        _, wall = host_recheck.timed_call(ctx.reference_fn, clone_values(bank[k % len(bank)]), ctx.flusher, ctx.device)
        return wall, None
    return once


# -- the audited call -----------------------------------------------------------------------------

def _inspect_audited(ctx: Context, args: list[Any], result: Any) -> list[str]:
    """Per-call output checks on the audited call's own outputs, before they are copied."""
    if ctx.dps:
        return []
    try:
        outputs = normalize_result(ctx, result)
    except Exception as exc:  # noqa: BLE001
        return [f"the audited timed call returned an unusable result: {exc}"]
    return output_problems(ctx, outputs, args)


def _check_audit(ctx: Context, workload: Workload, axes: dict[str, int], blobs: dict[str, torch.Tensor],
                 audit: AuditSet, keeper: CallKeeper | None, tally: RoundTally) -> None:
    if keeper is None or keeper.kept is None:
        return
    if keeper.problems:
        raise Verdict(S.REWARD_HACK, f"audited timed call: {'; '.join(keeper.problems)}")
    try:
        sol_out = list(keeper.kept) if ctx.dps else normalize_result(ctx, keeper.kept)
    except Exception as exc:  # noqa: BLE001
        raise Verdict(S.REWARD_HACK, f"the audited timed call returned an unusable result: {exc}") from exc
    ref_out = reference_call(ctx, audit.pristine, axes)
    check = compare_outputs(ctx, workload.tolerance, sol_out, ref_out)
    if check.status is None:
        return
    where = f"audited timed call (call {keeper.call_index - ctx.config.warmup_runs} of {ctx.config.iterations})"
    if not _correct_untimed(ctx, workload, axes, _round_zero_inputs(ctx, workload, blobs)):
        raise Verdict(S.REWARD_HACK, f"{where}: {check.message}; re-run after timing, the solution now fails inputs it "
                                     "passed in the correctness rounds: it stops computing once timed")
    if _correct_untimed(ctx, workload, axes, clone_values(audit.values)):
        raise Verdict(S.REWARD_HACK, f"{where}: {check.message}; the same inputs pass when re-run untimed: the "
                                     "solution computes differently when timed")
    for name, comp in check.comparisons:
        tally.add(name, comp)
    correctness = tally.result() if check.status is S.INCORRECT_NUMERICAL else None
    raise Verdict(check.status, f"{where}: {check.message} (fresh inputs; wrong again when re-run untimed)",
                  correctness)


def _round_zero_inputs(ctx: Context, workload: Workload, blobs: dict[str, torch.Tensor]) -> list[Any]:
    seed_all(round_seed(ctx.config.seed, workload.uuid, 0))
    return make_inputs(ctx.definition, workload, ctx.torch_device, blobs, ctx.custom_inputs_fn)


def _correct_untimed(ctx: Context, workload: Workload, axes: dict[str, int], inputs: list[Any]) -> bool:
    pristine = clone_values(inputs)
    try:
        sol_out, _ = solution_call(ctx, inputs, axes)
    except Verdict:
        return False
    ref_out = reference_call(ctx, pristine, axes)
    return compare_outputs(ctx, workload.tolerance, sol_out, ref_out).status is None
