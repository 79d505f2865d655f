"""Evaluating one workload inside the child: correctness rounds, then timing."""

from __future__ import annotations

import hashlib
import os
import time
import traceback
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import torch

from sol_execbench.platform import DeviceInfo
from sol_execbench.schema import (
    BenchmarkConfig, BuildRecord, Correctness, Definition, DeviceRecord, Environment, Evaluation,
    EvaluationStatus as S, Performance, Trace, Workload, torch_dtype,
)

from . import guards
from .correctness import RoundTally, compare
from .failure_dump import dump_failure
from .inputs import InputError, allocate_outputs, load_blobs, make_inputs, blob_roots
from .timing import FreshArgs, L2Flusher, Measurement, time_calls

CPU_TIMING_ENV = "SOL_EXECBENCH_ALLOW_CPU_TIMING"


@dataclass
class Context:
    """Everything one child run shares across workloads."""

    definition: Definition
    solution_name: str
    solution_fn: Callable[..., Any]
    dps: bool
    reference_fn: Callable[..., Any]
    custom_inputs_fn: Callable[..., Any] | None
    config: BenchmarkConfig
    device: DeviceInfo
    staging_dir: Path
    environment: Environment
    build: BuildRecord
    integrity: guards.IntegritySnapshot
    dump_dir: Path | None = None
    env_hash: str | None = None
    flusher: L2Flusher | None = None
    jit_pending: bool = True
    warnings: list[str] = field(default_factory=list)


class Verdict(Exception):
    """Ends a workload early with a status and message."""

    def __init__(self, status: S, message: str, correctness: Correctness | None = None):
        super().__init__(message)
        self.status, self.message, self.correctness = status, message, correctness


def round_seed(base: int, uuid: str, round_index: int) -> int:
    digest = hashlib.sha256(f"{base}:{uuid}:{round_index}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & 0x7FFF_FFFF_FFFF_FFFF


def make_trace(ctx: Context, workload: Workload, status: S, log: str = "", correctness: Correctness | None = None,
               performance: Performance | None = None, warnings: list[str] | None = None) -> Trace:
    dev = ctx.device
    evaluation = Evaluation(
        status=status, environment=ctx.environment, timestamp=datetime.now(timezone.utc).isoformat(), log=log,
        correctness=correctness, performance=performance,
        device=DeviceRecord(vendor=dev.vendor, index=dev.index, name=dev.name, arch=dev.arch),
        build=ctx.build, env_hash=ctx.env_hash, warnings=list(ctx.warnings) + list(warnings or []),
    )
    return Trace(definition=ctx.definition.name, workload=workload, solution=ctx.solution_name, evaluation=evaluation)


def _sync(device: DeviceInfo) -> None:
    if device.is_gpu:
        torch.cuda.synchronize(device.torch_device)


def _normalize(result: Any, names: list[str], dtypes: dict[str, torch.dtype], device: torch.device) -> list[Any]:
    """Return-style results as a list in output order (tensor, tuple/list, dict or scalar)."""
    if isinstance(result, dict):
        missing = [n for n in names if n not in result]
        if missing:
            raise RuntimeError(f"returned dict lacks outputs {missing}")
        values = [result[n] for n in names]
    elif isinstance(result, (tuple, list)):
        if len(result) != len(names):
            raise RuntimeError(f"returned {len(result)} values, the definition has {len(names)} outputs {names}")
        values = list(result)
    else:
        if len(names) != 1:
            raise RuntimeError(f"returned one value, the definition has {len(names)} outputs {names}")
        values = [result]
    out = []
    for name, value in zip(names, values):
        if isinstance(value, (bool, int, float)):
            value = torch.tensor(value, dtype=dtypes[name], device=device)
        out.append(value)
    return out


def _call(ctx: Context, fn: Callable[..., Any], args: list[Any], dps: bool, axes: dict[str, int]) -> list[Any]:
    d = ctx.definition
    names = list(d.outputs)
    dtypes = {n: torch_dtype(s.dtype) for n, s in d.outputs.items()}
    dev = torch.device(ctx.device.torch_device)
    if dps:
        outs = allocate_outputs(d, axes, dev, poison=True)
        fn(*args, *outs)
        _sync(ctx.device)
        return outs
    result = fn(*args)
    _sync(ctx.device)
    return _normalize(result, names, dtypes, dev)


def _clone(values: list[Any]) -> list[Any]:
    return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]


def evaluate_workload(ctx: Context, workload: Workload) -> Trace:
    """Correctness over ``correctness_rounds`` fresh input sets, then timing. Never raises."""
    try:
        axes = ctx.definition.resolve_axes(workload.axes)
        blobs = load_blobs(ctx.definition, workload, blob_roots(ctx.staging_dir))
        tally, inputs = _correctness_rounds(ctx, workload, blobs, axes)
        performance, notes = _measure(ctx, inputs, axes)
        return make_trace(ctx, workload, S.PASSED, "\n".join(notes), tally.result(), performance)
    except Verdict as v:
        return make_trace(ctx, workload, v.status, v.message, v.correctness)
    except InputError as exc:
        return make_trace(ctx, workload, S.RUNTIME_ERROR, f"inputs could not be made: {exc}")
    except torch.cuda.OutOfMemoryError as exc:
        return make_trace(ctx, workload, S.RUNTIME_ERROR, f"device out of memory: {exc}")
    except Exception as exc:  # the harness itself failed on this workload: say so, keep going
        return make_trace(ctx, workload, S.RUNTIME_ERROR, f"evaluation failed: {exc}\n{traceback.format_exc()}")


def _check_integrity(ctx: Context) -> None:
    tampered = ctx.integrity.tampered()
    if tampered:
        raise Verdict(S.REWARD_HACK, f"harness functions were replaced by the solution: {', '.join(tampered)}")


def _correctness_rounds(ctx: Context, workload: Workload, blobs: dict[str, torch.Tensor],
                        axes: dict[str, int]) -> tuple[RoundTally, list[Any]]:
    d, cfg = ctx.definition, ctx.config
    tally = RoundTally()
    dev = torch.device(ctx.device.torch_device)
    inputs: list[Any] = []
    for round_index in range(cfg.correctness_rounds):
        seed = round_seed(cfg.seed, workload.uuid, round_index)
        torch.manual_seed(seed)
        inputs = make_inputs(d, workload, dev, blobs, ctx.custom_inputs_fn)
        kept = _clone(inputs) if ctx.dump_dir else None
        try:
            ref_out = _call(ctx, ctx.reference_fn, _clone(inputs), False, axes)
        except Exception as exc:
            raise Verdict(S.INVALID_REFERENCE, f"reference run() failed: {exc}\n{traceback.format_exc()}") from exc
        threads_before = guards.live_threads()
        try:
            began = time.perf_counter()
            sol_out = _call(ctx, ctx.solution_fn, inputs, ctx.dps, axes)
            if ctx.jit_pending:  # the first call carries Triton/DSL JIT compilation
                ctx.build.jit_time_s = round(time.perf_counter() - began, 6)
                ctx.jit_pending = False
        except Exception as exc:
            raise Verdict(S.RUNTIME_ERROR, f"solution raised: {exc}\n{traceback.format_exc()}") from exc
        _check_integrity(ctx)
        foreign = guards.foreign_output_types(sol_out)
        if foreign:
            raise Verdict(S.REWARD_HACK, f"outputs must be plain torch.Tensor, got {foreign}")
        if round_index == 0:
            ctx_threads = guards.new_threads(threads_before)
            if ctx_threads:
                ctx.warnings.append(f"solution started threads during its first call: {ctx_threads}")
        tally.rounds = round_index + 1
        for name, ref, sol in zip(d.outputs, ref_out, sol_out):
            if tuple(sol.shape) != tuple(ref.shape):
                _dump(ctx, workload, seed, round_index, kept, sol_out, ref_out, f"shape of '{name}'")
                raise Verdict(S.INCORRECT_SHAPE, f"output '{name}' has shape {tuple(sol.shape)}, expected {tuple(ref.shape)}")
            if sol.dtype != ref.dtype:
                _dump(ctx, workload, seed, round_index, kept, sol_out, ref_out, f"dtype of '{name}'")
                raise Verdict(S.INCORRECT_DTYPE, f"output '{name}' has dtype {sol.dtype}, expected {ref.dtype}")
            comp = compare(sol.to(ref.device), ref, workload.tolerance)
            tally.add(name, comp)
            if comp.failed:
                _dump(ctx, workload, seed, round_index, kept, sol_out, ref_out, comp.reason, name, comp.worst_index)
                raise Verdict(S.INCORRECT_NUMERICAL, f"round {round_index}: output '{name}': {comp.reason}", tally.result())
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


def _measure(ctx: Context, inputs: list[Any], axes: dict[str, int]) -> tuple[Performance, list[str]]:
    cfg, dev = ctx.config, ctx.device
    notes: list[str] = []
    if not dev.is_gpu and os.environ.get(CPU_TIMING_ENV) != "1":
        raise Verdict(S.RUNTIME_ERROR, f"correct on {ctx.config.correctness_rounds} round(s), but no GPU is visible: "
                      f"timing on the CPU needs {CPU_TIMING_ENV}=1 (a test/debug setting, not a GPU measurement)")
    if not dev.is_gpu:
        notes.append("timed on the CPU (SOL_EXECBENCH_ALLOW_CPU_TIMING=1): host clock, not a GPU measurement")
    if ctx.flusher is None:
        ctx.flusher = L2Flusher(dev)
    threads_before = guards.live_threads()
    _check_integrity(ctx)

    dev_t = torch.device(dev.torch_device)
    dps_outputs = allocate_outputs(ctx.definition, axes, dev_t, poison=False) if ctx.dps else []
    try:
        sol, sol_peak = _timed(ctx, ctx.solution_fn, inputs + dps_outputs)
    except Exception as exc:
        raise Verdict(S.RUNTIME_ERROR, f"solution failed while being timed: {exc}\n{traceback.format_exc()}") from exc
    _check_integrity(ctx)
    leftover = guards.new_threads(threads_before)
    if leftover:
        raise Verdict(S.REWARD_HACK, f"solution left threads running across the timed calls: {leftover}")
    perf = Performance(latency_ms=sol.stats().median_ms, solution_timing=sol.stats(), peak_memory_bytes=sol_peak)
    if cfg.benchmark_reference:
        try:
            ref, ref_peak = _timed(ctx, ctx.reference_fn, _clone(inputs))
            perf.reference_latency_ms = ref.stats().median_ms
            perf.reference_timing, perf.reference_peak_memory_bytes = ref.stats(), ref_peak
            perf.speedup_factor = perf.reference_latency_ms / perf.latency_ms if perf.latency_ms > 0 else 0.0
        except Exception as exc:
            notes.append(f"reference could not be timed: {exc}")
    return perf, notes


def _timed(ctx: Context, fn: Callable[..., Any], values: list[Any]) -> tuple[Measurement, int | None]:
    """Time ``fn``; also the peak device memory it allocated beyond its arguments."""
    dev, cfg = ctx.device, ctx.config
    fresh = FreshArgs(values, cfg.warmup_runs + cfg.iterations)
    baseline = None
    if dev.is_gpu:
        torch.cuda.synchronize(dev.torch_device)
        torch.cuda.reset_peak_memory_stats(dev.torch_device)
        baseline = torch.cuda.memory_allocated(dev.torch_device)
    m = time_calls(fn, fresh, warmup=cfg.warmup_runs, iterations=cfg.iterations, device=dev, flusher=ctx.flusher)
    peak = None
    if dev.is_gpu and baseline is not None:
        peak = max(0, torch.cuda.max_memory_allocated(dev.torch_device) - baseline)
    return m, peak
