"""The latency rule: what one timed call's latency is, from its device and host spans.

Continuous by construction (a maximum of measured quantities less constants): a small change in
any span changes the latency by no more than that change, so no threshold decides a verdict.
"""

from __future__ import annotations

from sol_execbench.schema.config import LAUNCH_ALLOWANCE_US

RULE = (
    "Device time: each call's span from the first start to the last end of the device work it launched, "
    "on any stream, read from the profiler's activity records with the call's launches queued behind a hold "
    "(a pass of its own, L2 flushed before each call). "
    "Host time: each call's wall-clock span from its start until the device is idle again, in a second, "
    "unprofiled pass of the same calls, less the measured cost of an empty synchronisation. "
    "A call's latency is max(device time, host time - launch allowance), where the launch allowance is one "
    f"stated constant (timing.launch_allowance_us, {LAUNCH_ALLOWANCE_US:g} us by default) and on the CPU the host time alone. "
    "Reference and solution are timed in alternating rounds of the same process (reference, solution, then "
    "solution, reference), and each side's latency is the median over its rounds. "
    "The speedup is the ratio of the two medians; its confidence interval is a bootstrap over the paired rounds, "
    "and the verdict is faster or slower only when the whole interval lies above or below 1."
)


def call_latency_ms(device_ms: float | None, host_ms: float, allowance_ms: float) -> float:
    """One call's latency: its device time, or its host time less the launch allowance where that
    is larger. Without a device time (the CPU) the host time itself."""
    if device_ms is None:
        return host_ms
    return max(device_ms, host_ms - allowance_ms)


def host_set(device_ms: float | None, host_ms: float, allowance_ms: float) -> bool:
    """Whether the host time, not the device time, gave this call's latency."""
    return device_ms is None or host_ms - allowance_ms > device_ms
