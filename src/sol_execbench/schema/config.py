"""BenchmarkConfig: how many rounds and runs, and the seed."""

from __future__ import annotations

from pydantic import Field

from .base import SchemaModel


class BenchmarkConfig(SchemaModel):
    """Benchmark settings (defaults from the configuration reference, plus ``correctness_rounds``)."""

    warmup_runs: int = Field(default=10, ge=0)
    """Untimed calls before the timed ones."""
    iterations: int = Field(default=50, gt=0)
    """Timed calls; the trace reports their median."""
    lock_clocks: bool = False
    """Require locked GPU clocks (SOL_EXECBENCH_CLOCKS_LOCKED=1); otherwise traces are RUNTIME_ERROR."""
    benchmark_reference: bool = True
    """Also time the reference, for speedup_factor."""
    seed: int = 200
    """Seed for input generation."""
    correctness_rounds: int = Field(default=10, gt=0)
    """Rounds of fresh inputs checked against the reference before timing."""
