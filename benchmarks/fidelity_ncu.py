"""Nsight Compute for benchmarks/fidelity.py: the ground truth of its single-kernel cases.

``ncu_ground_truth`` runs ``fidelity.py --ncu-child CASE`` under ncu and reads ``--csv`` output;
the parsers are plain text functions (tested without a GPU).
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import torch

from fidelity_cases import CASES
from sol_execbench.evaluate.child.timing import L2Flusher
from sol_execbench.platform import current

NCU_RANGE = "sol_call"  # only kernels inside this NVTX range are profiled
NCU_CALLS = 5
FIDELITY_SCRIPT = Path(__file__).resolve().parent / "fidelity.py"

_NCU_UNITS = {"nsecond": 1e-6, "usecond": 1e-3, "msecond": 1.0, "second": 1e3, "ns": 1e-6, "us": 1e-3, "ms": 1.0}


# Second reading of a kernel's time: cycles elapsed in the busiest GPC over the GPC clock, i.e. the
# time the kernel's blocks ran on the SMs. It tells whether ncu's extra 1.3 to 1.6 us on tiny kernels
# is the front end's launch processing: on the H100 it equals gpu__time_duration to 0.1 us, so not.
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
               sys.executable, str(FIDELITY_SCRIPT), "--ncu-child", case]
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
