"""Nsight Compute for benchmarks/fidelity.py: the ground truth of its single-kernel cases.

``ncu_ground_truth`` runs ``fidelity.py --ncu-child CASE`` under ncu and reads ``--csv`` output with
the parsers of ``sol_execbench.profiling.ncu`` (the same ones ``--profile ncu`` uses).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from fidelity_cases import CASES
from sol_execbench.evaluate.child.timing import L2Flusher
from sol_execbench.platform import current
from sol_execbench.profiling.ncu import GPC_CYCLES, GPC_RATE, TIME, find_ncu, ncu_command, parse_ncu_csv, parse_ncu_gpc_ms

NCU_RANGE = "sol_call"  # only kernels inside this NVTX range are profiled
NCU_CALLS = 5
FIDELITY_SCRIPT = Path(__file__).resolve().parent / "fidelity.py"


def ncu_ground_truth(case: str, cache_control: str = "all") -> tuple[float | None, str, float | None]:
    """(gpu__time_duration per call ms, its source, the busiest GPC's elapsed time per call ms).
    ``cache_control``: ncu's ``--cache-control``; ``all`` invalidates every cache before each
    kernel, ``none`` leaves them as the profiled process left them (the child flushes the L2 the
    way the harness does, by reading a buffer twice its size, before every call either way)."""
    ncu = find_ncu()
    if ncu is None:
        return None, "ncu not found", None
    log = Path(tempfile.mkdtemp(prefix="fidelity-ncu-")) / "ncu.csv"
    command = [*ncu_command(ncu, log, NCU_RANGE, (TIME, GPC_CYCLES, GPC_RATE), cache_control),
               sys.executable, str(FIDELITY_SCRIPT), "--ncu-child", case]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"ncu failed: {exc}", None
    text = log.read_text(errors="replace") if log.exists() else ""
    shutil.rmtree(log.parent, ignore_errors=True)
    value = parse_ncu_csv(text, NCU_CALLS)
    if value is None:
        return None, f"ncu gave no kernel rows (exit {done.returncode}): {(text or done.stderr or done.stdout)[-300:]}", None
    return value, f"ncu gpu__time_duration.sum (--cache-control {cache_control})", parse_ncu_gpc_ms(text, NCU_CALLS)


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
