"""Evaluation: staging, the sandboxed child, inputs, correctness, timing, guards.

Public entry points: ``sol_execbench.evaluate(...)`` (Python API) and ``evaluate_problem``
(models in, traces out). The child-side modules (child, workload_eval, inputs, timing,
correctness, guards) import torch; this package root does not.
"""

import sys
import types

from .parent.problem import Problem, UsageProblem, load_problem, resolve_paths
from .parent.runner import EvalOptions, evaluate_problem


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


sys.modules[__name__].__class__ = _CallableModule

__all__ = ["EvalOptions", "Problem", "UsageProblem", "evaluate", "evaluate_problem", "load_problem", "resolve_paths", "warm_pools"]
