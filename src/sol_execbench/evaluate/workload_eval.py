"""Evaluating one workload inside the child: correctness rounds, then timing (``measure``)."""

from __future__ import annotations

import time
import traceback
from datetime import datetime, timezone
from typing import Any

import torch

from sol_execbench.schema import (Correctness, DeviceRecord, Evaluation, EvaluationStatus as S, Performance, Trace,
                                  Workload)

from .calls import (Context, Verdict, checked_solution_call, clone_values, compare_outputs, reference_call,
                    round_seed)
from .correctness import RoundTally
from .failure_dump import dump_failure
from .inputs import InputError, blob_roots, load_blobs, make_inputs, seed_all
from .measure import measure_workload
from .phases import phase

__all__ = ["Context", "Verdict", "evaluate_workload", "make_trace", "round_seed"]


def make_trace(ctx: Context, workload: Workload, status: S, log: str = "", correctness: Correctness | None = None,
               performance: Performance | None = None, warnings: list[str] | None = None) -> Trace:
    dev = ctx.device
    evaluation = Evaluation(
        status=status, environment=ctx.environment, timestamp=datetime.now(timezone.utc).isoformat(), log=log,
        correctness=correctness, performance=performance,
        device=DeviceRecord(vendor=dev.vendor, index=dev.index, name=dev.name, arch=dev.arch),
        build=ctx.build, env_hash=ctx.env_hash, warnings=list(ctx.warnings) + list(warnings or []),
        clocks=ctx.clocks.record_for(workload.uuid) if ctx.clocks is not None else None,
    )
    return Trace(definition=ctx.definition.name, workload=workload, solution=ctx.solution_name, evaluation=evaluation)


def evaluate_workload(ctx: Context, workload: Workload) -> Trace:
    """Correctness over ``correctness_rounds`` fresh input sets, then timing. Never raises."""
    warnings: list[str] = []
    try:
        axes = ctx.definition.resolve_axes(workload.axes)
        blobs = load_blobs(ctx.definition, workload, blob_roots(ctx.staging_dir))
        tally, inputs = _correctness_rounds(ctx, workload, blobs, axes)
        phase(f"  {workload.uuid}: {tally.rounds} correctness round(s)")
        performance, notes = measure_workload(ctx, workload, blobs, inputs, axes, tally, warnings)
        return make_trace(ctx, workload, S.PASSED, "\n".join(notes), tally.result(), performance, warnings)
    except Verdict as v:
        return make_trace(ctx, workload, v.status, v.message, v.correctness, warnings=warnings)
    except InputError as exc:
        return make_trace(ctx, workload, S.RUNTIME_ERROR, f"inputs could not be made: {exc}", warnings=warnings)
    except torch.cuda.OutOfMemoryError as exc:
        return make_trace(ctx, workload, S.RUNTIME_ERROR, f"device out of memory: {exc}", warnings=warnings)
    except Exception as exc:  # the harness itself failed on this workload: say so, keep going
        return make_trace(ctx, workload, S.RUNTIME_ERROR, f"evaluation failed: {exc}\n{traceback.format_exc()}",
                          warnings=warnings)


def _correctness_rounds(ctx: Context, workload: Workload, blobs: dict[str, torch.Tensor],
                        axes: dict[str, int]) -> tuple[RoundTally, list[Any]]:
    cfg = ctx.config
    tally = RoundTally()
    inputs: list[Any] = []
    for round_index in range(cfg.correctness_rounds):
        seed = round_seed(cfg.seed, workload.uuid, round_index)
        seed_all(seed)
        inputs = make_inputs(ctx.definition, workload, ctx.torch_device, blobs, ctx.custom_inputs_fn)
        kept = clone_values(inputs) if ctx.dump_dir else None
        began = time.perf_counter()
        sol_out, pristine = checked_solution_call(ctx, inputs, axes)
        if ctx.jit_pending:  # the first call carries Triton/DSL JIT compilation
            ctx.build.jit_time_s = round(time.perf_counter() - began, 6)
            ctx.jit_pending = False
        ref_out = reference_call(ctx, pristine, axes)  # only now: its answer never coexists with the solution's call
        del pristine
        tally.rounds = round_index + 1
        check = compare_outputs(ctx, workload.tolerance, sol_out, ref_out)
        for name, comp in check.comparisons:
            tally.add(name, comp)
        if check.status is not None:
            worst = check.comparisons[-1][1] if check.status is S.INCORRECT_NUMERICAL else None
            _dump(ctx, workload, seed, round_index, kept, sol_out, ref_out, check.message, check.name,
                  worst.worst_index if worst else None)
            correctness = tally.result() if check.status is S.INCORRECT_NUMERICAL else None
            raise Verdict(check.status, f"round {round_index}: {check.message}", correctness)
        del ref_out, sol_out
    return tally, inputs


def _dump(ctx: Context, workload: Workload, seed: int, round_index: int, inputs: list[Any] | None,
          sol_out: list[Any], ref_out: list[Any], reason: str | None, worst_output: str | None = None,
          worst_index: list[int] | None = None) -> None:
    if ctx.dump_dir is None or inputs is None:
        return
    try:
        dump_failure(ctx.dump_dir, ctx.definition, ctx.solution_name, workload, seed, round_index, inputs,
                     sol_out, ref_out, reason, worst_output, worst_index)
    except Exception as exc:  # a dump must never change the verdict
        ctx.warnings.append(f"--dump-failures could not write: {exc}")
