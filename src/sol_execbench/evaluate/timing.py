"""Timing the calls of a solution or reference (see docs/timing.md).

Every timed call gets its arguments at a new address (``FreshArgs``), with contents rotated
over a bank of distinct input sets, and starts with a cold L2 (``L2Flusher``); neither the copy
nor the flush is inside the timed span. Methods (``timing_methods``):

- ``device`` (default on GPUs): per call, first kernel start to last kernel end of everything it
  launched on any stream, from the profiler's activity records; plus the host span of the call.
- ``events``: device events around each call on the current stream, calls queued back to back.
- ``graph``: one graph captured per input set, replays timed by events (comparison only).
- ``cpu``: host clock around each call (CPU device only).

A method that cannot run falls back (graph -> device -> events) and the note says why.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from sol_execbench.platform import DeviceInfo
from sol_execbench.schema import TimingStats

from .phases import phase
from .timing_methods.base import CallKeeper, HostSpans, MethodResult, MethodUnavailable, TimedCalls, synchronize
from .timing_methods.device import time_device
from .timing_methods.eager import time_cpu, time_events
from .timing_methods.graph import time_graph

_POOL_STEP_BYTES = 256  # shift of each call's data pointer; keeps the alignment kernels expect
HOST_BOUND_MIN_MS = 0.1  # host spans under 100 us are launch overhead: device time stands
HOST_BOUND_RATIO = 2.0
WARMUP_MIN_S = 0.1  # GPU: warm-up goes on (repeating the last warm-up call) until the device was busy this long
WARMUP_MAX_EXTRA_CALLS = 10_000
WARM_DEVICE_GAP_S = 0.25  # a timed loop that ended this recently leaves the clocks up: no extra warm-up
_last_loop_end: dict[str, float] = {}  # device -> perf_counter() when its last timed loop ended

__all__ = ["CallKeeper", "FreshArgs", "L2Flusher", "METHODS", "Measurement", "flat_view", "resolve_method",
           "summarize", "time_calls"]


def flat_view(src: torch.Tensor) -> tuple[torch.Tensor, int]:
    """The tensor's whole memory extent as a 1-D view, and that extent in elements."""
    if src.numel() == 0:
        return src.reshape(0), 0
    span = 1 + sum((n - 1) * s for n, s in zip(src.shape, src.stride()) if n > 1)
    return src.as_strided((span,), (1,)), span


class FreshArgs:
    """Arguments at a new address for every call, contents rotated over a bank of input sets.

    ``bank[0]`` fixes the layout; every set must match its shapes, strides and dtypes. Each
    tensor argument gets a pool ``span + (slots - 1) * step`` elements long; call ``i`` copies
    set ``i % len(bank)`` into offset ``(i % slots) * step`` and gets a view with the original
    shape and strides. Chosen calls can be given a set of their own (``substitute``: the audited
    calls), some of its tensors passed as they are (guarded destination outputs).
    """

    def __init__(self, bank: list[list[Any]], slots: int):
        first = [v.contiguous() if isinstance(v, torch.Tensor) and any(s < 0 for s in v.stride()) else v
                 for v in bank[0]]
        self._bank = [first] + [s for s in bank[1:] if self._same_layout(first, s)]
        self._slots, self.calls_made = max(1, slots), 0
        self._substitutes: dict[int, tuple[list[Any], frozenset[int]]] = {}
        self._pools: list[tuple[torch.Tensor, int, int] | None] = []
        for v in first:
            if not isinstance(v, torch.Tensor):
                self._pools.append(None)
                continue
            _, span = flat_view(v)
            step = max(1, _POOL_STEP_BYTES // v.element_size())
            self._pools.append((torch.empty(span + (self._slots - 1) * step, dtype=v.dtype, device=v.device), span, step))

    @staticmethod
    def _same_layout(first: list[Any], other: list[Any]) -> bool:
        if len(first) != len(other):
            return False
        for a, b in zip(first, other):
            if isinstance(a, torch.Tensor) != isinstance(b, torch.Tensor):
                return False
            if isinstance(a, torch.Tensor) and (a.shape, a.stride(), a.dtype, a.device) != (b.shape, b.stride(), b.dtype, b.device):
                return False
        return True

    @property
    def input_sets(self) -> int:
        return len(self._bank)

    @property
    def substituted_calls(self) -> list[int]:
        return sorted(self._substitutes)

    def substitute(self, call_index: int, values: list[Any], as_is: frozenset[int] = frozenset()) -> bool:
        """Give call ``call_index`` these values instead (same layout); the tensors at positions
        ``as_is`` are passed themselves, not copied into the pool. False if they do not fit."""
        if not self._same_layout(self._bank[0], values):
            return False
        self._substitutes[call_index] = (values, as_is)
        return True

    def _source(self, call_index: int) -> tuple[list[Any], frozenset[int]]:
        if call_index in self._substitutes:
            return self._substitutes[call_index]
        return self._bank[call_index % len(self._bank)], frozenset()

    def __call__(self) -> list[Any]:
        i, self.calls_made = self.calls_made, self.calls_made + 1
        values, as_is = self._source(i)
        out: list[Any] = []
        for position, (value, pool) in enumerate(zip(values, self._pools)):
            if pool is None or position in as_is:
                out.append(value)
                continue
            buffer, span, step = pool
            offset = (i % self._slots) * step
            flat, _ = flat_view(value)
            buffer.narrow(0, offset, span).copy_(flat)
            out.append(buffer.as_strided(value.shape, value.stride(), offset))
        return out

    def clear_passed_as_is(self) -> None:
        """Zero the substitutes' tensors passed as they are (destination outputs of audited calls,
        allocated as zeros): a call outside the timed ones (a graph method's warm-up and capture)
        must not leave values in them for the audited call to be credited with."""
        for values, as_is in self._substitutes.values():
            for position in as_is:
                if isinstance(values[position], torch.Tensor):
                    values[position].zero_()

    def persistent_sets(self, count: int) -> tuple[list[list[Any]], list[int | None]]:
        """``count`` argument sets that stay valid together (graph capture), each its own
        allocation; the substitute sets come first (as many as fit). Also, per set, the call
        index of the substitute it holds (None for a bank set)."""
        substitutes = self.substituted_calls[:count]
        sets, sources = [], []
        for k in range(count):
            if k < len(substitutes):
                values, as_is = self._substitutes[substitutes[k]]
                sources.append(substitutes[k])
            else:
                values, as_is = self._bank[k % len(self._bank)], frozenset()
                sources.append(None)
            sets.append([v.clone() if isinstance(v, torch.Tensor) and p not in as_is else v
                         for p, v in enumerate(values)])
        return sets, sources


class L2Flusher:
    """Reads a buffer twice the size of the device's last-level cache before each timed call.

    Reading, not writing: a written buffer leaves the cache full of dirty lines that the timed
    kernel then has to write back to memory as it evicts them, a fixed 5 to 7 us added to every
    kernel of 20 us and more on an H100 (measured against Nsight Compute, whose cache control
    leaves the cache clean). A read evicts everything earlier calls left (written back here,
    outside the timed span) and leaves only clean lines behind.
    """

    def __init__(self, device: DeviceInfo):
        size = 2 * (device.l2_bytes or 64 * 1024 * 1024) if device.is_gpu else 0
        size = (size + 7) // 8 * 8
        self._buffer = torch.empty(size // 4, dtype=torch.int32, device=device.torch_device) if size else None

    def flush(self) -> None:
        if self._buffer is not None:
            self._buffer.sum()


@dataclass
class Measurement:
    times_ms: list[float]
    method: str
    note: str | None = None
    device_ms: list[float] | None = None
    host_ms: list[float] | None = None
    host_bound: bool | None = None
    input_sets: int | None = None
    call_indices: list[int] | None = None  # per timed call: the FreshArgs call whose arguments it ran on
    host_functions: int = 0  # host functions the timed calls enqueued in stream order (device method)
    sm_clock_mhz: list[float] | None = None  # the SM clock right after each timed call (device method's probe)
    warnings: list[str] = field(default_factory=list)
    suspicious: list[str] = field(default_factory=list)

    def stats(self) -> TimingStats:
        stats = summarize(self.times_ms, self.method, self.note)
        stats.device_median_ms = statistics.median(self.device_ms) if self.device_ms else None
        stats.host_median_ms = statistics.median(self.host_ms) if self.host_ms else None
        stats.host_bound = self.host_bound
        stats.input_sets = self.input_sets
        if self.sm_clock_mhz:
            stats.sm_clock_median_mhz = round(statistics.median(self.sm_clock_mhz), 1)
            stats.sm_clock_min_mhz = round(min(self.sm_clock_mhz), 1)
        return stats


# The SM clock's fall over one timed loop worth a warning: on an H100, loops whose clock fell by 8
# to 23% (power cap) read a 350 us GEMM 3 to 23% slow; a cool loop's clock moved by about 4%.
CLOCK_FALL_WARN = 0.10


def clock_warning(sm_clock_mhz: list[float] | None) -> str | None:
    """A warning when the SM clock the probe read fell noticeably during the timed calls."""
    if not sm_clock_mhz:
        return None
    top, low, mid = max(sm_clock_mhz), min(sm_clock_mhz), statistics.median(sm_clock_mhz)
    if low >= (1 - CLOCK_FALL_WARN) * top:
        return None
    return (f"the SM clock fell during the timed calls: {low:.0f} to {top:.0f} MHz, median {mid:.0f} MHz (read on "
            "the device after each call): power or thermal capping; the latency holds the slower calls")


def summarize(times_ms: list[float], method: str, note: str | None = None) -> TimingStats:
    ordered = sorted(times_ms)
    n = len(ordered)
    if n >= 2:
        q = statistics.quantiles(ordered, n=4, method="inclusive")
        iqr, std = q[2] - q[0], statistics.stdev(ordered)
    else:
        iqr = std = 0.0
    return TimingStats(method=method, count=n, median_ms=statistics.median(ordered), mean_ms=statistics.fmean(ordered),
                       std_ms=std, iqr_ms=iqr, min_ms=ordered[0], max_ms=ordered[-1], note=note)


METHODS: dict[str, Callable[[TimedCalls], MethodResult]] = {
    "device": time_device, "events": time_events, "graph": time_graph, "cpu": time_cpu,
}
_FALLBACKS = {"graph": ["graph", "device", "events"], "device": ["device", "events"], "events": ["events"],
              "cpu": ["cpu"]}


def resolve_method(requested: str | None, device: DeviceInfo) -> tuple[str, str | None]:
    """The method to try first, and a note when it is not what was asked for."""
    requested = requested or "auto"
    if not device.is_gpu:
        if requested in ("auto", "cpu"):
            return "cpu", None
        return "cpu", f"timing.method '{requested}' needs a GPU; the host clock was used"
    if requested == "auto":
        return "device", None
    if requested == "cpu":
        return "device", "timing.method 'cpu' does not time GPU work; the device method was used"
    return requested, None


@dataclass
class LatencyChoice:
    times_ms: list[float]
    host_bound: bool
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def host_dominates(host_ms: float, device_ms: float) -> bool:
    return host_ms > HOST_BOUND_MIN_MS and host_ms > HOST_BOUND_RATIO * device_ms


def waited_not_worked(contended: bool, host_functions: int, cpu_ms: float, device_ms: float) -> bool:
    """A host-bound wall span the calling thread's CPU time does not bear out, on a contended
    machine: the wait was for other processes' GPU work or a core (see ``choose_latency``). Calls
    that enqueued host functions are judged on the wall span alone (a driver thread runs them)."""
    return contended and not host_functions and not host_dominates(cpu_ms, device_ms)


def choose_latency(device_ms: list[float | None], host_ms: list[float], bracket_ms: float = 0.0, *,
                   spans: HostSpans | None = None, host_functions: int = 0,
                   contended: bool = False) -> LatencyChoice:
    """Per-call times to report: device spans, or host spans where the host dominates.

    ``host_ms``: each call's wall-clock span until the device finished what it launched. Host-
    bound means that span, less what the measuring bracket (profiler range, what is left of the
    flush queued before the call, synchronisation, around no call) costs by itself, or the span
    until the call returned (``spans.wall_own``) less the bracket's, exceeds 100 us and twice the
    device median: work done on the
    host, a result copied up, a host function run in stream order, a blocking wait. The host
    spans are then reported. Under the profiler the bracket cost 100 to 300 us per call on a busy
    host, around kernels of 5 to 150 us.

    On a ``contended`` machine (other processes on the GPU, or more runnable threads than cores)
    wall-clock spans also hold the wait for other processes' GPU work and for a core: an honest
    12 us matmul had 0.3 to 1 ms spans with four evaluations and parallel compiles beside it.
    There the calling thread's CPU time in the call (``spans``) must show the host work too; where
    it does not, the device span stands and the trace says why. Calls that enqueued host functions
    (``host_functions``: they run on a driver thread after the call returned) are judged on the
    wall-clock span alone.
    """
    measured = [d for d in device_ms if d is not None]
    if not measured:
        return LatencyChoice(list(host_ms), True,
                             ["no device activity was recorded for any timed call: host span reported"])
    choice = LatencyChoice([], False)
    missing = sum(d is None for d in device_ms)
    if missing:
        choice.notes.append(f"{missing} timed call(s) launched no device work: their host span is used")
    device_times = [h if d is None else d for d, h in zip(device_ms, host_ms)]
    dev_med, wall_med = statistics.median(device_times), statistics.median(host_ms)
    excess = max(0.0, wall_med - bracket_ms)
    if spans is not None and spans.wall_own:
        # Until the call returned, too: the full span also waits for what is left of the flush
        # queued before the call, which host work before the launch hides and the bracket's own
        # share then over-corrects (device method docstring).
        excess = max(excess, statistics.median(spans.wall_own) - spans.bracket.get("wall_own", 0.0))
    if not host_dominates(excess, dev_med):
        choice.times_ms = device_times
        if host_dominates(wall_med, dev_med):
            choice.notes.append(f"host span {wall_med * 1e3:.1f} us, of which the measuring bracket's own "
                                f"{bracket_ms * 1e3:.1f} us: not host-bound; device span reported")
        return choice
    wall_text = (f"host span {wall_med * 1e3:.1f} us (less the bracket's own {bracket_ms * 1e3:.1f} us) > 100 us "
                 f"and > {HOST_BOUND_RATIO:g}x the device span {dev_med * 1e3:.1f} us")
    if contended and spans is not None and spans.cpu_own and not host_functions:
        cpu = max(0.0, statistics.median(spans.cpu_own) - spans.bracket.get("cpu_own", 0.0))
        if waited_not_worked(contended, host_functions, cpu, dev_med):
            choice.times_ms = device_times
            choice.warnings.append(f"{wall_text}, but the calling thread spent only {cpu * 1e3:.1f} us of CPU "
                                   f"time in the call on a contended machine: the wait is taken for other "
                                   f"processes' GPU work or a busy host, not host work; device span reported")
            return choice
        wall_text += f"; {cpu * 1e3:.1f} us of CPU time in the call on a contended machine"
    if host_functions:
        choice.notes.append(f"the calls enqueued {host_functions} host function(s) in stream order")
    choice.notes.append(f"host-bound: {wall_text}; host span reported")
    choice.times_ms, choice.host_bound = list(host_ms), True
    return choice


def _run_with_fallback(first: str, calls: TimedCalls, notes: list[str],
                       suspicious: list[str]) -> tuple[str, MethodResult]:
    chain = _FALLBACKS[first]
    for position, name in enumerate(chain):
        first_call = getattr(calls.fresh, "calls_made", 0)
        try:
            result = METHODS[name](calls)
            if result.call_indices is None:  # a loop over fresh arguments: one call index after another
                # The device method leaves times_ms to choose_latency: count its per-call device spans.
                count = len(result.times_ms) or len(result.device_ms or [])
                result.call_indices = list(range(first_call, first_call + count))
            return name, result
        except MethodUnavailable as exc:
            synchronize(calls.device)
            if exc.suspicious:
                suspicious.append(exc.reason)
            if position + 1 == len(chain):
                raise
            notes.append(f"{name} unavailable ({exc.reason}); fell back to {chain[position + 1]}")
    raise AssertionError("unreachable")


def _keep_busy(calls: TimedCalls, began: float) -> None:
    """Repeat the last warm-up call until the device has been busy for WARMUP_MIN_S since ``began``
    (the start of warm-up): clocks come up from idle over milliseconds, and a short timed loop that
    starts on an idle device is timed at the lower clocks (repeat runs of one case differed 2.5x).
    Skipped when a timed loop ended on this device within WARM_DEVICE_GAP_S: the solution's loop
    and then the reference's, and workload after workload, keep the device busy (skipping it saved
    0.2 s per workload)."""
    last = _last_loop_end.get(calls.device.torch_device)
    if last is not None and began - last < WARM_DEVICE_GAP_S:
        return
    for _ in range(WARMUP_MAX_EXTRA_CALLS):
        if time.perf_counter() - began >= WARMUP_MIN_S:
            break
        calls.warm_call(calls.warm_args)
        synchronize(calls.device)


def time_calls(fn: Callable, next_args: FreshArgs, *, warmup: int, iterations: int, device: DeviceInfo,
               flusher: L2Flusher, method: str | None = None, keepers: list[CallKeeper] | None = None,
               region: Any = None, contended: bool = False, cooldown: float = 0.0) -> Measurement:
    """Warm up, then time ``iterations`` calls of ``fn``, each on the next fresh arguments.

    ``keepers`` keep chosen timed calls' outputs (the audit); ``region`` (activity_watch) samples
    the solution's threads around every call, warm-up included; ``contended``: other
    processes use the GPU or the host's cores (see ``choose_latency``); ``cooldown``: the device
    method's idle time after each call, as a multiple of the call's span (``TimingConfig.cooldown``).
    """
    first, resolved_note = resolve_method(method, device)
    notes = [resolved_note] if resolved_note else []
    calls = TimedCalls(fn, next_args, iterations, flusher, device, list(keepers or []), region, cooldown=cooldown)
    began = time.perf_counter()
    for _ in range(warmup):
        calls.warm_args = next_args()
        calls.warm_call(calls.warm_args)
    phase(f"    {warmup} warm-up call(s)")
    if device.is_gpu and calls.warm_args is not None:
        _keep_busy(calls, began)
    synchronize(device)
    phase("    device kept busy")
    suspicious: list[str] = []
    try:
        name, result = _run_with_fallback(first, calls, notes, suspicious)
    finally:
        _last_loop_end[device.torch_device] = time.perf_counter()
    fallbacks = [n for n in notes if "fell back to" in n]
    notes.extend(result.notes)
    m = Measurement(result.times_ms, name, device_ms=None, host_ms=result.host_ms, input_sets=next_args.input_sets,
                    call_indices=result.call_indices, warnings=list(result.warnings),
                    suspicious=suspicious + result.suspicious)
    if fallbacks:  # in the trace's warnings too, not only in the timing note: a fallback changes what was timed
        m.warnings.insert(0, f"timing method '{first}' was not used: {'; '.join(fallbacks)}")
    if result.device_ms is not None and result.host_ms:
        choice = choose_latency(result.device_ms, result.host_ms, result.bracket_ms, spans=result.spans,
                                host_functions=result.host_functions, contended=contended)
        m.times_ms, m.host_bound = choice.times_ms, choice.host_bound
        m.device_ms = [d for d in result.device_ms if d is not None] or None
        m.host_functions = result.host_functions
        m.sm_clock_mhz = result.sm_clock_mhz
        if (fell := clock_warning(result.sm_clock_mhz)) is not None:
            m.warnings.append(fell)
        notes.extend(choice.notes)
        m.warnings.extend(choice.warnings)
    m.note = "; ".join(notes) or None
    return m
