"""The warm command line: an evaluation's command line run by a process the warm pool keeps ready.

A ``sol-execbench`` evaluation spends about 0.3 s of its own before its child has the job and after
the child is done: starting the interpreter, importing the command (pydantic's models, rich, the
evaluation's parent side), tearing the interpreter down. The default warm pool (``worker start``
without ``--device``) keeps one *front* process waiting on ``front.sock`` in the runtime folder
with those imports made. A command line that evaluates (and has neither ``--no-warm-pool`` nor
``SOL_EXECBENCH_WARM_FRONT=0``) connects, hands over its arguments, working folder, environment,
umask and standard streams, passes on the signals it receives (SIGINT, SIGTERM, SIGHUP), and exits
with the status the front reports (128 + the signal's number if it passed one on and the front
ended without a status, as a shell reports a process a signal ended). The
front runs that one command exactly as the command line would have, then exits; the pool starts
another. A command line that cannot be served (no front, a peer refused, other sources) runs the
command itself: nothing is different but the time it takes.

A front serves no process under ``no_new_privs`` (every sandboxed child runs so), and only a
command line of the same interpreter, package folder, version and sources: one started before the
package was edited refuses and exits. A command line killed outright (SIGKILL) closes its
connection, and the front then stops its run as SIGTERM would.
"""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import sys
import threading
from pathlib import Path
from typing import Any

from sol_execbench.evaluate.parent.child_env import FRONT_TAKEN, front_socket_path, package_identity, read_json_line

# The signals a command line passes on to the front running its command.
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
NO_WARM_POOL_FLAG = "--no-warm-pool"
FRONT_ENV = "SOL_EXECBENCH_WARM_FRONT"  # 0: the command line runs its command itself
_MAX_REQUEST = 1 << 22
_STREAMS = 3  # stdin, stdout, stderr


# -- the command line's side ---------------------------------------------------------------------

def evaluates(argv: list[str], commands: set[str]) -> bool:
    """Whether ``argv`` (without the program name) is an evaluation a front may run: the evaluate
    command, or a first word that is no other command (a problem directory, an option), and no
    ``--no-warm-pool`` (which asks for this process)."""
    if not argv or NO_WARM_POOL_FLAG in argv or argv[0] in ("-h", "--help", "--version") \
            or os.environ.get(FRONT_ENV) == "0":
        return False
    return argv[0] == "evaluate" or argv[0] not in commands


def run_in_front(argv: list[str]) -> int | None:
    """Hand ``argv`` to the warm pool's front and wait for its exit status; None when no front
    took it (the caller then runs the command itself)."""
    path = front_socket_path()
    if not path.exists():
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(5)
        conn.connect(str(path))
        request = {"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ), "umask": _umask(),
                   "streams": [_stream_settings(s) for s in (sys.stdin, sys.stdout, sys.stderr)], **package_identity()}
        socket.send_fds(conn, [json.dumps(request).encode() + b"\n"], list(range(_STREAMS)))
        reply = read_json_line(conn)
    except (OSError, ValueError):
        conn.close()
        return None
    if not reply or not reply.get("ok"):
        conn.close()
        return None
    return _await_exit(conn, int(reply["pid"]))


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _stream_settings(stream: Any) -> dict[str, str | None]:
    return {"encoding": getattr(stream, "encoding", None), "errors": getattr(stream, "errors", None)}


def _await_exit(conn: socket.socket, front_pid: int) -> int:
    """The front's exit status, passing on the signals this process receives meanwhile."""
    from sol_execbench.platform.lifetime import protect_from_children

    protect_from_children()  # this process holds the terminal: no child may open it through /proc

    forwarded: list[int] = []

    def forward(signum: int, _frame: Any) -> None:
        forwarded.append(signum)
        try:
            os.kill(front_pid, signum)
        except ProcessLookupError:
            pass

    for signum in FORWARDED_SIGNALS:
        signal.signal(signum, forward)
    conn.settimeout(None)
    try:
        reply = read_json_line(conn)
    except (OSError, ValueError):
        reply = None
    finally:
        conn.close()
    if (reply is None or "exit" not in reply) and forwarded:
        return 128 + forwarded[-1]  # the signal ended the front before its command could report
    if reply is None or "exit" not in reply:
        print(f"sol-execbench: the warm pool's command-line process (pid {front_pid}) ended without an exit status",
              file=sys.stderr)
        return 1
    return int(reply["exit"])


# -- the front's side ----------------------------------------------------------------------------

def serve(path: str, taken_fd: int | None, pool_pipe_fd: int | None) -> None:
    """Wait on ``path`` for one command line, run its command, exit. On ``taken_fd`` the pool reads
    ``FRONT_TAKEN`` once a command line was taken, or only the pipe's end when the front ends
    without one (either way it starts the next front); while waiting, the front ends when the
    pool's pipe (``pool_pipe_fd``) closes, as the pool's warm children do."""
    from sol_execbench.platform.host import listening_socket, use_bytecode_cache_here

    use_bytecode_cache_here()
    _import_ahead()
    from sol_execbench.evaluate.parent.warm_pool import source_stamp

    identity = package_identity()
    stamp = source_stamp(Path(identity["package"]))
    listener = listening_socket(path, backlog=1)
    taken = threading.Event()
    if pool_pipe_fd is not None:
        threading.Thread(target=_end_with_pool, args=(pool_pipe_fd, taken, path), daemon=True).start()
    while True:
        conn, _ = listener.accept()
        found = _take(conn, identity, stamp)
        if found is None:
            continue
        request, fds, stale = found
        if stale:  # this process imported sources that changed since: a fresh front will serve
            _end_waiting(listener, path, taken_fd, taken=False)
            return
        if request is not None:
            break
    taken.set()
    _end_waiting(listener, path, taken_fd, taken=True)
    try:
        _adopt(request, fds)
    except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:  # a folder gone, a malformed request
        _send(conn, {"ok": False, "reason": f"the command line's state could not be taken over: {exc}"})
        os._exit(0)
    _send(conn, {"ok": True, "pid": os.getpid()})
    code = _run_command(request["argv"], conn)
    os._exit(code)


def _import_ahead() -> None:
    """What an evaluation's command line imports, made while the front waits."""
    import rich.table  # noqa: F401

    import sol_execbench.evaluate.parent.runner  # noqa: F401
    from sol_execbench.cli import evaluate_cmd, main, render, run_signals  # noqa: F401
    from sol_execbench.evaluate.parent import problem, process  # noqa: F401


def _end_with_pool(pool_pipe_fd: int, taken: threading.Event, path: str) -> None:
    try:
        os.read(pool_pipe_fd, 1)  # returns (EOF) only when the pool is gone
    except OSError:
        pass
    if not taken.is_set():
        Path(path).unlink(missing_ok=True)
        os._exit(0)


def _end_waiting(listener: socket.socket, path: str, taken_fd: int | None, taken: bool) -> None:
    """Stop listening; tell the pool (a byte when a command line was taken, else only the pipe's end)."""
    listener.close()
    Path(path).unlink(missing_ok=True)
    if taken_fd is not None:
        if taken:
            os.write(taken_fd, FRONT_TAKEN)
        os.close(taken_fd)


def _take(conn: socket.socket, identity: dict[str, str],
          stamp: str) -> tuple[dict[str, Any] | None, list[int], bool] | None:
    """A command line's request on ``conn``: (request, its descriptors, whether this front is
    stale); None when the connection is dropped or refused (the front keeps waiting)."""
    from sol_execbench.evaluate.parent.warm_pool import source_stamp
    from sol_execbench.sandbox.peer import refusal

    fds: list[int] = []
    try:
        conn.settimeout(10)
        data, fds, _flags, _addr = socket.recv_fds(conn, 1 << 20, _STREAMS)
        while data and not data.endswith(b"\n") and len(data) < _MAX_REQUEST:
            chunk = conn.recv(1 << 20)
            if not chunk:
                break
            data += chunk
        refused = refusal(conn)  # a sandboxed child must not run commands outside its sandbox
        request = json.loads(data) if data and not refused else None
        if request is not None and (len(fds) != _STREAMS or any(request.get(k) != v for k, v in identity.items())):
            refused, request = "another interpreter, package or version", None
        stale = request is not None and source_stamp(Path(identity["package"])) != stamp
        if refused or stale or request is None:
            _send(conn, {"ok": False, "reason": refused or "the package's sources changed since this front started"})
            _close_all(fds)
            conn.close()
            return (None, [], True) if stale else None
        conn.settimeout(None)
        return request, fds, False
    except (OSError, ValueError):
        _close_all(fds)
        conn.close()
        return None


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def _send(conn: socket.socket, message: dict[str, Any]) -> None:
    try:
        conn.sendall(json.dumps(message).encode() + b"\n")
    except OSError:
        pass


def _adopt(request: dict[str, Any], fds: list[int]) -> None:
    """Become the command line: its standard streams, working folder, environment and umask."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        if fd != target:
            os.close(fd)
    settings = request.get("streams") or [{}] * _STREAMS
    sys.stdin = sys.__stdin__ = _text_stream(0, "r", settings[0], line_buffering=False)
    sys.stdout = sys.__stdout__ = _text_stream(1, "w", settings[1], line_buffering=os.isatty(1))
    sys.stderr = sys.__stderr__ = _text_stream(2, "w", settings[2], line_buffering=True)
    os.chdir(request["cwd"])
    os.umask(int(request["umask"]))
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = ["sol-execbench", *request["argv"]]


def _text_stream(fd: int, mode: str, settings: dict[str, str | None], line_buffering: bool) -> io.TextIOWrapper:
    raw = io.FileIO(fd, mode, closefd=False)
    buffered = io.BufferedReader(raw) if mode == "r" else io.BufferedWriter(raw)
    return io.TextIOWrapper(buffered, encoding=settings.get("encoding") or "utf-8",
                            errors=settings.get("errors") or "strict", line_buffering=line_buffering)


def _run_command(argv: list[str], conn: socket.socket) -> int:
    """Run the command as ``main`` would; its exit status, reported on ``conn`` once everything it
    writes is out. A connection that closes first (the command line was killed) stops the run as
    SIGTERM would."""
    import atexit
    import traceback

    from sol_execbench.cli import evaluate_cmd
    from sol_execbench.cli.main import run_as_process

    reported = threading.Event()
    threading.Thread(target=_stop_when_gone, args=(conn, reported), daemon=True).start()
    evaluate_cmd.FRONT_PID[0] = os.getpid()
    try:
        run_as_process(argv)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, (int, type(None))):
            print(exc.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001  (as an uncaught exception ends a command line: its traceback, 1)
        traceback.print_exc()
        code = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    reported.set()
    _send(conn, {"exit": code})
    return code


def _stop_when_gone(conn: socket.socket, reported: threading.Event) -> None:
    try:
        while conn.recv(4096):
            pass
    except OSError:
        pass
    if not reported.is_set():
        os.kill(os.getpid(), signal.SIGTERM)


def main(argv: list[str]) -> None:
    fds = [int(v) if v.isdigit() else None for v in argv[1:3]] + [None, None]
    serve(argv[0], fds[0], fds[1])


if __name__ == "__main__":
    main(sys.argv[1:])
