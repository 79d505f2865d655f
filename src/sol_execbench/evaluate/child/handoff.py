"""How a child started before its job receives it (a warm child, an early child): the job file,
the invoking evaluation's environment and the trace-channel and log descriptors (stdout's, then
stderr's when they are kept apart) arrive on a Unix socket only this user can connect to."""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import Callable
from typing import Any

from sol_execbench.sandbox.peer import refusal

from ..channel import FD_ENV


def receive_job(listener: socket.socket, path: str, idle: Callable[[], Any] | None = None,
                idle_period_s: float = 0.5) -> tuple[str, dict[str, str], list[int]]:
    """The evaluation that takes this child: (the job file, its environment, the channel and log
    descriptors). While none comes, ``idle`` runs every ``idle_period_s``."""
    with listener:
        conn = _accept(listener, idle, idle_period_s)
        while refusal(conn):  # a sandboxed process found the socket: not the evaluation that took us
            conn.close()
            conn = _accept(listener, idle, idle_period_s)
        with conn:
            message, fds, _flags, _addr = socket.recv_fds(conn, 1 << 20, 4)
            with contextlib.suppress(OSError):  # an evaluation that does not wait for the answer has gone
                conn.sendall(b"ok")
    os.unlink(path)
    request = json.loads(message)
    return request["job"], request["env"], fds


def _accept(listener: socket.socket, idle: Callable[[], Any] | None, period_s: float) -> socket.socket:
    listener.settimeout(period_s if idle is not None else None)
    while True:
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            idle()  # type: ignore[misc]  (a timeout is only set with idle)
            continue
        conn.settimeout(None)
        return conn


def adopt_job(job_path: str, env: dict[str, str], fds: list[int]) -> None:
    """Become the job's child: its log descriptors on stdout and stderr, the invoking evaluation's
    environment, the job's folder as the working directory."""
    # The channel, then stdout's log, then (when the evaluation keeps them apart) stderr's log.
    channel_fd, stdout_fd = fds[0], fds[1]
    stderr_fd = fds[2] if len(fds) > 2 else stdout_fd
    os.dup2(stdout_fd, 1)
    os.dup2(stderr_fd, 2)
    for fd in {stdout_fd, stderr_fd} - {1, 2}:
        os.close(fd)
    os.environ.clear()
    os.environ.update(env)  # the invoking evaluation's environment, channel key included
    os.environ[FD_ENV] = str(channel_fd)
    os.chdir(os.path.dirname(job_path))


def import_for_job(is_gpu: bool) -> None:
    """What ``run_job`` imports for a job, and on a GPU the profiler its device pass starts: imports
    that need no job, made while the child waits for one."""
    import sol_execbench.build  # noqa: F401
    import sol_execbench.schema  # noqa: F401

    from . import activity_watch, confinement, timing, workload_eval  # noqa: F401
    if is_gpu:
        import torch.profiler  # noqa: F401
