"""What every timing method shares: the timed-call loop's pieces and its result.

A method gets a ``TimedCalls`` (the function, fresh arguments, the L2 flusher, the keepers of
the audited calls) and returns a ``MethodResult``. Everything the harness does between calls
(new arguments, the flush, keeping the audited output) runs inside ``setup()`` under the
``SETUP_RANGE`` profiler range, so the device method can attribute it and leave it out.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from sol_execbench.platform import DeviceInfo

SETUP_RANGE = "sol_execbench::setup"
CALL_RANGE = "sol_execbench::call"  # a timed call is "sol_execbench::call#<index>"
# The device method's clock probe after each call: "sol_execbench::setup::clock_probe#<cycles>". Under
# SETUP_RANGE's name, so the attribution counts its kernel as the harness's own work.
PROBE_RANGE = SETUP_RANGE + "::clock_probe"
# The device method's hold before each call's flush: "sol_execbench::setup::hold#<cycles>" (same reason).
HOLD_RANGE = SETUP_RANGE + "::hold"


class MethodUnavailable(Exception):
    """This method cannot run here; ``reason`` says why (the trace's timing note repeats it).

    ``suspicious``: the reason is the solution's doing (a profiler it left running or switched
    off), so falling back must not end in a clean verdict."""

    def __init__(self, reason: str, suspicious: bool = False):
        super().__init__(reason)
        self.reason, self.suspicious = reason, suspicious


def synchronize(device: DeviceInfo) -> None:
    if device.is_gpu:
        torch.cuda.synchronize(device.torch_device)


def _clone_structure(value: Any) -> Any:
    """A copy of a call's result (tensor, list/tuple, dict, scalar) that later calls cannot change.

    Only plain tensors are cloned; a foreign type is kept as is so the audit can name it.
    """
    if type(value) is torch.Tensor:
        return value.detach().clone()
    if isinstance(value, (list, tuple)):
        return [_clone_structure(v) for v in value]
    if isinstance(value, dict):
        return {k: _clone_structure(v) for k, v in value.items()}
    return value


@dataclass
class CallKeeper:
    """Keeps the outputs of one chosen timed call (the audited one) for checking afterwards.

    The outputs are cloned before the next call's arguments are written (destination outputs
    live in FreshArgs' pool, which the next call overwrites) and inside the setup range, so the
    clone is neither timed nor visible to the solution before its audited call returns.
    """

    call_index: int
    dps_outputs: int = 0  # destination-passing style: the last N arguments are the outputs
    inspect: Callable[[list[Any], Any], list[str]] | None = None  # per-call output checks, run at keep time
    kept: Any = None
    problems: list[str] = field(default_factory=list)
    _pending: tuple[list[Any], Any] | None = None

    def observe(self, call_index: int, args: list[Any], result: Any) -> None:
        if call_index == self.call_index and self.kept is None:
            self._pending = (args, result)

    def settle(self) -> None:
        if self._pending is None:
            return
        args, result = self._pending
        self._pending = None
        self.keep_now(args, result)

    def keep_now(self, args: list[Any], result: Any) -> None:
        if self.inspect is not None:
            self.problems = self.inspect(args, result)
        if self.dps_outputs:
            self.kept = _clone_structure(list(args[len(args) - self.dps_outputs:]))
        else:
            self.kept = _clone_structure(result)


@dataclass
class TimedCalls:
    """The loop's pieces, shared by every method."""

    fn: Callable[..., Any]
    fresh: Any  # FreshArgs
    iterations: int
    flusher: Any  # L2Flusher
    device: DeviceInfo
    keepers: list[CallKeeper] = field(default_factory=list)
    region: Any = None  # activity_watch.TimedRegion: samples solution threads around each call
    warm_args: list[Any] | None = None  # the last warm-up call's arguments (re-used, never timed)
    cooldown: float = 0.0  # idle after each timed call, as a multiple of its host span (device method)
    warm_own_ms: list[float] = field(default_factory=list)  # host time until each warm-up call returned

    def warm_call(self, args: list[Any]) -> None:
        """One untimed call (warm-up), its host time until it returned kept (sizes the device method's hold)."""
        self.enter_call()
        began = time.perf_counter_ns()
        self.fn(*args)
        self.warm_own_ms.append((time.perf_counter_ns() - began) / 1e6)
        self.exit_call()

    def enter_call(self) -> None:
        """Just before a call's timestamps start (outside the measured span)."""
        if self.region is not None:
            self.region.enter_call()

    def exit_call(self) -> None:
        """Just after a call's timestamps end (outside the measured span)."""
        if self.region is not None:
            self.region.exit_call()

    def setup(self) -> list[Any]:
        """Next call's arguments (new address), the audited output kept, then a cold L2."""
        args = self.arguments()
        self.flush()
        return args

    def arguments(self) -> list[Any]:
        """Next call's arguments (new address), the audited output kept (a setup range)."""
        with torch.profiler.record_function(SETUP_RANGE):
            for keeper in self.keepers:
                keeper.settle()
            return self.fresh()

    def flush(self) -> None:
        """A cold L2 for the next call (a setup range)."""
        with torch.profiler.record_function(SETUP_RANGE):
            self.flusher.flush()

    def call(self, args: list[Any]) -> None:
        result = self.fn(*args)
        for keeper in self.keepers:
            keeper.observe(self.fresh.calls_made - 1, args, result)

    def finish(self) -> None:
        """After the loop: the device is idle and the audited output (if last) is kept."""
        synchronize(self.device)
        if self.keepers:
            with torch.profiler.record_function(SETUP_RANGE):
                for keeper in self.keepers:
                    keeper.settle()
            synchronize(self.device)


@dataclass
class HostSpans:
    """Per call, in ms: wall-clock and the calling thread's CPU time, each until the call returned (``own``)
    and until the device finished what it launched (``full``); ``bracket``: the median of each
    for the measuring bracket around no call."""

    wall_own: list[float] = field(default_factory=list)
    wall_full: list[float] = field(default_factory=list)
    cpu_own: list[float] = field(default_factory=list)
    cpu_full: list[float] = field(default_factory=list)
    bracket: dict[str, float] = field(default_factory=dict)

    def add(self, **spans_ms: float) -> None:
        for name, value in spans_ms.items():
            getattr(self, name).append(value)

    def medians(self) -> dict[str, float]:
        return {name: sorted(values)[len(values) // 2] for name in ("wall_own", "wall_full", "cpu_own", "cpu_full")
                if (values := getattr(self, name))}


@dataclass
class MethodResult:
    """Per-call times and what the method saw."""

    times_ms: list[float]
    call_indices: list[int] | None = None  # per timed call: the FreshArgs call whose arguments it ran on
    device_ms: list[float | None] | None = None
    host_ms: list[float] | None = None
    bracket_ms: float = 0.0  # the host span of the measuring bracket around no call (device method)
    spans: HostSpans | None = None  # wall and CPU spans of each call (device method)
    host_functions: int = 0  # host functions the calls enqueued in stream order (run after they return)
    sm_clock_mhz: list[float] | None = None  # the SM clock right after each call (device method's probe)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    suspicious: list[str] = field(default_factory=list)  # evidence of tampering: becomes REWARD_HACK
