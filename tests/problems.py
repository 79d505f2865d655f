"""Small problems written by tests: a definition, workloads and a solution from Python source."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ADD_REFERENCE = """import torch

def run(a, b):
    return a + b
"""


def add_definition(n: str = "N", dtype: str = "float32") -> dict[str, Any]:
    return {
        "name": "vector_add",
        "axes": {n: {"type": "var"}},
        "inputs": {"a": {"shape": [n], "dtype": dtype}, "b": {"shape": [n], "dtype": dtype}},
        "outputs": {"c": {"shape": [n], "dtype": dtype}},
        "reference": ADD_REFERENCE,
    }


def workloads(*sizes: int, axis: str = "N") -> list[dict[str, Any]]:
    return [{"uuid": f"w{i}-{s}", "axes": {axis: s}, "inputs": {"a": {"type": "random"}, "b": {"type": "random"}}}
            for i, s in enumerate(sizes)]


def solution(code: str, *, dps: bool = False, name: str = "candidate", language: str = "pytorch",
             definition: str = "vector_add") -> dict[str, Any]:
    return {
        "name": name, "definition": definition, "author": "tests",
        "spec": {"languages": [language], "entry_point": "kernel.py::run", "destination_passing_style": dps},
        "sources": [{"path": "kernel.py", "content": code}],
    }


def write_problem(root: Path, definition: dict, wls: list[dict], sol: dict | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "definition.json").write_text(json.dumps(definition, indent=1))
    (root / "workload.jsonl").write_text("".join(json.dumps(w) + "\n" for w in wls))
    if sol is not None:
        (root / "solution.json").write_text(json.dumps(sol, indent=1))
    return root


def process_alive(pid: int) -> bool:
    """Whether the process exists and is not a zombie (an unreaped exit counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False
