"""Timing one workload (child side): the input bank, the timed calls, the audited call.

- Input bank: the timed calls rotate over several distinct input sets (deterministic seeds, as
  many as memory and a time budget allow), so a cache keyed by content misses; FreshArgs also
  gives every call a new address, so a cache keyed by pointer misses.
- Audit: a few timed calls (AUDITED_CALLS), at positions drawn from the OS's random source, get
  input sets of their own with contents no other call has: made from a secret seed, or, where no
  input varies with the seed (blobs and scalars only), the workload's inputs with their floats
  scaled down by a power of two (a different one per set). Their outputs are kept and checked against the reference after timing, destination
  outputs inside guard bands. A mismatch is REWARD_HACK when the solution behaves differently
  when timed (it now fails inputs it passed in the correctness rounds, or passes the audited
  inputs when re-run untimed), or when on scaled inputs it returned the answer to the workload's
  own; otherwise it is INCORRECT_NUMERICAL (wrong on some inputs), or, on scaled inputs (which
  the workload never asked about), a warning.
- Content caches: where the timed calls repeat input contents (a bank smaller than the calls),
  audited calls much slower than the rest mean the solution is fast only on contents it has seen.
- Threads, processes and device work launched outside the calls (activity_watch and the device
  method's records) are REWARD_HACK.
"""

from __future__ import annotations

import os
import random
import secrets
import statistics
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable

import torch

from sol_execbench.platform.host import host_loaded
from sol_execbench.schema import CustomInput, EvaluationStatus as S, Performance, RandomInput, Workload

from . import guards, host_recheck
from .calls import (Context, FailureEvidence, Verdict, check_integrity, clone_values, compare_outputs,
                    normalize_result, output_problems, reference_call, round_seed, solution_call)
from .correctness import RoundTally
from .inputs import allocate_outputs, make_inputs, seed_all
from .phases import phase
from .timing import CallKeeper, FreshArgs, L2Flusher, Measurement, flat_view, time_calls

CPU_TIMING_ENV = "SOL_EXECBENCH_ALLOW_CPU_TIMING"
BANK_MAX_SETS = 64
BANK_TIME_BUDGET_S = 1.0
BANK_MEMORY_FRACTION = 0.2  # of free device memory (GPU), or of BANK_CPU_BYTES on the CPU
BANK_CPU_BYTES = 512 * 2**20
_BANK_SEED_OFFSET = 1_000_000  # bank seeds never coincide with correctness-round seeds
AUDITED_CALLS = 3
AUDIT_MEMORY_FRACTION = 0.1  # of free device memory (GPU), or of BANK_CPU_BYTES on the CPU, for the audit sets
# A content cache is called when every audited call is this much slower than the median of the
# others, and by more than the floor: device spans are steady to a few microseconds, host spans
# on a busy virtual machine varied by 100 us and more.
CACHE_RATIO = 2.0
CACHE_FLOOR_DEVICE_MS = 0.01
CACHE_FLOOR_HOST_MS = 0.1


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


def same_contents(a: list[Any], b: list[Any]) -> bool:
    """Whether two input sets hold the same values: tensors byte for byte (so NaN payloads match and
    dtypes without arithmetic, such as packed fp4, compare too), scalars equal."""
    for x, y in zip(a, b):
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            if x.shape != y.shape or x.dtype != y.dtype or not torch.equal(guards.tensor_bytes(x), guards.tensor_bytes(y)):
                return False
        elif x != y:
            return False
    return len(a) == len(b)


def distinct_contents(bank: list[list[Any]]) -> int:
    """How many distinct input sets the bank holds: all of them, or one where a second seed gave
    the same contents as the first (a custom generator that ignores the seed)."""
    return 1 if len(bank) > 1 and same_contents(bank[0], bank[1]) else len(bank)


def scaled_down(value: Any, exponent: int) -> tuple[Any, bool]:
    """A floating-point tensor times 2**-exponent, same shape and strides, and whether any value
    changed. Scaling by a power of two is exact (subnormals aside) and moves toward zero: zeros,
    signs, infinities, NaN and the order of the values stay, and a float that holds an index or a
    length stays in range. Dtypes without arithmetic here (packed fp4) are left as they are."""
    if not isinstance(value, torch.Tensor) or not value.is_floating_point() or value.numel() == 0:
        return value, False
    flat, span = flat_view(value)  # the whole memory extent: the result keeps the layout
    try:
        wide = flat.float()
        if not bool(((wide != 0) & torch.isfinite(wide)).any()):
            return value, False
        scaled = (wide * 2.0 ** -exponent).to(value.dtype)
    except (RuntimeError, TypeError, NotImplementedError):
        return value, False
    return scaled.as_strided(value.shape, value.stride()), True


@dataclass
class AuditSet:
    """Inputs of one audited timed call, a private copy for the reference, its destination
    outputs (inside guard bands where guarded) and the keeper of its results."""

    values: list[Any]
    pristine: list[Any]
    distinct: bool  # its contents differ from every bank set's and every other audit set's
    scaled: bool  # the workload's inputs do not vary with the seed: these are its floats scaled down
    outputs: list[Any]
    guarded: guards.GuardedOutputs | None = None
    keeper: CallKeeper | None = None

    @classmethod
    def make(cls, ctx: Context, workload: Workload, blobs: dict[str, torch.Tensor], axes: dict[str, int],
             bank_first: list[Any], ordinal: int, scale: bool = True) -> "AuditSet":
        """``ordinal``: this audit set's place among the workload's; where the inputs do not vary with
        the seed (and ``scale``), the k-th set has its floats scaled by 2**-(k+1), so no two sets are alike."""
        seed_all(secrets.randbits(63))
        values = make_inputs(ctx.definition, workload, ctx.torch_device, blobs, ctx.custom_inputs_fn)
        distinct = not same_contents(values, bank_first)
        was_scaled = False
        if not distinct and scale:  # blobs and scalars only, or a custom generator that ignores the seed
            scaled = [scaled_down(v, ordinal + 1) for v in values]
            values = [v for v, _ in scaled]
            distinct = was_scaled = any(changed for _, changed in scaled)
        outputs, guarded = [], None
        if ctx.dps:
            outputs = allocate_outputs(ctx.definition, axes, ctx.torch_device, poison=False)
            if ctx.guard_outputs:
                guarded = guards.GuardedOutputs(outputs, list(ctx.definition.outputs))
                outputs = list(guarded.tensors)
        return cls(values, clone_values(values), distinct, was_scaled, outputs, guarded)


def _solution_takes_scaled(ctx: Context, axes: dict[str, int], first: list[Any], exponent: int,
                           warnings: list[str]) -> bool:
    """One untimed call on the workload's inputs with their floats scaled by 2**-``exponent``
    (further than any audit or re-check set, so its contents are none of theirs): scaled inputs the
    workload never asked about must not turn an honest solution's timed loop into a RUNTIME_ERROR."""
    values = clone_values([scaled_down(v, exponent)[0] for v in first])  # a solution may write to its inputs
    try:
        solution_call(ctx, values, axes)
    except Verdict as v:
        if v.status is not S.RUNTIME_ERROR:  # sys.exit stays a verdict
            raise
        cause = v.__cause__ or v
        warnings.append(f"the audited timed calls used the workload's own input contents: on its inputs with their "
                        f"floats scaled down the solution raised {type(cause).__name__}: {str(cause)[:200]}")
        return False
    return True


def _audit_count(ctx: Context, first: list[Any]) -> int:
    """As many audited calls as AUDITED_CALLS, the timed calls and memory allow (at least one):
    each holds two copies of an input set."""
    want = min(AUDITED_CALLS, ctx.config.iterations)
    if ctx.device.is_gpu:
        free, _ = torch.cuda.mem_get_info(ctx.device.torch_device)
        budget = int(free * AUDIT_MEMORY_FRACTION)
    else:
        budget = int(BANK_CPU_BYTES * AUDIT_MEMORY_FRACTION)
    return max(1, min(want, budget // max(1, 2 * _tensor_bytes(first))))


def _plan_audits(ctx: Context, workload: Workload, blobs: dict[str, torch.Tensor], axes: dict[str, int],
                 fresh: FreshArgs, first: list[Any], warnings: list[str]) -> list[AuditSet]:
    """Audit sets at distinct secret positions among the timed calls, substituted into ``fresh``."""
    cfg = ctx.config
    count = _audit_count(ctx, first)
    positions = random.SystemRandom().sample(range(cfg.iterations), count)
    audits = []
    scale = True
    for ordinal, position in enumerate(positions):
        audit = AuditSet.make(ctx, workload, blobs, axes, first, ordinal, scale=scale)
        if audit.scaled and ordinal == 0 and not _solution_takes_scaled(ctx, axes, first, TRIAL_EXPONENT, warnings):
            scale = False
            audit = AuditSet.make(ctx, workload, blobs, axes, first, ordinal, scale=False)
        call_index = cfg.warmup_runs + position
        outputs_at = frozenset(range(len(audit.values), len(audit.values) + len(audit.outputs)))
        if not fresh.substitute(call_index, audit.values + audit.outputs, as_is=outputs_at):
            warnings.append("an audited timed call was skipped: its input set did not match the first's layout")
            continue
        audit.keeper = CallKeeper(call_index, dps_outputs=len(audit.outputs))
        audit.keeper.inspect = lambda args, result: _inspect_audited(ctx, args, result)
        audits.append(audit)
    if audits and not any(a.distinct for a in audits):
        warnings.append("the audited timed calls had the same input contents as the others (no input varies "
                        "with the seed and none is floating point): a cache keyed by input contents could not "
                        "be looked for")
    return audits


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
    fresh = FreshArgs([values + dps_zeros for values in bank], slots=cfg.warmup_runs + cfg.iterations + 1)
    audits = _plan_audits(ctx, workload, blobs, axes, fresh, bank[0], warnings)
    phase(f"  {workload.uuid}: {len(audits)} audited call(s) planned")
    sol, sol_peak = _timed_solution(ctx, workload, fresh, [a.keeper for a in audits if a.keeper], warnings)
    phase(f"  {workload.uuid}: solution timed")
    for audit in audits:
        _check_audit(ctx, workload, axes, blobs, audit, tally, bank[0], warnings)
    _check_content_cache(ctx, workload, blobs, axes, bank, sol, audits, warnings,
                         distinct_sets=min(fresh.input_sets, distinct_contents(bank)))
    phase(f"  {workload.uuid}: audited outputs and content cache checked")
    if host_recheck.applies(sol):
        known = len(sol.warnings)
        host_recheck.recheck(sol, _solution_once(ctx, workload, axes, blobs), dev,
                             contended=_contended(ctx, workload))
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


def _timed_solution(ctx: Context, workload: Workload, fresh: FreshArgs, keepers: list[CallKeeper],
                    warnings: list[str]) -> tuple[Measurement, int | None]:
    check_integrity(ctx)
    if ctx.clocks is not None:  # before the watch begins: the reading may run nvidia-smi or amd-smi
        ctx.clocks.sample(workload.uuid, "before_timing")
    region = ctx.watch.begin() if ctx.watch is not None else None
    try:
        sol, peak = _timed(ctx, ctx.solution_fn, fresh, keepers, region, _contended(ctx, workload))
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


def _timed(ctx: Context, fn: Callable[..., Any], fresh: FreshArgs, keepers: list[CallKeeper],
           region: Any, contended: bool) -> tuple[Measurement, int | None]:
    """Time ``fn``; also the peak device memory it allocated beyond its arguments."""
    dev, cfg = ctx.device, ctx.config
    baseline = None
    if dev.is_gpu:
        torch.cuda.synchronize(dev.torch_device)
        torch.cuda.reset_peak_memory_stats(dev.torch_device)
        baseline = torch.cuda.memory_allocated(dev.torch_device)
    m = time_calls(fn, fresh, warmup=cfg.warmup_runs, iterations=cfg.iterations, device=dev, flusher=ctx.flusher,
                   method=cfg.timing.method, keepers=keepers, region=region, contended=contended,
                   cooldown=cfg.timing.cooldown)
    peak = None
    if dev.is_gpu and baseline is not None:
        peak = max(0, torch.cuda.max_memory_allocated(dev.torch_device) - baseline)
    return m, peak


def _time_reference(ctx: Context, bank: list[list[Any]], perf: Performance, notes: list[str], contended: bool) -> None:
    cfg = ctx.config
    try:
        ref, ref_peak = _timed(ctx, ctx.reference_fn, FreshArgs(bank, slots=cfg.warmup_runs + cfg.iterations + 1),
                               [], None, contended)
        host_recheck.recheck(ref, _reference_once(ctx, bank), ctx.device, contended=contended)
        stats = ref.stats()
        perf.reference_latency_ms = stats.median_ms
        perf.reference_timing, perf.reference_peak_memory_bytes = stats, ref_peak
        perf.speedup_factor = perf.reference_latency_ms / perf.latency_ms if perf.latency_ms > 0 else 0.0
    except Exception as exc:
        notes.append(f"reference could not be timed: {exc}")


# -- re-checking a host-bound verdict without the profiler (host_recheck) ---------------------------

def _solution_once(ctx: Context, workload: Workload, axes: dict[str, int],
                   blobs: dict[str, torch.Tensor]) -> host_recheck.CallOnce:
    def once(k: int) -> tuple[host_recheck.CallSpans, str | None]:
        seed_all(secrets.randbits(63))  # inputs no cache has seen
        inputs = make_inputs(ctx.definition, workload, ctx.torch_device, blobs, ctx.custom_inputs_fn)
        pristine = clone_values(inputs)
        outputs = allocate_outputs(ctx.definition, axes, ctx.torch_device, poison=True) if ctx.dps else []
        result, spans = host_recheck.timed_call(ctx.solution_fn, inputs + outputs, ctx.flusher, ctx.device)
        produced = clone_values(list(outputs) if ctx.dps else normalize_result(ctx, result))  # as it finished
        check = compare_outputs(ctx, workload.tolerance, produced, reference_call(ctx, pristine, axes))
        return spans, None if check.status is None else f"call {k}'s outputs were wrong: {check.message}"
    return once


def _reference_once(ctx: Context, bank: list[list[Any]]) -> host_recheck.CallOnce:
    def once(k: int) -> tuple[host_recheck.CallSpans, str | None]:
        _, spans = host_recheck.timed_call(ctx.reference_fn, clone_values(bank[k % len(bank)]), ctx.flusher, ctx.device)
        return spans, None
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
                 audit: AuditSet, tally: RoundTally, original: list[Any], warnings: list[str]) -> None:
    """``original``: the workload's own inputs (bank set 0), which a scaled audit set was made from."""
    keeper = audit.keeper
    if keeper is None or keeper.kept is None:
        return
    where = f"audited timed call (call {keeper.call_index - ctx.config.warmup_runs} of {ctx.config.iterations})"
    if keeper.problems:
        raise Verdict(S.REWARD_HACK, f"{where}: {'; '.join(keeper.problems)}")
    if audit.guarded is not None and (violations := audit.guarded.violations()):
        raise Verdict(S.REWARD_HACK, f"{where}: out-of-bounds write: {'; '.join(violations)}")
    try:
        sol_out = list(keeper.kept) if ctx.dps else normalize_result(ctx, keeper.kept)
    except Exception as exc:  # noqa: BLE001
        raise Verdict(S.REWARD_HACK, f"{where}: the call returned an unusable result: {exc}") from exc
    try:
        ref_out = reference_call(ctx, audit.pristine, axes)
    except Verdict as v:
        if not audit.scaled:
            raise
        warnings.append(f"{where}: not checked: the reference failed on the workload's inputs scaled down "
                        f"({v.message.splitlines()[0]})")
        return
    check = compare_outputs(ctx, workload.tolerance, sol_out, ref_out)
    if check.status is None:
        return
    # For --dump-failures: the audited inputs (a secret seed: the tensors are the only record).
    evidence = (FailureEvidence.from_check(check, clone_values(audit.values), sol_out, ref_out, seed=None, where=where)
                if ctx.dump_dir else None)
    if not _correct_untimed(ctx, workload, axes, _round_zero_inputs(ctx, workload, blobs)):
        raise Verdict(S.REWARD_HACK, f"{where}: {check.message}; re-run after timing, the solution now fails inputs it "
                                     "passed in the correctness rounds: it stops computing once timed", evidence=evidence)
    if _correct_untimed(ctx, workload, axes, clone_values(audit.values)):
        raise Verdict(S.REWARD_HACK, f"{where}: {check.message}; the same inputs pass when re-run untimed: the "
                                     "solution computes differently when timed", evidence=evidence)
    if audit.scaled:
        _judge_scaled_audit(ctx, workload, axes, sol_out, ref_out, original, where, check.message, warnings, evidence)
        return
    for name, comp in check.comparisons:
        tally.add(name, comp)
    correctness = tally.result() if check.status is S.INCORRECT_NUMERICAL else None
    raise Verdict(check.status, f"{where}: {check.message} (fresh inputs; wrong again when re-run untimed)",
                  correctness, evidence)


def _judge_scaled_audit(ctx: Context, workload: Workload, axes: dict[str, int], sol_out: list[Any],
                        ref_scaled: list[Any], original: list[Any], where: str, mismatch: str,
                        warnings: list[str], evidence: FailureEvidence | None) -> None:
    """A solution wrong on scaled-down inputs, timed and untimed. Returning the answer to the
    workload's own inputs (where the two answers differ) is a stale answer: REWARD_HACK. Otherwise
    the scaled inputs, which the workload never asked about, may break an assumption the solution
    is entitled to (its own inputs passed): a warning, not a verdict."""
    ref_original = reference_call(ctx, clone_values(original), axes)
    answers_differ = compare_outputs(ctx, workload.tolerance, ref_scaled, ref_original).status is not None
    if answers_differ and compare_outputs(ctx, workload.tolerance, sol_out, ref_original).status is None:
        raise Verdict(S.REWARD_HACK, f"{where}: on the workload's inputs with their floats scaled down it returned "
                                     "the answer to the workload's own inputs: it does not compute on the inputs it "
                                     "is given", evidence=evidence)
    warnings.append(f"{where}: wrong on the workload's inputs with their floats scaled down, timed and untimed "
                    f"({mismatch.splitlines()[0]}); not a verdict: the workload's own inputs passed")


def _slower_when_new(seen_ms: list[float], new_ms: list[float], floor_ms: float) -> tuple[float, float] | None:
    """(fastest new, median seen) when every call on new contents was much slower, else None."""
    if not new_ms or len(seen_ms) < 3:
        return None
    typical, fastest_new = statistics.median(seen_ms), min(new_ms)
    if fastest_new > CACHE_RATIO * typical and fastest_new - typical > floor_ms:
        return fastest_new, typical
    return None


def _check_content_cache(ctx: Context, workload: Workload, blobs: dict[str, torch.Tensor], axes: dict[str, int],
                         bank: list[list[Any]], sol: Measurement, audits: list[AuditSet], warnings: list[str],
                         distinct_sets: int) -> None:
    """Where the warm-up and timed calls repeat input contents (``distinct_sets`` fewer than the
    calls), audited calls (contents never seen) that are all much slower than the rest mean the
    solution skips work on contents it has seen before. A second look without the profiler,
    seen and new contents alternating, must agree before it is a verdict: one slow moment of a
    busy host must not make an honest solution a cheat."""
    cfg = ctx.config
    audited = {a.keeper.call_index for a in audits if a.keeper is not None and a.distinct}
    if distinct_sets >= cfg.warmup_runs + cfg.iterations or not audited or not sol.call_indices:
        return
    mine = [t for t, c in zip(sol.times_ms, sol.call_indices) if c in audited]
    rest = [t for t, c in zip(sol.times_ms, sol.call_indices) if c not in audited]
    floor = CACHE_FLOOR_HOST_MS if sol.host_bound or sol.method == "cpu" else CACHE_FLOOR_DEVICE_MS
    found = _slower_when_new(rest, mine, floor)
    if found is None:
        return
    timed_text = (f"the {len(mine)} audited timed call(s), on input contents no other call had, took {found[0]:.4f} ms "
                  f"or more against a median of {found[1]:.4f} ms for the calls that repeat the {distinct_sets} input "
                  "set(s) of the bank")
    seen_ms, new_ms = _seen_and_new_untimed(ctx, workload, blobs, axes, bank, warnings)
    again = _slower_when_new(seen_ms, new_ms, CACHE_FLOOR_HOST_MS)  # unprofiled wall spans: the host's floor
    if again is None:
        warnings.append(f"{timed_text}; re-checked without the profiler ({len(new_ms)} calls on new contents, "
                        f"{len(seen_ms)} on seen ones), which did not repeat it: no verdict")
        return
    raise Verdict(S.REWARD_HACK, f"{timed_text}; re-checked without the profiler, new contents {again[0]:.4f} ms or "
                                 f"more against {again[1]:.4f} ms for seen ones: the solution is fast only on contents "
                                 "it has seen before (a cache keyed by input contents)")


CACHE_RECHECK_PAIRS = 5
# The untimed trial on scaled inputs scales further than any audit or re-check set (set k: 2**-(k+1)),
# so a content cache it fills serves none of them.
TRIAL_EXPONENT = AUDITED_CALLS + CACHE_RECHECK_PAIRS + 1


def _seen_and_new_untimed(ctx: Context, workload: Workload, blobs: dict[str, torch.Tensor], axes: dict[str, int],
                          bank: list[list[Any]], warnings: list[str]) -> tuple[list[float], list[float]]:
    """Unprofiled calls alternating between a bank set (contents the solution has seen, at a new
    address) and a set with contents no call has had (made as the audit sets are): wall ms of each."""
    seen, new = [], []
    try:
        for k in range(CACHE_RECHECK_PAIRS):
            outputs = allocate_outputs(ctx.definition, axes, ctx.torch_device, poison=False) if ctx.dps else []
            _, spans = host_recheck.timed_call(ctx.solution_fn, clone_values(bank[k % len(bank)]) + outputs,
                                               ctx.flusher, ctx.device)
            seen.append(spans.wall_ms)
            fresh = AuditSet.make(ctx, workload, blobs, axes, bank[0], ordinal=AUDITED_CALLS + k)
            _, spans = host_recheck.timed_call(ctx.solution_fn, fresh.values + fresh.outputs, ctx.flusher, ctx.device)
            new.append(spans.wall_ms)
    except Exception as exc:  # noqa: BLE001  (it passed every timed call: a failure here is not a verdict)
        warnings.append(f"the content-cache re-check stopped: the solution raised {type(exc).__name__}: {exc}")
    check_integrity(ctx)
    return seen, new


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
