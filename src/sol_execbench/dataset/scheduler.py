"""Running problems on evaluation slots: one worker thread per slot (a GPU, or the CPU), each
evaluating one problem at a time, taking the next from a shared queue (longest first). That one
worker owns each device is what keeps two evaluations off one GPU.

In pipeline mode a pool of preparation threads works ahead in queue order (native builds into
the build cache) while the slots evaluate, and a free slot takes the first problem in the queue
whose preparation is done: a problem still building holds back no problem that is ready (its
build would otherwise leave every slot idle for as long as the compiler runs). In serial mode
nothing runs ahead.

Worker threads are daemons and every process they start dies with the run (the evaluator's
children and the compile processes carry the parent-death signal): a run killed at any moment
leaves nothing behind. A stop (``--timeout-policy fail``, an error) lets no further problem start;
a signal also interrupts the evaluations in progress, which clean up as the ``evaluate`` command's
does, and nothing more is committed."""

from __future__ import annotations

import contextlib
import ctypes
import threading
import time
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Callable, Generic, Iterator, TypeVar

P = TypeVar("P")
_JOIN_POLL_S = 0.2  # the main thread wakes this often, so that a signal's handler runs promptly
_INTERRUPT_GRACE_S = 10.0  # an interrupted evaluation ends its child and removes its staging in well under this


@dataclass
class RunControl:
    """Whether the run goes on. A stop lets no further problem start; an interrupting stop also
    lets no further result be committed (the evaluations in progress are being ended). A commit and
    the decision to interrupt exclude each other, so a result is committed whole or not at all."""

    stopped: str | None = None
    interrupted: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def stop(self, reason: str, interrupt: bool = False) -> None:
        with self._lock:
            if self.stopped is None:
                self.stopped = reason
            self.interrupted = self.interrupted or interrupt

    @contextlib.contextmanager
    def committing(self) -> Iterator[bool]:
        """Held while a result is written; yields whether it may be."""
        with self._lock:
            yield not self.interrupted


@dataclass
class Scheduler(Generic[P]):
    items: list[P]
    slots: list[str | None]
    evaluate: Callable[[P, str | None], None]
    prepare: Callable[[P], None] | None = None
    """Pipeline mode: run ahead of the evaluations on ``prepare_jobs`` threads."""
    prepare_jobs: int = 1
    control: RunControl = field(default_factory=RunControl)
    errors: list[BaseException] = field(default_factory=list)

    def run(self) -> None:
        pending: deque[P] = deque(self.items)
        queue_lock = threading.Lock()
        pool = ThreadPoolExecutor(self.prepare_jobs, thread_name_prefix="prepare") if self.prepare else None
        prepared: dict[int, Future] = {}
        if pool is not None:
            prepared = {id(item): pool.submit(self.prepare, item) for item in self.items}

        def take() -> tuple[bool, P | None]:
            """(whether anything is left, the next problem ready to evaluate or None)."""
            with queue_lock:
                if not pending:
                    return False, None
                ready = next((i for i in pending if pool is None or prepared[id(i)].done()), None)
                if ready is not None:
                    pending.remove(ready)
                    return True, ready
                building = [prepared[id(i)] for i in pending]
            wait(building, timeout=_JOIN_POLL_S, return_when=FIRST_COMPLETED)
            return True, None

        def work(slot: str | None) -> None:
            while self.control.stopped is None:
                left, item = take()
                if not left:
                    return
                if item is None:
                    continue
                try:
                    if pool is not None:
                        prepared[id(item)].result()
                    self.evaluate(item, slot)
                except BaseException as exc:  # noqa: BLE001  (handed to the main thread, which raises it)
                    self.errors.append(exc)
                    self.control.stop(f"an error in the runner: {exc}")
                    return

        threads = [threading.Thread(target=work, args=(slot,), name=f"evaluate-{slot or 'default'}-{i}", daemon=True)
                   for i, slot in enumerate(self.slots)]
        for thread in threads:
            thread.start()
        try:
            for thread in threads:
                while thread.is_alive():
                    thread.join(_JOIN_POLL_S)
        except BaseException as exc:
            self.control.stop(f"interrupted ({type(exc).__name__})", interrupt=True)
            _interrupt(threads)
            raise
        finally:
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)
        errors = [e for e in self.errors if not isinstance(e, EvaluationInterrupted)]
        if errors:
            raise errors[0]


class EvaluationInterrupted(BaseException):
    """Raised inside a worker thread when the run is stopped (a signal in the main thread)."""


def _interrupt(threads: list[threading.Thread], grace_s: float = _INTERRUPT_GRACE_S) -> None:
    """Stop the evaluations in progress the way a signal stops the single evaluation of the
    ``evaluate`` command: an exception raised in the thread that waits on the child, whose cleanup
    then ends the child's session and removes its staging folder. Waits up to ``grace_s`` for that."""
    for thread in threads:
        if thread.is_alive() and thread.ident is not None:
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident),
                                                       ctypes.py_object(EvaluationInterrupted))
    deadline = time.monotonic() + grace_s
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
