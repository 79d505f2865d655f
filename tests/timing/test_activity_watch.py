"""Threads and processes beside the timed calls (CPU, in this process)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from sol_execbench.evaluate.child import activity_watch
from sol_execbench.platform import host
from sol_execbench.evaluate.child.activity_watch import ActivityWatch


@pytest.fixture
def watch(monkeypatch):
    name = "_start_new_thread" if hasattr(threading, "_start_new_thread") else "_start_joinable_thread"
    monkeypatch.setattr(threading, name, getattr(threading, name))  # undo the counting wrapper afterwards
    return ActivityWatch()


def _spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def _call(region, work=lambda: None):
    region.enter_call()
    work()
    region.exit_call()


def test_a_thread_started_during_the_timed_calls_is_suspicious(watch):
    region = watch.begin()
    _call(region, lambda: threading.Thread(target=lambda: None).start())
    findings = region.finish()
    assert findings.suspicious == ["the solution started 1 thread(s) during the timed calls"]


def test_a_process_started_during_the_timed_calls_is_suspicious(watch):
    region = watch.begin()
    _call(region, lambda: subprocess.run([sys.executable, "-c", "pass"], check=True))
    assert any("subprocess.Popen" in s for s in region.finish().suspicious)


def test_an_idle_solution_thread_is_only_a_warning(watch):
    stop = threading.Event()
    idle = threading.Thread(target=stop.wait, name="idle-pool")
    idle.start()
    try:
        region = watch.begin()
        for _ in range(3):
            _call(region)
        findings = region.finish()
    finally:
        stop.set()
        idle.join()
    assert findings.suspicious == [] and "idle-pool" in findings.warnings[0]


def _deferred_worker(name: str):
    """A persistent thread that spins for each job handed to it: hand(seconds) returns at once."""
    jobs: list[float] = []
    ready = threading.Event()

    def worker():
        while True:
            ready.wait()
            ready.clear()
            while jobs:
                _spin(jobs.pop())

    threading.Thread(target=worker, name=name, daemon=True).start()
    return lambda seconds: (jobs.append(seconds), ready.set())


def test_work_done_by_a_thread_after_the_calls_return_is_suspicious(watch):
    hand = _deferred_worker("late-worker")
    region = watch.begin()
    for _ in range(3):
        _call(region, lambda: hand(0.02))  # returns at once; the worker computes after
        time.sleep(0.03)
    findings = region.finish()
    assert findings.suspicious and "late-worker" in findings.suspicious[0]


def test_deferred_work_is_suspicious_in_a_region_the_machine_stretched(watch):
    """A loaded machine stretches the timed region (here: sleeps between the calls) but not the CPU
    a persistent worker spends after each call returns: 3 x 5 ms of deferred work in a region of
    about 300 ms (5%) is still work finishing after the timer stops."""
    hand = _deferred_worker("deferred-worker")
    region = watch.begin()
    for _ in range(3):
        _call(region, lambda: hand(0.005))
        time.sleep(0.1)
    findings = region.finish()
    assert findings.suspicious and "deferred-worker" in findings.suspicious[0], findings


def test_work_a_call_waits_for_is_the_calls_own(watch):
    requests, done = threading.Event(), threading.Event()

    def worker():
        while True:
            requests.wait()
            requests.clear()
            _spin(0.02)
            done.set()

    threading.Thread(target=worker, name="joined-worker", daemon=True).start()

    def call():
        done.clear()
        requests.set()
        done.wait()

    region = watch.begin()
    for _ in range(3):
        _call(region, call)
        time.sleep(0.01)
    findings = region.finish()
    assert findings.suspicious == [], findings.suspicious


def test_process_listing_finds_children(watch):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3)"])
    try:
        assert child.pid in activity_watch.descendants()
    finally:
        child.kill()
        child.wait()


def test_the_scan_reads_again_only_new_and_related_processes_between_full_scans(monkeypatch):
    """Between full scans only new pids and the processes below this one are read again: a process
    started after the last read is still found, init (unrelated to this process) is not read
    again until a full scan reads everything."""
    assert os.getpid() != 1
    scan = host.ProcessScan(activity_watch._related, full_scan_s=3600)
    scan()
    reads: list[int] = []
    real = host._read_stat
    monkeypatch.setattr(host, "_read_stat", lambda pid: reads.append(pid) or real(pid))
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert child.pid in scan()
        assert child.pid in reads and 1 not in reads
        reads.clear()
        assert child.pid in scan()
        assert reads.count(child.pid) == 1 and 1 not in reads
        scan.full_scan_s = 0.0
        reads.clear()
        assert child.pid in scan()
        assert 1 in reads
    finally:
        child.kill()
        child.wait()
    assert child.pid not in scan()
