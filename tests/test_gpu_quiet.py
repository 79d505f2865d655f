"""The warm pool's GPU quiet rule: evaluations hold a shared lock, a warm-up the exclusive one, and
idle warm children are not counted as other processes on the GPU."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from types import SimpleNamespace

import pytest

from sol_execbench.evaluate.child import gpu_quiet


@pytest.fixture(autouse=True)
def _own_runtime_dir(monkeypatch):
    # A short path of each test's own: runtime_dir() falls back to the shared /tmp for a long one
    # (pytest's tmp_path), where tests running in parallel would see each other's locks and marks.
    folder = tempfile.mkdtemp(prefix="gq", dir="/tmp")
    monkeypatch.setenv("XDG_RUNTIME_DIR", folder)
    yield
    for fd in gpu_quiet._held:
        os.close(fd)
    gpu_quiet._held.clear()
    shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def warm_up_holding_the_device(release_after_s: float):
    """A warm-up (a thread) that holds the device exclusively from the block's start until
    ``release_after_s`` later, or the block's end."""
    entered, release = threading.Event(), threading.Event()

    def warm_up():
        with gpu_quiet.exclusive(0, wait_s=5):
            entered.set()
            release.wait(5)

    worker = threading.Thread(target=warm_up)
    worker.start()
    try:
        assert entered.wait(5)
        threading.Timer(release_after_s, release.set).start()
        yield
    finally:
        release.set()
        worker.join(5)


@contextlib.contextmanager
def want_file():
    """A descriptor of device 0's ``.want`` file of this test's own, closed at the block's end."""
    fd = gpu_quiet._open_lock(0, gpu_quiet.WANT_SUFFIX)
    try:
        yield fd
    finally:
        os.close(fd)


@contextlib.contextmanager
def process_keeping(fd: int):
    """A child process that inherited ``fd`` and keeps it for the block (a solution's worker)."""
    keeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], pass_fds=(fd,))
    try:
        yield keeper
    finally:
        keeper.kill()
        keeper.wait()


def test_an_evaluation_waits_for_a_warm_up_and_then_holds_the_device():
    with warm_up_holding_the_device(release_after_s=0.8):
        began = time.monotonic()
        warning = gpu_quiet.SharedHold(0).take(wait_s=0.3)  # the warm-up keeps the device: give up, say so
        assert warning and "still warming up" in warning and time.monotonic() - began >= 0.3
        assert gpu_quiet.SharedHold(0).take(wait_s=5) is None  # granted once the warm-up ended

    blocked = threading.Event()

    def second_warm_up():
        with gpu_quiet.exclusive(0):
            blocked.set()

    later = threading.Thread(target=second_warm_up)
    later.start()
    assert not blocked.wait(0.3)  # a warm-up waits while an evaluation holds the device
    os.close(gpu_quiet._held.pop())
    assert blocked.wait(5)
    later.join(5)


def test_an_evaluation_holds_the_device_only_from_its_first_timed_pass():
    """The lock file is opened at the child's start (before its sandbox); until ``take`` a warm-up
    may use the device (the evaluation's correctness rounds time nothing), after it a warm-up waits."""
    hold = gpu_quiet.SharedHold(0)
    with gpu_quiet.exclusive(0, wait_s=0.2) as turn:
        assert turn.alone is True
    assert hold.take() is None
    with gpu_quiet.exclusive(0, wait_s=0.2) as turn:
        assert turn.alone is False
    assert hold.take() is None and len(gpu_quiet._held) == 1  # taken once


def test_a_warm_up_gives_the_device_to_a_waiting_evaluation_at_its_next_step():
    """An evaluation reaching its timed passes during a warm-up gets the device once the step under
    way ends, not after the whole warm-up; the warm-up then waits until that evaluation is over."""
    steps_run: list[int] = []
    first_step, release_step = threading.Event(), threading.Event()
    given_up = []

    def warm_up():
        with gpu_quiet.exclusive(0, wait_s=5) as turn:
            for n in range(3):
                steps_run.append(n)
                if n == 0:
                    first_step.set()
                    release_step.wait(5)  # the step under way when the evaluation comes
                turn.between_steps()
            given_up.append(turn.given_up)

    worker = threading.Thread(target=warm_up)
    worker.start()
    assert first_step.wait(5)
    hold = gpu_quiet.SharedHold(0)
    threading.Timer(0.3, release_step.set).start()
    assert hold.take(wait_s=5) is None
    assert steps_run == [0] and hold.waited_s >= 0.25  # granted at the end of the first step
    time.sleep(0.3)
    assert steps_run == [0]  # no step runs while the evaluation holds the device
    os.close(gpu_quiet._held.pop())  # the evaluation exits
    worker.join(5)
    assert steps_run == [0, 1, 2] and given_up == [1]

    with gpu_quiet.exclusive(0, wait_s=5) as turn:  # nobody waits: the warm-up keeps the device
        turn.between_steps()
        assert turn.alone and turn.given_up == 0
    free = gpu_quiet.SharedHold(0)
    assert free.take() is None and free.waited_s < 0.1  # no warm-up: no wait to speak of


def test_a_warm_up_waits_for_evaluations_only_so_long():
    assert gpu_quiet.SharedHold(0).take() is None
    began = time.monotonic()
    with gpu_quiet.exclusive(0, wait_s=0.2) as turn:
        assert turn.alone is False and time.monotonic() - began >= 0.2
    with gpu_quiet.exclusive(1, wait_s=0.2) as turn:
        assert turn.alone is True  # another device is free


def test_devices_have_locks_of_their_own(monkeypatch):
    assert gpu_quiet.lock_path(0) != gpu_quiet.lock_path(1)
    first = gpu_quiet.lock_path(0)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    assert gpu_quiet.lock_path(0) != first


def test_idle_warm_children_are_not_other_processes(monkeypatch):
    from sol_execbench.evaluate.child import clock_watch

    me = os.getpid()
    sibling = os.getppid()  # a live process standing in for an idle warm child
    assert clock_watch._others([me, sibling], gpu_quiet.idle_pids()) == [sibling]
    (gpu_quiet._runtime_dir() / f"idle-{sibling}").touch()
    assert sibling in gpu_quiet.idle_pids()
    assert clock_watch._others([me, sibling], gpu_quiet.idle_pids()) == []
    gpu_quiet.mark_idle()
    assert me in gpu_quiet.idle_pids()
    gpu_quiet.unmark_idle()
    assert me not in gpu_quiet.idle_pids()
    (gpu_quiet._runtime_dir() / "idle-999999999").touch()  # left by a process that is gone
    assert 999999999 not in gpu_quiet.idle_pids()


def test_idle_warm_children_stay_apart_inside_the_sandbox(monkeypatch, tmp_path):
    """The readings between workloads run in the sandbox: its environment names another folder and
    its pid namespace hides every outside process. A warm child idle at the start and still marked
    idle is not another process, nor one the pool started since; one that took a job since (its mark
    gone) is, and so is a process whose pid a mark left by a process gone before the start names."""
    from sol_execbench.evaluate.child.clock_watch import ClockWatch
    from sol_execbench.platform import DeviceInfo
    from sol_execbench.platform.clocks import ClockReading

    spare, busy = os.getppid(), 1  # live processes standing in for two idle warm children
    later = os.getpgrp() if os.getpgrp() not in (spare, busy, os.getpid()) else 2  # a warm child started since
    stale = 999999999  # a mark left by a process gone, whose pid a foreign process may take
    for pid in (spare, busy, stale):
        (gpu_quiet._runtime_dir() / f"idle-{pid}").touch()
    gpu_quiet.pin_runtime_dir()
    readings = iter([ClockReading("nvml", processes=[os.getpid(), spare, busy]),
                     ClockReading("nvml", processes=[os.getpid(), spare, busy, later, stale])])
    reader = SimpleNamespace(read=lambda: next(readings))
    gpu = DeviceInfo(vendor="cuda", torch_device="cuda:0", index=0, name="NVIDIA H100 80GB HBM3", arch="sm_90a",
                     compute_units=132, l2_bytes=50 * 2**20, memory_bytes=80 * 2**30, runtime_version="13.0")
    try:
        watch = ClockWatch(gpu, reader=reader)
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "private"))  # as the sandbox's environment
        monkeypatch.setattr(gpu_quiet, "process_alive", lambda pid: False)  # as in its pid namespace
        (gpu_quiet._runtime_dir() / f"idle-{busy}").unlink()  # took a job
        (gpu_quiet._pinned[0] / f"idle-{later}").touch()  # marked itself after the watch began
        watch.sample("w1", "before_timing")
        assert watch.record_for("w1").other_processes == sorted([busy, stale])
        assert f"pids {sorted([busy, stale])}" in " ".join(watch.warnings_for("w1"))
    finally:
        gpu_quiet._pinned.clear()


def _pretend_a_gpu(monkeypatch):
    """``warm_child._warm_up`` sees GPU 0 here (its device steps are replaced: no GPU is used)."""
    import sol_execbench.platform as platform

    monkeypatch.setattr(platform, "current", lambda spec=None: SimpleNamespace(is_gpu=True, index=0, vendor="cuda",
                                                                               torch_device="cuda:0"))


def test_a_warm_child_marks_itself_idle_then_warms_a_gpu_under_the_exclusive_lock(monkeypatch):
    """warm_child._warm_up's GPU path, with the device work itself stubbed (no GPU here)."""

    from sol_execbench.evaluate.child import warm_child

    seen = {}

    def fake_device_work(info):
        seen["device"] = info.torch_device
        seen["marked"] = os.getpid() in gpu_quiet.idle_pids()  # marked before it holds a context
        # an evaluation starting now waits: the warm-up holds the device
        seen["evaluation_warning"] = gpu_quiet.SharedHold(info.index).take(wait_s=0.1)

    _pretend_a_gpu(monkeypatch)
    monkeypatch.setattr(warm_child, "_device_steps", lambda info: [functools.partial(fake_device_work, info)])
    warm_child._warm_up(None)
    assert seen["device"] == "cuda:0" and seen["marked"] and "still warming up" in seen["evaluation_warning"]
    assert os.getpid() in gpu_quiet.idle_pids()
    assert gpu_quiet.SharedHold(0).take(wait_s=0.5) is None  # the warm-up released the device
    gpu_quiet.unmark_idle()


def test_a_warm_up_beside_a_measuring_evaluation_counts_as_another_process_until_it_is_over(monkeypatch):
    """Past its wait for the device, a warm-up runs beside an evaluation's timed passes: it is not
    marked idle while it does."""
    from sol_execbench.evaluate.child import warm_child

    seen = {}

    def fake_device_work(info):
        seen["marked"] = os.getpid() in gpu_quiet.idle_pids()

    _pretend_a_gpu(monkeypatch)
    monkeypatch.setattr(warm_child, "_device_steps", lambda info: [functools.partial(fake_device_work, info)])
    monkeypatch.setattr(gpu_quiet, "exclusive", functools.partial(gpu_quiet.exclusive, wait_s=0.2))
    assert gpu_quiet.SharedHold(0).take() is None  # an evaluation measuring on the device
    warm_child._warm_up(None)
    assert seen == {"marked": False}
    assert os.getpid() in gpu_quiet.idle_pids()  # idle once its warm-up is over
    gpu_quiet.unmark_idle()


def test_a_warm_child_is_warm_without_waiting_for_an_evaluation_that_came_during_its_last_step(monkeypatch):
    """The device goes to a waiting evaluation between steps only: after the last step the warm-up
    is over and its lock released, so the child does not wait for that evaluation to end."""
    from sol_execbench.evaluate.child import warm_child

    in_last, go_on, warm = threading.Event(), threading.Event(), threading.Event()

    def last_step():
        in_last.set()
        go_on.wait(5)

    _pretend_a_gpu(monkeypatch)
    monkeypatch.setattr(warm_child, "_device_steps", lambda info: [lambda: None, last_step])
    warming = threading.Thread(target=lambda: (warm_child._warm_up(None), warm.set()))
    warming.start()
    assert in_last.wait(30)
    hold = gpu_quiet.SharedHold(0)
    taking = threading.Thread(target=hold.take, kwargs={"wait_s": 10})
    taking.start()
    with want_file() as want:
        deadline = time.monotonic() + 5
        while not gpu_quiet._someone_waits(want) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert gpu_quiet._someone_waits(want)  # the evaluation waits for the device
    go_on.set()
    assert warm.wait(5)  # warm while the evaluation still holds the device
    taking.join(5)
    assert len(gpu_quiet._held) == 1  # the evaluation got it
    warming.join(5)
    gpu_quiet.unmark_idle()


def test_a_process_holding_the_want_file_cannot_keep_an_evaluation_from_the_device():
    """Another run's solution can hold the ``.want`` file exclusively through its inherited
    descriptor; an evaluation then cannot say it waits, but still takes the device once it is free,
    within its own bounded wait."""
    with want_file() as want, warm_up_holding_the_device(release_after_s=0.3):
        fcntl.flock(want, fcntl.LOCK_EX)
        result: list[str | None] = []
        taking = threading.Thread(target=lambda: result.append(gpu_quiet.SharedHold(0).take(wait_s=5)), daemon=True)
        taking.start()
        taking.join(10)
        assert not taking.is_alive() and result == [None]  # granted once the warm-up was over


def test_an_evaluation_stops_saying_it_waits_once_it_has_the_device_even_beside_its_own_children():
    """A process started from the evaluation that kept its descriptor of the want file (a worker a
    solution started) shares the lock: closing the evaluation's own copy would leave it held
    (warm-ups handing the device over at every step) until that process exits, so ``take``
    releases the lock itself."""
    hold = gpu_quiet.SharedHold(0)
    with process_keeping(hold._want_fd), want_file() as want, warm_up_holding_the_device(release_after_s=0.3):
        assert hold.take(wait_s=5) is None
        assert not gpu_quiet._someone_waits(want)


def test_a_warm_up_releases_the_device_even_where_a_process_it_started_kept_the_descriptor():
    with contextlib.ExitStack() as keeping:
        with gpu_quiet.exclusive(0, wait_s=5) as turn:
            keeping.enter_context(process_keeping(turn._fd))
        assert gpu_quiet.SharedHold(0).take(wait_s=0.5) is None
