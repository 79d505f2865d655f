"""A/A: each problem's reference submitted as its own solution, so the true speedup is 1.00.

    python benchmarks/aa.py [--runs 3] [--only rmsnorm,linear] [--warm] [--out out/aa.json]

Problems: every conformance problem with a workload file (tests/data/conformance, blobs shipped),
the bundled examples, and generated problems of single small kernels and of a dozen eager
operators (``SYNTHETIC``). Each run is one CLI invocation per problem (a fresh evaluation process,
or with ``--warm`` one from the default warm pool, which it starts in the evaluations' environment
unless one answers, and refuses with exit 2 where one started in another answers). Prints per
workload the speedup of every run with its interval, and the spread across runs; writes JSON;
exits 0 when every target holds:

- in every run, every workload's A/A speedup within [0.95, 1.05];
- its interval contains 1.00 for at least 95% of the workload-runs;
- where the device time sets the latency in every run, the solution's latency across runs within
  3% from 10 us, within 0.5 us below; where the host sets it in any run (``host`` or ``mixed``),
  the speedup across runs within 5%.

A device-set latency that misses is shown beside the reference's spread and the speedup's: one that
moved with the reference's while the speedup held within 3% is a level both sides met in that
process (``shared_level``), still a miss. After the table: the evaluation processes' launch levels
(NVIDIA, ``evaluation.environment.launch_level_us``), with ``--warm`` the warm pool's counts
(processes handed out, the seconds evaluations waited for them, processes turned away for their
level), how many workload runs had another process on the GPU around their timed calls
(``evaluation.environment.clocks.other_processes``), and per kind of workload (device-set,
host-set or mixed) the median and largest spread across runs and how many missed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))  # the warm pool's status, as this checkout's package reads it
CORPUS = REPO / "tests" / "data" / "conformance"
EXAMPLES = REPO / "examples"
SKIP = {"gqa_paged_decode"}  # blobs not shipped
SPEEDUP_BAND = (0.95, 1.05)
INTERVAL_SHARE = 0.95
LOG_CHARS = 2000  # of a run that did not pass: its verdict's log, kept in the JSON
DEVICE_SPREAD, DEVICE_SPREAD_FLOOR_MS, DEVICE_SPREAD_MIN_MS = 0.03, 0.0005, 0.01
HOST_SPEEDUP_SPREAD = 0.05

_EAGER_RMSNORM = """import torch

def run(x, w):
    h = x.float()
    var = h.pow(2).mean(-1, keepdim=True)
    h = h * torch.rsqrt(var + 1e-6)
    h = h.to(x.dtype).float() * (1.0 + w.float())
    h = torch.clamp(h, -65504.0, 65504.0)
    return (h * 1.0 + 0.0).to(x.dtype)
"""

# Generated problems: (name, inputs, reference, workloads as {axis: value}).
SYNTHETIC: list[tuple[str, dict[str, Any], str, list[dict[str, int]]]] = [
    ("aa_add_small", {"a": {"shape": ["n"], "dtype": "float32"}, "b": {"shape": ["n"], "dtype": "float32"}},
     "import torch\n\ndef run(a, b):\n    return a + b\n", [{"n": 4096}, {"n": 1 << 20}]),
    ("aa_eager_rmsnorm", {"x": {"shape": ["rows", "hidden"], "dtype": "bfloat16"},
                          "w": {"shape": ["hidden"], "dtype": "bfloat16"}},
     _EAGER_RMSNORM, [{"rows": 7, "hidden": 4096}, {"rows": 512, "hidden": 4096}]),
    ("aa_gemm", {"a": {"shape": ["m", "k"], "dtype": "bfloat16"}, "b": {"shape": ["k", "n"], "dtype": "bfloat16"}},
     "import torch\n\ndef run(a, b):\n    return a @ b\n", [{"m": 2048, "n": 2048, "k": 2048}]),
]
_OUTPUTS = {"aa_add_small": {"c": {"shape": ["n"], "dtype": "float32"}},
            "aa_eager_rmsnorm": {"y": {"shape": ["rows", "hidden"], "dtype": "bfloat16"}},
            "aa_gemm": {"c": {"shape": ["m", "n"], "dtype": "bfloat16"}}}


def _write_synthetic(root: Path) -> list[Path]:
    made = []
    for name, inputs, reference, workloads in SYNTHETIC:
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        axes = {a: {"type": "var"} for spec in inputs.values() for a in spec["shape"]}
        definition = {"name": name, "op_type": "aa", "axes": axes, "inputs": inputs, "outputs": _OUTPUTS[name],
                      "reference": reference, "description": "A/A benchmark problem"}
        (folder / "definition.json").write_text(json.dumps(definition, indent=1))
        lines = [json.dumps({"uuid": f"{name}-{'-'.join(f'{k}{v}' for k, v in w.items())}", "axes": w,
                             "inputs": {n: {"type": "random"} for n in inputs}}) for w in workloads]
        (folder / "workload.jsonl").write_text("\n".join(lines) + "\n")
        made.append(folder)
    return made


def problems(only: list[str] | None, scratch: Path) -> list[Path]:
    """Each problem once: the corpus holds some definitions twice (an example and a sample)."""
    found = sorted({d.parent for d in CORPUS.rglob("definition.json") if (d.parent / "workload.jsonl").exists()})
    found += sorted(d.parent for d in EXAMPLES.glob("*/definition.json"))
    found = [p for p in found if p.name not in SKIP] + _write_synthetic(scratch / "synthetic")
    if only:
        found = [p for p in found if any(part in str(p) for part in only)]
    seen: dict[str, Path] = {}
    for p in found:
        key = (p / "definition.json").read_text() + (p / "workload.jsonl").read_text()
        seen.setdefault(key, p)
    return list(seen.values())


def aa_solution(problem: Path, scratch: Path) -> Path:
    """A solution whose source is the problem's own reference, called as the reference is."""
    definition = json.loads((problem / "definition.json").read_text())
    solution = {"name": f"{definition['name']}_reference_as_solution", "definition": definition["name"],
                "author": "benchmarks/aa.py",
                "spec": {"languages": ["pytorch"], "entry_point": "reference_copy.py::run",
                         "destination_passing_style": False},
                "sources": [{"path": "reference_copy.py", "content": definition["reference"]}]}
    path = scratch / "solutions" / f"{abs(hash(str(problem)))}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(solution))
    return path


CLI = [sys.executable, "-c", "from sol_execbench.cli.main import main; main()"]


def _cli_environment() -> dict[str, str]:
    """This checkout's source first on the path, the environment unchanged where it already is (a
    warm pool hands its processes only to evaluations whose start-up variables, PYTHONPATH among
    them, match its own)."""
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if REPO / "src" not in {Path(p).resolve() for p in paths}:
        paths.insert(0, str(REPO / "src"))
    return dict(os.environ, PYTHONPATH=os.pathsep.join(paths))


class PoolMismatch(Exception):
    """A warm pool answers whose processes these evaluations would not be handed."""


def own_warm_pool() -> bool:
    """Make sure the default warm pool serves these evaluations: start it in their environment
    unless one answers; whether this started it. Raises PoolMismatch when one started in another
    start-up environment answers (its processes would not be handed out: every evaluation would
    run in a fresh process)."""
    from sol_execbench.evaluate.parent.warm_pool import pool_status, startup_fingerprint

    env = _cli_environment()
    status = pool_status(None)
    if status is None:
        subprocess.run([*CLI, "worker", "start"], env=env, check=True, capture_output=True)
        status = pool_status(None)
        if status is None:
            raise PoolMismatch("the warm pool did not start")
        return True
    if status.get("fingerprint") != startup_fingerprint(env, None):
        raise PoolMismatch(f"the warm pool (pid {status.get('pid')}) was started in another start-up environment "
                           "(PYTHONPATH, CUDA_VISIBLE_DEVICES, ...): stop it with `sol-execbench worker stop`")
    return False


def run_once(problem: Path, solution: Path, out: Path, warm: bool, extra: list[str]) -> list[dict[str, Any]]:
    command = [*CLI, str(problem), "--solution", str(solution), "-o", str(out),
               *([] if warm else ["--no-warm-pool"]), *extra]
    env = _cli_environment()
    if out.exists():
        out.unlink()
    proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1800)
    traces = [json.loads(line) for line in out.read_text().splitlines() if line.strip()] if out.exists() else []
    if not traces:
        print(f"  {problem.name}: no traces (exit {proc.returncode}): {proc.stderr[-400:]}", file=sys.stderr)
    return traces


def _row(trace: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The facts of one trace the targets need, and its workload's uuid."""
    ev = trace["evaluation"]
    perf = ev.get("performance") or {}
    sol, interval = perf.get("solution_timing") or {}, perf.get("speedup_interval") or {}
    return {"status": ev["status"], "speedup": perf.get("speedup_factor"), "low": interval.get("low"),
            "high": interval.get("high"), "verdict": interval.get("verdict"), "latency_ms": perf.get("latency_ms"),
            "reference_ms": perf.get("reference_latency_ms"), "method": sol.get("method"),
            "host_bound": sol.get("host_bound"), "device_time_ms": sol.get("device_time_ms"),
            "host_time_ms": sol.get("host_time_ms", sol.get("host_median_ms")),
            "warnings": ev.get("warnings") or [],  # e.g. other processes on the GPU
            "launch_level_us": (ev.get("environment") or {}).get("launch_level_us"),  # the process's (NVIDIA)
            # pids of other processes the driver listed on the GPU around the timed calls
            "other_processes": ((ev.get("environment") or {}).get("clocks") or {}).get("other_processes") or [],
            # why a run did not pass (the verdict's log), so that a miss can be told from a harness fault
            "log": (ev.get("log") or "")[:LOG_CHARS] if ev["status"] != "PASSED" else ""}, trace["workload"]["uuid"]


def spread(values: list[float]) -> float:
    """Largest less smallest, over the median: how far a reading moved across runs or processes."""
    return (max(values) - min(values)) / statistics.median(values)


def judge(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The targets for one workload over its runs."""
    passed = [r for r in runs if r["status"] == "PASSED" and r["speedup"]]
    if len(passed) < len(runs) or not passed:
        return {"ok": False, "why": "not PASSED in every run"}
    speedups = [r["speedup"] for r in passed]
    in_band = all(SPEEDUP_BAND[0] <= s <= SPEEDUP_BAND[1] for s in speedups)
    covered = sum(1 for r in passed if r["low"] is not None and r["low"] <= 1.0 <= r["high"])
    host_runs = sum(bool(r["host_bound"]) for r in passed)
    # Which time set the latency: the device in every run, the host in every run, or mixed. Where the
    # host set it in any run, the latency follows the absolute host time, which moves between
    # processes on a shared host: such a workload is judged, like a host-set one, by its speedup.
    setter = "dev" if host_runs == 0 else "host" if host_runs == len(passed) else "mixed"
    if setter != "dev":
        moved = spread(speedups)
        steady = moved <= HOST_SPEEDUP_SPREAD
    else:
        lat = [r["latency_ms"] for r in passed]
        moved = spread(lat)
        steady = (max(lat) - min(lat) <= DEVICE_SPREAD_FLOOR_MS if statistics.median(lat) < DEVICE_SPREAD_MIN_MS
                  else moved <= DEVICE_SPREAD)
    verdict = {"ok": in_band and steady, "in_band": in_band, "covered": covered, "runs": len(passed),
               "setter": setter, "spread": moved, "steady": steady}
    if setter == "dev" and not steady:
        verdict.update(shared_level(passed, speedups))
    return verdict


def shared_level(passed: list[dict[str, Any]], speedups: list[float]) -> dict[str, Any]:
    """For a device-set latency that moved across runs: how far the reference's latency and the
    speedup moved. A latency that moved while the speedup held moved with the reference's, a level
    both sides met in that process (docs/timing.md, known limits), not a difference in how they
    were timed; the target still counts it as missed."""
    ref = [r.get("reference_ms") for r in passed]
    found: dict[str, Any] = {"speedup_spread": spread(speedups)}
    if all(ref):
        found["reference_spread"] = spread(ref)
    found["shared_level"] = "reference_spread" in found and found["speedup_spread"] <= DEVICE_SPREAD
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", help="comma-separated parts of problem paths to keep")
    parser.add_argument("--warm", action="store_true", help="take evaluation processes from the warm pool")
    parser.add_argument("--config", type=Path, help="benchmark config for every evaluation (e.g. a CPU smoke run)")
    parser.add_argument("--out", type=Path, help="write the results here as JSON")
    parser.add_argument("--isolation", choices=("strict", "auto", "off"),
                        help="the evaluations' --isolation (compare the sandbox's cost: auto against off)")
    args = parser.parse_args(argv)
    extra = (["--config", str(args.config)] if args.config else []) + (["--isolation", args.isolation] if args.isolation else [])
    began = time.time()
    try:
        started_pool = own_warm_pool() if args.warm else False
    except PoolMismatch as exc:
        print(f"aa.py --warm: {exc}", file=sys.stderr)
        return 2
    try:
        return _run_all(args, extra, began)
    finally:
        if started_pool:
            subprocess.run([*CLI, "worker", "stop"], env=_cli_environment(), capture_output=True)


def _run_all(args: argparse.Namespace, extra: list[str], began: float) -> int:
    with tempfile.TemporaryDirectory(prefix="sol-aa-") as tmp:
        scratch = Path(tmp)
        chosen = problems(args.only.split(",") if args.only else None, scratch)
        per_workload: dict[str, list[dict[str, Any]]] = {}
        levels: list[float] = []  # each evaluation process's launch level (NVIDIA), in order
        for run in range(args.runs):
            for problem in chosen:
                solution = aa_solution(problem, scratch)
                started = time.time()
                rows = [_row(t) for t in run_once(problem, solution, scratch / "traces.jsonl", args.warm, extra)]
                for trace_row, uuid in rows:
                    per_workload.setdefault(f"{problem.name}/{uuid}", []).append(trace_row)
                levels += [level for level in {r.get("launch_level_us") for r, _ in rows} if level]
                shown = " ".join(f"{r['speedup']:.3f}" if r["speedup"] else r["status"] for r, _ in rows)
                print(f"run {run + 1} {problem.name}: {time.time() - started:.1f} s {shown}", flush=True)
                _write(args.out, {"runs": args.runs, "warm": args.warm, "workloads": per_workload})
    return report(args.out, Collected(args.runs, args.warm, per_workload, levels,
                                      pool_counts() if args.warm else None), began)


@dataclass(frozen=True)
class Collected:
    """What the runs gave: each workload's rows (one per run), each evaluation process's launch
    level (NVIDIA) and the warm pool's counts (``pool_counts``; None: no pool)."""

    runs: int
    warm: bool
    per_workload: dict[str, list[dict[str, Any]]]
    levels: list[float]
    pool: dict[str, Any] | None


def report(out: Path | None, found: Collected, began: float) -> int:
    """Judge every workload, print the table and the summary, write the JSON; the exit code."""
    verdicts = {key: judge(runs) for key, runs in found.per_workload.items()}
    covered = sum(v.get("covered", 0) for v in verdicts.values())
    total = sum(v.get("runs", 0) for v in verdicts.values())
    share = covered / total if total else 0.0
    print_table(found.per_workload, verdicts)
    processes = process_levels(found.levels)
    spreads = spread_summary(verdicts)
    shared = sum(bool(r.get("other_processes")) for runs in found.per_workload.values() for r in runs)
    rows = sum(len(runs) for runs in found.per_workload.values())
    shared_line = f"workload runs with another process on the GPU around their timed calls: {shared} of {rows}"
    for line in (processes or {}).get("line"), pool_line(found.pool), shared_line, *map(spread_line, spreads.items()):
        if line:
            print(line)
    all_ok = all(v["ok"] for v in verdicts.values()) and share >= INTERVAL_SHARE and bool(verdicts)
    print(f"intervals containing 1.00: {covered} of {total} ({share * 100:.1f}%, target {INTERVAL_SHARE * 100:.0f}%); "
          f"workloads meeting every target: {sum(v['ok'] for v in verdicts.values())} of {len(verdicts)} "
          f"(device-set latencies that moved with the reference's while the speedup held: "
          f"{sum(bool(v.get('shared_level')) for v in verdicts.values())}); {time.time() - began:.0f} s")
    _write(out, {"runs": found.runs, "warm": found.warm, "interval_share": share, "all_targets_met": all_ok,
                 "workloads": found.per_workload, "verdicts": verdicts, "processes": processes, "pool": found.pool,
                 "runs_beside_other_processes": shared,
                 "spreads": spreads})
    return 0 if all_ok else 1


def print_table(per_workload: dict[str, list[dict[str, Any]]], verdicts: dict[str, dict[str, Any]]) -> None:
    """Per workload: the speedup and interval of every run, the spread across runs, who set the
    latency, whether it met every target; beside a miss, what the runs said about it."""
    print(f"{'workload':58s} {'speedups (interval) per run':70s} {'spread':>7s} set   ok")
    for key, runs in per_workload.items():
        cells = "  ".join(f"{r['speedup']:.3f}({r['low']:.3f},{r['high']:.3f})" if r["speedup"] and r["low"] is not None
                          else r["status"] for r in runs)
        v = verdicts[key]
        moved = f"{v['spread'] * 100:6.2f}%" if "spread" in v else "-"
        print(f"{key[:58]:58s} {cells[:70]:70s} {moved:>7s} {v.get('setter', '-'):5s} "
              f"{'yes' if v['ok'] else 'NO'}")
        if "shared_level" in v:
            run_levels = [r.get("launch_level_us") for r in runs]
            print(f"    the reference's latency moved {v.get('reference_spread', float('nan')) * 100:.2f}% across the runs, "
                  f"the speedup {v['speedup_spread'] * 100:.2f}%: "
                  + ("a level both sides shared in each process" if v["shared_level"] else "not a shared level")
                  + (f"; the processes' launch levels {' '.join(f'{lv:.3f}' for lv in run_levels)} us"
                     if all(run_levels) else ""))
        if not v["ok"]:  # what the traces said beside a miss (another process on the GPU, clocks)
            for number, run in enumerate(runs, 1):
                for warning in run.get("warnings", []):
                    print(f"    run {number}: {warning[:150]}")
                if run.get("log"):
                    print(f"    run {number} {run['status']}: {run['log'][:600]}")


SPREAD_KINDS = {"dev": "device-set latencies", "host": "host-set and mixed speedups"}


def spread_summary(verdicts: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per kind of workload (``SPREAD_KINDS``), what its target measures across runs (``judge``'s
    spread): median and largest, and how many missed that target; to set two A/As of different
    settings side by side."""
    found: dict[str, dict[str, Any]] = {}
    for kind in SPREAD_KINDS:
        judged = [v for v in verdicts.values() if "spread" in v and (v["setter"] == "dev") == (kind == "dev")]
        if judged:
            values = sorted(v["spread"] for v in judged)
            found[kind] = {"workloads": len(values), "median": statistics.median(values), "largest": values[-1],
                           "missed": sum(not v["steady"] for v in judged)}
    return found


def spread_line(item: tuple[str, dict[str, Any]]) -> str:
    kind, s = item
    return (f"{SPREAD_KINDS[kind]} across runs ({s['workloads']} workloads): median spread {s['median'] * 100:.2f}%, "
            f"largest {s['largest'] * 100:.2f}%, {s['missed']} missed")


def process_levels(levels: list[float]) -> dict[str, Any] | None:
    """The evaluation processes' launch levels (one per evaluation; NVIDIA only): whether the runs'
    processes ran at one level."""
    if not levels:
        return None
    ordered = sorted(levels)
    found: dict[str, Any] = {"launch_levels_us": levels, "spread": ordered[-1] / ordered[0] - 1}
    found["line"] = (f"launch levels of the {len(levels)} evaluation processes: {ordered[0]:.3f} to "
                     f"{ordered[-1]:.3f} us (median {statistics.median(ordered):.3f}, spread "
                     f"{found['spread'] * 100:.1f}%)")
    return found


POOL_COUNTS = ("takes", "take_wait_s", "take_wait_max_s", "ending_wait_s", "turned_away")


def pool_counts() -> dict[str, Any] | None:
    """The default warm pool's counts since it started (``worker status``): processes handed out,
    the seconds evaluations waited for a ready one and for the last one to end, and processes
    turned away for their launch level.
    None: no pool answered."""
    from sol_execbench.evaluate.parent.warm_pool import pool_status

    status = pool_status(None)
    return {key: status.get(key) for key in POOL_COUNTS} if status else None


def pool_line(pool: dict[str, Any] | None) -> str | None:
    """What the warm pool's counts say of the runs' cost: a warm process turned away for its level
    makes a later evaluation wait for the next."""
    if not pool or pool.get("takes") is None:
        return None
    return (f"the warm pool handed out {pool['takes']} process(es); evaluations waited {pool['take_wait_s']:.1f} s "
            f"in all for a ready one (longest {pool['take_wait_max_s']:.1f} s) and {pool['ending_wait_s']:.1f} s "
            f"for the last one to end; it turned away {pool['turned_away']} process(es) for their launch level")


def _write(path: Path | None, report: dict[str, Any]) -> None:
    """After every problem too: a run cut short still leaves its numbers."""
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    sys.exit(main())
