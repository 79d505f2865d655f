"""The host pass: each timed call's wall-clock span until the device is idle, without a profiler.

Per call: new arguments, the L2 flush, a synchronisation (the device is idle and the cache cold),
then the clock runs from just before the call until a synchronisation after it returned. That span
holds the host's work (launches, Python, a copy to the host), the device's work it waited for, and
one synchronisation's own cost, which ``sync_floor_ms`` measures on the idle device and the rule
subtracts. The reference and the solution alternate as in the device pass.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from .calls import SideCalls, flush, synchronize
from .profiled import Cooldown, PassPlan, note_call

FLOOR_SAMPLES = 21
# Untimed rounds before the first timed one, on a GPU: the first calls after the device pass (or
# any pause) ran 2 to 2.5 times their usual host time on an H100 (an eager RMSNorm: 250 to 460 us
# against 120 to 200 us), and so did the floor's synchronisations; two calls per side sufficed.
WAKE_ROUNDS = 2


def sync_floor_ms(device: Any, samples: int = FLOOR_SAMPLES) -> float:
    """Median wall time of a synchronisation of the idle device, with the clock readings around it:
    what every host span carries besides the call."""
    spans = []
    for _ in range(samples):
        synchronize(device)
        began = time.perf_counter_ns()
        synchronize(device)
        spans.append((time.perf_counter_ns() - began) / 1e6)
    return statistics.median(spans)


@dataclass
class HostPass:
    """Per side (by name), per round: the call's wall span until the device was idle (raw, the
    floor not yet taken off) and the FreshArgs call index it ran on."""

    floor_ms: float
    spans_ms: dict[str, list[float]] = field(default_factory=dict)
    call_indices: dict[str, list[int]] = field(default_factory=dict)
    opened_round: dict[str, list[bool]] = field(default_factory=dict)  # per call: the first of its round


def host_span_ms(device: Any, call: Callable[[], Any]) -> tuple[Any, float, float]:
    """Run ``call`` on an idle device: its result, its wall span until the device was idle and the
    host's wait for the device after it returned (both ms)."""
    synchronize(device)
    began = time.perf_counter_ns()
    result = call()
    returned = time.perf_counter_ns()
    synchronize(device)
    ended = time.perf_counter_ns()
    return result, (ended - began) / 1e6, (ended - returned) / 1e6


def _wake(plan: PassPlan) -> None:
    """``WAKE_ROUNDS`` untimed rounds, each side's call on its warm-up arguments (its own copy: no
    timed call's index or audit is used up), the cache flushed before each as in a timed round."""
    for r in range(WAKE_ROUNDS if plan.device.is_gpu else 0):
        for side in plan.order(r):
            if side.warm_args is not None:
                flush(plan.flusher)
                synchronize(plan.device)
                side.warm_call(side.warm_args)
                synchronize(plan.device)


def _settle_the_reference(plan: PassPlan) -> None:
    """On the CPU, one untimed call of the reference on its warm-up arguments right before the
    pass's first timed round, which it opens. After the floor's loop of synchronisations the first
    timed call ran long whichever side made it (a 2 us add: 4.6 us against 2.4), and the CPU's one
    host pass always opens with the reference: identical code read 1.1x over 10 rounds. Not the
    solution: a repeat of its warm-up arguments would let a cache answer the call."""
    opening = plan.order(0)[0]
    if not plan.device.is_gpu and opening.name == "reference" and opening.warm_args is not None:
        opening.warm_call(opening.warm_args)


def host_pass(plan: PassPlan, into: HostPass | None = None) -> HostPass:
    """The rounds of ``plan`` without a profiler; appended to ``into`` (same floor) when given,
    else after ``_wake`` and the floor (and on the CPU ``_settle_the_reference``)."""
    result = into
    if result is None:
        _wake(plan)
        result = HostPass(sync_floor_ms(plan.device), {s.name: [] for s in plan.sides}, {s.name: [] for s in plan.sides})
        _settle_the_reference(plan)
    cooldown = Cooldown(plan.cooldown)
    for r, _, side in plan.schedule():
        span, waited = _timed_call(plan, r, side, result, cooldown)
        result.spans_ms[side.name].append(span)
        cooldown.after_call(waited)
    synchronize(plan.device)
    return result


def _timed_call(plan: PassPlan, round_index: int, side: SideCalls, record: HostPass,
                cooldown: Cooldown) -> tuple[float, float]:
    """Round ``round_index``'s call of ``side``: its span and the host's wait for the device after
    it returned. Its arguments and result are let go before the next call: a result still held while
    the other side's call allocated its outputs made them take memory from elsewhere, new pages on
    the CPU (a page fault each 4 KiB), and identical code read up to 30% apart there in short runs."""
    args = side.arguments()
    note_call(record, plan, round_index, side)
    cooldown.before_call()
    flush(plan.flusher)
    side.enter_call()
    returned, span, waited = host_span_ms(plan.device, lambda: side.call(args))
    side.exit_call()
    side.observe(args, returned)
    return span, waited
