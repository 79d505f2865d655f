"""Timing fidelity on a GPU: every timing method against the device's own kernel time.

One batched call times kernels from about 2 us to 2 ms (elementwise, RMSNorm, softmax, GEMM, a
two-kernel solution, a solution that works on a second stream) by the harness's ``device``,
``events`` and ``graph`` methods, by ``triton.testing.do_bench``, and by the sum of the
profiler's kernel durations, and by a graph differential (CUDA events only); the ground truth is Nsight Compute's ``gpu__time_duration.sum``
(``ncu --clock-control none``, caches flushed before each kernel, only kernels inside the
``sol_call`` NVTX range), with the profiler's kernel sum as the fallback where ncu is missing
or refused. Prints a table, writes JSON (``--out``), and checks issue 4's targets:

- the default method within 5% of ground truth for kernels of 20 us and more, within 15% or
  1 us below that;
- repeat-run spread of the default method's median under 2% for kernels of 50 us and more
  (the repeats run first for each case, each printed with its SM clock from the method's probe).

Below 20 us the ground truth is ncu's time less ncu's own floor: what it reads for an empty
kernel beyond what the device method reads for it, measured in the same run (the
``empty_kernel`` case; 1.3 us on the H100, more than the 1 us allowance by itself). Without that
case in the run, raw ncu is the truth there too. Both verdicts are printed, and the graph
differential (no profiler at all) as a third reading.

Usage: ``python benchmarks/fidelity.py --out fidelity.json [--cases add_4k,gemm_8k] [--no-ncu]
[--after-load N]``.
Internal: ``--ncu-child CASE`` is the process ncu profiles.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import torch  # noqa: E402

from sol_execbench.evaluate import host_recheck  # noqa: E402
from sol_execbench.evaluate.clock_watch import device_uuid  # noqa: E402
from sol_execbench.evaluate.timing import FreshArgs, L2Flusher, time_calls  # noqa: E402
from sol_execbench.evaluate.timing_methods import activity, cupti_tsc  # noqa: E402
from sol_execbench.evaluate.timing_methods.base import CALL_RANGE, SETUP_RANGE  # noqa: E402
from sol_execbench.evaluate.timing_methods.graph import reset_after_failed_capture  # noqa: E402
from sol_execbench.platform import current  # noqa: E402
from sol_execbench.platform.clocks import ClockReader  # noqa: E402
from sol_execbench.schema import TimingConfig  # noqa: E402

DEFAULT_COOLDOWN = TimingConfig().cooldown  # what an evaluation uses unless its config says otherwise

NCU_RANGE = "sol_call"
NCU_CALLS = 5
TARGET_LARGE_US, TARGET_LARGE_ERR = 20.0, 0.05
TARGET_SMALL_ERR, TARGET_SMALL_ABS_US = 0.15, 1.0
SPREAD_MIN_US, SPREAD_MAX = 50.0, 0.02
CALIBRATION_CASES = frozenset({"empty_kernel"})  # measures the instruments, not a kernel: no target


# -- cases ------------------------------------------------------------------------------------------

def _randn(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, device="cuda", dtype=dtype)


def _add(n: int) -> tuple[Callable, list]:
    return (lambda x, y: x + y), [_randn(n), _randn(n)]


def _softmax(rows: int, cols: int) -> tuple[Callable, list]:
    return (lambda x: torch.softmax(x, dim=-1)), [_randn(rows, cols)]


def _gemm(m: int, n: int, k: int) -> tuple[Callable, list]:
    return (lambda a, b: a @ b), [_randn(m, k, dtype=torch.bfloat16), _randn(k, n, dtype=torch.bfloat16)]


def _empty_kernel() -> tuple[Callable, list]:
    """A kernel that does nothing (``torch.cuda._sleep`` for zero cycles): what each instrument
    reads for no work at all, its own floor."""
    return (lambda: torch.cuda._sleep(0)), []


def _gemm_relu(m: int, n: int, k: int) -> tuple[Callable, list]:
    return (lambda a, b: torch.relu(a @ b)), [_randn(m, k, dtype=torch.bfloat16), _randn(k, n, dtype=torch.bfloat16)]


def _second_stream(rows: int, cols: int) -> tuple[Callable, list]:
    side = torch.cuda.Stream()

    def on_side_stream(x):
        current = torch.cuda.current_stream()
        side.wait_stream(current)
        with torch.cuda.stream(side):
            y = torch.softmax(x, dim=-1)
        current.wait_stream(side)
        y.record_stream(current)
        return y

    return on_side_stream, [_randn(rows, cols)]


def _rmsnorm(rows: int, hidden: int) -> tuple[Callable, list]:
    values = [_randn(rows, hidden, dtype=torch.bfloat16), torch.ones(hidden, device="cuda", dtype=torch.bfloat16)]
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return (lambda x, w: torch.nn.functional.rms_norm(x, (hidden,), w, 1e-5)), values

    @triton.jit
    def rmsnorm_kernel(x_ptr, w_ptr, y_ptr, n, eps, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        offs = tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + row * n + offs, mask=mask, other=0.0).to(tl.float32)
        inv = tl.rsqrt(tl.sum(x * x, axis=0) / n + eps)
        w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * n + offs, (x * inv * w).to(tl.bfloat16), mask=mask)

    def rmsnorm(x, w):
        y = torch.empty_like(x)
        rmsnorm_kernel[(x.shape[0],)](x, w, y, hidden, 1e-5, BLOCK=triton.next_power_of_2(hidden))
        return y

    return rmsnorm, values


CASES: dict[str, tuple[str, Callable[[], tuple[Callable, list]]]] = {
    "empty_kernel": ("an empty kernel (each instrument's floor)", _empty_kernel),
    "add_4k": ("fp32 add, 4,096 elements", lambda: _add(4096)),
    "add_1m": ("fp32 add, 1M elements", lambda: _add(1 << 20)),
    "softmax_64x8192": ("fp32 softmax 64x8192", lambda: _softmax(64, 8192)),
    "gemm_256x4096x4096": ("bf16 GEMM 256x4096x4096", lambda: _gemm(256, 4096, 4096)),
    "rmsnorm_4096x4096": ("bf16 RMSNorm 4096x4096 (one Triton kernel)", lambda: _rmsnorm(4096, 4096)),
    "add_16m": ("fp32 add, 16M elements", lambda: _add(1 << 24)),
    "softmax_4096x8192": ("fp32 softmax 4096x8192", lambda: _softmax(4096, 8192)),
    "two_kernel_gemm_relu": ("bf16 GEMM 4096^3 then ReLU (two kernels)", lambda: _gemm_relu(4096, 4096, 4096)),
    "second_stream_softmax": ("softmax 4096x8192 on a second stream, joined", lambda: _second_stream(4096, 8192)),
    "add_64m": ("fp32 add, 64M elements", lambda: _add(1 << 26)),
    "gemm_8192x4096x4096": ("bf16 GEMM 8192x4096x4096", lambda: _gemm(8192, 4096, 4096)),
    "gemm_8192x8192x8192": ("bf16 GEMM 8192^3 (~2 ms)", lambda: _gemm(8192, 8192, 8192)),
}


# -- measurements ---------------------------------------------------------------------------------

def harness_median(fn: Callable, values: list, method: str, warmup: int, iterations: int,
                   cooldown: float = DEFAULT_COOLDOWN) -> dict[str, Any]:
    device = current()
    fresh = FreshArgs([values], slots=warmup + iterations + 1)
    flusher = L2Flusher(device)
    m = time_calls(fn, fresh, warmup=warmup, iterations=iterations, device=device, flusher=flusher,
                   method=method, cooldown=cooldown)
    # As an evaluation does: a host-bound verdict gets a second look without the profiler (the
    # evaluation also checks each output there; these cases are the harness's own functions).
    host_recheck.recheck(m, lambda k: (host_recheck.timed_call(fn, values, flusher, device)[1], None), device)
    stats = m.stats()
    return {"median_ms": stats.median_ms, "method_ran": m.method, "note": m.note, "host_bound": m.host_bound,
            "host_median_ms": stats.host_median_ms, "warnings": m.warnings,
            "sm_clock_median_mhz": stats.sm_clock_median_mhz, "sm_clock_min_mhz": stats.sm_clock_min_mhz,
            "device_ms": m.device_ms, "sm_clock_mhz": m.sm_clock_mhz}


def do_bench_median(fn: Callable, values: list, rep_ms: int = 100) -> float | None:
    try:
        import triton.testing
    except ImportError:
        return None
    return float(triton.testing.do_bench(lambda: fn(*values), warmup=25, rep=rep_ms, return_mode="median"))


def graph_differential(fn: Callable, values: list, calls: int = 100, replays: int = 5) -> float | None:
    """A third reading of a call's device time that uses neither CUPTI nor Nsight Compute: CUDA
    events around a graph of ``calls`` x (L2 flush, call) less a graph of ``calls`` flushes alone,
    per call (ms). Inside a graph the next kernel is dispatched as the previous one ends, so this
    is the time the call adds to a busy device; median of ``replays``. None where capture fails."""
    flusher = L2Flusher(current())

    def per_call(body: Callable[[], Any]) -> float:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up off the default stream, as capture requires
            for _ in range(3):
                body()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(calls):
                body()
        graph.replay()
        torch.cuda.synchronize()
        times = []
        for _ in range(replays):
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            graph.replay()
            end.record()
            end.synchronize()
            times.append(begin.elapsed_time(end) / calls)
        return statistics.median(times)

    try:
        return per_call(lambda: (flusher.flush(), fn(*values))) - per_call(flusher.flush)
    except Exception:  # noqa: BLE001  (a case that cannot be captured: the column stays empty)
        reset_after_failed_capture()  # as the graph method does: later cases start from a clean stream
        return None


def call_anatomy(device: list[activity.Activity],
                 launches: dict[int, activity.Activity]) -> tuple[int, int, int, int] | None:
    """One call's kernels (ns): their summed durations, the span from the first start to the last
    end, the idle time inside the span, and the most by which a later kernel's launch call returned
    after the kernels before it had finished (0: every launch was queued in time). None: no kernel."""
    kernels = sorted((a for a in device if a.kind == "kernel"), key=lambda a: a.start_ns)
    if not kernels:
        return None
    busy_until, idle, late = kernels[0].end_ns, 0, 0
    for k in kernels[1:]:
        idle += max(0, k.start_ns - busy_until)
        launch = launches.get(k.correlation)
        if launch is not None:
            late = max(late, launch.end_ns - busy_until)
        busy_until = max(busy_until, k.end_ns)
    return sum(a.end_ns - a.start_ns for a in kernels), kernels[-1].end_ns - kernels[0].start_ns, idle, late


def profiler_kernel_sum(fn: Callable, values: list, calls: int = 20) -> dict[str, float | None]:
    """From the profiler, calls synchronised one by one, the flush included (the device method's loop
    until the fifth session; it now queues the flush right before the call): the mean per-call
    sum of kernel durations (the fallback ground truth, ``median_ms``), and, per call, the span from
    the first kernel start to the last end (``span_ms``), the idle time inside that span
    (``idle_ms``), and how long after the previous kernel ended a later kernel's launch call
    returned (``late_launch_ms``; 0 when each launch was queued while the previous kernel ran)."""
    from torch.profiler import ProfilerActivity, profile, record_function

    flusher = L2Flusher(current())
    for _ in range(3):
        fn(*values)
    torch.cuda.synchronize()
    cupti_tsc.prepare()  # CUPTI 12.6u2-13.0 drops kernel records under Kineto's TSC callback (see cupti_tsc)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        cupti_tsc.after_start()
        for i in range(calls):
            with record_function(SETUP_RANGE):
                flusher.flush()
            torch.cuda.synchronize()
            with record_function(f"{CALL_RANGE}#{i}"):
                fn(*values)
            torch.cuda.synchronize()
    records = activity.from_kineto(prof.profiler.kineto_results.events())
    found = activity.attribute(records, calls, CALL_RANGE, SETUP_RANGE)
    launches = {r.correlation: r for r in records if r.kind in activity.LAUNCH_KINDS and r.correlation}
    anatomies = [a for a in (call_anatomy(c.device, launches) for c in found.calls) if a is not None]
    sums, spans, idles, lates = zip(*anatomies) if anatomies else ((), (), (), ())
    if not sums:
        return {"median_ms": None, "span_ms": None, "idle_ms": None, "late_launch_ms": None}
    return {"median_ms": statistics.mean(sums) / 1e6, "span_ms": statistics.median(spans) / 1e6,
            "idle_ms": statistics.median(idles) / 1e6, "late_launch_ms": statistics.median(lates) / 1e6}


_NCU_UNITS = {"nsecond": 1e-6, "usecond": 1e-3, "msecond": 1.0, "second": 1e3, "ns": 1e-6, "us": 1e-3, "ms": 1.0}


# Second reading of a kernel's time: cycles elapsed in the busiest GPC over the GPC clock, i.e. the
# time the kernel's blocks ran on the SMs. Added to test whether ncu's extra 1.3 to 1.6 us on tiny
# kernels is the front end's launch processing; on the H100 it equals gpu__time_duration to 0.1 us,
# so it is not (docs/timing.md).
GPC_CYCLES, GPC_RATE = "gpc__cycles_elapsed.max", "gpc__cycles_elapsed.avg.per_second"
_RATE_UNITS = {"cycle/second": 1.0, "cycle/msecond": 1e3, "cycle/usecond": 1e6, "cycle/nsecond": 1e9,
               "hz": 1.0, "khz": 1e3, "mhz": 1e6, "ghz": 1e9}


def _ncu_rows(text: str) -> dict[str, dict[str, tuple[float, str]]]:
    """Per kernel ID: metric name -> (value, unit) from ``ncu --csv`` output."""
    start = text.find('"ID"')
    kernels: dict[str, dict[str, tuple[float, str]]] = {}
    if start < 0:
        return kernels
    for row in csv.DictReader(io.StringIO(text[start:])):
        value = (row.get("Metric Value") or "").replace(",", "")
        try:
            number = float(value)
        except ValueError:
            continue
        kernels.setdefault(row.get("ID", ""), {})[row.get("Metric Name", "")] = (
            number, (row.get("Metric Unit") or "").strip())
    return kernels


def parse_ncu_csv(text: str, calls: int) -> float | None:
    """Mean per-call sum of gpu__time_duration.sum (ms) from ``ncu --csv`` output."""
    total, rows = 0.0, 0
    for metrics in _ncu_rows(text).values():
        value, unit = metrics.get("gpu__time_duration.sum", (None, ""))
        scale = _NCU_UNITS.get(unit)
        if value is None or scale is None:
            continue
        total += value * scale
        rows += 1
    return total / calls if rows else None


def parse_ncu_gpc_ms(text: str, calls: int) -> float | None:
    """Mean per-call sum (ms) of each kernel's busiest-GPC cycles over the GPC clock."""
    total, rows = 0.0, 0
    for metrics in _ncu_rows(text).values():
        if GPC_CYCLES not in metrics or GPC_RATE not in metrics:
            continue
        cycles, (rate, unit) = metrics[GPC_CYCLES][0], metrics[GPC_RATE]
        scale = _RATE_UNITS.get(unit.lower())
        if scale is None or rate <= 0:
            continue
        total += cycles / (rate * scale) * 1e3
        rows += 1
    return total / calls if rows else None


def ncu_ground_truth(case: str, cache_control: str = "all") -> tuple[float | None, str, float | None]:
    """(gpu__time_duration per call ms, its source, the busiest GPC's elapsed time per call ms).
    ``cache_control``: ncu's ``--cache-control``; ``all`` invalidates every cache before each
    kernel, ``none`` leaves them as the profiled process left them (the child flushes the L2 the
    way the harness does, by reading a buffer twice its size, before every call either way)."""
    ncu = shutil.which("ncu") or ("/usr/local/cuda/bin/ncu" if os.path.exists("/usr/local/cuda/bin/ncu") else None)
    if ncu is None:
        return None, "ncu not found", None
    command = [ncu, "--clock-control", "none", "--cache-control", cache_control, "--metrics",
               f"gpu__time_duration.sum,{GPC_CYCLES},{GPC_RATE}",
               "--csv", "--print-units", "base", "--nvtx", "--nvtx-include", f"{NCU_RANGE}/",
               sys.executable, str(Path(__file__).resolve()), "--ncu-child", case]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"ncu failed: {exc}", None
    value = parse_ncu_csv(done.stdout, NCU_CALLS)
    if value is None:
        return None, f"ncu gave no kernel rows (exit {done.returncode}): {(done.stderr or done.stdout)[-300:]}", None
    return value, f"ncu gpu__time_duration.sum (--cache-control {cache_control})", parse_ncu_gpc_ms(done.stdout, NCU_CALLS)


def ncu_child(case: str) -> None:
    """The process ncu profiles: warm-up outside the range, then NCU_CALLS calls inside it."""
    fn, values = CASES[case][1]()
    flusher = L2Flusher(current())
    for _ in range(3):
        fn(*values)
    torch.cuda.synchronize()
    for _ in range(NCU_CALLS):
        flusher.flush()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push(NCU_RANGE)
        fn(*values)
        torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()


# -- one case, the targets, the report -----------------------------------------------------------

@dataclass
class CaseResult:
    name: str
    description: str
    ground_truth_ms: float
    ground_truth_source: str
    methods: dict[str, Any] = field(default_factory=dict)
    repeat_medians_ms: list[float] = field(default_factory=list)
    repeat_clocks_mhz: list[float | None] = field(default_factory=list)  # each repeat's median probe clock
    repeat_notes: list[str | None] = field(default_factory=list)  # the timing note of each repeat found host-bound
    repeat_calls: list[dict[str, Any]] = field(default_factory=list)  # each repeat's per-call device spans and clocks
    after_load: list[dict[str, Any]] = field(default_factory=list)  # --after-load runs (not in the targets)
    error: float = 0.0
    spread: float | None = None
    accuracy_ok: bool = False
    spread_ok: bool | None = None
    accuracy_basis: str = "ground truth"  # what the accuracy verdict was judged against
    accuracy_ok_raw: bool | None = None  # below 20 us: the verdict against ncu's raw time, where the floor was taken out


def relative_error(measured_ms: float, truth_ms: float) -> float:
    return abs(measured_ms - truth_ms) / truth_ms if truth_ms > 0 else float("inf")


def accuracy_met(measured_ms: float, truth_ms: float) -> bool:
    """Issue 4's accuracy target: within 5% from 20 us, within 15% or 1 us below."""
    if truth_ms * 1e3 >= TARGET_LARGE_US:
        return relative_error(measured_ms, truth_ms) <= TARGET_LARGE_ERR
    return relative_error(measured_ms, truth_ms) <= TARGET_SMALL_ERR or abs(measured_ms - truth_ms) * 1e3 <= TARGET_SMALL_ABS_US


def check_targets(result: CaseResult) -> None:
    truth_us = result.ground_truth_ms * 1e3
    measured = result.methods["device"]["median_ms"]
    result.error = relative_error(measured, result.ground_truth_ms)
    result.accuracy_ok = accuracy_met(measured, result.ground_truth_ms)
    medians = result.repeat_medians_ms
    if len(medians) > 1:
        result.spread = (max(medians) - min(medians)) / statistics.median(medians)
        result.spread_ok = result.spread < SPREAD_MAX if truth_us >= SPREAD_MIN_US else None


def run_case(name: str, args: argparse.Namespace) -> CaseResult:
    description, build = CASES[name]
    fn, values = build()
    methods: dict[str, Any] = {}
    # The repeats for the spread come first, one after another as an evaluation's timed loops do.
    # Placed after do_bench (100 ms without a pause) and ncu, as until the sixth session, they
    # measured the bench's own heating: on the H100 a 350 us GEMM read 3 to 23% slow for seconds
    # after such a load, the SM clock down to 1530 MHz (see --after-load).
    runs = [harness_median(fn, values, "device", args.warmup, args.iterations, cooldown=args.cooldown)
            for _ in range(args.repeats)]
    methods["device"] = runs[0]
    for method in ("events", "graph"):
        methods[method] = harness_median(fn, values, method, args.warmup, args.iterations, cooldown=args.cooldown)
    # The default device method idles after each call (TimingConfig.cooldown); this is it without.
    methods["device_back_to_back"] = harness_median(fn, values, "device", args.warmup, args.iterations, cooldown=0.0)
    methods["graph_differential"] = {"median_ms": graph_differential(fn, values)}
    methods["do_bench"] = {"median_ms": do_bench_median(fn, values)}
    methods["profiler_kernel_sum"] = profiler_kernel_sum(fn, values)
    truth, source, gpc_ms = ((None, "ncu skipped (--no-ncu)", None) if args.no_ncu
                             else ncu_ground_truth(name, args.ncu_cache_control))
    methods["ncu_gpc_elapsed"] = {"median_ms": gpc_ms}
    if truth is None:
        truth, source = methods["profiler_kernel_sum"]["median_ms"], f"profiler kernel sum ({source})"
    result = CaseResult(name, description, truth, source, methods, [r["median_ms"] for r in runs],
                        [r["sm_clock_median_mhz"] for r in runs],
                        [r["note"] if r["host_bound"] else None for r in runs],
                        [{"device_ms": r["device_ms"], "sm_clock_mhz": r["sm_clock_mhz"]} for r in runs])
    for _ in range(args.after_load):
        result.after_load.append(after_load(fn, values, args))
    check_targets(result)
    return result


LOAD_MS = 1000


def after_load(fn: Callable, values: list, args: argparse.Namespace) -> dict[str, Any]:
    """One device-method run right after a second of the same calls back to back (do_bench):
    what a preceding sustained load does to the next timed loop with clocks as found."""
    do_bench_median(fn, values, rep_ms=LOAD_MS)
    run = harness_median(fn, values, "device", args.warmup, args.iterations, cooldown=args.cooldown)
    return {"median_ms": run["median_ms"], "sm_clock_median_mhz": run["sm_clock_median_mhz"],
            "sm_clock_min_mhz": run["sm_clock_min_mhz"]}


def empty_kernel_offset(results: list[CaseResult]) -> float | None:
    """How much more than the device method the ground truth reads for an empty kernel (ms), when
    that case ran with ncu: the difference between the two instruments' own floors."""
    for r in results:
        if r.name == "empty_kernel" and r.ground_truth_source.startswith("ncu"):
            return r.ground_truth_ms - r.methods["device"]["median_ms"]
    return None


def error_less_offset(result: CaseResult, offset_ms: float) -> float:
    """The device method's relative error against the ground truth less the empty-kernel offset."""
    return relative_error(result.methods["device"]["median_ms"], result.ground_truth_ms - offset_ms)


def judge_small_less_floor(results: list[CaseResult], offset_ms: float | None) -> None:
    """Kernels under 20 us: the accuracy verdict against ncu's time less its floor (``offset_ms``,
    from ``empty_kernel_offset``), the raw verdict kept beside it. Nothing changes without an
    offset, or for a case whose truth is not ncu's."""
    if offset_ms is None:
        return
    for r in results:
        if (r.name in CALIBRATION_CASES or r.ground_truth_ms * 1e3 >= TARGET_LARGE_US
                or not r.ground_truth_source.startswith("ncu")):
            continue
        r.accuracy_ok_raw = r.accuracy_ok
        r.accuracy_ok = accuracy_met(r.methods["device"]["median_ms"], r.ground_truth_ms - offset_ms)
        r.accuracy_basis = f"ncu less its empty-kernel floor ({offset_ms * 1e3:.2f} us)"


def _us(ms: float | None) -> str:
    return "-" if ms is None else f"{ms * 1e3:9.2f}"


def print_table(results: list[CaseResult]) -> None:
    columns = ["device", "device_back_to_back", "events", "graph", "do_bench", "profiler_kernel_sum", "ncu_gpc_elapsed",
               "graph_differential"]
    print(f"{'case':26s} {'truth us':>9s} " + " ".join(f"{c[:9]:>9s}" for c in columns) + "   err%  spread%  ok")
    for r in results:
        cells = " ".join(_us(r.methods[c]["median_ms"]) for c in columns)
        spread = "-" if r.spread is None else f"{r.spread * 100:6.2f}"
        ok = "floor" if r.name in CALIBRATION_CASES else "yes" if r.accuracy_ok and r.spread_ok is not False else "NO"
        print(f"{r.name:26s} {_us(r.ground_truth_ms)} {cells} {r.error * 100:6.2f} {spread:>7s}  {ok}")
    print("ground truth:", "; ".join(sorted({r.ground_truth_source for r in results})))
    print(f"{'profiled calls, synchronised':26s} {'sum us':>9s} {'span us':>9s} {'idle us':>9s} {'late us':>9s}")
    for r in results:
        k = r.methods["profiler_kernel_sum"]
        print(f"{r.name:26s} {_us(k['median_ms'])} {_us(k.get('span_ms'))} {_us(k.get('idle_ms'))} "
              f"{_us(k.get('late_launch_ms'))}")
    print("device-method runs: median us @ median SM clock MHz (the probe after each call)")
    for r in results:
        runs = ", ".join(f"{m * 1e3:.2f}@{c:.0f}" if c else f"{m * 1e3:.2f}" for m, c in
                         zip(r.repeat_medians_ms, r.repeat_clocks_mhz))
        loaded = ", ".join(f"{a['median_ms'] * 1e3:.2f}@{a['sm_clock_median_mhz'] or 0:.0f}" for a in r.after_load)
        print(f"  {r.name:26s} {runs}" + (f" | after a sustained load: {loaded}" if loaded else ""))
        for k, note in enumerate(r.repeat_notes):
            if note:
                print(f"    run {k + 1} host-bound: {note}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write the results here as JSON")
    parser.add_argument("--cases", help="comma-separated subset of: " + ", ".join(CASES))
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--iterations", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=5, help="device-method runs per case for the spread")
    parser.add_argument("--cooldown", type=float, default=DEFAULT_COOLDOWN,
                        help="timing.cooldown of the default method's runs (default: an evaluation's)")
    parser.add_argument("--no-ncu", action="store_true", help="use the profiler's kernel sum as ground truth")
    parser.add_argument("--ncu-cache-control", choices=("all", "none"), default="all",
                        help="ncu's --cache-control for the ground truth (default all)")
    parser.add_argument("--after-load", type=int, default=0, metavar="N",
                        help="also N device-method runs per case, each right after a second of back-to-back calls "
                             "(reported, not in the targets)")
    parser.add_argument("--ncu-child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.ncu_child:
        ncu_child(args.ncu_child)
        return 0
    if not torch.cuda.is_available():
        print("fidelity.py needs a GPU", file=sys.stderr)
        return 2
    device = current()
    reader = ClockReader(device.vendor, device.index, device_uuid(device))  # NVML needs the UUID under remapped visibility
    report: dict[str, Any] = {"device": device.to_dict(), "torch": torch.__version__,
                              "clocks_before": asdict(reader.read()),
                              "targets": {"accuracy": "device within 5% of truth at >= 20 us, within 15% or 1 us below",
                                          "spread": "repeat-run spread of the device median < 2% at >= 50 us"},
                              "cases": []}
    began = time.time()
    results = []
    for name in args.cases.split(",") if args.cases else list(CASES):
        results.append(run_case(name, args))
        report["cases"].append(asdict(results[-1]))
        workaround = cupti_tsc.state()
        report["cupti_timestamp_workaround"] = asdict(workaround) if workaround is not None else None
        _write(args.out, report)  # after every case: a run cut short still leaves its numbers
        print(f"{name}: done at {time.time() - began:.0f} s", flush=True)
    offset = empty_kernel_offset(results)
    judge_small_less_floor(results, offset)
    report["cases"] = [asdict(r) for r in results]
    report.update(clocks_after=asdict(reader.read()), seconds=round(time.time() - began, 1),
                  all_targets_met=all(r.accuracy_ok and r.spread_ok is not False for r in results
                                      if r.name not in CALIBRATION_CASES))
    print_table(results)
    if offset is not None:
        report["empty_kernel_offset_ms"] = offset
        print(f"on an empty kernel the ground truth reads {offset * 1e3:.2f} us more than the device method; "
              f"error of each case against the ground truth less that offset (the verdict below 20 us; "
              f"against raw ncu in brackets):")
        for r in results:
            raw = "" if r.accuracy_ok_raw is None else f"  (raw ncu: {'met' if r.accuracy_ok_raw else 'missed'})"
            print(f"  {r.name:26s} {error_less_offset(r, offset) * 100:6.2f}%{raw}")
    print("kernels under 20 us, the device method against the graph differential (events only; neither CUPTI nor "
          "ncu; larger kernels run into the power cap in it, flushes and calls back to back):")
    for r in results:
        diff = r.methods["graph_differential"]["median_ms"]
        if diff and r.ground_truth_ms * 1e3 < TARGET_LARGE_US:
            measured = r.methods["device"]["median_ms"]
            print(f"  {r.name:26s} {(measured - diff) * 1e3:+7.2f} us {relative_error(measured, diff) * 100:6.2f}%  "
                  f"{'met' if accuracy_met(measured, diff) else 'missed'}")
    _write(args.out, report)
    return 0 if report["all_targets_met"] else 1


def _write(path: Path | None, report: dict[str, Any]) -> None:
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(report, indent=2, default=str))


if __name__ == "__main__":
    sys.exit(main())
