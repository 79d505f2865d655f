"""The evaluation child's parent: a stdlib-only process between the command line and the child.

Run as ``python -I -S supervisor.py COMMAND...``. The child's ``getppid()`` names this process, not
the command line, so a solution that signals its parent ends only this one (it ignores every
catchable signal; SIGKILL ends it, and the child then dies by its parent-death signal). The command
line survives to write the trace. Exits as the child did: its exit code, or the same signal.
"""

import ctypes
import os
import signal
import subprocess
import sys

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


def main(argv: list[str]) -> int:
    for number in _CATCHABLE:
        try:
            signal.signal(number, signal.SIG_IGN)
        except (OSError, ValueError):
            pass
    fds = [int(x) for x in os.environ.get("SOL_EXECBENCH_PASS_FDS", "").split(",") if x]
    proc = subprocess.Popen(argv, pass_fds=fds, preexec_fn=_child_setup, restore_signals=True)
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
