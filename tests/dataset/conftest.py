"""A small suite built from the upstream conformance corpus and the examples, and the real
command line run on it (its own process: real signals, real files)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path


from ..conftest import CONFORMANCE
from ..problems import CLI, LIGHT_CONFIG, add_definition, workloads, write_problem

ROOT = Path(__file__).resolve().parents[2]
# Light problems: about 2 s each on the CPU. Two of them share the definition name
# 'linear_backward' (upstream has it in two folders).
SUITE = {
    "L1/linear_backward": CONFORMANCE / "samples" / "linear_backward",
    "L2/linear_backward": CONFORMANCE / "examples" / "pytorch" / "linear_backward",
    "L1/custom_inputs_matmul": CONFORMANCE / "samples" / "custom_inputs_matmul",
    "Quant/softmax": ROOT / "examples" / "softmax",
}
PROBLEM_FILES = ("definition.json", "workload.jsonl", "config.json")


def build_suite(root: Path, problems: dict[str, Path] = SUITE) -> Path:
    for key, source in problems.items():
        target = root / key
        target.mkdir(parents=True)
        for name in PROBLEM_FILES:
            if (source / name).is_file():
                shutil.copy(source / name, target / name)
    return root


def add_problem(root: Path, key: str, sizes=(8, 16), **definition) -> Path:
    """The vector-add problem of the evaluator tests (its reference is its solution)."""
    return write_problem(root / key, {**add_definition(), **definition}, workloads(*sizes))


def run_env(tmp_path: Path) -> dict[str, str]:
    """Unsandboxed like the other lifecycle tests; every process of the run inherits TMPDIR, which
    names this test's folder (see ``problems.run_processes``)."""
    temp = tmp_path / "tmp"
    temp.mkdir(exist_ok=True)
    return {**os.environ, "SOL_EXECBENCH_SANDBOX": "none", "TMPDIR": str(temp),
            "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}


def light_config(folder: Path) -> Path:
    path = folder / "light.json"
    path.write_text(json.dumps(LIGHT_CONFIG))
    return path


def dataset_command(root: Path, out: Path, config: Path, *extra: str) -> list[str]:
    return [*CLI, "dataset", "run", str(root), "-o", str(out), "--config", str(config), "--device", "cpu", *extra]


def start_run(tmp_path: Path, root: Path, out: Path, config: Path, *extra: str,
              env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen(dataset_command(root, out, config, *extra), env=env or run_env(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def run_to_end(tmp_path: Path, root: Path, out: Path, config: Path, *extra: str,
               timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(dataset_command(root, out, config, *extra), env=run_env(tmp_path), capture_output=True,
                          text=True, timeout=timeout)


