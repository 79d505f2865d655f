"""Calling the solution and the reference once, with every per-call check (child side).

Order inside one checked call (``checked_solution_call``), and why:

1. a private copy of the inputs is taken for the reference *before* the solution runs, and the
   reference runs only *after* it: while the solution runs, the reference's answer does not
   exist anywhere in the process for it to find;
2. exact-change checksums of the inputs and of the private copy, before and after;
3. destination outputs live inside guard bands with random canaries;
4. after the call: harness integrity, plain ``torch.Tensor`` outputs, no output sharing memory
   with an input, canaries intact, inputs and the private copy unchanged. Any failure is
   REWARD_HACK, with every finding in the message.
"""

from __future__ import annotations

import hashlib
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from sol_execbench.platform import DeviceInfo
from sol_execbench.schema import (BenchmarkConfig, BuildRecord, Correctness, Definition, Environment,
                                  EvaluationStatus as S, torch_dtype)

from . import guards
from .correctness import Comparison, compare
from .inputs import allocate_outputs
from .timing.calls import synchronize


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
    rounds_dir: Path | None = None  # SOL_EXECBENCH_TIMING_ROUNDS: each workload's timed calls written there
    flusher: Any = None  # timing.L2Flusher, made on first use
    jit_pending: bool = True
    warnings: list[str] = field(default_factory=list)
    watch: Any = None  # activity_watch.ActivityWatch
    clocks: Any = None  # clock_watch.ClockWatch
    # Destination outputs inside canary bands. Off only for the --sanitize run: there each output
    # must be an allocation of its own exact size, or the memory checker cannot see a write past it.
    guard_outputs: bool = True
    device_hold: Any = None  # gpu_quiet.SharedHold: taken before the first timed pass

    def hold_device(self) -> None:
        """Keep warm-pool start-up off the device from now on (``gpu_quiet``); a warning on every
        later trace where a warm-up held it too long."""
        if self.device_hold is not None and (warning := self.device_hold.take()) is not None:
            self.warnings.append(warning)

    @property
    def torch_device(self) -> torch.device:
        return torch.device(self.device.torch_device)


@dataclass
class FailureEvidence:
    """What reproduces one failing call; a Verdict carrying it is written out by ``--dump-failures``.

    ``seed`` is the seed the inputs were made from (``seed_all(seed)`` then ``make_inputs``), or
    None when they came from a secret seed: the dumped input tensors are then the only record.
    ``solution_outputs`` / ``reference_outputs`` are None when that side produced nothing.
    """

    inputs: list[Any]
    solution_outputs: list[Any] | None = None
    reference_outputs: list[Any] | None = None
    seed: int | None = None
    where: str = ""  # which call failed, e.g. "correctness round 3", "audited timed call 7 of 50"
    worst_output: str | None = None
    worst_index: list[int] | None = None
    round_index: int | None = None  # the correctness round, when it was one

    @classmethod
    def from_check(cls, check: "OutputCheck", inputs: list[Any], solution_outputs: list[Any] | None,
                   reference_outputs: list[Any] | None, *, seed: int | None, where: str,
                   round_index: int | None = None) -> "FailureEvidence":
        """Evidence for a failed ``compare_outputs``: the worst element of the failing output, if numerical."""
        worst_output = worst_index = None
        if check.status is S.INCORRECT_NUMERICAL and check.comparisons:
            worst_output, comp = check.comparisons[-1]  # the comparison that failed ends the list
            worst_index = comp.worst_index
        elif check.name is not None:
            worst_output = check.name
        return cls(inputs, solution_outputs, reference_outputs, seed, where, worst_output, worst_index, round_index)


class Verdict(Exception):
    """Ends a workload early with a status and message; ``evidence``, when given, is dumped."""

    def __init__(self, status: S, message: str, correctness: Correctness | None = None,
                 evidence: FailureEvidence | None = None):
        super().__init__(message)
        self.status, self.message, self.correctness, self.evidence = status, message, correctness, evidence


def round_seed(base: int, uuid: str, round_index: int) -> int:
    digest = hashlib.sha256(f"{base}:{uuid}:{round_index}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & 0x7FFF_FFFF_FFFF_FFFF


def clone_values(values: list[Any]) -> list[Any]:
    return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]


def normalize_result(ctx: Context, result: Any) -> list[Any]:
    """Return-style results as a list in output order (tensor, tuple/list, dict or scalar)."""
    names = list(ctx.definition.outputs)
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
            value = torch.tensor(value, dtype=torch_dtype(ctx.definition.outputs[name].dtype), device=ctx.torch_device)
        out.append(value)
    return out


def reference_call(ctx: Context, args: list[Any], axes: dict[str, int]) -> list[Any]:
    try:
        result = ctx.reference_fn(*args)
        synchronize(ctx.device)
        outputs = normalize_result(ctx, result)
    except Exception as exc:
        raise Verdict(S.INVALID_REFERENCE, f"reference run() failed: {exc}\n{traceback.format_exc()}") from exc
    mismatches = reference_mismatches(ctx.definition, outputs, axes)
    if mismatches:
        # The solution is judged against the reference's answer: one that contradicts the
        # definition would otherwise be blamed on the solution as a shape or dtype error.
        raise Verdict(S.INVALID_REFERENCE, "the reference's output does not match the definition: "
                                           + "; ".join(mismatches))
    return outputs


def reference_non_finite(definition: Definition, outputs: list[Any], allow_negative_inf: bool) -> list[str]:
    """The reference's outputs holding NaN or Inf that the workload's tolerance does not allow
    (-inf only with ``allow_negative_inf``): no solution can match them, the reference is broken."""
    found = []
    for name, value in zip(definition.outputs, outputs):
        if not isinstance(value, torch.Tensor) or not (value.is_floating_point() or value.is_complex()):
            continue
        bad = ~torch.isfinite(value)
        if allow_negative_inf:
            bad &= value != float("-inf")
        count = int(bad.sum())
        if count:
            kind = "NaN" if bool(torch.isnan(value).any()) else "Inf"
            found.append(f"output '{name}' holds {count} non-finite value(s) ({kind}) the workload's tolerance does not allow")
    return found


def reference_mismatches(definition: Definition, outputs: list[Any], axes: dict[str, int]) -> list[str]:
    """How the reference's outputs differ from the definition's declared outputs (type, shape, dtype)."""
    found = []
    for (name, spec), value in zip(definition.outputs.items(), outputs):
        if not isinstance(value, torch.Tensor):
            found.append(f"output '{name}' is a {type(value).__name__}, not a tensor")
            continue
        shape = definition.shape_of(spec, axes) or ()  # a declared Python scalar arrives as a 0-d tensor
        if tuple(value.shape) != shape:
            found.append(f"output '{name}' has shape {tuple(value.shape)}, the definition declares {shape}")
        dtype = torch_dtype(spec.dtype)
        if value.dtype != dtype:
            found.append(f"output '{name}' has dtype {value.dtype}, the definition declares {dtype}")
    return found


def solution_call(ctx: Context, args: list[Any], axes: dict[str, int]) -> tuple[list[Any], guards.GuardedOutputs | None]:
    """One call of the solution; destination outputs come inside guard bands."""
    guarded = None
    try:
        if ctx.dps:
            outputs = allocate_outputs(ctx.definition, axes, ctx.torch_device, poison=True)
            if ctx.guard_outputs:
                guarded = guards.GuardedOutputs(outputs, list(ctx.definition.outputs))
                outputs = list(guarded.tensors)
            ctx.solution_fn(*args, *outputs)
            synchronize(ctx.device)
            return outputs, guarded
        result = ctx.solution_fn(*args)
        synchronize(ctx.device)
        return normalize_result(ctx, result), None
    except SystemExit as exc:
        raise Verdict(S.REWARD_HACK, f"the solution called sys.exit({exc.code!r}) during a call: exiting the "
                                     "measuring process cannot produce a result") from exc
    except Exception as exc:
        raise Verdict(S.RUNTIME_ERROR, f"solution raised: {exc}\n{traceback.format_exc()}") from exc


def output_problems(ctx: Context, outputs: list[Any], inputs: list[Any]) -> list[str]:
    """Findings about returned outputs: foreign types, memory shared with an input."""
    problems = []
    foreign = guards.foreign_output_types(outputs)
    if foreign:
        problems.append(f"outputs must be plain torch.Tensor, got {foreign}")
    if not ctx.dps and not foreign:
        shared = guards.shared_memory(outputs, list(ctx.definition.outputs), inputs, list(ctx.definition.inputs))
        if shared:
            problems.append("; ".join(shared) + " (an output must be new memory, not an input or a view of one)")
    return problems


def check_integrity(ctx: Context) -> None:
    tampered = ctx.integrity.tampered()
    if tampered:
        shown = ", ".join(tampered[:8]) + (f" and {len(tampered) - 8} more" if len(tampered) > 8 else "")
        raise Verdict(S.REWARD_HACK, f"harness functions were replaced by the solution: {shown}")


def checked_solution_call(ctx: Context, inputs: list[Any], axes: dict[str, int]) -> tuple[list[Any], list[Any]]:
    """The solution once on ``inputs`` under every per-call check; returns (outputs, private input copy)."""
    names = list(ctx.definition.inputs)
    pristine = clone_values(inputs)
    sums_inputs = guards.checksums(inputs)
    sums_pristine = list(sums_inputs)  # a byte-exact copy has the same sums
    outputs, guarded = solution_call(ctx, inputs, axes)
    check_integrity(ctx)
    problems = output_problems(ctx, outputs, inputs)
    if guarded is not None:
        problems.extend(f"out-of-bounds write: {v}" for v in guarded.violations())
    after = guards.checksums(list(inputs) + list(pristine))  # one read-back for both
    mutated = guards.changed(names, sums_inputs, after[:len(inputs)])
    if mutated:
        problems.append(f"the solution wrote to its input(s) {mutated} (inputs are read-only)")
    if guards.changed(names, sums_pristine, after[len(inputs):]):
        problems.append("the harness's private copy of the inputs (for the reference) was modified")
    if problems:
        raise Verdict(S.REWARD_HACK, "; ".join(problems))
    return outputs, pristine


@dataclass
class OutputCheck:
    """Solution outputs against reference outputs: the first failure, or every comparison."""

    status: S | None
    message: str = ""
    name: str | None = None
    comparisons: list[tuple[str, Comparison]] = field(default_factory=list)
    # Every output was compared and matched, so neither side held a value that is not finite (one
    # fails the comparison): the reference's outputs are known to be finite without a pass of their own.
    all_finite: bool = False


def compare_outputs(ctx: Context, tolerance: Any, sol_out: list[Any], ref_out: list[Any]) -> OutputCheck:
    check = OutputCheck(None)
    for name, ref, sol in zip(ctx.definition.outputs, ref_out, sol_out):
        if tuple(sol.shape) != tuple(ref.shape):
            return OutputCheck(S.INCORRECT_SHAPE, f"output '{name}' has shape {tuple(sol.shape)}, expected "
                                                  f"{tuple(ref.shape)}", name, check.comparisons)
        if sol.dtype != ref.dtype:
            return OutputCheck(S.INCORRECT_DTYPE, f"output '{name}' has dtype {sol.dtype}, expected {ref.dtype}",
                               name, check.comparisons)
        comp = compare(sol.to(ref.device), ref, tolerance)
        check.comparisons.append((name, comp))
        if comp.failed:
            return OutputCheck(S.INCORRECT_NUMERICAL, f"output '{name}': {comp.reason}", name, check.comparisons)
    check.all_finite = True  # every output compared, none failed
    return check
