"""A problem's speed-of-light bound per workload: fewest bytes, FLOPs by dtype, T_SOL.

T_SOL = max(compute time, memory time). Memory time is the bytes every input read once and every
output written once take at the datasheet bandwidth. Compute time is the larger of the matrix
time (matrix FLOPs of each dtype at that dtype's matrix rate, summed) and the vector time (vector
FLOPs at the fp32 or fp64 vector rate, summed): the two kinds of units run concurrently.
"""

from __future__ import annotations

import importlib.util
import math
import tempfile
from pathlib import Path
from typing import Any, Callable

from sol_execbench.platform.peaks import PartPeaks
from sol_execbench.schema import DTYPES, Definition, Workload
from sol_execbench.schema.bound import (CountedFlops, PricedFlops, ProblemBound, ProblemDerivation,
                                        WorkloadBound, WorkloadDerivation)
from sol_execbench.schema.dtypes import DType
from sol_execbench.schema.loading import FormatError, load_definition, load_workloads

from .counting import FlopCounts, count_flops
from .hardware import hardware_model

# torch dtype name -> the rate name of the peak table. fp32 matmuls are priced as fp16: a
# solution may legally run them on tensor cores (TF32, or bf16/fp16 within the tolerance), and
# NVIDIA's SOL tooling prices them the same way, so the fp16 rate keeps T_SOL a lower bound.
_MATRIX_RATE = {"float64": "fp64", "float32": "fp16", "float16": "fp16", "bfloat16": "bf16",
                "float8_e4m3fn": "fp8", "float8_e5m2": "fp8", "float8_e4m3fnuz": "fp8", "float8_e5m2fnuz": "fp8",
                "float4_e2m1fn_x2": "fp4", "int8": "fp8", "uint8": "fp8"}
# A dtype the part lacks runs on the next wider one it has (fp8 on an A100 runs as fp16).
_WIDER = {"fp4": "fp8", "fp8": "fp16", "tf32": "fp16", "bf16": "fp16", "fp16": "fp32"}


class BoundInputError(Exception):
    """A problem directory that cannot be bounded; the message names the file, the field and the fix."""


def _matrix_rate(peaks: PartPeaks, dtype_name: str) -> tuple[str, float]:
    rate = _MATRIX_RATE.get(dtype_name, "fp16")
    while rate not in peaks.matrix and rate in _WIDER:
        rate = _WIDER[rate]
    if rate not in peaks.matrix:  # fp32 without a matrix path: the vector unit does it
        return "vector fp32", peaks.vector["fp32"]
    return f"matrix {rate}", peaks.matrix[rate]


def _vector_rate(peaks: PartPeaks, dtype_name: str) -> tuple[str, float]:
    rate = "fp64" if dtype_name == "float64" else "fp32"
    return f"vector {rate}", peaks.vector[rate]


def _dtype_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


def bytes_moved(definition: Definition, axes: dict[str, int]) -> int:
    """Each input read once, each output written once; Python scalars (shape null) are free."""
    total = 0
    for tensors, shapes in ((definition.inputs, definition.input_shapes(axes)),
                            (definition.outputs, definition.output_shapes(axes))):
        for name, shape in shapes.items():
            if shape is not None:
                total += math.prod(shape) * DTYPES[DType(tensors[name].dtype)].bits // 8
    return total


def _meta_args(definition: Definition, workload: Workload, axes: dict[str, int]) -> list[Any]:
    import torch

    from sol_execbench.schema.dtypes import torch_dtype

    scalars = workload.scalar_values()
    args: list[Any] = []
    for name, shape in definition.input_shapes(axes).items():
        spec = definition.inputs[name]
        if shape is None:
            args.append(scalars.get(name, DTYPES[DType(spec.dtype)].python_type(1)))
        else:
            args.append(torch.empty(shape, dtype=torch_dtype(spec.dtype), device="meta"))
    return args


def _counted(counts: FlopCounts) -> list[CountedFlops]:
    return [CountedFlops(unit=unit, dtype=_dtype_name(dtype), flops=flops)
            for unit, table in (("matrix", counts.matrix), ("vector", counts.vector))
            for dtype, flops in sorted(table.items(), key=lambda item: str(item[0])) if flops]


def _priced(counted: CountedFlops, peaks: PartPeaks) -> PricedFlops:
    label, rate = (_matrix_rate if counted.unit == "matrix" else _vector_rate)(peaks, counted.dtype)
    return PricedFlops(**counted.model_dump(), priced_as=label, rate_flops_per_s=rate, time_s=counted.flops / rate)


def _reason(exc: BaseException) -> str:
    first = (str(exc).strip().splitlines() or [""])[0][:300]
    return f"the reference cannot run on meta tensors ({type(exc).__name__}: {first})"


def _derive_workload(definition: Definition, workload: Workload, run: Callable[..., Any] | None,
                     load_failure: str | None) -> WorkloadDerivation:
    axes = definition.resolve_axes(workload.axes)
    moved = bytes_moved(definition, axes)
    reason = load_failure
    counted: list[CountedFlops] = []
    if run is not None:
        try:
            counted = _counted(count_flops(run, _meta_args(definition, workload, axes)))
        except Exception as exc:  # the reference is user code: any failure makes the bound bytes-only
            reason = _reason(exc)
    if reason is not None:
        return WorkloadDerivation(uuid=workload.uuid, axes=axes, bytes_moved=moved, flops=[], total_flops=None,
                                  arithmetic_intensity=None, bytes_only_reason=reason)
    total = sum(c.flops for c in counted)
    return WorkloadDerivation(uuid=workload.uuid, axes=axes, bytes_moved=moved, flops=counted, total_flops=total,
                              arithmetic_intensity=total / moved if moved else None)


def price_workload(derived: WorkloadDerivation, peaks: PartPeaks) -> WorkloadBound:
    """T_SOL of a derivation on ``peaks``: max(compute time, memory time)."""
    memory_time = derived.bytes_moved / peaks.memory_bandwidth
    fields = derived.model_dump(exclude={"flops"})
    if derived.bytes_only_reason is not None:
        return WorkloadBound(**fields, flops=[], compute_time_s=None, memory_time_s=memory_time, t_sol_s=memory_time,
                             bound_by="memory")
    priced = [_priced(c, peaks) for c in derived.flops]
    compute_time = max(sum(p.time_s for p in priced if p.unit == unit) for unit in ("matrix", "vector"))
    return WorkloadBound(**fields, flops=priced, compute_time_s=compute_time, memory_time_s=memory_time,
                         t_sol_s=max(compute_time, memory_time),
                         bound_by="compute" if compute_time > memory_time else "memory")


def _load_reference(definition: Definition, path: Path) -> tuple[Callable[..., Any] | None, str | None]:
    """The reference's ``run``, loaded from a file (Triton's ``@jit`` reads its function's source file)."""
    with tempfile.TemporaryDirectory(prefix="sol-bound-") as folder:
        source = Path(folder) / "reference.py"
        source.write_text(definition.reference, encoding="utf-8")
        spec = importlib.util.spec_from_file_location(f"sol_execbench_reference_{definition.name}", source)
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception as exc:  # an import the reference needs and this host lacks, say
            return None, f"the reference in {path} does not load here ({type(exc).__name__}: {str(exc)[:300]})"
    return module.run, None


def derive_problem(problem_dir: Path, problem: str | None = None) -> ProblemDerivation:
    """Bytes and FLOPs of every workload of the problem in ``problem_dir`` (``problem``: its name in
    the outputs, the directory as given by default).

    Raises BoundInputError for a directory without a readable definition.json and workload.jsonl."""
    definition_path, workload_path = problem_dir / "definition.json", problem_dir / "workload.jsonl"
    for path in (definition_path, workload_path):
        if not path.is_file():
            raise BoundInputError(f"{path}: not found; give a problem directory holding definition.json and workload.jsonl")
    try:
        definition = load_definition(definition_path)
        workloads = load_workloads(workload_path, definition=definition)
    except FormatError as exc:
        raise BoundInputError(str(exc)) from None
    run, load_failure = _load_reference(definition, definition_path)
    derived = []
    for workload in workloads:
        try:
            derived.append(_derive_workload(definition, workload, run, load_failure))
        except ValueError as exc:  # an axis the workload does not give, an expression that fails
            raise BoundInputError(f"{workload_path}: workload '{workload.uuid}': {exc}; fix its axes") from None
    return ProblemDerivation(problem=problem or str(problem_dir), definition=definition.name, workloads=derived)


def price_problem(derivation: ProblemDerivation, peaks: PartPeaks, resolved_from: str) -> ProblemBound:
    return ProblemBound(problem=derivation.problem, definition=derivation.definition,
                        hardware=hardware_model(peaks, resolved_from), ceilings=peaks.ceilings,
                        workloads=[price_workload(w, peaks) for w in derivation.workloads])


def bound_problem(problem_dir: Path, peaks: PartPeaks, resolved_from: str) -> ProblemBound:
    """Bounds of every workload of the problem in ``problem_dir`` on the part ``peaks`` describes.

    Raises BoundInputError for a directory without a readable definition.json and workload.jsonl."""
    return price_problem(derive_problem(problem_dir), peaks, resolved_from)
