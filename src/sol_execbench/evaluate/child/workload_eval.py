"""Evaluating one workload inside the child: correctness rounds, then timing (``measure``)."""

from __future__ import annotations

import time
import traceback
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

import torch

from sol_execbench.schema import (Correctness, DeviceRecord, Evaluation, EvaluationStatus as S, Performance, Trace,
                                  Workload)

from .calls import (Context, FailureEvidence, Verdict, checked_solution_call, clone_values, compare_outputs,
                    reference_call, reference_non_finite, round_seed)
from .correctness import RoundTally
from .cpu_budget import budget_in_effect_s, fitted_counts
from .failure_dump import dump_failure
from .inputs import InputError, blob_roots, load_blobs, make_inputs, seed_all
from .measure import measure_workload
from ..phases import phase

__all__ = ["Context", "FailureEvidence", "Verdict", "evaluate_workload", "make_trace", "round_seed"]


def make_trace(ctx: Context, workload: Workload, status: S, log: str = "", correctness: Correctness | None = None,
               performance: Performance | None = None, warnings: list[str] | None = None) -> Trace:
    dev = ctx.device
    evaluation = Evaluation(
        status=status, timestamp=datetime.now(timezone.utc).isoformat(), log=log,
        environment=ctx.environment.model_copy(
            update={"clocks": ctx.clocks.record_for(workload.uuid) if ctx.clocks is not None else None}),
        correctness=correctness, performance=performance,
        device=DeviceRecord(vendor=dev.vendor, index=dev.index, name=dev.name, arch=dev.arch),
        build=ctx.build, warnings=list(ctx.warnings) + list(warnings or []),
    )
    return Trace(definition=ctx.definition.name, workload=workload, solution=ctx.solution_name, evaluation=evaluation)


def evaluate_workload(ctx: Context, workload: Workload) -> Trace:
    """Correctness over ``correctness_rounds`` fresh input sets, then timing. Never raises."""
    warnings: list[str] = []
    try:
        axes = ctx.definition.resolve_axes(workload.axes)
        blobs = load_blobs(ctx.definition, workload, blob_roots(ctx.staging_dir))
        tally, inputs, spans_s = _correctness_rounds(ctx, workload, blobs, axes)
        phase(f"  {workload.uuid}: {tally.rounds} correctness round(s)")
        counts = fitted_counts(ctx.config, ctx.device.is_gpu, spans_s)
        if (cut := counts.warning()) is not None:
            warnings.append(cut)
            # This workload's input bank, audits and timing plan all read ctx.config: a copy of the
            # context carries the cut counts (what it makes on first use is made again: on the
            # CPU, the flusher, which holds nothing there).
            ctx = replace(ctx, config=counts.config)
        performance, notes = measure_workload(ctx, workload, blobs, inputs, axes, tally, warnings)
        return make_trace(ctx, workload, S.PASSED, "\n".join(notes), tally.result(), performance, warnings)
    except Verdict as v:
        if v.evidence is not None:
            _dump(ctx, workload, v, warnings)
        return make_trace(ctx, workload, v.status, v.message, v.correctness, warnings=warnings)
    except InputError as exc:
        return make_trace(ctx, workload, S.RUNTIME_ERROR, f"inputs could not be made: {exc}", warnings=warnings)
    except torch.cuda.OutOfMemoryError as exc:
        return make_trace(ctx, workload, S.RUNTIME_ERROR, f"device out of memory: {exc}", warnings=warnings)
    except Exception as exc:  # the harness itself failed on this workload: say so, keep going
        return make_trace(ctx, workload, S.RUNTIME_ERROR, f"evaluation failed: {exc}\n{traceback.format_exc()}",
                          warnings=warnings)


def _correctness_rounds(ctx: Context, workload: Workload, blobs: dict[str, torch.Tensor],
                        axes: dict[str, int]) -> tuple[RoundTally, list[Any], list[float]]:
    """The rounds, the last round's inputs and each round's wall time (s); on the CPU they stop
    once they have taken ``cpu_budget_s`` (``cpu_budget``)."""
    tally = RoundTally()
    inputs: list[Any] = []
    spans_s: list[float] = []
    budget_s = budget_in_effect_s(ctx.config, ctx.device.is_gpu)
    for round_index in range(ctx.config.correctness_rounds):
        began = time.perf_counter()
        inputs = _correctness_round(ctx, workload, blobs, axes, tally, round_index)
        spans_s.append(time.perf_counter() - began)
        if round_index == 0:
            phase(f"  {workload.uuid}: first correctness round")
        if budget_s is not None and sum(spans_s) >= budget_s:
            break
    return tally, inputs, spans_s


def _correctness_round(ctx: Context, workload: Workload, blobs: dict[str, torch.Tensor], axes: dict[str, int],
                       tally: RoundTally, round_index: int) -> list[Any]:
    """One round on fresh inputs; returns them. A failure is a Verdict, with evidence under --dump-failures."""
    seed = round_seed(ctx.config.seed, workload.uuid, round_index)
    seed_all(seed)
    inputs = make_inputs(ctx.definition, workload, ctx.torch_device, blobs, ctx.custom_inputs_fn)
    kept = clone_values(inputs) if ctx.dump_dir else None  # as made: the solution may still write to them
    where = f"correctness round {round_index}"
    began = time.perf_counter()
    try:
        sol_out, pristine = checked_solution_call(ctx, inputs, axes)
    except Verdict as v:
        if kept is not None and v.evidence is None:
            # The solution produced nothing usable: the inputs and what it should have returned.
            v.evidence = FailureEvidence(kept, None, _reference_for_evidence(ctx, kept, axes), seed, where,
                                         round_index=round_index)
        raise
    if ctx.jit_pending:  # the first call carries Triton/DSL JIT compilation
        ctx.build.jit_time_s = round(time.perf_counter() - began, 6)
        ctx.jit_pending = False
    try:
        ref_out = reference_call(ctx, pristine, axes)  # only now: its answer never coexists with the solution's call
        check = compare_outputs(ctx, workload.tolerance, sol_out, ref_out)
        # A reference that is not finite is the problem's fault, whatever the solution returned. A
        # comparison that matched every output saw every value of both sides finite (a value that is
        # not fails it); otherwise the reference's outputs are searched themselves.
        broken = [] if check.all_finite else reference_non_finite(ctx.definition, ref_out,
                                                                  workload.tolerance.allow_negative_inf)
        if broken:
            raise Verdict(S.INVALID_REFERENCE, "the reference's output is not finite: " + "; ".join(broken))
    except Verdict as v:
        if kept is not None and v.evidence is None:
            v.evidence = FailureEvidence(kept, sol_out, None, seed, where, round_index=round_index)
        raise
    del pristine
    tally.rounds = round_index + 1
    for name, comp in check.comparisons:
        tally.add(name, comp)
    if check.status is not None:
        evidence = None
        if kept is not None:
            evidence = FailureEvidence.from_check(check, kept, sol_out, ref_out, seed=seed, where=where,
                                                  round_index=round_index)
        correctness = tally.result() if check.status is S.INCORRECT_NUMERICAL else None
        raise Verdict(check.status, f"round {round_index}: {check.message}", correctness, evidence)
    return inputs


def _reference_for_evidence(ctx: Context, inputs: list[Any], axes: dict[str, int]) -> list[Any] | None:
    """The reference's outputs on a copy of ``inputs``, for a dump only: None if it cannot give them
    (a device left broken by the solution, a failing reference); the verdict stays the solution's."""
    try:
        return reference_call(ctx, clone_values(inputs), axes)
    except Exception:
        return None


def _dump(ctx: Context, workload: Workload, verdict: Verdict, warnings: list[str]) -> None:
    if ctx.dump_dir is None or verdict.evidence is None:
        return
    try:
        dump_failure(ctx.dump_dir, ctx.definition, ctx.solution_name, workload, verdict.status, verdict.message,
                     verdict.evidence)
    except Exception as exc:  # a dump must never change the verdict
        # This workload's own warnings, not the run's (ctx.warnings): those go on every later trace.
        warnings.append(f"--dump-failures {ctx.dump_dir}: the failure of workload {workload.uuid} could not be "
                        f"written ({type(exc).__name__}: {exc}); the verdict is unaffected")
