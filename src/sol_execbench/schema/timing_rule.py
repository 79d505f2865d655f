"""The latency rule in words, and its one constant: part of the contract (``contract --json``), so
it lives with the formats and imports no torch. ``evaluate/child/timing/rule.py`` applies it."""

from __future__ import annotations

# Host time per timed call that is free: one launch and the synchronisation's wake-up, which a
# stream pipeline hides behind the device's work. On the H100 host a single-kernel call's host time
# (its start until the device was idle, less an empty synchronisation) was 19 to 36 us for a
# PyTorch add, 55 to 150 us for a Triton add, 85 us for a cuBLAS GEMM of 24 us: a single kernel
# keeps its device time; host work beyond that counts (a dozen eager operators: 300 to 430 us).
LAUNCH_ALLOWANCE_US = 100.0

RULE = (
    "Device time: each call's span from the first start to the last end of the device work it launched, "
    "on any stream, read from the profiler's activity records with the call's launches queued behind a hold "
    "(a pass of its own, L2 flushed before each call). "
    "Host time: each call's wall-clock span from its start until the device is idle again, in a second, "
    "unprofiled pass of the same calls, less the measured cost of an empty synchronisation; where the host "
    "may set a side's latency and the other side's host time is near setting its own (or there is no other "
    "side) this pass runs more rounds of both, and while the device rounds leave the "
    "speedup imprecise more device passes follow it (up to four in all) for the sides whose device time sets "
    "their latency. "
    "A side's device time is the mean of its device spans without the lowest and highest fifth, its host time "
    "the same of its host spans; its latency is max(device time, host time - launch allowance), where the "
    f"launch allowance is one stated constant (timing.launch_allowance_us, {LAUNCH_ALLOWANCE_US:g} us by default), "
    "and on the CPU the host time alone. "
    "Reference and solution are timed in alternating rounds of the same process (reference, solution, then "
    "solution, reference; each later batch of rounds opens with the side the one before did not), call k of "
    "each reading its inputs at the same addresses. "
    "The speedup is the ratio of the two latencies; its confidence interval is a bootstrap over the paired rounds "
    "of both passes (many host rounds drawn as runs of consecutive rounds) that also draws an offset of each "
    "side's device time and of its host time (0.5% standard deviation each, the offsets identical code shows "
    "within one process) and a shift of both sides' host times together (20% standard deviation, how far host "
    "times move between processes), what the rounds contribute widened for their number (sqrt(n/(n-1)) t(n-1)/z, "
    "n the fewest rounds of a pass that may move the speedup), and the verdict is faster or slower only when the whole interval lies above "
    "or below 1."
)
