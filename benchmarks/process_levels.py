"""Device time between processes: does a call of several small kernels keep its level from one
fresh process to the next, and if not, is it the kernels or the gaps between them?

    python benchmarks/process_levels.py [--processes 6] [--calls 60] [--out levels.json]

Each of ``--processes`` fresh processes times the bundled RMSNorm example's eager reference (eight
kernels) at two sizes, every call queued behind a hold as in the device pass (the L2 flushed by the
harness's ``L2Flusher`` before the hold rather than after it, so that the flush lies outside the
call's records; the call; a marker kernel), three ways:

- ``span``: the profiler's records, first kernel start to last kernel end (the device time's
  definition, ``docs/timing.md``);
- ``kernel_sum``: the same records, the kernels' durations added (the span less the gaps);
- ``events``: CUDA events recorded behind the hold around the call, no profiler running;

and ``span_no_flush``: the span without the flush. Each is the trimmed mean of the process's calls.
Prints, per size and reading, the value in every process and its spread across processes (largest
less smallest, over the median); writes JSON. The A/A target asks 3% of a device-set latency across
runs; a reading whose spread exceeds it here does so whatever times it. Needs an NVIDIA GPU (exit 2
without one). Internal: ``--child`` is one process's measurement.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterable

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from sol_execbench.evaluate.child.timing.statistics import trimmed_mean  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "rmsnorm" / "definition.json"
SHAPES = ((4, 1024), (64, 4096))  # rows x hidden: the bundled example's rmsnorm-small and rmsnorm-decode
HOLD_CYCLES = 400_000  # about 0.2 ms at 2 GHz: longer than the host takes to launch eight kernels
SPIN_NAMES = ("spin", "sleep")
MARKER_NAME = "FillFunctor"  # the marker after each call: a fill of one element
READINGS = ("span", "kernel_sum", "events", "span_no_flush")


def call_spans(kernels: Iterable[tuple[str, int, int]]) -> list[tuple[float, float]]:
    """(span, kernel sum) in us of each call, from kernel records (name, start ns, end ns): a call's
    kernels are those after a hold's spin kernel and before the next marker. Anything else, the
    flush included, falls outside every call."""
    calls, current = [], None
    for name, start, end in sorted(kernels, key=lambda k: k[1]):
        if any(tag in name for tag in SPIN_NAMES):
            current = []
        elif MARKER_NAME in name:
            if current:
                calls.append(((max(e for _, _, e in current) - current[0][1]) / 1e3,
                              sum(e - s for _, s, e in current) / 1e3))
            current = None
        elif current is not None:
            current.append((name, start, end))
    return calls


def spread(values: list[float]) -> float:
    """Largest less smallest, over the median."""
    return (max(values) - min(values)) / statistics.median(values)


def summarize(processes: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, Any]]:
    """Per size and reading: every process's value and the spread across them."""
    table: dict[str, dict[str, Any]] = {}
    for shape in processes[0]:
        for reading in READINGS:
            values = [p[shape][reading] for p in processes if reading in p.get(shape, {})]
            if values:
                table[f"{shape} {reading}"] = {"us": values, "spread": spread(values)}
    return table


def example_reference() -> Any:
    """The bundled RMSNorm example's reference, ``run(x, weight, eps)``, as its definition holds it."""
    namespace: dict[str, Any] = {}
    exec(compile(json.loads(EXAMPLE.read_text())["reference"], str(EXAMPLE), "exec"), namespace)  # noqa: S102
    return namespace["run"]


def measure_here(calls: int) -> dict[str, dict[str, float]]:
    """One process: every size, every reading (trimmed means, us)."""
    import torch  # noqa: PLC0415
    from torch.profiler import ProfilerActivity, profile  # noqa: PLC0415

    from sol_execbench.evaluate.child.timing.arguments import L2Flusher  # noqa: PLC0415
    from sol_execbench.platform import current  # noqa: PLC0415

    flusher, marker, rmsnorm = L2Flusher(current()), torch.empty(1, device="cuda"), example_reference()
    results: dict[str, dict[str, float]] = {}
    for rows, hidden in SHAPES:
        x = torch.randn(rows, hidden, device="cuda", dtype=torch.bfloat16)
        weight = torch.randn(hidden, device="cuda", dtype=torch.bfloat16)
        for _ in range(20):
            rmsnorm(x, weight, 1e-6)
        torch.cuda.synchronize()
        reading: dict[str, float] = {}
        for flush in (True, False):
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(calls):
                    if flush:
                        flusher.flush()
                    torch.cuda._sleep(HOLD_CYCLES)
                    rmsnorm(x, weight, 1e-6)
                    marker.fill_(0)
                torch.cuda.synchronize()
            kernels = [(e.name(), e.start_ns(), e.start_ns() + e.duration_ns()) for e in prof.profiler.kineto_results.events()
                       if e.device_type() == torch.autograd.DeviceType.CUDA]
            spans = call_spans(kernels)
            if flush:
                reading["span"] = trimmed_mean([s for s, _ in spans])
                reading["kernel_sum"] = trimmed_mean([k for _, k in spans])
            else:
                reading["span_no_flush"] = trimmed_mean([s for s, _ in spans])
        timed = []
        for _ in range(calls):
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            flusher.flush()
            torch.cuda._sleep(HOLD_CYCLES)
            begin.record()
            rmsnorm(x, weight, 1e-6)
            end.record()
            torch.cuda.synchronize()
            timed.append(begin.elapsed_time(end) * 1e3)
        reading["events"] = trimmed_mean(timed)
        results[f"{rows}x{hidden}"] = reading
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
    print(f"{'size and reading':26s} {'us in each process':60s} spread")
    for key, row in table.items():
        cells = " ".join(f"{v:7.2f}" for v in row["us"])
        print(f"{key:26s} {cells[:60]:60s} {row['spread'] * 100:5.1f}%")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
                                        "calls": args.calls, "processes": processes, "table": table}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
