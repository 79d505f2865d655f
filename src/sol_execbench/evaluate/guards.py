"""Checks against solutions that tamper with the measurement (basic set).

- integrity: the harness functions and timer entry points are recorded before solution code is
  imported; a replaced one is REWARD_HACK.
- outputs must be plain ``torch.Tensor`` (no subclasses, no lazy proxies).
- threads the solution starts and leaves running across the timed region are REWARD_HACK.
"""

from __future__ import annotations

import importlib
import threading
from typing import Any

import torch

# (module, dotted attribute) pairs whose identity must not change once solution code runs.
_WATCHED = [
    ("time", "perf_counter"),
    ("time", "perf_counter_ns"),
    ("torch", "cuda.synchronize"),
    ("torch", "cuda.Event.record"),
    ("torch", "cuda.Event.elapsed_time"),
    ("torch", "cuda.Event.synchronize"),
    ("sol_execbench.evaluate.timing", "time_calls"),
    ("sol_execbench.evaluate.timing", "_time_events"),
    ("sol_execbench.evaluate.timing", "_time_cpu"),
    ("sol_execbench.evaluate.timing", "FreshArgs.__call__"),
    ("sol_execbench.evaluate.timing", "L2Flusher.flush"),
    ("sol_execbench.evaluate.timing", "summarize"),
    ("sol_execbench.evaluate.correctness", "compare"),
    ("sol_execbench.evaluate.inputs", "make_inputs"),
    ("sol_execbench.evaluate.guards", "foreign_output_types"),
    ("sol_execbench.evaluate.workload_eval", "evaluate_workload"),
    ("sol_execbench.evaluate.workload_eval", "_measure"),
    ("sol_execbench.evaluate.workload_eval", "_call"),
]


def _resolve(module: str, dotted: str) -> Any:
    obj: Any = importlib.import_module(module)
    for part in dotted.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


class IntegritySnapshot:
    """Identities of the watched functions and of the timing-method table, taken at construction."""

    def __init__(self) -> None:
        from sol_execbench.evaluate import timing

        self._ids = [(m, a, id(_resolve(m, a))) for m, a in _WATCHED]
        self._methods = dict(timing.METHODS)

    def tampered(self) -> list[str]:
        from sol_execbench.evaluate import timing

        changed = [f"{m}.{a}" for m, a, ident in self._ids if id(_resolve(m, a)) != ident]
        if timing.METHODS != self._methods:
            changed.append("sol_execbench.evaluate.timing.METHODS")
        return changed


def foreign_output_types(outputs: list[Any]) -> list[str]:
    """Type names of outputs that are not exactly ``torch.Tensor``."""
    return [type(t).__name__ for t in outputs if type(t) is not torch.Tensor]


def live_threads() -> set[int]:
    return {t.ident for t in threading.enumerate() if t.is_alive() and t.ident is not None}


def new_threads(before: set[int]) -> list[str]:
    return [t.name for t in threading.enumerate() if t.is_alive() and t.ident not in before]
