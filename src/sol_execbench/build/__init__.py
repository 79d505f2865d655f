"""Builders: turn a solution's sources into a callable, one builder per language family.

A builder has two sides. ``prepare`` runs in the parent before the evaluation child starts and
may compile (in its own subprocess, under the compile timeout). ``load`` runs inside the child
and returns the entry-point function. Native languages (CUDA C++, HIP C++, C++) register here too.
"""

from . import native, python_family  # noqa: F401  (each registers itself)
from .base import Builder, BuildFailure, BuildOutcome, builder_for, register

__all__ = ["BuildFailure", "Builder", "BuildOutcome", "builder_for", "register"]
