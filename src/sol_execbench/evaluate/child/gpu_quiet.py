"""Keeps warm-pool start-up work off a GPU while an evaluation measures on it.

A warm child's start-up runs kernels and a profiler session on the device. An evaluation timing
its calls at that moment would share the GPU with it: the device time-slices between processes,
and the pool starts a replacement exactly when it hands a child out. So:

- every evaluation child on a GPU holds a shared lock on a per-device file from its first timed
  pass until it exits (its correctness rounds may run beside a warm-up: they time nothing);
- a warm child takes the exclusive lock around its device warm-up, which runs in steps of at most
  a few tenths of a second: it waits while evaluations measure, and an evaluation that reaches its
  timed passes meanwhile says so (a shared lock on the device's ``.want`` file while it waits), and
  the warm-up gives the device up at its next step, to take it back once that evaluation is over.

The pool starts a replacement child as it hands one out, so with evaluations back to back the
replacement's device warm-up falls at the start of the next evaluation, which loads its solution
and runs its correctness rounds meanwhile; an evaluation whose timed passes come first waits for
one step, not for the whole warm-up (about a second on an H100).

A warm child holds a device context, which the driver lists as a process using the GPU. Until
it is handed a job its device work runs only under the exclusive lock, never beside a timed pass,
so it marks itself idle (a file named after its pid) as it takes that lock, before its context
exists, and evaluations leave it out of "other processes use this GPU". A warm-up that gave up
waiting for the lock runs beside timed passes and is marked only once it is over.

The lock and the marks live in the per-user runtime folder of the warm pool; a solution could
drop its own process's lock, which only lets a warm-up overlap its timing again.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

from sol_execbench.platform.host import process_alive, runtime_dir

from .. import phases

SHARED_WAIT_S = 30.0  # an evaluation waits at most this long for a warm-up to finish
EXCLUSIVE_WAIT_S = 15.0  # a warm-up waits at most this long for running evaluations (see exclusive)
HANDOVER_S = 0.5  # a warm-up that gave the device up waits this long at most for the evaluation to take it
WANT_SUFFIX = ".want"
ANNOUNCE_WAIT_S = 0.1  # an evaluation tries this long at most to say it waits before it just waits
_held: list[int] = []  # descriptors of this process's shared locks, kept open until exit


_pinned: list[Path] = []  # the pool's folder as resolved before the sandbox (mutated, never rebound)


def pin_runtime_dir() -> None:
    """Keep the pool's folder as it resolves now, before the evaluation enters its sandbox, whose
    environment names a private folder instead (the idle marks are read there between workloads)."""
    _pinned[:] = [runtime_dir()]


def _runtime_dir() -> Path:
    return _pinned[0] if _pinned else runtime_dir()


def lock_path(device_index: int | None) -> Path:
    """One lock file per physical device as this process's visibility variables name it."""
    visible = "|".join(os.environ.get(v, "") for v in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES",
                                                        "ROCR_VISIBLE_DEVICES"))
    key = hashlib.sha1(f"{visible}#{device_index or 0}".encode()).hexdigest()[:12]
    return _runtime_dir() / f"gpu-{key}.lock"


def _lock(fd: int, kind: int, wait_s: float) -> bool:
    """flock ``kind`` on ``fd``, polling, for at most ``wait_s``; whether it was granted."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, kind | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)


def _open_lock(device_index: int | None, suffix: str = "") -> int:
    """The device's lock file (``suffix`` ".want": the file whose shared lock says an evaluation waits)."""
    path = lock_path(device_index)
    return os.open(path.with_name(path.name + suffix), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)


def _someone_waits(want_fd: int) -> bool:
    """Whether an evaluation holds the shared lock of the device's ``.want`` file: waits for the device."""
    try:
        fcntl.flock(want_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    fcntl.flock(want_fd, fcntl.LOCK_UN)
    return False


class SharedHold:
    """The device's shared lock, its file opened now (before the evaluation's sandbox, which may
    deny opening it) and taken by ``take`` before the first timed pass, then held until exit."""

    def __init__(self, device_index: int | None):
        self._fd: int | None = _open_lock(device_index)
        self._want_fd: int | None = _open_lock(device_index, WANT_SUFFIX)
        self.waited_s = 0.0  # how long ``take`` waited for a warm-up

    def take(self, wait_s: float = SHARED_WAIT_S) -> str | None:
        """Take the lock (once; later calls do nothing). None, or a warning when a warm-up kept it
        past ``wait_s`` (the evaluation then goes on without it). While it waits, it holds the
        shared lock of the ``.want`` file: a warm-up gives the device up at its next step."""
        fd, self._fd = self._fd, None
        want, self._want_fd = self._want_fd, None
        if fd is None or want is None:
            return None
        began = time.monotonic()
        try:
            granted = _lock(fd, fcntl.LOCK_SH, 0.0)
            if not granted:
                # Polled, not blocking: a process that holds the want file exclusively (another
                # run's solution can, through its inherited descriptor) only keeps this evaluation
                # from saying it waits; the wait for the device stays bounded by ``wait_s``.
                _lock(want, fcntl.LOCK_SH, min(wait_s, ANNOUNCE_WAIT_S))
                granted = _lock(fd, fcntl.LOCK_SH, max(0.0, wait_s - (time.monotonic() - began)))
        finally:
            fcntl.flock(want, fcntl.LOCK_UN)  # explicit: a process started from this one may share it
            os.close(want)
        self.waited_s = time.monotonic() - began
        if self.waited_s >= 0.001:
            phases.phase(f"waited {self.waited_s:.3f} s for a warm process's device warm-up")
        if granted:
            _held.append(fd)
            return None
        os.close(fd)
        return (f"a warm evaluation process was still warming up this GPU after {wait_s:g} s; "
                "timing went ahead beside it")


class DeviceTurn:
    """A warm-up's exclusive hold of the device, given up between steps to an evaluation that waits
    for it (``between_steps``). ``alone``: whether the warm-up holds the device now; false once a
    wait for it ran past its bound, after which the warm-up runs beside evaluations."""

    def __init__(self, device_index: int | None, wait_s: float):
        self.wait_s = wait_s
        self.given_up = 0  # times the device went to a waiting evaluation
        self._fd = _open_lock(device_index)
        self._want_fd = _open_lock(device_index, WANT_SUFFIX)
        self.alone = _lock(self._fd, fcntl.LOCK_EX, wait_s)

    def between_steps(self) -> None:
        """Where an evaluation waits for the device, let it take the device, then wait (at most
        ``wait_s``) for the device again: until that evaluation, and any that took it meanwhile, exit."""
        if not self.alone or not _someone_waits(self._want_fd):
            return
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        self.given_up += 1
        handover = time.monotonic() + HANDOVER_S  # the evaluation polls every 10 ms
        while _someone_waits(self._want_fd) and time.monotonic() < handover:
            time.sleep(0.005)
        self.alone = _lock(self._fd, fcntl.LOCK_EX, self.wait_s)

    def close(self) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_UN)  # explicit, as in SharedHold.take: a process started
        os.close(self._fd)  # during the warm-up that kept the descriptor would keep the lock
        os.close(self._want_fd)


@contextlib.contextmanager
def exclusive(device_index: int | None, wait_s: float = EXCLUSIVE_WAIT_S) -> Iterator[DeviceTurn]:
    """The device to itself (no evaluation measuring) for the duration of the block, between steps
    given up to evaluations that wait for it. Evaluations that overlap one another (several at once
    on one GPU) would keep a waiting warm-up out for good, since a shared lock is granted while an
    exclusive one waits; so each wait is bounded, and past it the warm-up runs beside them (they
    already share the GPU)."""
    turn = DeviceTurn(device_index, wait_s)
    try:
        yield turn
    finally:
        turn.close()


def _idle_mark(pid: int) -> Path:
    return _runtime_dir() / f"idle-{pid}"


def mark_idle() -> None:
    _idle_mark(os.getpid()).touch()


def unmark_idle() -> None:
    with contextlib.suppress(FileNotFoundError):
        _idle_mark(os.getpid()).unlink()


def marked_idle() -> set[int]:
    """The pids of the idle marks, live or not: inside the sandbox (its own pid namespace) no
    process outside can be checked."""
    try:
        names = os.listdir(_runtime_dir())
    except OSError:
        return set()
    return {int(name[5:]) for name in names if name.startswith("idle-") and name[5:].isdigit()}


def idle_pids(marks: set[int] | None = None) -> set[int]:
    """Warm children waiting for a job among ``marks`` (every mark by default): live processes only,
    a mark left by a killed one is ignored."""
    return {pid for pid in (marked_idle() if marks is None else marks) if process_alive(pid)}
