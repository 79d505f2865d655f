"""``bench gemm``: GEMM shapes x dtypes x variants, each timed by the evaluator.

Each dtype is a definition (``C = A @ B``, reference ``torch.matmul``; fp8 through
``torch._scaled_mm`` with unit scales) whose workloads are the shapes; each variant is a solution
evaluated on all of them in one ``sol_execbench.evaluate`` call, so correctness, fresh inputs, the L2
flush and the device timing rule are the evaluator's. A point's latency is its trace's solution
latency; TFLOP/s = 2MNK / latency; the fractions are of the part's datasheet peak and of a
calibrated peak where a calibration file exists."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sol_execbench.files import replace_json
from sol_execbench.schema import DTYPES, Definition, Solution, Trace, Workload
from sol_execbench.schema.benches import GemmPoint, GemmSweep

from .errors import BenchUsageError
from .figures import missing_matplotlib

JSON_FILE = "gemm_sweep.json"
TIMING = "the evaluator's latency rule (docs/timing.md): per call, L2 flushed, fresh inputs at a new address, " \
         "max(device time, host time - launch allowance), each a trimmed mean of its pass's spans, " \
         "solution timed beside the reference"
KERNEL_FILE = Path(__file__).parent / "kernels" / "gemm_triton.py"
DTYPE_NAMES = {"bf16": "bfloat16", "fp16": "float16", "fp8": "float8_e4m3fn"}
VARIANTS = ("torch", "triton")


@dataclass(frozen=True)
class GemmShape:
    name: str
    family: str
    m: int
    n: int
    k: int


# Llama-3-8B's projections over 4096 tokens (hidden 4096, 8 KV heads of 128, MLP 14336).
SHAPES = (
    GemmShape("square_1024", "square", 1024, 1024, 1024),
    GemmShape("square_2048", "square", 2048, 2048, 2048),
    GemmShape("square_4096", "square", 4096, 4096, 4096),
    GemmShape("square_8192", "square", 8192, 8192, 8192),
    GemmShape("skinny_16x8192x8192", "tall_skinny", 16, 8192, 8192),
    GemmShape("skinny_32768x128x4096", "tall_skinny", 32768, 128, 4096),
    GemmShape("llama3_8b_qkv", "llm", 4096, 6144, 4096),
    GemmShape("llama3_8b_o", "llm", 4096, 4096, 4096),
    GemmShape("llama3_8b_gate_up", "llm", 4096, 28672, 4096),
    GemmShape("llama3_8b_down", "llm", 4096, 4096, 14336),
)
FAMILIES = ("square", "tall_skinny", "llm")


@dataclass(frozen=True)
class GemmOptions:
    output: Path
    shapes: tuple[GemmShape, ...] = SHAPES
    dtypes: tuple[str, ...] = ("bf16", "fp16", "fp8")
    variants: tuple[str, ...] = VARIANTS
    solutions: tuple[Path, ...] = ()
    config: dict[str, Any] | None = None
    device: str | None = None
    timeout_s: float = 600.0
    calibration: Path | None = None


def parse_shape(text: str) -> GemmShape:
    """A built-in shape's name, or ``MxNxK`` as a custom shape; BenchUsageError otherwise."""
    named = {s.name: s for s in SHAPES}
    if text in named:
        return named[text]
    parts = text.lower().split("x")
    if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise BenchUsageError(f"--shape {text}: give MxNxK with whole numbers above 0 (e.g. 4096x4096x4096) or a "
                              f"built-in shape ({', '.join(named)})")
    m, n, k = (int(p) for p in parts)
    return GemmShape(f"{m}x{n}x{k}", "custom", m, n, k)


def gemm_definition(dtype: str) -> Definition:
    fp8 = dtype == "fp8"
    name = DTYPE_NAMES[dtype]
    reference = ("import torch\n\n\n@torch.no_grad()\ndef run(A, B):\n"
                 + ("    one = torch.ones((), device=A.device, dtype=torch.float32)\n"
                    "    return torch._scaled_mm(A, B.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)\n"
                    if fp8 else "    return torch.matmul(A, B)\n"))
    return Definition.model_validate({
        "name": f"gemm_{dtype}", "op_type": "gemm",
        "description": f"C = A @ B in {name}" + (" (B given as [N, K]; C in bfloat16)" if fp8 else ""),
        "axes": {"M": {"type": "var"}, "N": {"type": "var"}, "K": {"type": "var"}},
        "inputs": {"A": {"shape": ["M", "K"], "dtype": name}, "B": {"shape": ["N", "K"] if fp8 else ["K", "N"],
                                                                    "dtype": name}},
        "outputs": {"C": {"shape": ["M", "N"], "dtype": "bfloat16" if fp8 else name}},
        "reference": reference,
    })


def gemm_workload(shape: GemmShape) -> Workload:
    # Two kernels accumulating K products in fp32 and rounding to 16 bits differ by an output ulp:
    # the absolute tolerance grows with sqrt(K), the size of an output of random inputs.
    return Workload.model_validate({
        "uuid": shape.name, "axes": {"M": shape.m, "N": shape.n, "K": shape.k},
        "inputs": {"A": {"type": "random"}, "B": {"type": "random"}},
        "tolerance": {"max_atol": 0.02 * math.sqrt(shape.k), "max_rtol": 0.02, "required_matched_ratio": 0.99},
    })


def variant_solution(variant: str, definition: Definition) -> Solution:
    from sol_execbench.dataset.solutions import RUNNER_AUTHOR, python_solution

    if variant == "torch":
        return python_solution(definition, definition.reference, name=f"torch_{definition.name}", entry_file="gemm.py",
                               description="The reference's torch call as the solution.")
    return Solution.model_validate({
        "name": f"triton_{definition.name}", "definition": definition.name, "author": RUNNER_AUTHOR,
        "description": "The tiled Triton GEMM shipped with sol-execbench (benches/kernels/gemm_triton.py).",
        "spec": {"languages": ["triton"], "target_hardware": ["LOCAL"], "entry_point": "gemm_triton.py::run",
                 "dependencies": ["torch", "triton"], "destination_passing_style": False},
        "sources": [{"path": "gemm_triton.py", "content": KERNEL_FILE.read_text(encoding="utf-8")}],
    })


def bytes_moved(shape: GemmShape, dtype: str) -> int:
    size = DTYPES[DTYPE_NAMES[dtype]].bits // 8
    out = 2 if dtype == "fp8" else size
    return (shape.m * shape.k + shape.k * shape.n) * size + shape.m * shape.n * out


def _point(shape: GemmShape, dtype: str, variant: str, trace: Trace | None, peaks: dict[str, float],
           calibrated: dict[str, float] | None, error: str | None = None) -> GemmPoint:
    flops = 2 * shape.m * shape.n * shape.k
    evaluation = trace.evaluation if trace is not None else None
    status = evaluation.status.value if evaluation is not None else "NOT_RUN"
    point = GemmPoint(shape=shape.name, family=shape.family, m=shape.m, n=shape.n, k=shape.k, dtype=dtype,
                      variant=variant, status=status, arithmetic_intensity=flops / bytes_moved(shape, dtype),
                      note=error)
    perf = evaluation.performance if evaluation is not None else None
    if status != "PASSED" or perf is None or perf.latency_ms <= 0:
        if evaluation is not None and evaluation.log and status != "PASSED":
            point.note = evaluation.log.strip().splitlines()[-1][:300] if evaluation.log.strip() else None
        return point
    tflops = flops / (perf.latency_ms * 1e-3) / 1e12
    point.latency_ms, point.tflops = perf.latency_ms, tflops
    point.timing_method = perf.solution_timing.method if perf.solution_timing is not None else None
    if dtype in peaks:
        point.fraction_of_datasheet = tflops / peaks[dtype]
    if calibrated and dtype in calibrated:
        point.fraction_of_calibrated = tflops / calibrated[dtype]
    return point


def _calibration(path: Path | None, info: Any) -> tuple[dict[str, float] | None, str]:
    """This device's calibrated GEMM ceilings (dtype -> TFLOP/s) from ``sol-execbench calibrate``'s
    cache, or from a calibration file given; None and why where there is none."""
    from pydantic import ValidationError

    from sol_execbench.platform.ceilings import CeilingsError, calibration_key, load_calibration
    from sol_execbench.schema.calibration import Calibration

    if path is not None:
        try:
            calibration = Calibration.model_validate_json(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, ValidationError) as exc:
            first = (str(exc).splitlines() or [""])[0][:200]
            raise BenchUsageError(f"--calibration {path}: not a calibration ({first}); give a file "
                                  "'sol-execbench calibrate --json' wrote") from None
        where = str(path)
    else:
        try:
            calibration = load_calibration(calibration_key(info))
        except CeilingsError as exc:
            raise BenchUsageError(str(exc)) from None
        if calibration is None:
            return None, f"no calibration of {info.name} (sol-execbench calibrate); fractions of a calibrated peak are not given"
        where = calibration.cache_file or "the calibration cache"
    values = {c.rate.split()[1]: c.achieved_per_s / 1e12 for c in calibration.ceilings if c.rate.startswith("matrix ")}
    if not values:
        return None, f"{where} holds no GEMM ceiling"
    return values, f"calibrated ceilings from {where} (measured {calibration.measured_at})"


def _device_facts(device: str | None) -> tuple[Any, str | None, dict[str, float], float | None]:
    """(device info, part, datasheet TFLOP/s per dtype, memory GB/s)."""
    from sol_execbench.platform import use_device
    from sol_execbench.platform.peaks import UnknownPartError, peaks_for

    try:
        info = use_device(device)
    except ValueError as exc:
        raise BenchUsageError(f"--device {device}: {exc}") from None
    if not info.is_gpu:
        return info, None, {}, None
    try:
        peaks = peaks_for(info.name)
    except UnknownPartError:
        return info, None, {}, None
    return info, peaks.name, {d: r / 1e12 for d, r in peaks.matrix.items()}, peaks.memory_bandwidth / 1e9


def _fp8_supported(info: Any) -> str | None:
    """None where fp8 runs here, else why not."""
    if info.vendor != "cuda":
        return f"fp8: needs an NVIDIA GPU of sm_89 or later (here: {info.vendor})"
    digits = "".join(ch for ch in (info.arch or "") if ch.isdigit())
    if not digits or int(digits) < 89:
        return f"fp8: needs sm_89 or later (here: {info.arch})"
    return None


def _evaluate(definition: Definition, workloads: list[Workload], solution: Solution,
              options: GemmOptions) -> list[Trace] | str:
    from sol_execbench import evaluate
    from sol_execbench.evaluate import UsageProblem
    from sol_execbench.schema import FormatError

    try:
        return evaluate(definition, workloads, solution, options.config, device=options.device,
                        timeout_s=options.timeout_s)
    except (FormatError, UsageProblem, ValueError) as exc:
        return f"not evaluated: {str(exc).splitlines()[0][:300]}"


def run_gemm(options: GemmOptions) -> GemmSweep:
    from sol_execbench.schema import Loaded, load_solution

    unknown = [d for d in options.dtypes if d not in DTYPE_NAMES]
    if unknown:
        raise BenchUsageError(f"--dtype {unknown[0]}: give bf16, fp16 or fp8")
    unknown = [v for v in options.variants if v not in VARIANTS]
    if unknown:
        raise BenchUsageError(f"--variant {unknown[0]}: give torch or triton (other kernels: --solution FILE)")
    extra: list[Solution] = []
    for path in options.solutions:
        try:
            extra.append(load_solution(path, Loaded()))
        except Exception as exc:  # noqa: BLE001 - FormatError or OSError, named with the file
            raise BenchUsageError(f"--solution {path}: {str(exc).splitlines()[0][:300]}") from None
    info, part, peaks, bandwidth = _device_facts(options.device)
    calibrated, calibrated_note = _calibration(options.calibration, info)
    sweep = GemmSweep(created_at=datetime.now(timezone.utc).isoformat(), device_name=info.name, part=part,
                      datasheet_tflops=peaks, memory_bandwidth_gbps=bandwidth, calibrated_tflops=calibrated,
                      calibrated_note=calibrated_note, timing=TIMING, points=[], skipped=[])
    workloads = [gemm_workload(s) for s in options.shapes]
    for dtype in options.dtypes:
        reason = _fp8_supported(info) if dtype == "fp8" else None
        if reason:
            sweep.skipped.append(reason)
            continue
        definition = gemm_definition(dtype)
        solutions = [(v, variant_solution(v, definition)) for v in options.variants]
        solutions += [(s.name, s) for s in extra]
        for variant, solution in solutions:
            result = _evaluate(definition, workloads, solution, options)
            by_uuid = {t.workload.uuid: t for t in result} if not isinstance(result, str) else {}
            for shape in options.shapes:
                sweep.points.append(_point(shape, dtype, variant, by_uuid.get(shape.name), peaks, calibrated,
                                     result if isinstance(result, str) else None))
            write_outputs(sweep, options.output, figures=False)  # a sweep stopped later keeps these points
    write_outputs(sweep, options.output, figures=missing_matplotlib() is None)
    return sweep


def write_outputs(sweep: GemmSweep, output: Path, figures: bool = True) -> list[Path]:
    from .gemm_figures import render_gemm

    output.mkdir(parents=True, exist_ok=True)
    replace_json(output / JSON_FILE, sweep)
    return [output / JSON_FILE, *(render_gemm(sweep, output) if figures else [])]
