"""The trace channel between the evaluation child and its parent.

A pipe the child inherits at a file descriptor named only in its environment, which the child
removes before any solution code is imported. Each message is a JSON line signed with a per-run
key (HMAC-SHA256); the parent drops unsigned lines and reports them as forged. Printing, writing
to stdout/stderr or to the ``-o`` file cannot reach it. In-process code that goes looking (reads
the interpreter's memory, guesses the descriptor) still can: see docs/security.md.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import select
import signal
import threading
import time
from typing import Any

FD_ENV = "SOL_EXECBENCH_CHANNEL_FD"
KEY_ENV = "SOL_EXECBENCH_CHANNEL_KEY"


def new_key() -> str:
    return secrets.token_hex(32)


def _sign(key: bytes, body: bytes) -> str:
    return hmac.new(key, body, hashlib.sha256).hexdigest()


class ChannelWriter:
    """Child side. Take it from the environment with ``from_environment()`` before importing user code."""

    def __init__(self, fd: int, key: str, wake_fd: int | None = None):
        self._fd, self._key = fd, key.encode()
        self._lock = threading.Lock()
        self._wake_fd = wake_fd  # ends the reader watch before the pipe is closed

    @classmethod
    def from_environment(cls) -> "ChannelWriter":
        fd, key = os.environ.pop(FD_ENV, None), os.environ.pop(KEY_ENV, None)
        if fd is None or key is None:
            raise RuntimeError(f"{FD_ENV}/{KEY_ENV} not set: the evaluation child must be started by its parent")
        # Move the pipe to a descriptor number chosen at random so it is not found by a fixed guess.
        high = os.dup(int(fd))
        os.close(int(fd))
        wake_read, wake_write = os.pipe()
        threading.Thread(target=_exit_when_reader_gone, args=(high, wake_read), daemon=True).start()
        return cls(high, key, wake_write)

    def send(self, kind: str, **payload: Any) -> None:
        body = json.dumps({"type": kind, **payload}, allow_nan=False, default=str).encode()
        line = _sign(self._key, body).encode() + b" " + body + b"\n"
        with self._lock:
            view = memoryview(line)
            while view:
                written = os.write(self._fd, view)
                view = view[written:]

    def close(self) -> None:
        # The watch's poll holds the pipe open while it waits: wake it first, or the reader would
        # see no end of file until this process exits.
        if self._wake_fd is not None:
            try:
                os.close(self._wake_fd)
            except OSError:
                pass
            self._wake_fd = None
            time.sleep(0.001)
        try:
            os.close(self._fd)
        except OSError:
            pass


def _exit_when_reader_gone(fd: int, wake_fd: int) -> None:
    """The child ends when its parent's end of the channel closes (the parent died, however): a
    pipe's write end reports POLLERR once no reader is left. This covers a warm child too, whose
    process parent is the pool and not the evaluation that took it."""
    poller = select.poll()
    poller.register(fd, 0)  # POLLERR, POLLHUP and POLLNVAL are always reported
    poller.register(wake_fd, select.POLLIN)  # the writer is closing the channel itself
    while True:
        try:
            events = poller.poll()
        except InterruptedError:
            continue
        for polled, event in events:
            if polled == wake_fd or event & select.POLLNVAL:
                os.close(wake_fd)
                return  # closed by the child itself: its evaluation is over
            if event & (select.POLLERR | select.POLLHUP):
                if os.getpgrp() == os.getpid():  # a session leader: what it started goes with it
                    os.killpg(os.getpgrp(), signal.SIGKILL)
                os._exit(137)


def read_messages(fd: int, key: str, on_message, on_forged) -> None:
    """Parent side: read lines until EOF; verified messages go to ``on_message``, others to ``on_forged``."""
    secret = key.encode()
    with os.fdopen(fd, "rb") as stream:
        for raw in stream:
            raw = raw.rstrip(b"\n")
            signature, _, body = raw.partition(b" ")
            if not hmac.compare_digest(signature.decode(errors="replace"), _sign(secret, body)):
                on_forged(raw[:200].decode(errors="replace"))
                continue
            try:
                on_message(json.loads(body))
            except ValueError:
                on_forged(raw[:200].decode(errors="replace"))
