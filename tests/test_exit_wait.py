"""The pause between checks on a running child ends when the child exits or its channel ends, and
a child that reported the end of its job is not waited out: real processes."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

from sol_execbench.evaluate.parent.process import _ExitWait

from .problems import poll_until, process_alive


def _seconds_paused(pause: _ExitWait, interval_s: float) -> float:
    began = time.monotonic()
    try:
        pause.wait(interval_s)
    finally:
        pause.close()
    return time.monotonic() - began


def test_the_pause_ends_when_the_child_exits_not_when_its_interval_does():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
    try:
        waited = _seconds_paused(_ExitWait(child.pid), 30.0)
    finally:
        child.wait()
    assert waited < 15.0  # woken by the exit (about 0.3 s), not by the 30 s interval


def test_a_child_gone_already_leaves_a_plain_pause():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert _seconds_paused(_ExitWait(child.pid), 0.05) >= 0.04


def test_the_pause_ends_when_the_channel_ends():
    from sol_execbench.evaluate.parent.process import ChannelEnd

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    read_fd, write_fd = os.pipe()
    channel = ChannelEnd(read_fd, "key", lambda message: None, lambda line: None)
    threading.Timer(0.3, os.close, args=(write_fd,)).start()
    try:
        waited = _seconds_paused(_ExitWait(child.pid, channel), 30.0)
    finally:
        channel.close()
        child.kill()
        child.wait()
    assert channel.ended.is_set()
    assert waited < 15.0  # woken by the channel's end (about 0.3 s), not by the 30 s interval


# Stands in for the evaluation child (a wrapper runs it instead of the driver): reports on the real
# channel, closes it, then takes its time to exit, as a child tearing down its device context does.
_SLOW_EXIT_CHILD = """import os, sys, time
from sol_execbench.evaluate.channel import ChannelWriter
channel = ChannelWriter.from_environment()
open(sys.argv[2], "w").write(str(os.getpid()))
channel.send("ready")
if sys.argv[1] == "done":
    channel.send("done")
channel.close()
time.sleep(float(sys.argv[3]))
os._exit(3)
"""


def _run_slow_exit_child(tmp_path, ending: str, exit_after_s: float, end_at_done: bool):
    from sol_execbench.evaluate.parent.process import run_child

    script = tmp_path / "child.py"
    script.write_text(_SLOW_EXIT_CHILD)
    pid_file = tmp_path / "child.pid"
    job = tmp_path / "job.json"
    job.write_text("{}")
    began = time.monotonic()
    run = run_child(job, tmp_path / "child.log", timeout_s=60, memory_limit_bytes=None, env_extra={},
                    on_message=lambda message: None, end_at_done=end_at_done,
                    wrapper=[sys.executable, str(script), ending, str(pid_file), str(exit_after_s), "--"])
    return run, time.monotonic() - began, int(pid_file.read_text())


def test_a_child_that_reported_done_is_not_waited_out(tmp_path):
    run, took, pid = _run_slow_exit_child(tmp_path, "done", exit_after_s=30, end_at_done=True)
    assert run.ended_at_done and run.returncode is None
    assert [m["type"] for m in run.messages] == ["ready", "done"]
    assert took < 10.0  # not the child's 30 s exit
    assert poll_until(lambda: not process_alive(pid), 5.0), "the child's session was not killed"


def test_a_child_that_closed_its_channel_without_done_is_waited_for(tmp_path):
    run, took, _ = _run_slow_exit_child(tmp_path, "no-done", exit_after_s=1.0, end_at_done=True)
    assert not run.ended_at_done
    assert run.returncode == 3  # its own exit, through the supervisor
    assert took >= 1.0


def test_without_end_at_done_the_exit_is_awaited(tmp_path):
    run, took, _ = _run_slow_exit_child(tmp_path, "done", exit_after_s=1.0, end_at_done=False)
    assert not run.ended_at_done and run.returncode == 3 and took >= 1.0
