"""Audited timed calls and the content-cache check (see docs/security.md).

- A few timed calls (AUDITED_CALLS), at positions drawn from the OS's random source in both the
  device pass and the host pass, get input sets of their own with contents no other call has:
  made from a secret seed, or, where no input varies with the seed (blobs and scalars only), the
  workload's inputs with their floats scaled down by a power of two (a different one per set).
  Their outputs are kept and checked against the reference after timing, destination outputs
  inside guard bands. A mismatch is REWARD_HACK when the tensors the call returned hold the right
  answer later (written after the call returned), when the solution behaves differently when timed
  (it now fails inputs it passed in the correctness rounds, or passes the audited inputs when re-run
  untimed), or when on scaled inputs it returned the answer to the workload's own; otherwise it is
  INCORRECT_NUMERICAL (wrong on some inputs), or, on scaled inputs (which the workload never asked
  about), a warning.
- Content caches: where the timed calls repeat input contents (a bank smaller than the calls),
  audited calls much slower than the rest of their pass mean the solution is fast only on
  contents it has seen.
"""

from __future__ import annotations

import random
import secrets
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable

import torch

from sol_execbench.schema import EvaluationStatus as S, Workload

from . import guards
from .calls import (Context, FailureEvidence, Verdict, check_integrity, clone_values, compare_outputs,
                    normalize_result, output_problems, reference_call, round_seed, solution_call)
from .correctness import RoundTally
from .input_bank import BANK_CPU_BYTES, same_contents, scaled_down, tensor_bytes
from .inputs import allocate_outputs, make_inputs, seed_all
from .timing import CallKeeper, FreshArgs, SideMeasurement, rounds_per_pass
from .timing.calls import synchronize
from .timing.unprofiled import host_span_ms

AUDITED_CALLS = 3
AUDIT_MEMORY_FRACTION = 0.1  # of free device memory (GPU), or of BANK_CPU_BYTES on the CPU, for the audit sets
# A content cache is called when every audited call of a pass is this much slower than the median
# of the others, and by more than the floor: device spans are steady to a few microseconds, host
# spans on a busy virtual machine varied by 100 us and more.
CACHE_RATIO = 2.0
CACHE_FLOOR_MS = {"device": 0.01, "host": 0.1}
CACHE_RECHECK_PAIRS = 5
# The untimed trial on scaled inputs scales further than any audit or re-check set (set k: 2**-(k+1)),
# so a content cache it fills serves none of them.
TRIAL_EXPONENT = AUDITED_CALLS + CACHE_RECHECK_PAIRS + 1
# A wrong audited result is looked at again after these waits (doubling, 0.6 s in all): a backlog
# behind a solution's thread drains slowly on a loaded machine. Only a wrong solution pays them.
LATE_WRITE_WAITS_S = (0.0, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32)
_NO_AUDIT_AHEAD = "a pass added after the host pass ran without an audited call"  # a warning's start


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
    where: str = "audited timed call"  # which call it was, for the verdict

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


def _audits_memory_allows(ctx: Context, first: list[Any]) -> int:
    """Audit sets that fit in AUDIT_MEMORY_FRACTION of the memory: each holds two copies of an input set."""
    if ctx.device.is_gpu:
        free, _ = torch.cuda.mem_get_info(ctx.device.torch_device)
        budget = int(free * AUDIT_MEMORY_FRACTION)
    else:
        budget = int(BANK_CPU_BYTES * AUDIT_MEMORY_FRACTION)
    return budget // max(1, 2 * tensor_bytes(first))


def _audit_count(ctx: Context, first: list[Any]) -> int:
    """As many audited calls as AUDITED_CALLS, the timed calls and memory allow (at least one)."""
    return max(1, min(AUDITED_CALLS, ctx.config.iterations, _audits_memory_allows(ctx, first)))


def _plant(ctx: Context, fresh: FreshArgs, audit: AuditSet, call_index: int, where: str,
           warnings: list[str]) -> bool:
    """Substitute the audit set into ``fresh`` at ``call_index`` and give it a keeper; False (a
    warning) where its layout does not fit."""
    outputs_at = frozenset(range(len(audit.values), len(audit.values) + len(audit.outputs)))
    if not fresh.substitute(call_index, audit.values + audit.outputs, as_is=outputs_at):
        warnings.append("an audited timed call was skipped: its input set did not match the first's layout")
        return False
    audit.keeper = CallKeeper(call_index, dps_outputs=len(audit.outputs))
    audit.keeper.inspect = lambda args, result: _inspect_audited(ctx, args, result)
    audit.where = where
    return True


def plan_audits(ctx: Context, workload: Workload, blobs: dict[str, torch.Tensor], axes: dict[str, int],
                 fresh: FreshArgs, first: list[Any], warnings: list[str]) -> list[AuditSet]:
    """Audit sets at distinct secret positions among the timed calls, substituted into ``fresh``."""
    cfg = ctx.config
    count = _audit_count(ctx, first)
    positions = _audit_positions(rounds_per_pass(cfg.iterations, ctx.device.is_gpu), count,
                                 passes=2 if ctx.device.is_gpu else 1)
    audits = []
    scale = True
    for ordinal, position in enumerate(positions):
        audit = AuditSet.make(ctx, workload, blobs, axes, first, ordinal, scale=scale)
        if audit.scaled and ordinal == 0 and not _solution_takes_scaled(ctx, axes, first, TRIAL_EXPONENT, warnings):
            scale = False
            audit = AuditSet.make(ctx, workload, blobs, axes, first, ordinal, scale=False)
        call_index = cfg.warmup_runs + position  # the solution's calls: warm-up, device pass, host pass
        if _plant(ctx, fresh, audit, call_index, _audited_call_name(ctx, position), warnings):
            audits.append(audit)
    if audits and not any(a.distinct for a in audits):
        warnings.append("the audited timed calls had the same input contents as the others (no input varies "
                        "with the seed and none is floating point): a cache keyed by input contents could not "
                        "be looked for")
    return audits


def audit_ahead(ctx: Context, workload: Workload, blobs: dict[str, torch.Tensor], axes: dict[str, int],
                fresh: FreshArgs, first: list[Any], audits: list[AuditSet],
                warnings: list[str]) -> Callable[[int], CallKeeper | None]:
    """The solution's ``SideCalls.audit_ahead``: one audited call at a secret position among the
    ``count`` calls of each pass added after the planned ones, appended to ``audits``, while the
    memory for audit sets lasts (a warning once where it does not). Its inputs are made with a
    secret seed, not scaled: where no input varies with the seed they repeat the bank's, which still
    shows a solution that stopped computing."""
    allowed = _audits_memory_allows(ctx, first)
    pick = random.SystemRandom()

    def plant(count: int) -> CallKeeper | None:
        if count <= 0:
            return None
        if len(audits) >= allowed:
            if not any(w.startswith(_NO_AUDIT_AHEAD) for w in warnings):
                warnings.append(f"{_NO_AUDIT_AHEAD}: the memory for audit sets was spent")
            return None
        offset = pick.randrange(count)
        try:
            audit = AuditSet.make(ctx, workload, blobs, axes, first, ordinal=0, scale=False)
        except Exception as exc:  # noqa: BLE001  (the problem's input generation, out of memory: not the solution's failure)
            warnings.append(f"{_NO_AUDIT_AHEAD}: its inputs could not be made ({type(exc).__name__}: {exc})")
            return None
        where = f"audited timed call (call {offset + 1} of {count} of a pass added after the host pass)"
        if not _plant(ctx, fresh, audit, fresh.calls_made + offset, where, warnings):
            return None
        audits.append(audit)
        return audit.keeper

    return plant


def _audited_call_name(ctx: Context, position: int) -> str:
    """'audited timed call (call 3 of 20 of the host pass)', from a position as _audit_positions draws it."""
    rounds = rounds_per_pass(ctx.config.iterations, ctx.device.is_gpu)
    which = "device" if ctx.device.is_gpu and position < rounds else "host"
    return f"audited timed call (call {position % rounds + 1} of {rounds} of the {which} pass)"


def _audit_positions(rounds: int, count: int, passes: int) -> list[int]:
    """Secret positions among the solution's ``passes`` x ``rounds`` timed calls (on a GPU the
    device pass, then the host pass; on the CPU the host pass alone): on a GPU as many in each pass
    as ``count`` allows, so a solution that behaves differently under the profiler or without it
    is caught in either."""
    pick = random.SystemRandom()
    if passes == 1:
        return pick.sample(range(rounds), min(count, rounds))
    in_device = (count + 1) // 2 if count > 1 else pick.randrange(2)
    in_device = min(in_device, rounds)
    in_host = min(count - in_device, rounds)
    return pick.sample(range(rounds), in_device) + [rounds + p for p in pick.sample(range(rounds), in_host)]


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


def check_audit(ctx: Context, workload: Workload, axes: dict[str, int], blobs: dict[str, torch.Tensor],
                 audit: AuditSet, tally: RoundTally, original: list[Any], warnings: list[str]) -> None:
    """``original``: the workload's own inputs (bank set 0), which a scaled audit set was made from."""
    keeper = audit.keeper
    if keeper is None or keeper.kept is None:
        return
    where = audit.where
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
    if _written_after_return(ctx, workload, keeper.returned, ref_out):
        raise Verdict(S.REWARD_HACK, f"{where}: {check.message} when it returned; the tensors it returned hold the "
                                     "right answer now: they were written after the call returned (work finishing "
                                     "after the timer stops)", evidence=evidence)
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


def _written_after_return(ctx: Context, workload: Workload, returned: Any, ref_out: list[Any]) -> bool:
    """Whether the audited call's own result objects, wrong when copied at return, are right now.
    Work queued behind a solution's thread or stream may still be draining: several looks."""
    if returned is None:
        return False
    for wait_s in LATE_WRITE_WAITS_S:
        time.sleep(wait_s)
        synchronize(ctx.device)
        try:
            late = normalize_result(ctx, returned)
        except Exception:  # noqa: BLE001 - an unusable result was judged when it was kept
            return False
        if compare_outputs(ctx, workload.tolerance, late, ref_out).status is None:
            return True
    return False


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


def check_content_cache(ctx: Context, workload: Workload, blobs: dict[str, torch.Tensor], axes: dict[str, int],
                        bank: list[list[Any]], sol: SideMeasurement, audits: list[AuditSet], warnings: list[str],
                        distinct_sets: int) -> None:
    """Where the warm-up and timed calls repeat input contents (``distinct_sets`` fewer than the
    calls), audited calls (contents never seen) that are all much slower than the rest of their
    pass mean the solution skips work on contents it has seen before. A second look, seen and new
    contents alternating, must agree before it is a verdict: one slow moment of a busy host must not
    make an honest solution a cheat."""
    cfg = ctx.config
    audited = {a.keeper.call_index for a in audits if a.keeper is not None and a.distinct}
    if distinct_sets >= cfg.warmup_runs + len(sol.call_times()) or not audited:
        return
    found = None
    for instrument in ("device", "host"):
        times = [(c, t) for c, t, kind in sol.call_times() if kind == instrument]
        mine = [t for c, t in times if c in audited]
        rest = [t for c, t in times if c not in audited]
        found = found or _slower_when_new(rest, mine, CACHE_FLOOR_MS[instrument])
        if found is not None:
            timed_text = (f"the {len(mine)} audited call(s) of the {instrument} pass, on input contents no other call "
                          f"had, took {found[0]:.4f} ms or more against a median of {found[1]:.4f} ms for the calls "
                          f"that repeat the {distinct_sets} input set(s) of the bank")
            break
    if found is None:
        return
    seen_ms, new_ms = _seen_and_new_untimed(ctx, workload, blobs, axes, bank, warnings)
    again = _slower_when_new(seen_ms, new_ms, CACHE_FLOOR_MS["host"])
    if again is None:
        warnings.append(f"{timed_text}; re-checked ({len(new_ms)} calls on new contents, {len(seen_ms)} on seen "
                        f"ones), which did not repeat it: no verdict")
        return
    raise Verdict(S.REWARD_HACK, f"{timed_text}; re-checked, new contents {again[0]:.4f} ms or more against "
                                 f"{again[1]:.4f} ms for seen ones: the solution is fast only on contents it has seen "
                                 "before (a cache keyed by input contents)")


def _seen_and_new_untimed(ctx: Context, workload: Workload, blobs: dict[str, torch.Tensor], axes: dict[str, int],
                          bank: list[list[Any]], warnings: list[str]) -> tuple[list[float], list[float]]:
    """Unprofiled calls in pairs, a bank set (contents the solution has seen, at a new address) and
    a set with contents no call has had (made as the audit sets are): wall ms of each. Both sets of
    a pair are made before either call, and which goes first alternates, so the two kinds of call
    differ in their contents and nothing else: a cache keyed by contents is slower on new sets in
    either place, while what follows the making of a set, or the other call, falls on both kinds."""
    seen, new = [], []
    try:
        for k in range(CACHE_RECHECK_PAIRS):
            fresh = AuditSet.make(ctx, workload, blobs, axes, bank[0], ordinal=AUDITED_CALLS + k).values
            pair = {"seen": clone_values(bank[k % len(bank)]) + _plain_outputs(ctx, axes),
                    "new": fresh + _plain_outputs(ctx, axes)}
            for kind in ("seen", "new") if k % 2 == 0 else ("new", "seen"):
                (seen if kind == "seen" else new).append(_wall_ms(ctx, pair[kind]))
    except Exception as exc:  # noqa: BLE001  (it passed every timed call: a failure here is not a verdict)
        warnings.append(f"the content-cache re-check stopped: the solution raised {type(exc).__name__}: {exc}")
    check_integrity(ctx)
    return seen, new


def _plain_outputs(ctx: Context, axes: dict[str, int]) -> list[Any]:
    """Destination outputs of one call (none unless destination-passing style)."""
    return allocate_outputs(ctx.definition, axes, ctx.torch_device, poison=False) if ctx.dps else []


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


def _wall_ms(ctx: Context, args: list[Any]) -> float:
    """One untimed solution call on a cold cache: its wall span until the device was idle."""
    ctx.flusher.flush()
    return host_span_ms(ctx.device, lambda: ctx.solution_fn(*args))[1]
