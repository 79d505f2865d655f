"""Device activity records, grouped per timed call (plain Python, testable without a GPU).

The profiler gives three kinds of record that matter here:

- device activity (``kernel``, ``gpu_memcpy``, ``gpu_memset``) with device timestamps, a
  correlation id (the launching API call's) and a linked id (the CPU op active on the
  launching thread);
- launch API calls (``cuda_runtime``/``cuda_driver``; ROCm's HIP calls arrive under the same
  names) with host timestamps and the same correlation id;
- host ranges: our ``sol_execbench::call#i`` and ``sol_execbench::setup`` annotations and the
  CPU ops inside them.

A device record belongs to the call whose host window contains its launch: found through the
linked CPU op, else through the launch API record (which also covers launches from other
threads). Launches inside setup ranges are the harness's own (FreshArgs copies, the L2 flush)
and are left out. Launches found outside every range were made by someone else while the
timed loop ran.
"""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable

DEVICE_KINDS = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
LAUNCH_KINDS = frozenset({"cuda_runtime", "cuda_driver", "privateuse1_runtime", "privateuse1_driver"})
HOST_RANGE_KINDS = frozenset({"cpu_op", "user_annotation"})
_NAME_WIDTH = 72


@dataclass(frozen=True)
class Activity:
    kind: str
    name: str
    start_ns: int
    end_ns: int
    correlation: int = 0
    linked: int = 0
    stream: int | None = None


def _kind_of(event: Any) -> str:
    kind = ""
    try:
        kind = str(event.activity_type() or "")
    except Exception:  # older torch: no activity_type(); device records are the non-CPU ones
        pass
    if kind:
        return kind
    return "cpu_op" if str(event.device_type()).endswith("CPU") else "kernel"


def from_kineto(events: Iterable[Any]) -> list[Activity]:
    """Plain records from ``prof.profiler.kineto_results.events()``."""
    out = []
    for e in events:
        kind = _kind_of(e)
        if kind not in DEVICE_KINDS and kind not in LAUNCH_KINDS and kind not in HOST_RANGE_KINDS:
            continue
        out.append(Activity(kind=kind, name=e.name(), start_ns=int(e.start_ns()), end_ns=int(e.end_ns()),
                            correlation=int(e.correlation_id()), linked=int(e.linked_correlation_id()),
                            stream=int(e.device_resource_id()) if kind in DEVICE_KINDS else None))
    return out


@dataclass
class CallActivity:
    """The device work one timed call launched."""

    index: int
    device: list[Activity] = field(default_factory=list)

    @property
    def span_ns(self) -> int | None:
        if not self.device:
            return None
        return max(a.end_ns for a in self.device) - min(a.start_ns for a in self.device)

    @property
    def has_kernel(self) -> bool:
        return any(a.kind == "kernel" for a in self.device)

    def work_set(self) -> tuple[str, ...]:
        """What it launched: kernel names (shortened) and memcpy/memset kinds, with repeats."""
        labels = [a.name[:_NAME_WIDTH] if a.kind == "kernel" else f"[{a.kind}] {a.name[:40]}" for a in self.device]
        return tuple(sorted(labels))


@dataclass
class Attribution:
    calls: list[CallActivity]
    setup_count: int = 0  # device records from setup ranges (the flush at least): the profiler works
    foreign: list[Activity] = field(default_factory=list)  # launched outside every range
    unmatched: list[Activity] = field(default_factory=list)  # no launch record found


@dataclass(frozen=True)
class _Window:
    start_ns: int
    end_ns: int
    call: int | None  # None: a setup range


def _windows(records: list[Activity], call_prefix: str, setup_name: str) -> list[_Window]:
    found = []
    for r in records:
        if r.kind != "user_annotation":
            continue
        if r.name == setup_name:
            found.append(_Window(r.start_ns, r.end_ns, None))
        elif r.name.startswith(call_prefix + "#"):
            found.append(_Window(r.start_ns, r.end_ns, int(r.name.rsplit("#", 1)[1])))
    return sorted(found, key=lambda w: w.start_ns)


def _window_at(windows: list[_Window], starts: list[int], t: int) -> _Window | None:
    i = bisect.bisect_right(starts, t) - 1
    return windows[i] if i >= 0 and windows[i].start_ns <= t <= windows[i].end_ns else None


def attribute(records: list[Activity], call_count: int, call_prefix: str, setup_name: str) -> Attribution:
    """Group device records by the timed call that launched them."""
    windows = _windows(records, call_prefix, setup_name)
    starts = [w.start_ns for w in windows]
    op_start = {r.correlation: r.start_ns for r in records if r.kind in HOST_RANGE_KINDS}
    launch_start = {r.correlation: r.start_ns for r in records if r.kind in LAUNCH_KINDS}
    result = Attribution(calls=[CallActivity(i) for i in range(call_count)])
    for r in records:
        if r.kind not in DEVICE_KINDS:
            continue
        when = op_start.get(r.linked) if r.linked else None
        if when is None or _window_at(windows, starts, when) is None:
            when = launch_start.get(r.correlation, when)
        if when is None:
            result.unmatched.append(r)
            continue
        window = _window_at(windows, starts, when)
        if window is None:
            result.foreign.append(r)
        elif window.call is None:
            result.setup_count += 1
        elif 0 <= window.call < call_count:
            result.calls[window.call].device.append(r)
    return result


def _describe(work: tuple[str, ...]) -> str:
    if not work:
        return "{nothing}"
    counts = Counter(work)
    return "{" + ", ".join(f"{name} x{n}" if n > 1 else name for name, n in sorted(counts.items())) + "}"


def work_set_warnings(calls: list[CallActivity]) -> list[str]:
    """Warnings when timed calls launched different work, or no kernel at all (status unchanged)."""
    warnings = []
    sets = Counter(c.work_set() for c in calls)
    if len(sets) > 1:
        listed = "; ".join(f"{n} call(s): {_describe(work)}" for work, n in sets.most_common())
        warnings.append(f"timed calls launched different kernel sets ({len(sets)} kinds): {listed}")
    without = [c.index for c in calls if not c.has_kernel]
    if without:
        warnings.append(f"{len(without)} of {len(calls)} timed call(s) launched no kernel "
                        f"(first: call {without[0]}, which launched {_describe(calls[without[0]].work_set())})")
    return warnings


def foreign_description(foreign: list[Activity]) -> str:
    names = Counter(a.name[:_NAME_WIDTH] for a in foreign)
    shown = ", ".join(f"{n} x{c}" for n, c in names.most_common(5))
    return (f"{len(foreign)} device operation(s) were launched outside the timed calls while they ran "
            f"(by another thread, or after a call returned): {shown}")
