"""The pause between checks on a running child ends when the child exits: a real process."""

from __future__ import annotations

import subprocess
import sys
import time

from sol_execbench.evaluate.parent.process import _ExitWait


def test_the_pause_ends_when_the_child_exits_not_when_its_interval_does():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
    pause = _ExitWait(child.pid)
    try:
        began = time.monotonic()
        pause.wait(30.0)
        waited = time.monotonic() - began
    finally:
        pause.close()
        child.wait()
    assert waited < 15.0  # woken by the exit (about 0.3 s), not by the 30 s interval


def test_a_child_gone_already_leaves_a_plain_pause():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    pause = _ExitWait(child.pid)
    began = time.monotonic()
    pause.wait(0.05)
    pause.close()
    assert time.monotonic() - began >= 0.04
