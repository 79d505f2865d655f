"""The latency rule: what one timed call's latency is, from its device and host spans.

Continuous by construction (a maximum of measured quantities less constants): a small change in
any span changes the latency by no more than that change, so no threshold decides a verdict.
"""

from __future__ import annotations

from sol_execbench.schema.timing_rule import LAUNCH_ALLOWANCE_US, RULE

__all__ = ["LAUNCH_ALLOWANCE_US", "RULE", "call_latency_ms", "host_set"]


def call_latency_ms(device_ms: float | None, host_ms: float, allowance_ms: float) -> float:
    """One call's latency: its device time, or its host time less the launch allowance where that
    is larger. Without a device time (the CPU) the host time itself."""
    if device_ms is None:
        return host_ms
    return max(device_ms, host_ms - allowance_ms)


def host_set(device_ms: float | None, host_ms: float, allowance_ms: float) -> bool:
    """Whether the host time, not the device time, gave this call's latency."""
    return device_ms is None or host_ms - allowance_ms > device_ms
