"""Timing (see docs/timing.md): the reference and the solution measured by one procedure, side by
side, under one continuous latency rule. ``measure`` is the entry; the rest are its parts."""

from .arguments import FreshArgs, L2Flusher, flat_view
from .calls import CallKeeper, MethodUnavailable, SideCalls
from .paired import PairedMeasurement, SideFailed, SideMeasurement, TimingPlan, measure, resolve_method, rounds_per_pass
from . import activity, calls, paired, profiled, unprofiled  # noqa: F401  (submodules callers reach as attributes)
from .rule import LAUNCH_ALLOWANCE_US, RULE, side_latency_ms
from .statistics import SideSpans, SpeedupInterval, host_time_ms, speedup_interval, summarize

__all__ = ["CallKeeper", "FreshArgs", "L2Flusher", "LAUNCH_ALLOWANCE_US", "MethodUnavailable", "PairedMeasurement",
           "RULE", "SideCalls", "SideFailed", "SideMeasurement", "SideSpans", "SpeedupInterval", "TimingPlan", "side_latency_ms",
           "flat_view", "host_time_ms", "measure", "resolve_method", "rounds_per_pass", "speedup_interval", "summarize"]
