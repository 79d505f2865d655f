"""rocprofv3 (ROCm): the command line it runs under and the reading of its CSV output.

``rocprofv3 --kernel-trace --stats --output-format csv -d DIR -o NAME -- program`` writes
``NAME_kernel_trace.csv`` (one row per dispatch: ``Kernel_Name``, ``Start_Timestamp``,
``End_Timestamp`` in ns, ``Workgroup_Size_X/Y/Z``, ``Grid_Size_X/Y/Z``, ``VGPR_Count``,
``LDS_Block_Size``, ``Scratch_Size``, ...) and ``NAME_kernel_stats.csv`` (one row per kernel name:
``Name``, ``Calls``, ``TotalDurationNs``, ``AverageNs``, ``Percentage``, ``MinNs``, ``MaxNs``,
``StdDev``), below DIR (some versions add ``<host>/<pid>/`` folders: the files are searched for).
"""

from __future__ import annotations

import csv
import os
import shutil
from pathlib import Path

from sol_execbench.schema.profiling import KernelLaunch, KernelProfile

ROCPROF_PATHS = ("/opt/rocm/bin/rocprofv3",)
OUTPUT_NAME = "profile"


def find_rocprofv3() -> str | None:
    return shutil.which("rocprofv3") or next((p for p in ROCPROF_PATHS if os.path.exists(p)), None)


def rocprofv3_command(rocprofv3: str, output_dir: Path) -> list[str]:
    return [rocprofv3, "--kernel-trace", "--stats", "--output-format", "csv", "-d", str(output_dir), "-o", OUTPUT_NAME,
            "--"]


def _number(row: dict[str, str], key: str) -> float | None:
    try:
        return float((row.get(key) or "").replace(",", ""))
    except ValueError:
        return None


def _triple(row: dict[str, str], prefix: str) -> tuple[int, ...] | None:
    values = [_number(row, f"{prefix}_{axis}") for axis in "XYZ"]
    return tuple(int(v) for v in values) if all(v is not None for v in values) else None


def parse_kernel_trace(text: str) -> list[KernelLaunch]:
    """Every dispatch of a ``*_kernel_trace.csv``, in start order."""
    rows = []
    for row in csv.DictReader(text.splitlines()):
        start, end = _number(row, "Start_Timestamp"), _number(row, "End_Timestamp")
        name = (row.get("Kernel_Name") or "").strip()
        if start is None or end is None or not name:
            continue
        vgprs = _number(row, "VGPR_Count")
        launch = KernelLaunch(name, end - start, _triple(row, "Grid_Size"), _triple(row, "Workgroup_Size"),
                              int(vgprs) if vgprs is not None else None)
        rows.append((start, _number(row, "Dispatch_Id") or 0, launch))
    return [launch for _, _, launch in sorted(rows, key=lambda r: (r[0], r[1]))]


def parse_kernel_stats(text: str) -> list[KernelProfile]:
    """The rows of a ``*_kernel_stats.csv`` (every kernel the process ran)."""
    out = []
    for row in csv.DictReader(text.splitlines()):
        name, calls, total = (row.get("Name") or "").strip(), _number(row, "Calls"), _number(row, "TotalDurationNs")
        if not name or calls is None or total is None:
            continue
        average = _number(row, "AverageNs")
        out.append(KernelProfile(name=name, calls=int(calls), total_us=total / 1e3,
                                 median_us=(average if average is not None else total / max(calls, 1)) / 1e3))
    return out


def output_files(output_dir: Path, suffix: str) -> list[Path]:
    """``*_kernel_trace.csv`` or ``*_kernel_stats.csv`` below the output folder."""
    return sorted(output_dir.rglob(f"*_{suffix}.csv"))
