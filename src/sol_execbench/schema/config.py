"""BenchmarkConfig: how many rounds and runs, the seed, and how calls are timed."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import SchemaModel
from .timing_rule import LAUNCH_ALLOWANCE_US

TimingMethodName = Literal["auto", "device", "events", "cpu"]
# How a trace's warning opens where a workload's counts were cut to ``cpu_budget_s`` (the rest of
# the line gives the counts); the command's table counts such workloads by it.
CPU_BUDGET_WARNING = "on the CPU the counts were cut to fit cpu_budget_s"


class TimingConfig(SchemaModel):
    """How timed calls are measured (see docs/timing.md)."""

    method: TimingMethodName = "auto"
    """Where device time comes from. ``auto``: ``device`` on a GPU (``events`` where the profiler
    delivers no activity records), ``cpu`` on the CPU. ``device``: per call, first kernel start to
    last kernel end on any stream, from the vendor's activity records. ``events``: device events
    around each call on the current stream. ``cpu``: the host clock alone (CPU only)."""
    cooldown: float = Field(default=1.0, ge=0, le=10)
    """After each timed call the device idles this many times as long as it kept working after the
    call returned (the harness's own work before the next call counts), so a GEMM loop runs it at
    most about half the time at the default 1: back-to-back millisecond GEMMs otherwise reach the
    power cap. 0 times calls back to back."""
    launch_allowance_us: float = Field(default=LAUNCH_ALLOWANCE_US, ge=0, le=1000)
    """Host time per call that is free: latency = max(device time, host time - this)."""


class BenchmarkConfig(SchemaModel):
    """Benchmark settings (defaults from the configuration reference, plus ``correctness_rounds``)."""

    warmup_runs: int = Field(default=10, ge=0)
    """Untimed calls before the timed ones."""
    iterations: int = Field(default=50, gt=0)
    """Timed calls per side. On a GPU they are split over the device pass and the host pass, each
    an even number of rounds of one call per side (26 and 26 for 50); on the CPU the host pass runs
    this many rounds."""
    lock_clocks: bool = False
    """Require locked GPU clocks: SOL_EXECBENCH_CLOCKS_LOCKED=1 and clocks measured under load within
    50 MHz of SOL_EXECBENCH_GPU_CLK_MHZ / SOL_EXECBENCH_DRAM_CLK_MHZ (else the device's preset);
    otherwise traces are RUNTIME_ERROR."""
    benchmark_reference: bool = True
    """Also time the reference, for speedup_factor."""
    seed: int = 200
    """Seed for input generation."""
    correctness_rounds: int = Field(default=10, gt=0)
    """Rounds of fresh inputs checked against the reference before timing."""
    cpu_budget_s: float = Field(default=30.0, ge=0)
    """On the CPU (no GPU): how long a workload's correctness rounds may take (the first always
    runs), and again its warm-up and timed calls, before their counts are cut (docs/timing.md). 0
    runs every count. A GPU always runs every count."""
    timing: TimingConfig = Field(default_factory=TimingConfig)
    """Timing method; the trace's ``solution_timing.method``/``note`` say which ran and why."""
