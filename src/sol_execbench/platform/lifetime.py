"""Processes of a run end with the run: the kernel's parent-death signal for each child, and the
command-line process as a child subreaper so that what a solution double-forks away (``setsid``
daemons) is re-parented to it and can be found and ended when the run is over. Linux only; each
call is a no-op elsewhere."""

from __future__ import annotations

import ctypes
import os
import signal
import time

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36


def _prctl(option: int, value: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def die_with_parent(parent_pid: int | None = None) -> bool:
    """SIGKILL this process when the thread that started it ends. ``parent_pid``: the parent it
    must still have, checked after the call (a parent that died before it is already gone)."""
    ok = _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if parent_pid is not None and os.getppid() != parent_pid:
        os._exit(1)
    return ok


def preexec_die_with_parent() -> None:
    """For ``subprocess.Popen(preexec_fn=...)``: the child keeps the parent-death signal through exec."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def exit_when_pipe_closes(fd: int) -> None:
    """Start a thread that ends this process (and the group it leads) when ``fd``, the read end of
    a pipe whose write end only the parent holds, reaches EOF: the parent is gone, however it went.
    Unlike the parent-death signal, this does not depend on which of the parent's threads
    started the process."""
    import select
    import threading

    def watch() -> None:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        while True:
            try:
                events = poller.poll()
            except InterruptedError:
                continue
            if any(event & (select.POLLHUP | select.POLLERR | select.POLLIN) for _, event in events):
                if os.getpgrp() == os.getpid():
                    os.killpg(os.getpgrp(), signal.SIGKILL)
                os._exit(137)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def protect_from_children() -> bool:
    """Make this (parent) process non-dumpable, so a same-user child cannot open its
    /proc/<pid>/fd/* (its stdout, the -o file) or /proc/<pid>/mem. Linux only; root children are
    not stopped. Side effect: no core dumps and no ptrace attach by non-root users. True if set."""
    return _prctl(PR_SET_DUMPABLE, 0)


def become_subreaper() -> bool:
    """Orphans of this process's descendants are re-parented here instead of to PID 1."""
    return _prctl(PR_SET_CHILD_SUBREAPER, 1)


def child_pids(pid: int) -> list[int]:
    """The children of process ``pid``: each of its threads lists the children it started itself
    (``/proc/<pid>/task/<tid>/children``), so a child a worker thread started is only in that
    thread's list."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    found: list[int] = []
    for tid in threads:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as fh:
                found.extend(int(x) for x in fh.read().split())
        except (OSError, ValueError):
            continue
    return sorted(set(found))


def kill_descendants(spare: set[int] = frozenset(), settle_s: float = 2.0) -> int:
    """SIGKILL every descendant of this process, except the children in ``spare`` (that were
    there before the run) and theirs, and reap them; the number found. With ``become_subreaper``
    in force this also reaches daemons that left their session."""
    me, found = os.getpid(), 0
    deadline = time.monotonic() + settle_s
    while True:
        stack = [pid for pid in child_pids(me) if pid not in spare]
        seen: set[int] = set()
        while stack:
            pid = stack.pop()
            if pid in seen:
                continue
            seen.add(pid)
            stack.extend(child_pids(pid))
        for pid in seen:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        found += len(seen)
        for pid in seen:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
        if not [pid for pid in child_pids(me) if pid not in spare] or time.monotonic() > deadline:
            return found
        time.sleep(0.02)
