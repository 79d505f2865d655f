"""SIGTERM and SIGINT stop a run in order: the exception raised in the main thread unwinds through
the child's watch (which kills the child's session) and the staging cleanup; the command then
exits 128 + the signal number (143, 130), as a shell expects of a process ended by it."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from typing import Iterator


class RunStopped(BaseException):
    """Raised by the signal handler; a BaseException so no ``except Exception`` swallows it."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum
        self.name = signal.Signals(signum).name


@contextlib.contextmanager
def stop_on_signals(signums: tuple[int, ...] = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield  # handlers can only be installed from the main thread
        return

    def stop(signum, _frame):
        for number in signums:  # a second signal during the cleanup does not interrupt it
            signal.signal(number, signal.SIG_IGN)
        raise RunStopped(signum)

    previous = {number: signal.signal(number, stop) for number in signums}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


@contextlib.contextmanager
def owned_run(owns_process: bool) -> Iterator[None]:
    """The process-wide measures of a run, where the CLI owns its process: a child subreaper (a
    solution's double-forked daemon comes back here), SIGTERM/SIGINT/SIGHUP raising RunStopped,
    and every descendant that was not there before ended when the run is over, then the staging
    folders of evaluations that did not remove their own. Run in-process
    (click's test runner, a notebook) they would reach the host program's own children and
    signals, so there they are left out."""
    from sol_execbench.platform.lifetime import become_subreaper, child_pids, kill_descendants

    earlier_children = set(child_pids(os.getpid()))
    if owns_process:
        become_subreaper()
    try:
        with stop_on_signals() if owns_process else contextlib.nullcontext():
            yield
    finally:
        if owns_process:
            kill_descendants(spare=earlier_children)
            from sol_execbench.evaluate.parent.runner import remove_live_staging

            remove_live_staging()
