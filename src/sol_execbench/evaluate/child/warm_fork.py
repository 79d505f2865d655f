"""The warm pool's fork server: one process makes a warm child's imports (torch, the evaluation's
modules, Triton and its cache key), touches no device, and forks a warm child whenever the pool
asks. A forked child starts with the imports made and creates its own device context, so the
replacement the pool starts as it hands a child out costs a fork and the device warm-up, not
seconds of imports beside the evaluation that took the last child.

A fork is sound here because this process never starts a GPU runtime (CUDA and HIP do not survive
a fork once started): whether the device is a GPU, which decides how Triton is imported, is judged
from the device nodes (``platform.gpu_expected``), and a child that finds otherwise exits before it
is warm (``warm_child.EXIT_NOT_EXPECTED``), upon which the pool starts its children afresh. No
Python thread runs here when it forks (it refuses to serve otherwise). It runs no solution's code
and holds nothing of any run: each child still takes one job, in a process of its own.

The pool talks to it over a socket pair, one JSON object a line. This process says ``{"ready":
true}`` once its imports are made; the pool asks ``{"fork": "<socket path>"}`` and hears
``{"forked": pid}``; when a child ends this process, its parent, reaps it and says ``{"exited": pid,
"returncode": code}`` (a signal as its negative number, as ``subprocess`` reports it). It ends when
the pool closes its end or the pool's life pipe closes.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import sys
import threading
import warnings

CONTROL_FD_ENV = "SOL_EXECBENCH_FORK_CONTROL"  # named by parent/warm_fork.py, which may not import this side


def _send(control: socket.socket, message: dict) -> None:
    control.sendall(json.dumps(message).encode() + b"\n")


def _reap(control: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _send(control, {"exited": pid, "returncode": os.waitstatus_to_exitcode(status)})


def serve(control: socket.socket, pool_pipe: int) -> str:
    """Fork a warm child for each request until the pool goes; returns only in a forked child, with
    the socket path it is to listen on."""
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so that the wake-up byte is written
    signal.set_wakeup_fd(wake_write)
    _send(control, {"ready": True})
    pending = b""
    while True:
        ready, _, _ = select.select([control, pool_pipe, wake_read], [], [], 1.0)
        if pool_pipe in ready:
            os._exit(0)  # the pool is gone; its children watch the same pipe
        if wake_read in ready:
            os.read(wake_read, 4096)
        if control in ready:
            chunk = control.recv(65536)
            if not chunk:
                os._exit(0)  # the pool closed its end
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                socket_path = json.loads(line)["fork"]
                pid = os.fork()
                if pid == 0:
                    signal.set_wakeup_fd(-1)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    for fd in (wake_read, wake_write):
                        os.close(fd)
                    control.close()
                    os.setsid()  # a session of its own, as the pool starts its children
                    return str(socket_path)
                _send(control, {"forked": pid})
        _reap(control)


def main(argv: list[str]) -> None:
    from sol_execbench.platform import gpu_expected

    from . import warm_child

    control = socket.socket(fileno=int(os.environ.pop(CONTROL_FD_ENV)))
    pool_pipe = int(os.environ.pop(warm_child.POOL_PIPE_ENV))
    device_spec = argv[1] if len(argv) > 1 else None

    expected_gpu = gpu_expected(device_spec)
    if not expected_gpu:
        os.environ["TRITON_INTERPRET"] = "1"  # Triton reads it at import, as a fresh warm child sets it
    warm_child.import_ahead(expected_gpu)
    if threading.active_count() > 1:  # a thread holding a lock at the fork would leave it held in the child
        sys.stderr.write("sol-execbench fork server: a Python thread runs after the imports; not forking\n")
        return
    # Threads of native libraries (OpenBLAS's pool) are not Python's: they restart after a fork
    # (their own fork handlers), which Python's warning about forking with threads does not know.
    warnings.filterwarnings("ignore", category=DeprecationWarning, message=".*fork.*")
    socket_path = serve(control, pool_pipe)
    warm_child.main_forked(device_spec, socket_path, pool_pipe, expected_gpu)


if __name__ == "__main__":
    main(sys.argv)
