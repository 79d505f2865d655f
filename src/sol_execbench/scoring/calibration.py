"""Measuring a device's achievable ceilings (``sol-execbench calibrate``).

A large GEMM per dtype (fp64, fp32, tf32, bf16, fp16, and fp8 through ``torch._scaled_mm`` where
the device and torch build run it) and a large device-to-device copy, each timed by the
evaluator's own timing (``timing.measure``: fresh addresses, a cold L2, the device pass and the
host pass, the latency rule) with the evaluator's default plan (``BenchmarkConfig``). Achieved
rate = work per call / latency. The result is cached per device, driver and torch build
(``platform.ceilings``); ``--ceilings measured`` reads it back.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from typing import Any, Callable

from sol_execbench import __version__
from sol_execbench.evaluate.child.timing import FreshArgs, L2Flusher, SideCalls, TimingPlan, measure, rounds_per_pass
from sol_execbench.platform import DeviceInfo
from sol_execbench.platform.ceilings import (CeilingsError, calibration_key, datasheet_part, datasheet_rate, gemm_rate,
                                             load_calibration, store_calibration)
from sol_execbench.platform.peaks import PartPeaks
from sol_execbench.schema import BenchmarkConfig
from sol_execbench.schema.calibration import Calibration, CeilingMeasurement, SkippedCeiling

GEMM_DTYPES = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8")
GIB = 1 << 30


@dataclass(frozen=True)
class CalibrationPlan:
    """Sizes and rounds: square GEMMs of ``gemm_sizes[dtype]`` and a copy of ``copy_bytes``."""

    gemm_sizes: dict[str, int]
    copy_bytes: int
    warmup: int
    rounds: int


def gpu_plan(device: DeviceInfo) -> CalibrationPlan:
    """GEMMs of a few milliseconds at datasheet rates (fp64 and fp32 are ~15x slower than the
    tensor-core dtypes, hence smaller); a copy of 1 GiB (20x an H100's L2, 4x an MI300X's
    Infinity Cache), less on a GPU with under 16 GiB. Rounds as an evaluation times a workload."""
    config = BenchmarkConfig()
    memory = device.memory_bytes or 16 * GIB
    return CalibrationPlan(gemm_sizes={"fp64": 4096, "fp32": 4096, "tf32": 8192, "bf16": 8192, "fp16": 8192,
                                       "fp8": 8192},
                           copy_bytes=min(GIB, memory // 16), warmup=config.warmup_runs, rounds=config.iterations)


# The CPU is calibrated only so that the whole path runs without a GPU (tests, demos): small sizes.
CPU_PLAN = CalibrationPlan(gemm_sizes=dict.fromkeys(GEMM_DTYPES, 128), copy_bytes=4 << 20, warmup=1, rounds=3)


@dataclass(frozen=True)
class _Probe:
    """One ceiling to measure: its function, its arguments, its work per call."""

    name: str
    rate: str
    shape: list[int]
    work: int
    fn: Callable[..., Any]
    values: list[Any]
    precision: str | None = None  # torch.set_float32_matmul_precision while it runs


def _skip_reason(device: DeviceInfo, datasheet: PartPeaks | None, dtype: str) -> str | None:
    if dtype == "tf32":
        if not device.is_gpu:
            return "the CPU has no TF32 matrix path"
        if device.vendor == "rocm":
            return "torch's TF32 switch does not reach hipBLASLt on ROCm (HIPBLASLT_ALLOW_TF32); not measured"
        if datasheet is not None and "tf32" not in datasheet.matrix:
            return f"{datasheet.label} has no TF32 matrix rate"
    return None


def _fp8_gemm(device: DeviceInfo, n: int) -> tuple[Callable[..., Any], list[Any]]:
    """A ``torch._scaled_mm`` GEMM of e4m3 operands (OCP, else the fnuz variant gfx942 runs), unit
    scales, bf16 out; raises what torch raises where neither runs here."""
    import torch

    dev = device.torch_device
    one = torch.ones((), dtype=torch.float32, device=dev)

    def gemm(a: Any, b_t: Any) -> Any:
        return torch._scaled_mm(a, b_t.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

    failures = []
    for dtype in (torch.float8_e4m3fn, torch.float8_e4m3fnuz):
        try:
            small = torch.randn(32, 32, device=dev).to(dtype)
            gemm(small, small)
        except Exception as exc:  # noqa: BLE001  (this dtype does not run here; try the next)
            failures.append(f"{dtype}: {(str(exc).splitlines() or [''])[0][:160]}")
            continue
        # b is held as (N, K) row-major and passed transposed: _scaled_mm wants a column-major second operand.
        return gemm, [torch.randn(n, n, device=dev).to(dtype), torch.randn(n, n, device=dev).to(dtype)]
    raise RuntimeError("torch._scaled_mm does not run here: " + "; ".join(failures))


def _gemm_probe(device: DeviceInfo, datasheet: PartPeaks | None, dtype: str, n: int) -> _Probe:
    import torch

    if dtype == "fp8":
        fn, values = _fp8_gemm(device, n)
    else:
        torch_dtype = {"fp64": torch.float64, "fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16,
                       "fp16": torch.float16}[dtype]
        values = [torch.randn(n, n, device=device.torch_device, dtype=torch_dtype) for _ in range(2)]
        fn = torch.matmul
    precision = {"fp32": "highest", "tf32": "high"}.get(dtype)
    return _Probe(f"gemm {dtype}", gemm_rate(datasheet, dtype), [n, n, n], 2 * n ** 3, fn, values, precision)


def _copy_probe(device: DeviceInfo, size: int) -> _Probe:
    import torch

    count = size // 4
    values = [torch.randn(count, device=device.torch_device), torch.empty(count, device=device.torch_device)]
    return _Probe("copy", "memory", [count * 4], 2 * count * 4, lambda src, dst: dst.copy_(src), values)


def _measure(probe: _Probe, device: DeviceInfo, plan: CalibrationPlan, flusher: L2Flusher,
             datasheet: PartPeaks | None) -> CeilingMeasurement:
    import torch

    config = BenchmarkConfig()
    timing = TimingPlan(warmup=plan.warmup, rounds=rounds_per_pass(plan.rounds, device.is_gpu), device=device,
                        flusher=flusher,
                        method=config.timing.method, cooldown=config.timing.cooldown,
                        allowance_ms=config.timing.launch_allowance_us / 1e3)
    side = SideCalls("solution", probe.fn, FreshArgs([probe.values], slots=plan.warmup + 2 * plan.rounds + 2))
    before = torch.get_float32_matmul_precision()
    try:
        if probe.precision is not None:
            torch.set_float32_matmul_precision(probe.precision)
        paired = measure(side, None, timing)
    finally:
        torch.set_float32_matmul_precision(before)
    result = paired.solution
    achieved = probe.work / (result.latency_ms / 1e3)
    sheet = datasheet_rate(datasheet, probe.rate)
    clocks = sorted(result.sm_clock_mhz)
    return CeilingMeasurement(
        name=probe.name, rate=probe.rate, shape=probe.shape, work=probe.work, latency_ms=result.latency_ms,
        relative_iqr=round(result.summary.relative_iqr, 6), method=result.instrument, achieved_per_s=achieved,
        datasheet_per_s=sheet, fraction_of_datasheet=achieved / sheet if sheet else None,
        sm_clock_median_mhz=clocks[len(clocks) // 2] if clocks else None,
        notes=list(paired.notes) + list(paired.warnings))


def _probes(device: DeviceInfo, datasheet: PartPeaks | None, plan: CalibrationPlan,
            skipped: list[SkippedCeiling]) -> Any:
    """Each probe in turn (made when its turn comes, so only one probe's tensors are alive)."""
    for dtype in GEMM_DTYPES:
        reason = _skip_reason(device, datasheet, dtype)
        if reason is not None:
            skipped.append(SkippedCeiling(name=f"gemm {dtype}", reason=reason))
            continue
        try:
            yield _gemm_probe(device, datasheet, dtype, plan.gemm_sizes[dtype])
        except Exception as exc:  # noqa: BLE001  (a dtype this device or torch build cannot run)
            skipped.append(SkippedCeiling(name=f"gemm {dtype}", reason=f"{type(exc).__name__}: {str(exc)[:300]}"))
    yield _copy_probe(device, plan.copy_bytes)


def measure_ceilings(device: DeviceInfo, plan: CalibrationPlan,
                     progress: Callable[[str], None] = lambda _: None) -> Calibration:
    """Measure every ceiling of ``device`` under ``plan`` (nothing cached)."""
    import torch

    key = calibration_key(device)
    datasheet = datasheet_part(device.name) if device.is_gpu else None
    flusher = L2Flusher(device)
    ceilings: list[CeilingMeasurement] = []
    skipped: list[SkippedCeiling] = []
    for probe in _probes(device, datasheet, plan, skipped):
        progress(f"measuring {probe.name} {'x'.join(map(str, probe.shape))}")
        try:
            ceilings.append(_measure(probe, device, plan, flusher, datasheet))
        except Exception as exc:  # noqa: BLE001  (out of memory, a library without the kernel: say so, go on)
            skipped.append(SkippedCeiling(name=probe.name, reason=f"{type(exc).__name__}: {str(exc)[:300]}"))
        del probe
        if device.is_gpu:
            torch.cuda.empty_cache()
    config = BenchmarkConfig()
    return Calibration(key=key, part=datasheet.name if datasheet is not None else None,
                       measured_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                       tool_version=__version__,
                       timing={"warmup": plan.warmup, "rounds": plan.rounds, "cooldown": config.timing.cooldown,
                               "launch_allowance_us": config.timing.launch_allowance_us},
                       ceilings=ceilings, skipped=skipped)


def calibrate(device: DeviceInfo, refresh: bool = False,
              progress: Callable[[str], None] = lambda _: None) -> Calibration:
    """This device's ceilings: from the cache when it holds this device, driver and torch (unless
    ``refresh``), else measured and cached. An unreadable cache file is measured over."""
    if not refresh:
        try:
            cached = load_calibration(calibration_key(device))
        except CeilingsError as exc:
            progress(f"{exc}: measuring again")
            cached = None
        if cached is not None:
            return cached.model_copy(update={"from_cache": True})
    calibration = measure_ceilings(device, gpu_plan(device) if device.is_gpu else CPU_PLAN, progress)
    path = store_calibration(calibration)
    return calibration.model_copy(update={"cache_file": str(path)})
