"""Running a short program in a fresh interpreter with this checkout's sources first on the path:
for what only shows in a process that has imported nothing yet (import hooks, lazy imports)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def run_program(program: str, timeout_s: float = 120) -> list[str]:
    """The program's stdout lines; fails the test with its stderr when it exits non-zero."""
    run = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=str(SRC)), timeout=timeout_s)
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout.split("\n")
