"""Speed of light and scores: bounds of problems on a named part (``sol-execbench bound``), SOL
scores of a run's traces, and comparisons of trace sets (``sol-execbench-baseline``).

The bound counts FLOPs with torch (meta tensors); scores and comparisons are plain arithmetic on
traces and import no torch, so this package's ``__init__`` imports nothing heavy."""

from __future__ import annotations

from typing import Any

_BOUND_NAMES = ("BoundInputError", "bound_problem", "derive_problem", "price_problem")


def __getattr__(name: str) -> Any:
    if name in _BOUND_NAMES:
        from . import bound

        return getattr(bound, name)
    raise AttributeError(name)


__all__ = list(_BOUND_NAMES)
