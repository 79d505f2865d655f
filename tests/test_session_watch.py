"""The incremental watch of a session's processes (the memory limit polls it every 50 ms)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from sol_execbench.platform import host

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

# A child in a session of its own that starts a grandchild, and a grandchild that double-forks away
# from its parent (reparented, still in the session).
TREE = """
import os, subprocess, sys, time
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
middle = os.fork()
if middle == 0:
    if os.fork() == 0:
        time.sleep(30)
    os._exit(0)
os.waitpid(middle, 0)  # the grandchild exists and the middle process is gone: the tree is settled
print("ready", flush=True)
time.sleep(30)
"""


def _members_until(watch: host.SessionWatch, count: int, timeout_s: float = 10.0) -> list[int]:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        found = watch.members()
        if len(found) >= count:
            return found
        time.sleep(0.05)
    return watch.members()


def test_the_watch_finds_the_whole_session_and_agrees_with_the_full_table():
    proc = subprocess.Popen([sys.executable, "-c", TREE], stdout=subprocess.PIPE, start_new_session=True, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        watch = host.SessionWatch(proc.pid)
        found = _members_until(watch, 3)
        assert proc.pid in found and len(found) == 3
        assert sorted(found) == sorted(host.session_processes(proc.pid))
    finally:
        host.kill_session(proc.pid)
        proc.wait()
    assert host.SessionWatch(proc.pid).members() == []


def test_only_new_processes_and_members_are_read_again(monkeypatch):
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)
    try:
        watch = host.SessionWatch(proc.pid, refresh_s=3600)
        seen_before = {int(p) for p in os.listdir("/proc") if p.isdigit()} - {proc.pid}
        assert watch.members() == [proc.pid]
        reads: list[int] = []
        real = host._read_stat
        monkeypatch.setattr(host, "_read_stat", lambda pid: reads.append(pid) or real(pid))
        assert watch.members() == [proc.pid]
        # The member is read again; processes that existed at the first poll and are not in the
        # session are not (processes started since, by other tests on a busy machine, may be).
        assert reads.count(proc.pid) == 1 and not (set(reads) & seen_before)
    finally:
        host.kill_session(proc.pid)
        proc.wait()
