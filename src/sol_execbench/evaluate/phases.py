"""The evaluation child's phase log: with SOL_EXECBENCH_PHASE_LOG=1 it prints, on stderr (shown
with -v), the time since the child started at each phase, down to the parts of each workload."""

from __future__ import annotations

import os
import sys
import time

PHASE_LOG_ENV = "SOL_EXECBENCH_PHASE_LOG"
PREFIX = "[sol-execbench phase]"
_started = time.perf_counter()


def restart_clock() -> None:
    """A warm child counts from when it was handed its job, not from when it started warming."""
    global _started
    _started = time.perf_counter()


def phase(name: str) -> None:
    if os.environ.get(PHASE_LOG_ENV) == "1":
        print(f"{PREFIX} {time.perf_counter() - _started:8.3f} s  {name}", file=sys.stderr, flush=True)


def split_log(text: str) -> tuple[list[str], str]:
    """A child's output (with -v) split into its phase lines (prefix removed) and the rest."""
    phases, rest = [], []
    for line in text.splitlines():
        if line.startswith(PREFIX):
            phases.append(line[len(PREFIX):].strip())
        else:
            rest.append(line)
    return phases, "\n".join(rest)
