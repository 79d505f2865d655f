"""Evaluation: staging, the sandboxed child, inputs, correctness, timing, guards.

Public entry points: ``evaluate`` (Python API) and ``evaluate_problem`` (models in, traces out).
The child-side modules (child, workload_eval, inputs, timing, correctness, guards) import torch;
this package root does not.
"""

from .problem import Problem, UsageProblem, load_problem, resolve_paths
from .runner import EvalOptions, evaluate_problem

__all__ = ["EvalOptions", "Problem", "UsageProblem", "evaluate_problem", "load_problem", "resolve_paths"]
