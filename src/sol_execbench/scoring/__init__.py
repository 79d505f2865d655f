"""Speed-of-light bounds of problems on a named part (``sol-execbench bound``)."""

from .bound import BoundInputError, bound_problem

__all__ = ["BoundInputError", "bound_problem"]
