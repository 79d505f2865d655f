"""A/A on the CPU, by construction: inside its timed span the solution's call runs exactly the
harness code the reference's does. Any extra step on one side only (the audit keepers, which only
the solution has, were one) is a systematic difference that identical code would read as a speedup."""

from __future__ import annotations

import sys
import time
from collections import Counter

import torch

from sol_execbench.evaluate.child.timing import CallKeeper, FreshArgs, L2Flusher, SideCalls, TimingPlan, measure
from sol_execbench.evaluate.child.timing.unprofiled import host_span_ms

ROUNDS, WARMUP = 6, 2


def _same_code():
    def run(x, y):
        return x * y + 1.0
    return run


class _SpanTracer:
    """Records, per side, the Python and builtin calls made between the first and the last clock
    read of each host span (``host_span_ms``)."""

    def __init__(self) -> None:
        self.spans: dict[str, list[tuple[str, ...]]] = {"reference": [], "solution": []}
        self._reads = 0
        self._span_frame = None
        self._calls: list[str] = []
        self._side: str | None = None

    def __call__(self, frame, event, arg) -> None:
        if event == "call" and frame.f_code is host_span_ms.__code__:
            self._span_frame, self._reads, self._calls, self._side = frame, 0, [], None
            return
        if self._span_frame is None:
            return
        if event == "c_call" and frame is self._span_frame and arg is time.perf_counter_ns:
            self._reads += 1
            if self._reads == 3:  # the span ends with the third read (began, returned, ended)
                self.spans[self._side].append(tuple(self._calls))
                self._span_frame = None
            return
        if self._reads < 1:
            return
        if event == "call":
            if frame.f_code.co_qualname == "SideCalls.call":
                self._side = frame.f_locals["self"].name
            self._calls.append(frame.f_code.co_qualname)
        elif event == "c_call":
            self._calls.append(getattr(arg, "__qualname__", repr(arg)))


def test_the_solution_runs_the_same_harness_code_as_the_reference_inside_its_timed_span(cpu_device):
    def values():
        return [[torch.randn(64), torch.randn(64)]]

    slots = WARMUP + 2 * ROUNDS + 2
    keepers = [CallKeeper(WARMUP + 1), CallKeeper(WARMUP + 3, inspect=lambda args, result: [])]
    solution = SideCalls("solution", _same_code(), FreshArgs(values(), slots=slots), keepers)
    reference = SideCalls("reference", _same_code(), FreshArgs(values(), slots=slots))
    tracer = _SpanTracer()
    sys.setprofile(tracer)
    try:
        m = measure(solution, reference, TimingPlan(warmup=WARMUP, rounds=ROUNDS, device=cpu_device,
                                                    flusher=L2Flusher(cpu_device)))
    finally:
        sys.setprofile(None)
    assert len(tracer.spans["reference"]) == len(tracer.spans["solution"]) == len(m.solution.host_ms) == ROUNDS
    assert all(k.kept is not None for k in keepers)  # the audited calls were still kept
    reference_code, solution_code = Counter(tracer.spans["reference"]), Counter(tracer.spans["solution"])
    assert len(reference_code) == 1 and reference_code == solution_code, (reference_code, solution_code)
    assert "_same_code.<locals>.run" in next(iter(solution_code))  # the tracer saw the side's own function


def test_each_timed_call_s_result_is_let_go_before_the_next_call(cpu_device):
    """A result still held while the next call allocates its outputs makes them take memory from
    elsewhere (new pages on the CPU): in the order R S S R, which side pays depends on the round."""
    import weakref

    refs: list[weakref.ref] = []
    held_at_start: list[int] = []

    def run(x, y):
        held_at_start.append(sum(ref() is not None for ref in refs))
        out = x * y + 1.0
        refs.append(weakref.ref(out))
        return out

    def values():
        return [[torch.randn(64), torch.randn(64)]]

    slots = WARMUP + 2 * ROUNDS + 2
    solution = SideCalls("solution", run, FreshArgs(values(), slots=slots))
    reference = SideCalls("reference", run, FreshArgs(values(), slots=slots))
    measure(solution, reference, TimingPlan(warmup=WARMUP, rounds=ROUNDS, device=cpu_device, flusher=L2Flusher(cpu_device)))
    timed = held_at_start[-2 * ROUNDS:]
    assert len(timed) == 2 * ROUNDS and timed == [0] * len(timed), held_at_start


def test_the_first_timed_call_finds_memory_for_its_outputs(cpu_device):
    """The warm-up's outputs leave freed memory of their size, which the harness's own allocations
    between the warm-up and the first timed round took; the first timed call (always the
    reference's) then took new pages for its outputs: 512 page faults, 1.1 ms against 0.35 ms for
    a 1M-element add, where no later call took any. The first timed call now takes no more new
    pages than the others (in some processes every call of this size takes new pages: both sides
    alike)."""
    import resource

    faults: list[tuple[str, int]] = []

    def counted(name):
        def run(x, y):
            before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
            out = x + y
            faults.append((name, resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before))
            return out
        return run

    def values():
        return [[torch.randn(1 << 20), torch.randn(1 << 20)]]

    rounds, warmup = 3, 1
    slots = warmup + 2 * rounds + 2
    solution = SideCalls("solution", counted("solution"), FreshArgs(values(), slots=slots), [CallKeeper(warmup)])
    reference = SideCalls("reference", counted("reference"), FreshArgs(values(), slots=slots))
    measure(solution, reference, TimingPlan(warmup=warmup, rounds=rounds, device=cpu_device, flusher=L2Flusher(cpu_device)))
    timed = faults[-2 * rounds:]
    assert timed[0][0] == "reference" and timed[0][1] <= max(n for _, n in timed[1:]) + 64, faults


def test_on_the_cpu_the_reference_settles_before_the_pass_it_opens(cpu_device):
    """After the floor's loop of synchronisations the first timed call ran long (a 2 us add: 4.6 us
    against 2.4), and on the CPU that call is always the reference's: one untimed call of the
    reference, on its warm-up arguments, comes right before it. None of the solution: a repeat of
    its warm-up arguments would let a cache answer it."""
    calls: list[tuple[str, int]] = []

    def recorded(name):
        def run(x, y):
            calls.append((name, x.data_ptr()))
            return x + y
        return run

    def values():
        return [[torch.randn(64), torch.randn(64)]]

    rounds, warmup = 3, 1
    slots = warmup + 2 * rounds + 2
    solution = SideCalls("solution", recorded("solution"), FreshArgs(values(), slots=slots))
    reference = SideCalls("reference", recorded("reference"), FreshArgs(values(), slots=slots))
    m = measure(solution, reference, TimingPlan(warmup=warmup, rounds=rounds, device=cpu_device, flusher=L2Flusher(cpu_device)))
    assert len(m.reference.host_ms) == len(m.solution.host_ms) == rounds
    names = [name for name, _ in calls]
    assert names.count("solution") == warmup + rounds and names.count("reference") == warmup + 1 + rounds
    settle, first_timed = calls[-2 * rounds - 1], calls[-2 * rounds]
    assert settle[0] == first_timed[0] == "reference"
    assert settle[1] not in {pointer for _, pointer in calls[-2 * rounds:]}  # the warm-up's own copy
