"""Device time between processes: does a call of several small kernels keep its level from one
fresh process to the next, and if not, is it the kernels or the gaps between them?

    python benchmarks/process_levels.py [--processes 6] [--calls 60] [--out levels.json]

Each of ``--processes`` fresh processes times the bundled RMSNorm example's eager reference (eight
kernels) at two sizes with ``fidelity.py``'s instruments:

- ``span``: the harness's device time (``harness_median``, method ``device``: each call's first
  kernel start to last kernel end, queued behind the hold, L2 flushed), what the A/A judges;
- ``span_no_flush``: the same without the flush;
- ``events``: the same calls timed by CUDA events behind the hold (method ``events``);
- ``kernel_sum``: the kernels' durations added (``profiler_kernel_sum``), the span less its gaps;

and, first, the process's launch level as a warm child measures it (``evaluate/launch_level.py``:
us per one-element addition queued behind a spin), with its correlation to each reading.

Prints, per size and reading, the value in every process and its spread across processes (largest
less smallest, over the median); writes JSON. The A/A target asks 3% of a device-set latency across
runs; a reading whose spread exceeds it here does so whatever times it. Needs an NVIDIA GPU (exit 2
without one). Internal: ``--child`` is one process's measurement.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # fidelity.py and aa.py, also when loaded by path

from aa import spread  # noqa: E402  (imports no torch)

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "rmsnorm" / "definition.json"
SHAPES = ((4, 1024), (64, 4096))  # rows x hidden: the bundled example's rmsnorm-small and rmsnorm-decode
WARMUP = 10
READINGS = ("span", "kernel_sum", "events", "span_no_flush")
LEVEL = "launch_level"  # the process's launch level, as a warm child measures it


class _NoFlush:
    """A flusher that leaves the cache as the last call left it."""

    def flush(self) -> None:
        pass


def summarize(processes: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, Any]]:
    """Per size and reading: every process's value, the spread across them and, where every process
    has a launch level, their correlation with it."""
    table: dict[str, dict[str, Any]] = {}
    levels = [p.get(LEVEL, {}).get("probe") for p in processes]
    for shape in processes[0]:
        for reading in READINGS if shape != LEVEL else ("probe",):
            values = [p[shape][reading] for p in processes if reading in p.get(shape, {})]
            if values:
                row = table[f"{shape} {reading}"] = {"us": values, "spread": spread(values)}
                if shape != LEVEL and None not in levels and len(values) == len(levels) > 2:
                    with contextlib.suppress(statistics.StatisticsError):
                        row["correlation_with_level"] = statistics.correlation(levels, values)
    return table


def example_reference() -> Any:
    """The bundled RMSNorm example's reference, ``run(x, weight, eps)``, as its definition holds it."""
    namespace: dict[str, Any] = {}
    exec(compile(json.loads(EXAMPLE.read_text())["reference"], str(EXAMPLE), "exec"), namespace)  # noqa: S102
    return namespace["run"]


def measure_here(calls: int) -> dict[str, dict[str, float]]:
    """One process: every size, every reading (us)."""
    import torch  # noqa: PLC0415

    from fidelity import harness_median, profiler_kernel_sum  # noqa: PLC0415

    from sol_execbench.evaluate.launch_level import probe_us  # noqa: PLC0415

    rmsnorm, results = example_reference(), {LEVEL: {"probe": probe_us("cuda")}}

    def device_time_us(values: list, method: str, flusher: Any = None) -> float:
        return harness_median(rmsnorm, values, method, WARMUP, calls, flusher=flusher)["device_time_ms"] * 1e3

    for rows, hidden in SHAPES:
        values = [torch.randn(rows, hidden, device="cuda", dtype=torch.bfloat16),
                  torch.randn(hidden, device="cuda", dtype=torch.bfloat16), 1e-6]
        results[f"{rows}x{hidden}"] = {"span": device_time_us(values, "device"),
                                       "span_no_flush": device_time_us(values, "device", _NoFlush()),
                                       "events": device_time_us(values, "events"),
                                       "kernel_sum": profiler_kernel_sum(rmsnorm, values, calls)["median_ms"] * 1e3}
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=6)
    parser.add_argument("--calls", type=int, default=60, help="timed calls per reading and process")
    parser.add_argument("--out", type=Path, help="write the results here as JSON")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    import torch  # noqa: PLC0415

    if not torch.cuda.is_available() or torch.version.cuda is None:
        print("process_levels.py: needs an NVIDIA GPU (torch.cuda finds none); run it on a GPU machine", file=sys.stderr)
        return 2
    if args.child:
        print(json.dumps(measure_here(args.calls)))
        return 0
    processes = []
    for number in range(args.processes):
        proc = subprocess.run([sys.executable, __file__, "--child", "--calls", str(args.calls)],
                              capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            print(f"process {number + 1} failed (exit {proc.returncode}): {proc.stderr[-400:]}", file=sys.stderr)
            return 1
        processes.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        print(f"process {number + 1} of {args.processes} done", flush=True)
    table = summarize(processes)
    print(f"{'size and reading':26s} {'us in each process':60s} spread, correlation with the launch level")
    for key, row in table.items():
        cells = " ".join(f"{v:7.2f}" for v in row["us"])
        correlation = f"  r={row['correlation_with_level']:+.2f}" if "correlation_with_level" in row else ""
        print(f"{key:26s} {cells[:60]:60s} {row['spread'] * 100:5.1f}%{correlation}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
                                        "calls": args.calls, "processes": processes, "table": table}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
