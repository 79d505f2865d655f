"""The evaluation child's parent: a stdlib-only process between the command line and the child.

Run as ``python -I -S supervisor.py COMMAND...``. The child's ``getppid()`` names this process, not
the command line, so a solution that signals its parent ends only this one (it ignores every
catchable signal; SIGKILL ends it, and the child then dies by its parent-death signal). The command
line survives to write the trace. Exits as the child did: its exit code, or the same signal.
"""

import ctypes
import os
import shutil
import signal
import subprocess
import sys
import time

KILLED_CHILD_CODE = 128 + 9  # the child was SIGKILLed (the parent reads it back as that signal)
_CATCHABLE = [s for s in signal.valid_signals() if s not in (signal.SIGKILL, signal.SIGSTOP, signal.SIGCHLD)]


def _child_setup() -> None:
    for number in _CATCHABLE:  # ignored dispositions survive exec: the child gets the defaults back
        try:
            signal.signal(number, signal.SIG_DFL)
        except (OSError, ValueError):
            pass
    try:
        ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG: die with this process
    except (OSError, AttributeError):
        pass


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0].decode()
    except (OSError, IndexError):
        return "X"


def _on_parent_death(proc: subprocess.Popen, staging: str | None):
    """The command line died (SIGKILL included): end the child, remove the staging folder it
    cannot remove now, then end what is left of this process group, this process with it."""

    def handler(_signum, _frame) -> None:
        proc.kill()
        # Not proc.wait(): the main thread may be inside it, holding its lock. A zombie writes nothing.
        for _ in range(200):
            if _state(proc.pid) in ("Z", "X"):
                break
            time.sleep(0.01)
        if staging:
            shutil.rmtree(staging, ignore_errors=True)
        os.killpg(os.getpgrp(), signal.SIGKILL)

    return handler


def main(argv: list[str]) -> int:
    for number in _CATCHABLE:
        try:
            signal.signal(number, signal.SIG_IGN)
        except (OSError, ValueError):
            pass
    fds = [int(x) for x in os.environ.get("SOL_EXECBENCH_PASS_FDS", "").split(",") if x]
    staging = os.environ.pop("SOL_EXECBENCH_STAGING_CLEANUP", None)
    parent = int(os.environ.pop("SOL_EXECBENCH_SUPERVISOR_PARENT", "0"))
    proc = subprocess.Popen(argv, pass_fds=fds, preexec_fn=_child_setup, restore_signals=True)
    # The parent-death signal becomes SIGUSR2, handled from now on (the child exists). A solution
    # that sends it itself ends the run as a SIGKILL of this process would.
    signal.signal(signal.SIGUSR2, _on_parent_death(proc, staging))
    try:
        ctypes.CDLL(None).prctl(1, signal.SIGUSR2, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if parent and os.getppid() != parent:  # the command line died before the signal was armed
        _on_parent_death(proc, staging)(signal.SIGUSR2, None)
    for fd in fds:
        os.close(fd)
    code = proc.wait()
    if code == -signal.SIGKILL:
        return KILLED_CHILD_CODE  # not by signal: a SIGKILL of this process itself means it was signalled
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
