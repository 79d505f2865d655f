"""``bench allreduce``: the all-reduce sweep over message sizes, GPU counts and buffer kinds.

Each GPU count is one group of processes, one per GPU (``torch.multiprocessing`` spawn, the
equivalent of torchrun on one host), running ``allreduce_rank.run_rank``; on the CPU, gloo ranks.
The command sets the variables that keep NVLink multicast (NVLS) off before the ranks start."""

from __future__ import annotations

import csv
import json
import os
import socket
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from sol_execbench.files import replace_json
from sol_execbench.schema.benches import AllreduceMeasurement, AllreduceSweep, SkippedConfiguration

from .allreduce_metrics import ELEMENT_BYTES, GB, algbw_gbps, busbw_gbps, fits_by_configuration, message_sizes
from .allreduce_rank import RankPlan, run_rank
from .errors import BenchUsageError
from .figures import missing_matplotlib
from .topology import read_topology

BUFFER_KINDS = ("regular", "nccl_mem_pool", "symm_mem_one_shot", "symm_mem_two_shot", "cupy_nccl")
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
JSON_FILE, CSV_FILE = "allreduce.json", "summary.csv"
LAUNCHES = ("eager", "graph")
_BANDWIDTHS = "the slowest rank's; algbw = S/t, busbw = algbw * 2(n-1)/n"
_WINDOWS = ("after the warm-up calls, `repeats` windows of `iterations` timed calls; time_us is the median "
            "window's time per call, time_us_min the fastest window's")
DEVICE_TIME_RULE = (f"per call: {_WINDOWS}, each window's device time between a CUDA event recorded on the current "
                    "stream before its first call and one after its last (every buffer kind's call runs on or joins "
                    "that stream), divided by its calls; host_time_us: the host clock from before the start event to "
                    "the end event's completion, median window. launch eager: the calls issued one by one; launch "
                    "graph: the `iterations` calls captured into one CUDA graph, each window one replay (device time "
                    f"without the host's launch gaps); {_BANDWIDTHS}")
HOST_TIME_RULE = (f"per call: {_WINDOWS}, each window's host-clock time (gloo on the CPU blocks until each call is "
                  f"done; host_time_us is the same) divided by its calls; launch eager only; {_BANDWIDTHS}")


def time_rule(on_gpu: bool) -> str:
    """The rule ``allreduce_rank`` follows on this kind of device."""
    return DEVICE_TIME_RULE if on_gpu else HOST_TIME_RULE


CSV_COLUMNS = ("ranks", "buffer_kind", "placement", "launch", "bytes", "count", "time_us", "time_us_min",
               "host_time_us", "windows", "algbw_gbps", "busbw_gbps", "checked", "max_abs_error")


@dataclass(frozen=True)
class AllreduceOptions:
    output: Path
    min_bytes: int = 8
    max_bytes: int = 1 << 30
    factor: int = 2
    rank_counts: tuple[int, ...] = ()
    """Empty: 1, 2, 4, ... up to every GPU here (and the full count); on the CPU, 2."""
    buffer_kinds: tuple[str, ...] = BUFFER_KINDS
    warmup: int = 5
    iterations: int = 20
    repeats: int = 5
    """Timed windows of ``iterations`` calls per measurement; the median window is the time."""
    launches: tuple[str, ...] = LAUNCHES
    """graph is skipped on the CPU, with the reason."""
    cpu: bool = False
    """gloo ranks on the CPU even where GPUs exist."""
    timeout_s: float = 600.0
    """For one GPU count's whole group of processes."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def default_rank_counts(gpus: int) -> tuple[int, ...]:
    counts, n = [], 1
    while n <= gpus:
        counts.append(n)
        n *= 2
    if gpus and counts[-1] != gpus:
        counts.append(gpus)
    return tuple(counts)


def run_ranks(plan: RankPlan) -> str | None:
    """Start ``plan.ranks`` processes and wait for them; None, or why the group failed."""
    import torch.multiprocessing as mp

    context = mp.start_processes(run_rank, args=(plan,), nprocs=plan.ranks, join=False, start_method="spawn")
    deadline = time.monotonic() + plan.timeout_s
    try:
        while not context.join(timeout=2.0):
            if time.monotonic() > deadline:
                return f"the {plan.ranks} rank processes did not finish within {plan.timeout_s:g} s"
    except Exception as exc:  # noqa: BLE001 - a rank's exception arrives as ProcessRaisedException/ExitedException
        lines = [line for line in str(exc).strip().splitlines() if line.strip()]
        return f"a rank process failed: {lines[-1][:300] if lines else type(exc).__name__}"
    finally:
        for process in context.processes:
            if process.is_alive():
                process.kill()
                process.join(5)
    return None


def _measurement(record: dict) -> AllreduceMeasurement:
    seconds, size, ranks = record["seconds"], record["bytes"], record["ranks"]
    return AllreduceMeasurement(ranks=ranks, buffer_kind=record["buffer_kind"], placement=record["placement"],
                                bytes=size, count=record["count"], launch=record["launch"], time_us=seconds * 1e6,
                                time_us_min=record["fastest_seconds"] * 1e6, host_time_us=record["host_seconds"] * 1e6,
                                windows=record["windows"], algbw_gbps=algbw_gbps(size, seconds),
                                busbw_gbps=busbw_gbps(size, seconds, ranks), checked=record["max_abs_error"] == 0.0,
                                max_abs_error=record["max_abs_error"])


def _unreached(got: list[dict], ranks: int, kinds: tuple[str, ...], launches: tuple[str, ...],
               failure: str) -> list[SkippedConfiguration]:
    """After a group failed: every kind and launch it had not reached (no row, no skip), with why."""
    reached = {(r["buffer_kind"], launch) for r in got for launch in ((r["launch"],) if r.get("launch") else launches)}
    return [SkippedConfiguration(ranks=ranks, buffer_kind=kind, launch=launch, reason=failure)
            for launch in launches for kind in kinds if (kind, launch) not in reached]


def _platform() -> tuple[str, str, int]:
    """(platform, device name, GPU count)."""
    import torch

    from sol_execbench.platform import current

    device = current()
    return device.vendor, device.name, (torch.cuda.device_count() if device.is_gpu else 0)


def datasheet_link(platform: str, device_name: str) -> tuple[float | None, str]:
    """(the part's datasheet link bandwidth per direction in GB/s, or None; where it comes from or why not)."""
    from sol_execbench.platform.peaks import UnknownPartError, peaks_for

    if platform == "cpu":
        return None, "no GPU link: the ranks ran on the CPU"
    try:
        part = peaks_for(device_name)
    except UnknownPartError:
        return None, f"'{device_name}' has no entry in the peak table (platform/peaks.py)"
    if part.link_bandwidth is None:
        return None, f"{part.label}: no datasheet link figure in the peak table (platform/peaks.py)"
    return part.link_bandwidth / GB, f"{part.label}, {part.link_source}"


def _check(options: AllreduceOptions) -> None:
    unknown = [k for k in options.buffer_kinds if k not in BUFFER_KINDS]
    if unknown:
        raise BenchUsageError(f"--buffer-kind {unknown[0]}: not a buffer kind; give one of {', '.join(BUFFER_KINDS)}")
    try:
        message_sizes(options.min_bytes, options.max_bytes, options.factor)
    except ValueError:
        raise BenchUsageError(f"--min-bytes {options.min_bytes} --max-bytes {options.max_bytes} --factor "
                              f"{options.factor}: give 1 <= min <= max and a factor of 2 or more") from None
    if any(n < 1 for n in options.rank_counts):
        raise BenchUsageError("--ranks: give whole numbers above 0")
    if options.iterations < 1 or options.warmup < 0:
        raise BenchUsageError("--iterations must be at least 1 and --warmup at least 0")
    if options.repeats < 1:
        raise BenchUsageError(f"--repeats {options.repeats}: give a whole number of timed windows, 1 or more")
    wrong = [launch for launch in options.launches if launch not in LAUNCHES]
    if wrong or not options.launches:
        raise BenchUsageError(f"--launch {wrong[0] if wrong else '(none)'}: give eager or graph (repeatable)")


def run_allreduce(options: AllreduceOptions) -> AllreduceSweep:
    """Run the sweep, write ``allreduce.json``, ``summary.csv`` and the figures; return the sweep."""
    import torch

    _check(options)
    os.environ.update(MULTICAST_OFF)  # before any rank starts: spawned ranks inherit it
    platform, device_name, gpus = ("cpu", "CPU (gloo)", 0) if options.cpu else _platform()
    on_gpu = platform != "cpu"
    counts = options.rank_counts or (default_rank_counts(gpus) if on_gpu else (2,))
    if on_gpu and max(counts) > gpus:
        raise BenchUsageError(f"--ranks {max(counts)}: only {gpus} GPU(s) are visible here; give at most {gpus}")
    sizes = tuple(message_sizes(options.min_bytes, options.max_bytes, options.factor))
    launches = tuple(launch for launch in LAUNCHES if launch in options.launches)  # eager first, always
    records: list[dict] = []
    skipped: list[SkippedConfiguration] = []
    with tempfile.TemporaryDirectory(prefix="sol-execbench-allreduce-") as folder:
        for ranks in counts:
            result_path = Path(folder) / f"ranks{ranks}.jsonl"
            plan = RankPlan(ranks=ranks, backend="nccl" if on_gpu else "gloo", on_gpu=on_gpu, port=free_port(),
                            sizes=sizes, buffer_kinds=options.buffer_kinds, warmup=options.warmup,
                            iterations=options.iterations, result_path=str(result_path), timeout_s=options.timeout_s,
                            repeats=options.repeats, launches=launches)
            failure = run_ranks(plan)
            lines = result_path.read_text(encoding="utf-8").splitlines() if result_path.is_file() else []
            got = [json.loads(line) for line in lines]
            records.extend(r for r in got if not r.get("skipped"))
            skipped.extend(SkippedConfiguration(ranks=r["ranks"], buffer_kind=r["buffer_kind"], launch=r["launch"],
                                                reason=r["reason"]) for r in got if r.get("skipped"))
            if failure is not None:  # the sizes measured before it stay; the kinds not reached say why
                skipped.extend(_unreached(got, ranks, options.buffer_kinds, launches, failure))
    measurements = [_measurement(r) for r in records]
    link_gbps, link_source = datasheet_link(platform, device_name)
    sweep = AllreduceSweep(created_at=datetime.now(timezone.utc).isoformat(), backend="nccl" if on_gpu else "gloo",
                           platform=platform, device_name=device_name, torch_version=torch.__version__,
                           dtype=f"float32 ({ELEMENT_BYTES} bytes)", warmup=options.warmup,
                           iterations=options.iterations, repeats=options.repeats, environment=dict(MULTICAST_OFF), time_rule=time_rule(on_gpu),
                           measurements=measurements, skipped=skipped, fits=fits_by_configuration(measurements),
                           topology=read_topology(platform), link_datasheet_gbps=link_gbps, link_source=link_source)
    write_outputs(sweep, options.output, figures=missing_matplotlib() is None)
    return sweep


def write_summary_csv(sweep: AllreduceSweep, path: Path) -> None:
    with open(path, "w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(CSV_COLUMNS)
        for m in sweep.measurements:
            values = [getattr(m, c) for c in CSV_COLUMNS]
            writer.writerow(["" if v is None else f"{v:.6g}" if isinstance(v, float) else v for v in values])


def write_outputs(sweep: AllreduceSweep, output: Path, figures: bool = True) -> list[Path]:
    """The JSON, the CSV and (``figures``) every figure with its CSV; returns the files written."""
    from .allreduce_figures import render_allreduce

    output.mkdir(parents=True, exist_ok=True)
    replace_json(output / JSON_FILE, sweep)
    write_summary_csv(sweep, output / CSV_FILE)
    return [output / JSON_FILE, output / CSV_FILE, *(render_allreduce(sweep, output) if figures else [])]
