"""Evaluation: staging, the sandboxed child, inputs, correctness, timing, guards.

Public entry points: ``sol_execbench.evaluate(...)`` (Python API) and ``evaluate_problem``
(models in, traces out). The child-side modules (child, workload_eval, inputs, timing,
correctness, guards) import torch; this package root does not.
"""

import importlib
import sys
import types

# Parent-side names, imported on first use: the evaluation child imports this package (its modules
# live below it) and needs none of them (25 ms of its start on the CPU machine, schema aside).
_PARENT_NAMES = {"Problem": ".parent.problem", "UsageProblem": ".parent.problem", "load_problem": ".parent.problem",
                 "resolve_paths": ".parent.problem", "EvalOptions": ".parent.runner",
                 "evaluate_problem": ".parent.runner"}


def evaluate(*args, **kwargs):
    """See ``sol_execbench.evaluate.api.evaluate``."""
    from .api import evaluate as _evaluate

    return _evaluate(*args, **kwargs)


def warm_pools(*args, **kwargs):
    """See ``sol_execbench.evaluate.parent.warm_pool.warm_pools`` (imported when used: the pool's
    server runs that module as ``__main__``)."""
    from .parent.warm_pool import warm_pools as _warm_pools

    return _warm_pools(*args, **kwargs)


class _CallableModule(types.ModuleType):
    # The package and the API function share the name ``sol_execbench.evaluate`` (the layout and
    # the documented API both ask for it); calling the package calls the function.
    def __call__(self, *args, **kwargs):
        return evaluate(*args, **kwargs)

    def __getattr__(self, name: str):
        if name not in _PARENT_NAMES:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(_PARENT_NAMES[name], __name__), name)
        setattr(self, name, value)
        return value


sys.modules[__name__].__class__ = _CallableModule

__all__ = ["EvalOptions", "Problem", "UsageProblem", "evaluate", "evaluate_problem", "load_problem", "resolve_paths", "warm_pools"]
