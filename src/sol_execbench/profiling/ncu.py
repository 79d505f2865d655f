"""Nsight Compute: the command line it runs under and the reading of its ``--csv`` output.

The parsers are plain text functions (tested without a GPU against a recorded H100 CSV).
``ncu --csv`` prints one row per kernel launch and metric: ``"ID"`` (launch order),
``"Kernel Name"``, ``"Block Size"``, ``"Grid Size"``, ``"Metric Name"``, ``"Metric Unit"``,
``"Metric Value"`` (thousands separated by commas), after any ``==PROF==`` lines.
"""

from __future__ import annotations

import csv
import io
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from sol_execbench.schema.profiling import KernelLaunch

NCU_PATHS = ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/ncu")
TIME = "gpu__time_duration.sum"
DRAM_READ, DRAM_WRITE = "dram__bytes_read.sum", "dram__bytes_write.sum"
GRID, BLOCK, REGISTERS = "launch__grid_size", "launch__block_size", "launch__registers_per_thread"
# SASS thread instructions by operation; an FMA does two floating-point operations.
_FLOP_OPS = {"fadd": 1, "fmul": 1, "ffma": 2, "dadd": 1, "dmul": 1, "dfma": 2, "hadd": 1, "hmul": 1, "hfma": 2}
FLOP_METRICS = {f"sm__sass_thread_inst_executed_op_{op}_pred_on.sum": weight for op, weight in _FLOP_OPS.items()}
METRICS = (TIME, DRAM_READ, DRAM_WRITE, *FLOP_METRICS, GRID, BLOCK, REGISTERS)

# Second reading of a kernel's time (benchmarks/fidelity.py): cycles elapsed in the busiest GPC over
# the GPC clock, i.e. the time the kernel's blocks ran on the SMs.
GPC_CYCLES, GPC_RATE = "gpc__cycles_elapsed.max", "gpc__cycles_elapsed.avg.per_second"

_TIME_UNITS_MS = {"nsecond": 1e-6, "usecond": 1e-3, "msecond": 1.0, "second": 1e3, "ns": 1e-6, "us": 1e-3, "ms": 1.0}
_RATE_UNITS = {"cycle/second": 1.0, "cycle/msecond": 1e3, "cycle/usecond": 1e6, "cycle/nsecond": 1e9,
               "hz": 1.0, "khz": 1e3, "mhz": 1e6, "ghz": 1e9}
_BYTE_UNITS = {"byte": 1.0, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "kibyte": 2**10, "mibyte": 2**20, "gibyte": 2**30}


def find_ncu() -> str | None:
    return shutil.which("ncu") or next((p for p in NCU_PATHS if os.path.exists(p)), None)


def ncu_command(ncu: str, log_file: Path, nvtx_range: str | None, metrics: tuple[str, ...] = METRICS,
                cache_control: str = "all") -> list[str]:
    """The prefix that runs a program under ncu: clocks as the program leaves them (``--clock-control
    none``: the harness never locks them either), every cache invalidated before each kernel, child
    processes followed, only kernels inside ``nvtx_range`` profiled, CSV in base units to ``log_file``."""
    command = [ncu, "--clock-control", "none", "--cache-control", cache_control, "--target-processes", "all",
               "--metrics", ",".join(metrics), "--csv", "--print-units", "base", "--log-file", str(log_file)]
    if nvtx_range:
        command += ["--nvtx", "--nvtx-include", f"{nvtx_range}/"]
    return command


@dataclass
class NcuLaunch:
    """One profiled launch: its name, launch geometry and metric values (value, unit)."""

    id: str
    name: str
    grid: tuple[int, ...] | None = None
    block: tuple[int, ...] | None = None
    metrics: dict[str, tuple[float, str]] = field(default_factory=dict)

    def time_ms(self) -> float | None:
        value, unit = self.metrics.get(TIME, (None, ""))
        scale = _TIME_UNITS_MS.get(unit)
        return value * scale if value is not None and scale is not None else None

    def _bytes(self, metric: str) -> float | None:
        value, unit = self.metrics.get(metric, (None, ""))
        scale = _BYTE_UNITS.get(unit.lower())
        return value * scale if value is not None and scale is not None else None

    def flops(self) -> float | None:
        """Floating-point operations from the SASS counters; None when none of them was recorded."""
        counted = [self.metrics[m][0] * w for m, w in FLOP_METRICS.items() if m in self.metrics]
        return float(sum(counted)) if counted else None

    def as_launch(self) -> KernelLaunch:
        time_ms = self.time_ms()
        registers = self.metrics.get(REGISTERS)
        grid = self.grid or _scalar_shape(self.metrics.get(GRID))
        block = self.block or _scalar_shape(self.metrics.get(BLOCK))
        return KernelLaunch(self.name, (time_ms or 0.0) * 1e6, grid, block,
                            int(registers[0]) if registers else None, self._bytes(DRAM_READ), self._bytes(DRAM_WRITE),
                            self.flops())


def _scalar_shape(metric: tuple[float, str] | None) -> tuple[int, ...] | None:
    return (int(metric[0]),) if metric else None


def _shape(text: str | None) -> tuple[int, ...] | None:
    """``(256, 1, 1)`` -> (256, 1, 1)."""
    if not text:
        return None
    try:
        parts = tuple(int(p) for p in text.strip().strip("()").split(",") if p.strip())
    except ValueError:
        return None
    return parts or None


def _number(text: str | None) -> float | None:
    try:
        return float((text or "").replace(",", ""))
    except ValueError:
        return None


def parse_ncu_launches(text: str) -> list[NcuLaunch]:
    """Every profiled launch of ``ncu --csv`` output, in launch order: the default ``details`` page
    (a row per launch and metric) or ``--page raw`` (a row per launch, a column per metric, its
    units in the second row)."""
    start = text.find('"ID"')
    if start < 0:
        return []
    rows = list(csv.reader(io.StringIO(text[start:])))
    if not rows:
        return []
    header = rows[0]
    launches = _details(header, rows[1:]) if "Metric Name" in header else _raw(header, rows[1:])
    return sorted(launches, key=lambda k: int(k.id) if k.id.isdigit() else 0)


def _launch(row: dict[str, str]) -> NcuLaunch:
    return NcuLaunch(row.get("ID", ""), (row.get("Kernel Name") or "").strip(), _shape(row.get("Grid Size")),
                     _shape(row.get("Block Size")))


def _details(header: list[str], rows: list[list[str]]) -> list[NcuLaunch]:
    launches: dict[str, NcuLaunch] = {}
    for values in rows:
        row = dict(zip(header, values))
        launch_id = row.get("ID") or ""
        if not launch_id or launch_id == "ID":
            continue
        launch = launches.setdefault(launch_id, _launch(row))
        number = _number(row.get("Metric Value"))
        if number is not None:
            launch.metrics[row.get("Metric Name", "")] = (number, (row.get("Metric Unit") or "").strip())
    return list(launches.values())


def _raw(header: list[str], rows: list[list[str]]) -> list[NcuLaunch]:
    units = rows[0] if rows and not (rows[0][0] if rows[0] else "") else [""] * len(header)
    launches = []
    for values in rows:
        row = dict(zip(header, values))
        if not row.get("ID"):
            continue  # the units row
        launch = _launch(row)
        for name, unit, value in zip(header, units, values):
            number = _number(value) if "__" in name else None
            if number is not None:
                launch.metrics[name] = (number, unit.strip())
        launches.append(launch)
    return launches


def parse_ncu_csv(text: str, calls: int) -> float | None:
    """Mean per-call sum of gpu__time_duration.sum (ms) from ``ncu --csv`` output."""
    times = [t for t in (k.time_ms() for k in parse_ncu_launches(text)) if t is not None]
    return sum(times) / calls if times else None


def parse_ncu_gpc_ms(text: str, calls: int) -> float | None:
    """Mean per-call sum (ms) of each kernel's busiest-GPC cycles over the GPC clock."""
    total, rows = 0.0, 0
    for launch in parse_ncu_launches(text):
        if GPC_CYCLES not in launch.metrics or GPC_RATE not in launch.metrics:
            continue
        cycles, (rate, unit) = launch.metrics[GPC_CYCLES][0], launch.metrics[GPC_RATE]
        scale = _RATE_UNITS.get(unit.lower())
        if scale is None or rate <= 0:
            continue
        total += cycles / (rate * scale) * 1e3
        rows += 1
    return total / calls if rows else None
