"""The plainest ``torch.distributed`` all-reduce loop, timed by the host clock, beside a ``bench allreduce`` sweep.

    python3 benchmarks/allreduce_parity.py --sweep OUT/allreduce/allreduce.json --ranks 2 --out OUT/allreduce_parity.json
    python3 benchmarks/allreduce_parity.py --cpu --sweep OUT/allreduce/allreduce.json --out OUT/allreduce_parity.json

One process per GPU (``torch.multiprocessing`` spawn, NCCL, with the sweep's multicast-off variables
set before the spawn); with ``--cpu`` two gloo processes on the CPU, a smoke test. For each message
size (the sweep's own sizes at ``--ranks``, or ``--min-bytes``/``--max-bytes``/``--factor``), every
rank runs ``dist.all_reduce(x)`` on a float32 tensor: ``--warmup`` calls, then ``--repeats`` windows of
``--iterations`` calls, each between two ``torch.cuda.synchronize()`` and timed by
``time.perf_counter``; the median window's time per call (the slowest rank's) gives busbw as
nccl-tests define it. The process group is made as the sweep makes it (``device_id`` given, so the
NCCL communicator is created eagerly). The table puts that beside the sweep's ``regular in_place``:
its eager busbw and host-clock time per call (below a few MiB both loops are paced by the host's
``dist.all_reduce`` overhead, tens of microseconds a call, so these two differ by host noise between
processes, not by clock), and its graph-launch busbw (the calls replayed from one CUDA graph: the
device's own time per call). It flags:

- a size where the sweep's device time for ``regular in_place`` (the graph launch where the sweep
  has it, else the eager one; median window) reads more than 2% below the host loop's busbw ("sweep
  slower than host loop": a device-timed sweep should never read slower than a host clock around
  the same collective);
- from 64 MiB up, the direct-launch reference (``cupy_nccl in_place``) against ``regular in_place``
  in % (the target is within 3%);
- the largest size's busbw as a fraction of the sweep's datasheet link bandwidth (per direction).

Everything printed is also written as JSON to ``--out``. A missing or malformed ``--sweep`` file
ends with exit status 2 and one line naming it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

from sol_execbench.benches.allreduce import BUFFER_KINDS, MULTICAST_OFF, free_port  # noqa: E402
from sol_execbench.benches.allreduce_metrics import busbw_gbps, message_sizes  # noqa: E402
from sol_execbench.benches.figures import size_label  # noqa: E402
from sol_execbench.cli.bench_cmd import read_bench_file  # noqa: E402
from sol_execbench.cli.errors import fail  # noqa: E402
from sol_execbench.schema.benches import AllreduceSweep  # noqa: E402

SLOWER_TOLERANCE_PCT = 2.0
"""The sweep's regular in-place device busbw may read this much below the host loop's before a size is flagged."""
DIRECT_LAUNCH_TARGET_PCT = 3.0
DIRECT_LAUNCH_FROM_BYTES = 64 << 20
REFERENCE = ("regular", "in_place")
DIRECT_LAUNCH = ("cupy_nccl", "in_place")


def host_loop_rank(rank: int, ranks: int, port: int, on_gpu: bool, sizes: list[int], warmup: int, iterations: int,
                   repeats: int, result_path: str) -> None:
    """One rank of the host-clock loop; rank 0 writes ``{bytes: seconds per call}`` (the median window's,
    the slowest rank's)."""
    import torch
    import torch.distributed as dist

    device = torch.device("cuda", rank) if on_gpu else torch.device("cpu")
    if on_gpu:
        torch.cuda.set_device(device)
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)
    options = {"device_id": device} if on_gpu else {}  # as the sweep's ranks: the communicator made eagerly
    dist.init_process_group("nccl" if on_gpu else "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=ranks, timeout=datetime.timedelta(seconds=600), **options)
    seconds: dict[int, float] = {}
    try:
        for size in sizes:
            x = torch.zeros(size // 4, dtype=torch.float32, device=device)  # zeros: repeated sums stay finite
            for _ in range(warmup):
                dist.all_reduce(x)
            sync()
            windows = []
            for _ in range(repeats):
                began = time.perf_counter()
                for _ in range(iterations):
                    dist.all_reduce(x)
                sync()
                windows.append((time.perf_counter() - began) / iterations)
            slowest = torch.tensor([statistics.median(windows)], dtype=torch.float64, device=device)
            dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
            seconds[size] = float(slowest.item())
            del x
    finally:
        dist.destroy_process_group()
    if rank == 0:
        Path(result_path).write_text(json.dumps({str(k): v for k, v in seconds.items()}), encoding="utf-8")


def run_host_loop(ranks: int, on_gpu: bool, sizes: list[int], warmup: int, iterations: int,
                  repeats: int) -> dict[int, float]:
    """Seconds per call at every size, the slowest rank's."""
    import torch.multiprocessing as mp

    os.environ.update(MULTICAST_OFF)  # before the spawn: the ranks inherit it
    with tempfile.TemporaryDirectory(prefix="allreduce-parity-") as folder:
        result = Path(folder) / "host_loop.json"
        mp.spawn(host_loop_rank, args=(ranks, free_port(), on_gpu, sizes, warmup, iterations, repeats, str(result)),
                 nprocs=ranks, join=True)
        return {int(k): v for k, v in json.loads(result.read_text(encoding="utf-8")).items()}


def _pct(value: float | None, reference: float | None) -> float | None:
    return None if value is None or not reference else 100.0 * (value / reference - 1.0)


def compare(sweep: AllreduceSweep, ranks: int, host_seconds: dict[int, float]) -> dict:
    """The host loop's busbw beside the sweep's at every size, with the flags (see the module's text)."""
    sweep_busbw: dict[int, dict[tuple[str, str], float]] = {}
    reference_host_us: dict[int, float | None] = {}
    graph_busbw: dict[int, float] = {}
    for m in sweep.measurements:
        if m.ranks != ranks:
            continue
        if m.launch == "graph":
            if (m.buffer_kind, m.placement) == REFERENCE:
                graph_busbw[m.bytes] = m.busbw_gbps
            continue
        sweep_busbw.setdefault(m.bytes, {})[(m.buffer_kind, m.placement)] = m.busbw_gbps
        if (m.buffer_kind, m.placement) == REFERENCE:
            reference_host_us[m.bytes] = m.host_time_us
    present = {key for by_kind in sweep_busbw.values() for key in by_kind}
    columns = [(k, p) for k in BUFFER_KINDS for p in ("in_place", "out_of_place") if (k, p) in present]
    rows = []
    for size in sorted(host_seconds):
        by_kind = sweep_busbw.get(size, {})
        host = busbw_gbps(size, host_seconds[size], ranks)
        eager = by_kind.get(REFERENCE)
        graph = graph_busbw.get(size)
        device, device_launch = (graph, "graph") if graph is not None else (eager, "eager")
        versus_host = _pct(device, host)
        direct = _pct(by_kind.get(DIRECT_LAUNCH), eager) if size >= DIRECT_LAUNCH_FROM_BYTES else None
        rows.append({"bytes": size, "host_loop_time_us": host_seconds[size] * 1e6, "host_loop_busbw_gbps": host,
                     "sweep_busbw_gbps": {f"{k} {p}": by_kind.get((k, p)) for k, p in columns},
                     "eager_vs_host_loop_pct": _pct(eager, host), "sweep_host_time_us": reference_host_us.get(size),
                     "graph_busbw_gbps": graph, "device_launch": device_launch, "sweep_vs_host_loop_pct": versus_host,
                     "sweep_slower_than_host_loop": versus_host is not None and versus_host < -SLOWER_TOLERANCE_PCT,
                     "cupy_nccl_vs_regular_pct": direct,
                     "cupy_nccl_within_target": None if direct is None else abs(direct) <= DIRECT_LAUNCH_TARGET_PCT})
    largest = rows[-1] if rows else None
    link = sweep.link_datasheet_gbps
    largest_vs_link = None
    if largest is not None:
        largest_vs_link = {"bytes": largest["bytes"], "link_datasheet_gbps": link, "link_source": sweep.link_source,
                           "host_loop_fraction": largest["host_loop_busbw_gbps"] / link if link else None,
                           "sweep_fraction": {name: (value / link if link and value is not None else None)
                                              for name, value in largest["sweep_busbw_gbps"].items()}}
    return {"ranks": ranks, "columns": [f"{k} {p}" for k, p in columns], "rows": rows,
            "slower_sizes": [r["bytes"] for r in rows if r["sweep_slower_than_host_loop"]],
            "largest_vs_link": largest_vs_link}


def _gbps(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def render(result: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"all-reduce, {result['ranks']} ranks: the host-clock loop against the sweep's "
                        f"{' '.join(REFERENCE)} (busbw in GB/s; every kind is in the JSON and the figures)")
    for name in ("size", "host loop", "host loop us/call", "sweep eager", "sweep eager host us/call", "sweep graph",
                 "sweep device vs host", f"{DIRECT_LAUNCH[0]} vs regular"):
        table.add_column(name, justify="right")
    for row in result["rows"]:
        versus = row["sweep_vs_host_loop_pct"]
        versus_text = "-" if versus is None else f"{versus:+.1f}% ({row['device_launch']})"
        if row["sweep_slower_than_host_loop"]:
            versus_text = f"[red]{versus_text} slower[/red]"
        direct = row["cupy_nccl_vs_regular_pct"]
        direct_text = "-" if direct is None else f"{direct:+.1f}%" + ("" if row["cupy_nccl_within_target"]
                                                                       else " [red]outside 3%[/red]")
        table.add_row(size_label(row["bytes"]), _gbps(row["host_loop_busbw_gbps"]), _gbps(row["host_loop_time_us"]),
                      _gbps(row["sweep_busbw_gbps"].get(" ".join(REFERENCE))), _gbps(row["sweep_host_time_us"]),
                      _gbps(row["graph_busbw_gbps"]), versus_text, direct_text)
    console = Console()
    console.print(table)
    slower = result["slower_sizes"]
    console.print(f"sweep slower than host loop (by more than {SLOWER_TOLERANCE_PCT:g}%) at: "
                  + (", ".join(size_label(s) for s in slower) if slower else "no size"))
    largest = result["largest_vs_link"]
    if largest is None:
        return
    link = largest["link_datasheet_gbps"]
    if link is None:
        console.print(f"no datasheet link bandwidth in the sweep: {largest['link_source'] or 'none recorded'}")
        return
    console.print(f"at {size_label(largest['bytes'])}, of the {link:.0f} GB/s datasheet link (per direction): host loop "
                  f"{100 * largest['host_loop_fraction']:.0f}%"
                  + "".join(f", {name} {100 * f:.0f}%" for name, f in largest["sweep_fraction"].items() if f is not None))


def _sizes(args: argparse.Namespace, sweep: AllreduceSweep) -> list[int]:
    if args.min_bytes is None and args.max_bytes is None and args.factor is None:
        sizes = sorted({m.bytes for m in sweep.measurements if m.ranks == args.ranks})
        if not sizes:
            fail(f"--sweep {args.sweep}: no measurement with {args.ranks} ranks; give the --ranks the sweep ran, "
                 "or --min-bytes/--max-bytes/--factor")
        return sizes
    try:
        return message_sizes(args.min_bytes or 8, args.max_bytes or 1 << 30, args.factor or 2)
    except ValueError:
        fail(f"--min-bytes {args.min_bytes} --max-bytes {args.max_bytes} --factor {args.factor}: give 1 <= min <= max "
             "and a factor of 2 or more")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", type=Path, required=True, help="allreduce.json of a bench allreduce run")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--min-bytes", type=int, help="default: the sweep's sizes at --ranks")
    parser.add_argument("--max-bytes", type=int)
    parser.add_argument("--factor", type=int)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=20, help="calls per timed window")
    parser.add_argument("--repeats", type=int, default=5, help="timed windows per size; the median is kept")
    parser.add_argument("--cpu", action="store_true", help="gloo ranks on the CPU (a smoke test)")
    parser.add_argument("--out", type=Path, default=Path("allreduce_parity.json"))
    args = parser.parse_args(argv)
    sweep = read_bench_file(AllreduceSweep, args.sweep, "--sweep")
    if args.ranks < 2 or args.iterations < 1 or args.warmup < 0 or args.repeats < 1:
        fail("--ranks must be at least 2, --iterations and --repeats at least 1 and --warmup at least 0")
    sizes = _sizes(args, sweep)
    on_gpu = not args.cpu
    if on_gpu:
        import torch

        if torch.cuda.device_count() < args.ranks:
            fail(f"--ranks {args.ranks}: {torch.cuda.device_count()} GPU(s) visible here; give at most that, or --cpu")
    host_seconds = run_host_loop(args.ranks, on_gpu, sizes, args.warmup, args.iterations, args.repeats)
    result = compare(sweep, args.ranks, host_seconds)
    document = {"sweep": str(args.sweep), "backend": "nccl" if on_gpu else "gloo", "sweep_device": sweep.device_name,
                "sweep_time_rule": sweep.time_rule, "warmup": args.warmup, "iterations": args.iterations,
                "repeats": args.repeats,
                "host_loop_rule": "dist.all_reduce(x), float32; after the warm-up calls, `repeats` windows of "
                                  "`iterations` calls, each timed by time.perf_counter from after one "
                                  "torch.cuda.synchronize() to after the next (gloo on the CPU blocks instead), "
                                  "divided by its calls; per call: the median window's, the slowest rank's; "
                                  "busbw = S/t * 2(n-1)/n",
                "environment": dict(MULTICAST_OFF), **result}
    render(result)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
