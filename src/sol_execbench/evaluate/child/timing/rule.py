"""The latency rule: a side's latency from its device time and host time (each a trimmed mean of
its pass's spans).

Continuous by construction (a maximum of two measured statistics less a constant): a small change in any
span changes the latency by no more than that change, so no threshold decides a verdict.
"""

from __future__ import annotations

from sol_execbench.schema.timing_rule import LAUNCH_ALLOWANCE_US, RULE

__all__ = ["LAUNCH_ALLOWANCE_US", "RULE", "host_set", "side_latency_ms"]


def side_latency_ms(device_ms: float | None, host_ms: float, allowance_ms: float) -> float:
    """A side's latency: its device time, or its host time less the launch allowance where that is
    larger. Without a device time (the CPU, or calls that launched no device work) the host time
    itself: there was no launch to allow for."""
    if device_ms is None:
        return host_ms
    return max(device_ms, host_ms - allowance_ms)


def host_set(device_ms: float | None, host_ms: float, allowance_ms: float) -> bool:
    """Whether the host time, not the device time, gave the side's latency."""
    return device_ms is None or host_ms - allowance_ms > device_ms
