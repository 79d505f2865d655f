"""Timing the calls of a solution or reference.

Every timed call gets its arguments at a new address (``FreshArgs``) and starts with a cold L2
(``L2Flusher``); neither the copy nor the flush is inside the timed span. Methods:

- ``events``: device events recorded on the current stream immediately before and after each
  call; no host synchronisation between calls, so queued work runs back to back and the span
  is the call's device work plus any launch gaps inside it.
- ``cpu``: host clock around each call (CPU device only; needs SOL_EXECBENCH_ALLOW_CPU_TIMING=1).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable

import torch

from sol_execbench.platform import DeviceInfo
from sol_execbench.schema import TimingStats

_POOL_STEP_BYTES = 256  # shift of each call's data pointer; keeps the alignment kernels expect


class FreshArgs:
    """Copies of the inputs at a new address for every call, storing the data about once.

    Each tensor gets a pool ``span + (calls - 1) * step`` elements long; call ``i`` copies the
    source into offset ``i * step`` and returns a view with the source's shape and strides.
    """

    def __init__(self, values: list[Any], calls: int):
        self._calls, self._next = calls, 0
        self._entries: list[tuple[Any, ...]] = []
        for v in values:
            if not isinstance(v, torch.Tensor):
                self._entries.append(("value", v))
                continue
            src = v.contiguous() if any(s < 0 for s in v.stride()) else v
            span = 1 + sum((n - 1) * s for n, s in zip(src.shape, src.stride()) if n > 1) if src.numel() else 0
            step = max(1, _POOL_STEP_BYTES // src.element_size())
            pool = torch.empty(span + (calls - 1) * step, dtype=src.dtype, device=src.device)
            flat = src.as_strided((span,), (1,)) if span else src.reshape(0)
            self._entries.append(("tensor", pool, flat, tuple(src.shape), src.stride(), span, step))

    def __call__(self) -> list[Any]:
        if self._next >= self._calls:
            raise RuntimeError(f"FreshArgs made for {self._calls} calls, asked for more")
        i, self._next = self._next, self._next + 1
        out: list[Any] = []
        for entry in self._entries:
            if entry[0] == "value":
                out.append(entry[1])
                continue
            _, pool, flat, shape, stride, span, step = entry
            pool.narrow(0, i * step, span).copy_(flat)
            out.append(pool.as_strided(shape, stride, i * step))
        return out


class L2Flusher:
    """Writes a buffer twice the size of the device's last-level cache before each timed call."""

    def __init__(self, device: DeviceInfo):
        size = 2 * (device.l2_bytes or 64 * 1024 * 1024) if device.is_gpu else 0
        self._buffer = torch.empty(size, dtype=torch.uint8, device=device.torch_device) if size else None

    def flush(self) -> None:
        if self._buffer is not None:
            self._buffer.zero_()


@dataclass
class Measurement:
    times_ms: list[float]
    method: str
    note: str | None = None

    def stats(self) -> TimingStats:
        return summarize(self.times_ms, self.method, self.note)


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


def _time_events(fn: Callable, next_args: Callable[[], list], iterations: int, flusher: L2Flusher,
                 device: DeviceInfo) -> list[float]:
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iterations)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iterations)]
    for start, end in zip(starts, ends):
        args = next_args()
        flusher.flush()
        start.record()
        fn(*args)
        end.record()
    torch.cuda.synchronize(device.torch_device)
    return [s.elapsed_time(e) for s, e in zip(starts, ends)]


def _time_cpu(fn: Callable, next_args: Callable[[], list], iterations: int, flusher: L2Flusher,
              device: DeviceInfo) -> list[float]:
    times = []
    for _ in range(iterations):
        args = next_args()
        begin = time.perf_counter_ns()
        fn(*args)
        times.append((time.perf_counter_ns() - begin) / 1e6)
    return times


METHODS: dict[str, Callable[..., list[float]]] = {"events": _time_events, "cpu": _time_cpu}


def default_method(device: DeviceInfo) -> str:
    return "events" if device.is_gpu else "cpu"


def time_calls(fn: Callable, next_args: FreshArgs, *, warmup: int, iterations: int, device: DeviceInfo,
               flusher: L2Flusher, method: str | None = None) -> Measurement:
    """Warm up, then time ``iterations`` calls of ``fn``, each on the next fresh arguments."""
    method = method or default_method(device)
    for _ in range(warmup):
        fn(*next_args())
    if device.is_gpu:
        torch.cuda.synchronize(device.torch_device)
    times = METHODS[method](fn, next_args, iterations, flusher, device)
    return Measurement(times, method)
