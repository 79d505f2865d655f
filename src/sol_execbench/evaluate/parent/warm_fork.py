"""The pool's side of the fork server (``child/warm_fork.py``): start it, ask it for warm children,
and follow their exits, which it reports as their parent.

A forked child is a ``ForkedChild``: the pool treats it as it treats a ``subprocess.Popen`` of a
child it started itself (``pid``, ``poll``, ``wait``). Until the server says it is ready, and for
good once it has failed (it ended, or a child it forked ended before it was warm), ``fork`` answers
None and the pool starts its children afresh.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

from sol_execbench.platform.host import process_alive

from .child_env import POOL_PIPE_ENV

FORK_SERVER_MODULE = "sol_execbench.evaluate.child.warm_fork"  # run by name: this side may not import it
CONTROL_FD_ENV = "SOL_EXECBENCH_FORK_CONTROL"
FORK_REPLY_S = 5.0  # a fork the server has not confirmed within this long is given up (the server too)
START_S = 120.0  # a server not ready within this long is given up: the pool starts no child while it starts


def end_process(proc: subprocess.Popen | ForkedChild) -> None:
    """SIGKILL the session ``proc`` leads, or ``proc`` alone where it leads none yet (a child forked
    a moment ago), and wait for it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


class ForkedChild:
    """A warm child the fork server forked: its exit status arrives from the server."""

    def __init__(self, pid: int):
        self.pid = pid
        self.returncode: int | None = None
        self._ended = threading.Event()
        self._lost = False  # the server went before this child: its status cannot be known

    def _end(self, returncode: int | None) -> None:
        self.returncode = returncode
        self._ended.set()

    def poll(self) -> int | None:
        if self._ended.is_set():
            return self.returncode
        if self._lost and not process_alive(self.pid):
            # Its parent is gone, so nobody can tell its status: reported as killed.
            self._end(-signal.SIGKILL)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._ended.wait(0.05):
            if self.poll() is not None:
                break
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired("forked warm child", timeout or 0)
        return self.returncode


class ForkServer:
    """The fork server process and the thread that reads what it says."""

    def __init__(self, device: str | None, env: dict[str, str], pool_pipe: int):
        self.started_at = time.monotonic()
        ours, theirs = socket.socketpair()
        args = [sys.executable, "-m", FORK_SERVER_MODULE] + ([device] if device else [])
        env = dict(env, **{CONTROL_FD_ENV: str(theirs.fileno()), POOL_PIPE_ENV: str(pool_pipe)})
        try:
            self.proc: subprocess.Popen | None = subprocess.Popen(
                args, stdin=subprocess.DEVNULL, env=env, start_new_session=True,
                pass_fds=(theirs.fileno(), pool_pipe))
        except OSError:
            self.proc = None
        theirs.close()
        self.control = ours
        self.ready = threading.Event()
        self.failed = self.proc is None
        self.children: dict[int, ForkedChild] = {}
        self._replies: list[ForkedChild] = []
        self._replied = threading.Condition()
        self._ask = threading.Lock()  # one fork request at a time: replies come in order
        if self.proc is not None:
            threading.Thread(target=self._read, name="fork-server", daemon=True).start()

    @property
    def usable(self) -> bool:
        return self.ready.is_set() and not self.failed

    def starting(self) -> bool:
        """Whether the server is still making its imports (given up once past ``START_S``)."""
        if self.ready.is_set() or self.failed:
            return False
        if time.monotonic() - self.started_at > START_S:
            self.give_up()
            return False
        return True

    def fork(self, socket_path: str) -> ForkedChild | None:
        """A child forked to listen on ``socket_path``, or None (not ready, failed, or no reply)."""
        if not self.usable:
            return None
        with self._ask:
            try:
                self.control.sendall(json.dumps({"fork": socket_path}).encode() + b"\n")
            except OSError:
                self.give_up()
                return None
            with self._replied:
                self._replied.wait_for(lambda: self._replies or self.failed, FORK_REPLY_S)
                child = self._replies.pop(0) if self._replies else None
            if child is None:
                self.give_up()
            return child

    def give_up(self) -> None:
        """Stop forking: the pool starts its children afresh from now on. The server ends (its
        children live on, reported as killed once they end, their status unknowable)."""
        with self._replied:
            self.failed = True
            self._replied.notify_all()
        self.close()

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            end_process(self.proc)
        try:
            self.control.shutdown(socket.SHUT_RDWR)  # the reader thread sees the end
        except OSError:
            pass

    def _read(self) -> None:
        pending = b""
        try:
            while True:
                chunk = self.control.recv(65536)
                if not chunk:
                    break
                pending += chunk
                while b"\n" in pending:
                    line, pending = pending.split(b"\n", 1)
                    self._handle(json.loads(line))
        except (OSError, ValueError):
            pass
        with self._replied:
            self.failed = True
            for child in self.children.values():
                child._lost = True
            self._replied.notify_all()

    def _handle(self, message: dict) -> None:
        if message.get("ready"):
            self.ready.set()
        elif "forked" in message:
            child = ForkedChild(int(message["forked"]))
            with self._replied:
                self.children[child.pid] = child
                self._replies.append(child)
                self._replied.notify_all()
        elif "exited" in message:
            child = self.children.pop(int(message["exited"]), None)
            if child is not None:
                child._end(int(message["returncode"]))
