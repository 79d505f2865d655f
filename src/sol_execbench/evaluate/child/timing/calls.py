"""One side's timed calls (the reference's or the solution's), shared by both passes.

Everything the harness does between calls (new arguments, the flush, keeping an audited call's
outputs) runs under the ``SETUP_RANGE`` profiler range, so the device pass can attribute it and
leave it out; each timed call runs under ``CALL_RANGE#<k>``.
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from sol_execbench.platform import DeviceInfo

SETUP_RANGE = "sol_execbench::setup"
CALL_RANGE = "sol_execbench::call"  # a timed call is "sol_execbench::call#<index>"
# The device pass's gap range after a call: "sol_execbench::setup::clock_probe#<cycles>", the clock
# probe its first work (the next call's arguments, hold and flush follow). Under SETUP_RANGE's name,
# so the attribution counts its kernels as the harness's own work.
PROBE_RANGE = SETUP_RANGE + "::clock_probe"


class MethodUnavailable(Exception):
    """This method cannot run here; ``reason`` says why (the trace's timing note repeats it).

    ``suspicious``: the reason is the solution's doing (a profiler it left running or switched
    off), so falling back must not end in a clean verdict."""

    def __init__(self, reason: str, suspicious: bool = False):
        super().__init__(reason)
        self.reason, self.suspicious = reason, suspicious


def setup_range() -> Any:
    """The ``SETUP_RANGE`` around the harness's work between calls while a profiler records (the
    device pass attributes by it), nothing otherwise: a range costs the host microseconds per call
    even unrecorded, and the host pass runs hundreds of rounds."""
    return torch.profiler.record_function(SETUP_RANGE) if torch.autograd._profiler_enabled() else nullcontext()


def synchronize(device: DeviceInfo) -> None:
    if device.is_gpu:
        torch.cuda.synchronize(device.torch_device)


def _clone_structure(value: Any) -> Any:
    """A copy of a call's result (tensor, list/tuple, dict, scalar) that later calls cannot change.

    Only plain tensors are cloned; a foreign type is kept as is so the audit can name it.
    """
    return _map_tensors(value, lambda tensor: tensor.detach().clone())


def _map_tensors(value: Any, fn: Callable[[torch.Tensor], Any]) -> Any:
    """``value`` with ``fn`` applied to each plain tensor in it (lists and tuples become lists,
    dicts stay dicts; anything else is left as is)."""
    if type(value) is torch.Tensor:
        return fn(value)
    if isinstance(value, (list, tuple)):
        return [_map_tensors(v, fn) for v in value]
    if isinstance(value, dict):
        return {k: _map_tensors(v, fn) for k, v in value.items()}
    return value


@dataclass
class CallKeeper:
    """Keeps the outputs of one chosen timed call (the audited one) for checking afterwards.

    The outputs are cloned right after the call's span, before any other call's arguments are
    written (destination outputs live in FreshArgs' pool, which later calls overwrite), inside the
    setup range, so the clone is neither timed nor visible to the solution before its audited call
    returns.
    """

    call_index: int
    dps_outputs: int = 0  # destination-passing style: the last N arguments are the outputs
    inspect: Callable[[list[Any], Any], list[str]] | None = None  # per-call output checks, run at keep time
    kept: Any = None
    # The result object itself (not for destination-passing outputs, which the pool reuses): an
    # output written after the call returned shows in it later, not in ``kept``.
    returned: Any = None
    problems: list[str] = field(default_factory=list)
    _pending: tuple[list[Any], Any] | None = None

    def observe(self, call_index: int, args: list[Any], result: Any) -> None:
        if call_index == self.call_index and self.kept is None:
            self._pending = (args, result)

    @property
    def pending(self) -> bool:
        return self._pending is not None

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
            self.returned = result
            # The keeper now holds these outputs: the next call's would otherwise find no freed
            # memory of their size (0.7 ms of page faults for a 4 MiB output on the CPU).
            touch_memory_for(cpu_output_specs(result))


def cpu_output_specs(value: Any) -> list[tuple[torch.Size, torch.dtype]]:
    """Shape and dtype of each CPU tensor in ``value`` (a call's result)."""
    specs: list[tuple[torch.Size, torch.dtype]] = []
    _map_tensors(value, lambda t: specs.append((t.shape, t.dtype)) if t.device.type == "cpu" else None)
    return specs


def touch_memory_for(specs: list[tuple[torch.Size, torch.dtype]]) -> None:
    """Allocate, touch and free memory for CPU tensors of these shapes and dtypes, all at once, so
    that the next call's outputs find freed memory of their size instead of taking new pages (a page
    fault each 4 KiB), which would be charged to whichever side calls next."""
    try:
        held = [torch.empty(shape, dtype=dtype).zero_() for shape, dtype in specs]
    except (RuntimeError, MemoryError):  # no room for a second copy: the next call may take new pages
        return
    del held


@dataclass
class SideCalls:
    """The function of one side, its fresh arguments and the keepers of its audited calls.

    ``region`` (activity_watch) samples the solution's threads around each of its calls; the
    reference's calls count as outside the solution's, so a solution thread working meanwhile is seen."""

    name: str  # "reference" or "solution"
    fn: Callable[..., Any]
    fresh: Any  # FreshArgs
    keepers: list[CallKeeper] = field(default_factory=list)
    region: Any = None
    warm_args: list[Any] | None = None  # the last warm-up call's arguments (re-used, never timed)
    warm_own_ms: list[float] = field(default_factory=list)  # host time until each warm-up call returned
    # Shape and dtype of each CPU tensor the last warm-up call returned (``touch_output_memory``).
    warm_cpu_outputs: list[tuple[torch.Size, torch.dtype]] = field(default_factory=list)
    # Given the number of calls this side is about to make in a pass the plan could not foresee
    # (added host rounds, added device passes), returns the keeper of an audited call it planted
    # among them, or None: no timed call may lie beyond every audited one, or a solution could
    # stop computing after the planned passes.
    audit_ahead: Callable[[int], CallKeeper | None] | None = None

    def before_unforeseen_calls(self, count: int) -> None:
        if self.audit_ahead is not None and (keeper := self.audit_ahead(count)) is not None:
            self.keepers.append(keeper)

    def warm_call(self, args: list[Any]) -> None:
        """One untimed call; its host time until it returned is kept (it sizes the hold)."""
        self.enter_call()
        began = time.perf_counter_ns()
        result = self.fn(*args)
        self.warm_own_ms.append((time.perf_counter_ns() - began) / 1e6)
        self.exit_call()
        self.warm_cpu_outputs = cpu_output_specs(result)

    def touch_output_memory(self) -> None:
        """``touch_memory_for`` the last warm-up call's CPU outputs. What the harness allocates
        between the warm-up and the first timed round (private copies of the warm-up arguments, the
        pass's pools) takes the memory the warm-up's outputs left, so the first timed call's outputs
        took new pages (512 page faults, 1.1 ms against 0.35 ms for a 1M-element add on the CPU),
        and that call is always the reference's."""
        touch_memory_for(self.warm_cpu_outputs)

    def typical_own_ms(self) -> float | None:
        """Median host time of the last five warm-up calls (the first ones compile and autotune)."""
        recent = sorted(self.warm_own_ms[-5:])
        return recent[len(recent) // 2] if recent else None

    def enter_call(self) -> None:
        if self.region is not None:
            self.region.enter_call()

    def exit_call(self) -> None:
        if self.region is not None:
            self.region.exit_call()

    def arguments(self) -> list[Any]:
        """The next call's arguments (a new address)."""
        with setup_range():
            return self.fresh()

    def settle(self) -> None:
        """Keep an audited call's outputs now, under a setup range: the copy is the harness's work,
        not device work launched outside every range."""
        if any(keeper.pending for keeper in self.keepers):
            with setup_range():
                for keeper in self.keepers:
                    keeper.settle()

    def call(self, args: list[Any]) -> Any:
        """The timed call itself: the side's function and nothing else, the same for both sides."""
        return self.fn(*args)

    def observe(self, args: list[Any], result: Any) -> None:
        """After the call's span: the audit keepers see the call (only the solution has keepers,
        so their cost must not fall inside its span) and keep what they need at once, before the
        other side's call, which writes its inputs where this call's were."""
        for keeper in self.keepers:
            keeper.observe(self.fresh.calls_made - 1, args, result)
        self.settle()


def flush(flusher: Any) -> None:
    """A cold last-level cache for the next call, under a setup range."""
    with setup_range():
        flusher.flush()
