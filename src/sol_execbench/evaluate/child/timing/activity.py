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
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, NamedTuple

DEVICE_KINDS = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
LAUNCH_KINDS = frozenset({"cuda_runtime", "cuda_driver", "privateuse1_runtime", "privateuse1_driver"})
HOST_RANGE_KINDS = frozenset({"cpu_op", "user_annotation"})
_KEPT_KINDS = DEVICE_KINDS | LAUNCH_KINDS | HOST_RANGE_KINDS
_NAME_WIDTH = 72


class Activity(NamedTuple):
    """One record. A named tuple, not a frozen dataclass: a loop leaves one to two thousand of
    them, and building the dataclass cost a third of reading them."""

    kind: str
    name: str
    start_ns: int
    end_ns: int
    correlation: int = 0
    linked: int = 0
    stream: int | None = None
    thread: int = 0  # host records: the thread that made the call or opened the range (0: not known)


_API_CALL = re.compile(r"^(cuda|cu|hip|hsa)[A-Z]\w*$")  # cudaLaunchKernel, cuLaunchKernelEx, hipMemcpyAsync
_OWN_RANGE_PREFIX = "sol_execbench::"
# Host work run in stream order after the call has returned (cudaLaunchHostFunc, cuLaunchHostFunc,
# cudaStreamAddCallback, hipLaunchHostFunc): its time is outside the call's own host span.
_HOST_FUNCTION = re.compile(r"LaunchHostFunc|StreamAddCallback")


def _kind_of(event: Any, name: str, typed: bool, annotated: bool, cpu: Any) -> str:
    """The record's kineto activity type: ``activity_type()`` where torch has it (2.13 does;
    2.11 does not, and every record then looked like a CPU op or a kernel: no call ranges, no
    launches, so the device method found nothing). Without it the type is read from the device
    (runtime and driver calls, CPU ops and annotations are the CPU's) and the name. ``typed`` and
    ``annotated``: whether this torch's events have ``activity_type``/``is_user_annotation``
    (looked up once per session: a failed lookup per record cost 60 ms per profiled loop).
    ``cpu``: the CPU's ``device_type().value`` (comparing values costs a quarter of reading the
    type's name, per record of thousands)."""
    if typed:
        kind = event.activity_type()
        if kind:
            return str(kind)
    annotation = name.startswith(_OWN_RANGE_PREFIX) or (annotated and bool(event.is_user_annotation()))
    if event.device_type().value == cpu:
        if annotation:
            return "user_annotation"
        return "cuda_runtime" if _API_CALL.match(name) else "cpu_op"
    if annotation:
        return "gpu_user_annotation"  # a host range projected onto the device: not work
    if name.startswith("Memcpy"):
        return "gpu_memcpy"
    if name.startswith("Memset"):
        return "gpu_memset"
    return "kernel"


def from_kineto(events: Iterable[Any]) -> list[Activity]:
    """Plain records from ``prof.profiler.kineto_results.events()``."""
    events = list(events)
    if not events:
        return []
    typed = callable(getattr(events[0], "activity_type", None))
    annotated = callable(getattr(events[0], "is_user_annotation", None))
    cpu = type(events[0].device_type()).CPU.value
    out = []
    for e in events:
        name = e.name()
        kind = _kind_of(e, name, typed, annotated, cpu)
        if kind not in _KEPT_KINDS:
            continue
        resource = e.device_resource_id()
        on_device = kind in DEVICE_KINDS
        out.append(Activity(kind, name, e.start_ns(), e.end_ns(), e.correlation_id(), e.linked_correlation_id(),
                            resource if on_device else None, 0 if on_device else resource))
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
    forged_ranges: list[str] = field(default_factory=list)  # ranges named like the harness's, not its own
    host_functions: list[str] = field(default_factory=list)  # host functions/callbacks enqueued by the calls


@dataclass(frozen=True)
class _Window:
    start_ns: int
    end_ns: int
    call: int | None  # None: a setup range


def _windows(records: list[Activity], call_prefix: str, setup_name: str) -> tuple[list[_Window], list[str]]:
    """The harness's call and setup ranges, in time order, and the names of ranges that only
    look like them. The harness opens its ranges one after another on one thread (the one that
    opened the call ranges); a range with such a name opened inside another, or on another
    thread, is the solution's, and would otherwise hide its work as the harness's setup."""
    found = []
    for r in records:
        if r.kind != "user_annotation":
            continue
        if r.name == setup_name or r.name.startswith(setup_name + "::"):  # the clock probe's range too
            found.append((r, None))
        elif r.name.startswith(call_prefix + "#"):
            try:
                found.append((r, int(r.name.rsplit("#", 1)[1])))
            except ValueError:
                found.append((r, -1))
    threads = Counter(r.thread for r, call in found if call is not None)
    owner = threads.most_common(1)[0][0] if threads else 0
    kept: list[_Window] = []
    forged = []
    for r, call in sorted(found, key=lambda item: (item[0].start_ns, -item[0].end_ns)):
        if (owner and r.thread and r.thread != owner) or (kept and r.start_ns < kept[-1].end_ns) or call == -1:
            forged.append(r.name)
        else:
            kept.append(_Window(r.start_ns, r.end_ns, call))
    return kept, forged


def _window_at(windows: list[_Window], starts: list[int], t: int) -> _Window | None:
    i = bisect.bisect_right(starts, t) - 1
    return windows[i] if i >= 0 and windows[i].start_ns <= t <= windows[i].end_ns else None


def attribute(records: list[Activity], call_count: int, call_prefix: str, setup_name: str) -> Attribution:
    """Group device records by the timed call that launched them."""
    windows, forged = _windows(records, call_prefix, setup_name)
    starts = [w.start_ns for w in windows]
    op_start = {r.correlation: r.start_ns for r in records if r.kind in HOST_RANGE_KINDS}
    launches = {r.correlation: r for r in records if r.kind in LAUNCH_KINDS}
    own = _setup_thread(windows, starts, launches.values())
    result = Attribution(calls=[CallActivity(i) for i in range(call_count)], forged_ranges=forged)
    result.host_functions = [r.name for r in launches.values() if _HOST_FUNCTION.search(r.name)
                             and (w := _window_at(windows, starts, r.start_ns)) is not None and w.call is not None]
    for r in records:
        if r.kind not in DEVICE_KINDS:
            continue
        launch = launches.get(r.correlation)
        when = op_start.get(r.linked) if r.linked else None
        if when is None or _window_at(windows, starts, when) is None:
            when = launch.start_ns if launch is not None else when
        if when is None:
            result.unmatched.append(r)
            continue
        window = _window_at(windows, starts, when)
        if window is None:
            result.foreign.append(r)
        elif window.call is None:  # the harness's own work, unless another thread launched it meanwhile
            if own and launch is not None and launch.thread and launch.thread != own:
                result.foreign.append(r)
            else:
                result.setup_count += 1
        elif 0 <= window.call < call_count:
            result.calls[window.call].device.append(r)
    return result


def probe_durations(records: list[Activity], probe_prefix: str) -> list[tuple[int, int]]:
    """(cycles, kernel duration in ns) of each clock probe, in launch order: the first kernel
    launched inside each range named ``<probe_prefix>#<cycles>`` (found as ``attribute`` finds a
    call's: through the linked range, else the launch record; the harness's later work in the same
    range, the next call's arguments, hold and flush, follows it on the stream). A probe whose
    kernel record is missing is left out."""
    probes = sorted((r for r in records if r.kind == "user_annotation" and r.name.startswith(probe_prefix + "#")),
                    key=lambda r: r.start_ns)
    if not probes:
        return []
    starts = [r.start_ns for r in probes]
    launches = {r.correlation: r.start_ns for r in records if r.kind in LAUNCH_KINDS}
    op_start = {r.correlation: r.start_ns for r in records if r.kind in HOST_RANGE_KINDS}
    first: dict[int, Activity] = {}  # probe range index -> its first kernel on the device
    for kernel in records:
        if kernel.kind != "kernel":
            continue
        for when in (op_start.get(kernel.linked) if kernel.linked else None, launches.get(kernel.correlation)):
            i = bisect.bisect_right(starts, when) - 1 if when is not None else -1
            if i >= 0 and when <= probes[i].end_ns:
                if i not in first or kernel.start_ns < first[i].start_ns:
                    first[i] = kernel
                break
    found = []
    for i, kernel in sorted(first.items()):
        cycles = probes[i].name.rsplit("#", 1)[1]
        if cycles.isdigit():
            found.append((int(cycles), kernel.end_ns - kernel.start_ns))
    return found


def sm_clocks_mhz(probes: list[tuple[int, int]]) -> list[float]:
    """The SM clock each spinning probe ran at: its cycles over its duration less an empty
    probe's (the launch's own floor, the median of the zero-cycle probes). Empty without a
    zero-cycle probe to calibrate against."""
    floor = sorted(ns for cycles, ns in probes if cycles == 0)
    if not floor:
        return []
    floor_ns = floor[len(floor) // 2]
    return [cycles * 1e3 / (ns - floor_ns) for cycles, ns in probes if cycles > 0 and ns > floor_ns]


def _setup_thread(windows: list[_Window], starts: list[int], launches: Iterable[Activity]) -> int:
    """The thread that makes the setup ranges' launches (the harness's; the one most of them
    come from), or 0 where the records carry no thread. Work another thread launches while a
    setup range is open is not the harness's."""
    threads = Counter(a.thread for a in launches if a.thread and (w := _window_at(windows, starts, a.start_ns))
                      is not None and w.call is None)
    return threads.most_common(1)[0][0] if threads else 0


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


def unmatched_description(unmatched: list[Activity]) -> str:
    names = Counter(a.name[:_NAME_WIDTH] for a in unmatched)
    shown = ", ".join(f"{n} x{c}" for n, c in names.most_common(5))
    return (f"{len(unmatched)} device operation(s) ran with no launch record from the profiled thread (launched "
            f"by another thread, possibly outside the timed calls): {shown}")


def host_ops_per_call(records: list[Activity], call_count: int, call_prefix: str, setup_name: str) -> list[list[Activity]]:
    """Per timed call, the outermost CPU ops that ran inside its range (the CPU device's "kernels":
    ``--profile torch`` on the CPU). An op inside another op of the same thread is part of it."""
    windows, _ = _windows(records, call_prefix, setup_name)
    starts = [w.start_ns for w in windows]
    per_call: list[list[Activity]] = [[] for _ in range(call_count)]
    open_until: dict[int, int] = {}  # thread -> end of the outermost op seen last
    for r in sorted((r for r in records if r.kind == "cpu_op"), key=lambda r: (r.start_ns, -r.end_ns)):
        window = _window_at(windows, starts, r.start_ns)
        if window is None or window.call is None or not 0 <= window.call < call_count:
            continue
        if r.start_ns < open_until.get(r.thread, -1):
            continue
        open_until[r.thread] = r.end_ns
        per_call[window.call].append(r)
    return per_call
