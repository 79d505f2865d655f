"""Diagnostics beside an evaluation: ``--profile`` (a profiler's view of the solution's calls),
``--static-evidence`` (the compiler's view of its kernels) and timing evidence (the profiler's
kernel time next to each reported latency). They never change a trace (docs/profiling.md)."""

from .diagnostics import Diagnostics, run_diagnostics
from .profile_run import ProfileRequest, profile_solution
from .static_evidence import static_evidence

__all__ = ["Diagnostics", "ProfileRequest", "profile_solution", "run_diagnostics", "static_evidence"]
