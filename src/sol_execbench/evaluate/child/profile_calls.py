"""The child's profiling task (``--profile``, ``--static-evidence``): the solution's calls, bounded,
for a profiler to watch, instead of an evaluation. Never part of a trace's numbers.

Per workload: inputs as the first correctness round makes them, one untimed call (JIT compilation,
lazy initialisation), then ``calls`` calls on the same arguments, each after an L2 flush. How a
call is marked depends on who watches:

- ``torch``: each call in a ``sol_execbench::call#<i>`` range of a profiler recording made here;
  its records are grouped per call by the timing code's ``activity`` parser and sent as launches.
- ``ncu`` / ``rocprofv3``: the profiler runs around this process. Each call sits between two
  marker kernels (``torch.cuda._sleep(0)``, named ``spin_kernel``) inside an NVTX range ncu is told
  to profile; the parent pairs the markers in its kernel list to find each call's kernels (the
  flush and the reference run outside them).

The workload's message says how many calls ran; the trace it returns only says the task ran.
"""

from __future__ import annotations

import gc
import traceback
from typing import Any

import torch

from sol_execbench.schema import Correctness, EvaluationStatus as S, Performance, Trace, Workload
from sol_execbench.schema.profiling import PROFILE_RANGE

from .calls import Context, Verdict, round_seed, solution_call
from .inputs import InputError, allocate_outputs, blob_roots, load_blobs, make_inputs, seed_all
from .timing import activity, profiled
from .timing.arguments import L2Flusher
from .timing.calls import CALL_RANGE, SETUP_RANGE, MethodUnavailable, synchronize
from .workload_eval import make_trace



def _nvtx(push: bool) -> None:
    try:
        if push:
            torch.cuda.nvtx.range_push(PROFILE_RANGE)
        else:
            torch.cuda.nvtx.range_pop()
    except Exception:  # noqa: BLE001  (a build without NVTX/roctx: rocprofv3 needs only the markers)
        pass


def _marked_calls(ctx: Context, fn: Any, args: list[Any], calls: int, flusher: L2Flusher) -> None:
    for _ in range(calls):
        flusher.flush()
        synchronize(ctx.device)
        _nvtx(True)
        torch.cuda._sleep(0)
        fn(*args)
        torch.cuda._sleep(0)
        _nvtx(False)
        synchronize(ctx.device)


def _recorded_gpu_calls(ctx: Context, fn: Any, args: list[Any], calls: int, flusher: L2Flusher) -> list[list[Any]]:
    session_block, record_function = profiled.recording(ctx.device)
    with session_block as session:
        for i in range(calls):
            with record_function(SETUP_RANGE):
                flusher.flush()
            synchronize(ctx.device)
            with record_function(f"{CALL_RANGE}#{i}"):
                fn(*args)
            synchronize(ctx.device)
    records = activity.from_kineto(session.recording.events)
    found = activity.attribute(records, calls, CALL_RANGE, SETUP_RANGE)
    return [[(a.name if a.kind == "kernel" else f"[{a.kind}] {a.name}", a.end_ns - a.start_ns) for a in call.device]
            for call in found.calls]


def _recorded_cpu_calls(fn: Any, args: list[Any], calls: int) -> list[list[Any]]:
    from torch.profiler import ProfilerActivity, profile, record_function

    if torch.autograd._profiler_enabled():
        raise MethodUnavailable("a profiler was already running in the evaluation process (left by the solution)")
    with profile(activities=[ProfilerActivity.CPU]) as recording:
        for i in range(calls):
            with record_function(f"{CALL_RANGE}#{i}"):
                fn(*args)
    records = activity.from_kineto(recording.profiler.kineto_results.events())
    return [[(op.name, op.end_ns - op.start_ns) for op in call]
            for call in activity.host_ops_per_call(records, calls, CALL_RANGE, SETUP_RANGE)]


def triton_kernels() -> list[dict[str, Any]]:
    """What Triton compiled in this process: name, registers, spills, shared memory, warps (read from
    each JIT function's cache of compiled kernels; empty where Triton is absent or interprets)."""
    try:
        from triton.runtime.jit import JITFunction
    except Exception:  # noqa: BLE001
        return []
    found: dict[str, dict[str, Any]] = {}
    for obj in gc.get_objects():
        if not isinstance(obj, JITFunction):
            continue
        for compiled in _compiled_of(obj):
            entry = _compiled_entry(compiled)
            if entry is not None:
                found.setdefault(f"{entry['name']}#{len(found)}", entry)
    return list(found.values())


def _compiled_of(function: Any) -> list[Any]:
    kernels: list[Any] = []
    caches = getattr(function, "device_caches", None)  # Triton 3.x: device -> (kernel cache, ...)
    if isinstance(caches, dict):
        for value in caches.values():
            cache = value[0] if isinstance(value, tuple) else value
            if isinstance(cache, dict):
                kernels.extend(cache.values())
    old = getattr(function, "cache", None)  # Triton 2.x: device -> {key: CompiledKernel}
    if isinstance(old, dict):
        for cache in old.values():
            if isinstance(cache, dict):
                kernels.extend(cache.values())
    return kernels


def _compiled_entry(compiled: Any) -> dict[str, Any] | None:
    try:
        init = getattr(compiled, "_init_handles", None)
        if callable(init):
            init()  # n_regs and n_spills are filled when the binary is loaded
        metadata = getattr(compiled, "metadata", None)
        name = getattr(compiled, "name", None) or getattr(metadata, "name", None)
        if not name:
            return None
        return {"name": str(name), "n_regs": getattr(compiled, "n_regs", None),
                "n_spills": getattr(compiled, "n_spills", None), "shared": getattr(metadata, "shared", None),
                "num_warps": getattr(metadata, "num_warps", None), "num_stages": getattr(metadata, "num_stages", None),
                "target": str(getattr(metadata, "target", "")) or None}
    except Exception:  # noqa: BLE001  (another Triton's layout: nothing to read)
        return None


def profile_workload(ctx: Context, workload: Workload, task: dict[str, Any], channel: Any) -> Trace:
    """Run the task's calls of one workload; a ``profile`` message says what ran. Never raises."""
    tool, calls = task.get("tool", "none"), int(task.get("calls", 1))
    try:
        axes = ctx.definition.resolve_axes(workload.axes)
        blobs = load_blobs(ctx.definition, workload, blob_roots(ctx.staging_dir))
        seed_all(round_seed(ctx.config.seed, workload.uuid, 0))
        inputs = make_inputs(ctx.definition, workload, ctx.torch_device, blobs, ctx.custom_inputs_fn)
        solution_call(ctx, inputs, axes)  # untimed: compilation and first-call work stay outside
        args = list(inputs) + (allocate_outputs(ctx.definition, axes, ctx.torch_device, poison=False) if ctx.dps else [])
        flusher = L2Flusher(ctx.device)
        per_call: list[list[Any]] = []
        if tool == "torch":
            per_call = (_recorded_gpu_calls(ctx, ctx.solution_fn, args, calls, flusher) if ctx.device.is_gpu
                        else _recorded_cpu_calls(ctx.solution_fn, args, calls))
        elif tool in ("ncu", "rocprofv3") and ctx.device.is_gpu:
            _marked_calls(ctx, ctx.solution_fn, args, calls, flusher)
        else:
            for _ in range(calls):
                ctx.solution_fn(*args)
            synchronize(ctx.device)
        message: dict[str, Any] = {"uuid": workload.uuid, "tool": tool, "calls": calls, "per_call": per_call,
                                   "device": ctx.device.vendor}
        if task.get("triton_metadata"):
            message["triton_kernels"] = triton_kernels()
        # Only the profiling feature reads this trace (never written out): PASSED says the task ran.
        done = make_trace(ctx, workload, S.PASSED, f"profiling task: {calls} call(s) under {tool}",
                          Correctness(), Performance())
        channel.send("profile", **message)
        return done
    except Verdict as v:
        error = v.message
        status = v.status
    except (InputError, MethodUnavailable) as exc:
        error, status = str(exc), S.RUNTIME_ERROR
    except Exception as exc:  # noqa: BLE001  (the solution's or the profiler's failure: reported, not raised)
        error, status = f"{exc!r}\n{traceback.format_exc()}", S.RUNTIME_ERROR
    channel.send("profile", uuid=workload.uuid, tool=tool, calls=0, per_call=[], error=error[:4000])
    return make_trace(ctx, workload, status, error)
