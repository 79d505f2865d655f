"""What runs beside the solution's calls: threads and processes it started (see docs/security.md).

``ActivityWatch`` is created before the solution is imported. It counts Python thread starts
(a wrapper on ``threading``'s thread-start function) and process creation (a permanent audit
hook: fork, posix_spawn, subprocess, system, exec), and reads per-thread and per-process CPU
time from /proc. Over the timed region:

- a thread or process started during the timed calls is REWARD_HACK;
- a solution thread (started after the watch) that spent CPU time *outside* the timed calls is
  REWARD_HACK: work finishing after the timer stopped. CPU it spends inside a call (a worker the
  call waits for) is the call's own and is fine;
- a descendant process that spent CPU time during the timed region is REWARD_HACK;
- threads or processes left running but idle are warnings.

Linux only for CPU times; elsewhere only the start counters work.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import dataclass, field

from sol_execbench.platform.host import CLK_TCK, ProcessInfo, ProcessScan

_PROCESS_EVENTS = frozenset({"os.fork", "os.forkpty", "os.posix_spawn", "os.spawn", "subprocess.Popen", "os.system",
                             "os.exec", "pty.spawn"})
THREAD_OUTSIDE_CPU_MIN_MS = 1.0
AFTERWARDS_SAMPLES = 5  # after the timed calls, solution threads may not keep computing:
AFTERWARDS_INTERVAL_S = 0.005  # sampled this often, a thread found runnable in most samples is
AFTERWARDS_RUNNABLE_MIN = 3  # still working (runnable counts even when other processes starve it)
PROCESS_CPU_MIN_MS = 20.0  # /proc/<pid>/stat counts in clock ticks (10 ms)
BUSY_FRACTION = 0.10  # ... and at least this fraction of the timed region's wall time
# Solution threads: the same, with a smaller fraction. A persistent worker's deferred job costs the
# same CPU on a loaded machine while the region (the reference's calls, flushes, synchronisations)
# stretches: a CPU matmul worker spent 9 ms outside the calls of a 47 ms region on an idle machine,
# under 10% of the region once the machine was loaded. Python threads a solution keeps for its own
# calls wait without CPU between them.
THREAD_BUSY_FRACTION = 0.02


def _read(path: str) -> str | None:
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return None


def thread_runnable(thread: threading.Thread) -> bool:
    """Whether the thread is running or waiting only for a CPU (state R), not blocked."""
    text = _read(f"/proc/self/task/{thread.native_id}/stat")
    return bool(text) and text.rsplit(")", 1)[1].split()[0] == "R"


def thread_cpu_ms(thread: threading.Thread) -> float | None:
    """CPU time of a thread of this process, up to now: its POSIX CPU clock (exact, includes the
    slice it is running), else /proc schedstat, else /proc stat (clock ticks)."""
    try:
        return time.clock_gettime_ns(time.pthread_getcpuclockid(thread.ident)) / 1e6
    except (AttributeError, OSError, TypeError, ValueError):
        pass
    text = _read(f"/proc/self/task/{thread.native_id}/schedstat")
    if text:
        return int(text.split()[0]) / 1e6
    text = _read(f"/proc/self/task/{thread.native_id}/stat")
    if text:
        fields = text.rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * 1000.0 / CLK_TCK
    return None


def _related(table: dict[int, ProcessInfo]) -> set[int]:
    """Live processes of ``table`` below this one in the process tree, and, when this process leads
    its own session (a fresh evaluation child), the rest of that session (orphans re-parented to init)."""
    me = os.getpid()
    session = os.getsid(0) if os.getsid(0) == me else None
    children: dict[int, list[int]] = {}
    for info in table.values():
        children.setdefault(info.ppid, []).append(info.pid)
    below, stack = set(), [me]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in below:
                below.add(child)
                stack.append(child)
    return {pid for pid, info in table.items()
            if pid != me and info.state not in ("Z", "X") and (pid in below or info.session == session)}


# Read before and after each workload's timed calls: only new pids and related processes are read
# again between full scans (``ProcessScan``).
descendants = ProcessScan(_related)


@dataclass
class WatchFindings:
    suspicious: list[str] = field(default_factory=list)  # becomes REWARD_HACK
    warnings: list[str] = field(default_factory=list)


class ActivityWatch:
    def __init__(self) -> None:
        self._baseline_threads = {t.ident for t in threading.enumerate()}
        self._baseline_processes = set(descendants())
        self._timing = False
        self.thread_starts = 0
        self.process_starts: list[str] = []
        self._install_thread_counter()
        sys.addaudithook(self._audit)  # permanent by design: solution code cannot remove it

    def _install_thread_counter(self) -> None:
        name = "_start_new_thread" if hasattr(threading, "_start_new_thread") else "_start_joinable_thread"
        original = getattr(threading, name, None)
        if original is None:
            return
        watch = self

        def counted_start(*args, **kwargs):
            watch.thread_starts += 1
            return original(*args, **kwargs)

        setattr(threading, name, counted_start)

    def _audit(self, event: str, args: tuple) -> None:
        if self._timing and event in _PROCESS_EVENTS:
            self.process_starts.append(event)

    def solution_threads(self) -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.is_alive() and t.ident not in self._baseline_threads]

    def begin(self) -> "TimedRegion":
        self._timing = True
        return TimedRegion(self)

    def _end(self) -> None:
        self._timing = False


class TimedRegion:
    """One timed region: call ``enter_call``/``exit_call`` around each call, then ``finish``."""

    def __init__(self, watch: ActivityWatch):
        self._watch = watch
        self._threads = watch.solution_threads()
        self._thread_cpu_start = self._thread_cpu()
        self._inside_ms = 0.0
        self._mark: float | None = None
        self._starts = (watch.thread_starts, len(watch.process_starts))
        self._processes = {pid: p.cpu_ms for pid, p in descendants().items()}
        self._wall_start = _now_ms()

    def _thread_cpu(self) -> float:
        return sum(filter(None, (thread_cpu_ms(t) for t in self._threads)))

    @property
    def watching_threads(self) -> bool:
        return bool(self._threads)

    def enter_call(self) -> None:
        if self._threads:
            self._mark = self._thread_cpu()

    def exit_call(self) -> None:
        if self._threads and self._mark is not None:
            self._inside_ms += self._thread_cpu() - self._mark
            self._mark = None

    def finish(self) -> WatchFindings:
        self._watch._end()
        out = WatchFindings()
        wall = _now_ms() - self._wall_start
        self._check_starts(out)
        self._check_threads(out, wall)
        self._check_processes(out, wall)
        return out

    def _check_starts(self, out: WatchFindings) -> None:
        threads = self._watch.thread_starts - self._starts[0]
        processes = self._watch.process_starts[self._starts[1]:]
        if threads:
            out.suspicious.append(f"the solution started {threads} thread(s) during the timed calls")
        if processes:
            out.suspicious.append(f"the solution started processes during the timed calls ({', '.join(sorted(set(processes)))})")

    def _check_threads(self, out: WatchFindings, wall_ms: float) -> None:
        if not self._threads:
            return
        names = ", ".join(sorted({t.name for t in self._threads}))
        outside = (self._thread_cpu() - self._thread_cpu_start) - self._inside_ms
        busy = self._busy_afterwards()
        if outside > max(THREAD_OUTSIDE_CPU_MIN_MS, THREAD_BUSY_FRACTION * wall_ms):
            out.suspicious.append(f"solution thread(s) [{names}] used {outside:.1f} ms of CPU outside the timed calls "
                                  f"(of {wall_ms:.1f} ms): work finishing after the timer stops")
        elif busy:
            out.suspicious.append(f"solution thread(s) [{', '.join(busy)}] were still computing after the timed calls "
                                  "had returned: work finishing after the timer stops")
        else:
            out.warnings.append(f"the solution keeps {len(self._threads)} thread(s) running (idle while timed): {names}")

    def _busy_afterwards(self) -> list[str]:
        runnable = {t.name: 0 for t in self._threads}
        for _ in range(AFTERWARDS_SAMPLES):
            for t in self._threads:
                runnable[t.name] += thread_runnable(t)
            time.sleep(AFTERWARDS_INTERVAL_S)
        return sorted(name for name, count in runnable.items() if count >= AFTERWARDS_RUNNABLE_MIN)

    def _check_processes(self, out: WatchFindings, wall_ms: float) -> None:
        now = {pid: p for pid, p in descendants().items() if pid not in self._watch._baseline_processes}
        busy = {pid: p.cpu_ms - self._processes.get(pid, 0.0) for pid, p in now.items()}
        busy = {pid: ms for pid, ms in busy.items() if ms > max(PROCESS_CPU_MIN_MS, BUSY_FRACTION * wall_ms)}
        if busy:
            listed = ", ".join(f"pid {pid}: {ms:.0f} ms" for pid, ms in sorted(busy.items()))
            out.suspicious.append(f"process(es) the solution started used CPU during the timed calls ({listed})")
        elif now:
            out.warnings.append(f"the solution left {len(now)} process(es) running: pids {sorted(now)}")


def _now_ms() -> float:
    return time.perf_counter_ns() / 1e6
