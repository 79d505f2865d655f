"""sol-execbench: is the kernel correct, how fast is it, how far from the speed of light.

The package root stays light (no torch import): ``sol_execbench.evaluate(...)`` is loaded on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:  # pragma: no cover
    from sol_execbench.evaluate.api import evaluate as evaluate


def __getattr__(name: str) -> Any:
    # ``sol_execbench.evaluate`` is both the evaluation package and, being callable, the API.
    if name == "evaluate":
        import importlib

        return importlib.import_module("sol_execbench.evaluate")
    raise AttributeError(name)
