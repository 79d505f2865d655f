"""Running the evaluation child: launch, watch (time, host memory), collect channel messages."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from sol_execbench.platform.host import SessionWatch, kill_session

from ..channel import FD_ENV, KEY_ENV, new_key, read_messages
from .child_env import (ALLOC_CONF, STAGING_CLEANUP_ENV, SUPERVISOR, SUPERVISOR_FDS_ENV,  # noqa: F401  (re-exported)
                        SUPERVISOR_PARENT_ENV, child_environment)
from .early_child import EarlyChild
from .warm_pool import hand_job, pool_answers, take_warm_child, wait_exit_code
from sol_execbench.platform.lifetime import preexec_die_with_parent

_POLL_S = 0.05


@dataclass
class ChildRun:
    """What one child process did."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    forged: list[str] = field(default_factory=list)
    returncode: int | None = None
    timed_out: bool = False
    memory_exceeded_bytes: int | None = None
    wall_s: float = 0.0
    warm: bool = False  # the child came from the warm pool
    early_unused: str | None = None  # why the early child offered for this run did not run it
    parent_killed: bool = False  # the child's parent (supervisor, or the warm pool) died: the solution signalled it
    # The child reported the end of its job and closed its channel; its exit (the device context's
    # teardown, about 0.17 s on the H200 host) was not awaited, so ``returncode`` is None.
    ended_at_done: bool = False


def _session_rss_bytes(watch: SessionWatch) -> int:
    """Resident memory of every process in the child's session (the child and what it spawned)."""
    total = 0
    page = os.sysconf("SC_PAGE_SIZE")
    for pid in watch.members():
        try:
            with open(f"/proc/{pid}/statm") as fh:
                total += int(fh.read().split()[1]) * page
        except (OSError, IndexError, ValueError):
            continue
    return total


def _kill_session(proc: Any) -> None:
    kill_session(proc.pid)
    proc.wait()


class _WarmProcess:
    """A handed-out warm child: not our child (the pool server reaps it), watched through /proc."""

    def __init__(self, child: Any):
        self.child, self.pid, self.returncode = child, child.pid, None
        self.pool_died = False  # the pool (the child's parent) was gone when the child ended

    def poll(self) -> int | None:
        try:
            with open(f"/proc/{self.pid}/stat", "rb") as fh:
                state = fh.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            state = b"X"
        if state in (b"Z", b"X"):
            code = wait_exit_code(self.child, timeout=5)
            self.returncode = code if code is not None else -signal.SIGKILL
            self.pool_died = code is None and not pool_answers(self.child)
        return self.returncode

    def wait(self) -> int | None:
        while self.poll() is None:
            time.sleep(_POLL_S)
        return self.returncode


class _ExitWait:
    """A pause between the checks on a running child that ends as soon as the child exits (a
    pidfd, Linux 5.3 and later; a plain sleep elsewhere) or its channel closes (``ChannelEnd``):
    the run is not kept up to a polling interval after either."""

    def __init__(self, pid: int, channel_end: ChannelEnd | None = None):
        try:
            self._fd: int | None = os.pidfd_open(pid)
        except (AttributeError, OSError):  # no pidfd here, or the process is gone already
            self._fd = None
        self._channel_end = channel_end

    def wait(self, seconds: float) -> None:
        channel_fd = self._channel_end.pending_fd() if self._channel_end is not None else None
        fds = [fd for fd in (self._fd, channel_fd) if fd is not None]
        if fds:
            select.select(fds, [], [], seconds)
        else:
            time.sleep(seconds)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class ChannelEnd:
    """Reads the child's channel in a thread until EOF, then wakes the wait on the child once."""

    def __init__(self, read_fd: int, key: str, deliver: Callable[[dict[str, Any]], None],
                 on_forged: Callable[[str], None]):
        self._wake_read, self._wake_write = os.pipe()
        self.ended = threading.Event()
        self.thread = threading.Thread(target=self._read, args=(read_fd, key, deliver, on_forged), daemon=True)
        self.thread.start()

    def _read(self, read_fd: int, key: str, deliver, on_forged) -> None:
        try:
            read_messages(read_fd, key, deliver, on_forged)
        finally:
            self.ended.set()
            os.close(self._wake_write)  # the read end turns readable (EOF)

    def pending_fd(self) -> int | None:
        """The descriptor that turns readable at the channel's end; None once it has ended."""
        return None if self.ended.is_set() or self._wake_read < 0 else self._wake_read

    def close(self) -> None:
        self.thread.join(timeout=5)
        if self._wake_read >= 0:
            os.close(self._wake_read)
            self._wake_read = -1


def _start(job_path: Path, stdout_path: Path, stderr_path: Path | None, env: dict[str, str], write_fd: int,
           wrapper: list[str] | None, warm_device: str | None, use_warm: bool,
           early: EarlyChild | None = None) -> tuple[Any, bool, str | None]:
    """The early child when it fits, else a warm child from the pool when one fits, else a fresh
    ``python -m ...child`` process; whether it is a warm one, and why an early child was not used.

    The child's stdout goes to ``stdout_path``; its stderr to ``stderr_path``, or into the same
    file when that is None."""
    with contextlib.ExitStack() as stack:
        out = stack.enter_context(open(stdout_path, "ab"))
        err = stack.enter_context(open(stderr_path, "ab")) if stderr_path is not None else None
        # An early or warm child puts the first log descriptor on its stdout and the second, when
        # there is one, on its stderr (a single one takes both).
        log_fds = [out.fileno()] + ([err.fileno()] if err is not None else [])
        early_unused = None
        if early is not None:
            early_unused = ("the child runs under a wrapper" if wrapper
                            else early.misfit(env, warm_device) or early.hand(job_path, env, [write_fd, *log_fds]))
            if early_unused is None:
                return early.proc, False, None
            early.discard()
        if use_warm and not wrapper:
            child = take_warm_child(warm_device, env)
            if child is not None and hand_job(child, job_path, env, [write_fd, *log_fds]):
                return _WarmProcess(child), True, early_unused
        # Through the supervisor: the child's parent is a process it may kill without ending the run.
        env = {**env, SUPERVISOR_FDS_ENV: str(write_fd), SUPERVISOR_PARENT_ENV: str(os.getpid())}
        proc = subprocess.Popen([sys.executable, "-I", "-S", str(SUPERVISOR), *(wrapper or []), sys.executable, "-m",
                                 "sol_execbench.evaluate.child.driver", str(job_path)],
                                stdin=subprocess.DEVNULL, stdout=out, stderr=err if err is not None else subprocess.STDOUT,
                                env=env, pass_fds=(write_fd,), start_new_session=True, cwd=str(job_path.parent),
                                preexec_fn=preexec_die_with_parent)
    return proc, False, early_unused


def run_child(job_path: Path, log_path: Path, *, timeout_s: float, memory_limit_bytes: int | None,
              env_extra: dict[str, str], on_message: Callable[[dict[str, Any]], None],
              wrapper: list[str] | None = None, warm_device: str | None = None, use_warm: bool = False,
              stderr_path: Path | None = None, forged: list[str] | None = None,
              early: EarlyChild | None = None, end_at_done: bool = False) -> ChildRun:
    """Run ``python -m sol_execbench.evaluate.child.driver job.json`` to completion, timeout or memory limit.

    The child's output is appended to ``log_path``: stdout and stderr together (one interleaved log,
    which ``--sanitize`` cuts by workload), or only stdout when ``stderr_path`` takes stderr.
    ``wrapper`` prefixes the command (``--sanitize``: compute-sanitizer). ``use_warm`` takes a
    pre-started child from a running warm pool (``sol-execbench worker start``) when one fits;
    ``early``, a child started before the job (``early_child``), goes first where it fits.
    ``end_at_done``: once the child has reported the end of its job and closed its channel, its
    session is killed and its exit left to its reaper (the warm pool, or a thread here) instead of
    awaited. Not for a child under a profiler or a sanitizer, whose report is written at its exit."""
    run = ChildRun(forged=forged if forged is not None else [])
    read_fd, write_fd = os.pipe()
    key = new_key()
    env = child_environment({**env_extra, FD_ENV: str(write_fd), KEY_ENV: key})

    def deliver(message: dict[str, Any]) -> None:
        run.messages.append(message)
        on_message(message)

    began = time.monotonic()
    proc, run.warm, run.early_unused = _start(job_path, log_path, stderr_path, env, write_fd, wrapper, warm_device,
                                              use_warm, early)
    os.close(write_fd)
    channel = ChannelEnd(read_fd, key, deliver, run.forged.append)
    deadline = began + timeout_s
    session = SessionWatch(proc.pid)
    pause = _ExitWait(proc.pid, channel)
    try:
        while True:
            # Checked before poll: a warm child's poll waits out its exit once its main thread has gone.
            if end_at_done and channel.ended.is_set() and any(m.get("type") == "done" for m in run.messages):
                run.ended_at_done = True
                break
            if proc.poll() is not None:
                break
            if time.monotonic() > deadline:
                run.timed_out = True
                _kill_session(proc)
                break
            if memory_limit_bytes:
                rss = _session_rss_bytes(session)
                if rss > memory_limit_bytes:
                    run.memory_exceeded_bytes = rss
                    _kill_session(proc)
                    break
            pause.wait(_POLL_S)
    except BaseException:
        # SIGTERM / Ctrl-C of the run (raised here by the CLI's handlers): the child goes with it.
        kill_session(proc.pid, settle_s=1.0)
        channel.close()
        raise
    finally:
        pause.close()
    if run.ended_at_done:
        kill_session(proc.pid, settle_s=0)  # one sweep now, so that nothing outlives this call ...
        threading.Thread(target=_end_in_background, args=(proc,), daemon=True).start()  # ... then settle and reap
    else:
        # Processes the child left in its session would hold the pipe open; end them too.
        kill_session(proc.pid, settle_s=1.0)
    channel.close()
    if not run.ended_at_done:
        _read_exit(run, proc)
    run.wall_s = time.monotonic() - began
    return run


def _read_exit(run: ChildRun, proc: Any) -> None:
    """The exit status of an awaited child, and whether its parent (the pool, or the supervisor)
    was killed under it."""
    run.returncode = proc.returncode
    if run.warm:  # the pool died under its handed-out child: a solution that signals its parent ends the pool
        run.parent_killed = getattr(proc, "pool_died", False) and not run.timed_out and run.memory_exceeded_bytes is None
    else:  # the supervisor's exit: 137 is the child killed by SIGKILL, -9 the supervisor itself
        if run.returncode == 128 + signal.SIGKILL:
            run.returncode = -signal.SIGKILL
        elif run.returncode == -signal.SIGKILL and not run.timed_out and run.memory_exceeded_bytes is None:
            run.parent_killed = True


def _end_in_background(proc: Any) -> None:
    """The rest of a child's end that ``run_child`` does not wait for: its session killed until none
    of it is left, and the fresh child's supervisor reaped (a warm child is the pool's to reap)."""
    kill_session(proc.pid, settle_s=1.0)
    if isinstance(proc, subprocess.Popen):
        proc.wait()


def signal_name(returncode: int | None) -> str | None:
    """``SIGSEGV`` for a child killed by a signal (negative return code), else None."""
    if returncode is None or returncode >= 0:
        return None
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def describe_exit(run: ChildRun) -> str:
    if run.memory_exceeded_bytes is not None:
        return f"host memory limit exceeded ({run.memory_exceeded_bytes / 2**30:.2f} GiB resident): the child was stopped"
    code = run.returncode
    if run.parent_killed and run.warm:
        return ("the evaluation child's parent process, the warm pool, died during the evaluation (the solution "
                "signals its parent, or the system's out-of-memory killer ended it), and the child with it")
    if run.parent_killed:
        return ("the evaluation child's parent process was killed by SIGKILL (the solution signals its parent, or the "
                "system's out-of-memory killer ended it), and the child with it")
    if code is None and run.ended_at_done:
        return "the child reported the end of its job without a result for this workload"
    if code is None:
        return "the child did not exit"
    if code < 0:
        return f"the child was killed by {signal_name(code)}"
    return f"the child exited with code {code} before reporting"


def exit_record(run: ChildRun) -> dict[str, Any]:
    """How one child ended, as plain JSON values (for diagnostics)."""
    return {"returncode": run.returncode, "signal": signal_name(run.returncode), "timed_out": run.timed_out,
            "memory_limit_exceeded": run.memory_exceeded_bytes is not None,
            "memory_resident_bytes": run.memory_exceeded_bytes, "wall_s": round(run.wall_s, 3),
            "warm_pool": run.warm, "description": describe_exit(run)}


_TAIL_CHUNK = 1 << 20


def tail(path: Path, max_bytes: int = 8000) -> tuple[str, int]:
    """The last ``max_bytes`` of a log file and its line count (a last line without a newline
    counts). Reads in chunks: a solution may print gigabytes."""
    try:
        with open(path, "rb") as fh:
            lines, last = 0, b""
            while chunk := fh.read(_TAIL_CHUNK):
                lines += chunk.count(b"\n")
                last = chunk
            size = fh.tell()
            if last and not last.endswith(b"\n"):
                lines += 1
            fh.seek(max(0, size - max_bytes))
            data = fh.read(max_bytes)
    except OSError:
        return "", 0
    return data.decode(errors="replace"), lines

