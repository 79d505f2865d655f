"""Warm evaluation processes: children started ahead of time, torch imported and the device
initialised, each waiting for exactly one job.

Every evaluation still gets a process of its own that has run no other solution's code, so the
isolation is that of a fresh child; only the start-up (importing torch, creating the device
context, loading the common kernels) is paid before the evaluation is asked for.

``sol-execbench worker start`` runs the pool server in the background. It keeps ``spares``
children warm and hands one to each CLI or API evaluation that asks over a Unix socket in a
per-user directory (mode 0700); it exits after ``idle_timeout`` seconds without a request. A
child is only handed to an evaluation whose start-up environment (Python, package, device,
visibility and allocator variables) matches the pool's; otherwise the evaluation starts its own.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import select
import shutil
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

from sol_execbench.platform.host import (kill_session, listening_socket, pending_socket_path, process_alive,
                                        remove_orphaned_sockets, runtime_socket)
from sol_execbench.sandbox.peer import refusal as peer_refusal
from sol_execbench.schema.warm_pool import WorkerStatus

from ..launch_level import EXIT_SLOW_LAUNCH
from .warm_fork import ForkedChild, ForkServer, end_process
from .child_env import (FRONT_TAKEN, POOL_NAME_ENV, POOL_PIPE_ENV, STAGING_CLEANUP_ENV, child_environment,  # noqa: F401  (re-exported)
                        front_socket_path, package_identity, pool_file, read_json_line, send_job, server_socket_path,
                        startup_values)

WARM_CHILD_ENV = "SOL_EXECBENCH_WARM_SOCKET"
WARM_FORK_ENV = "SOL_EXECBENCH_WARM_FORK"  # "0": every warm child imports afresh (no fork server)
_MAX_MESSAGE = 1 << 20

FRONT_MODULE = "sol_execbench.cli.warm_front"  # run by name: the command line's layer sits above this one
FRONT_FAILURES = 3  # fronts that end without taking a command line before the pool stops starting them
ENDING_WAIT_S = 5.0  # a take waits at most this long for the handed-out children that are ending
CHILD_SOCKET_PREFIX = "child-"  # child-<pid of the pool>-<random>.sock in the runtime folder


def source_stamp(root: Path) -> str:
    """Names, sizes and modification times of the Python sources under ``root``: a pool started
    before the package's code was edited (an editable install) must not hand out processes that
    imported the old code."""
    entries = []
    for path in sorted(root.rglob("*.py")):
        try:
            st = path.stat()
        except OSError:
            continue
        entries.append(f"{path.relative_to(root)}:{st.st_size}:{st.st_mtime_ns}")
    return hashlib.sha256("\n".join(entries).encode()).hexdigest()[:16]


def startup_fingerprint(env: dict[str, str], device: str | None) -> str:
    identity = package_identity()
    payload = json.dumps({**identity, "sources": source_stamp(Path(identity["package"])), "device": device or "auto",
                          "env": startup_values(env)}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


# -- talking to the server ---------------------------------------------------------------------

def _request(path: Path, message: dict[str, Any], timeout: float) -> dict[str, Any] | None:
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(timeout)
            conn.connect(str(path))
            conn.sendall(json.dumps(message).encode() + b"\n")
            return read_json_line(conn)
    except (OSError, ValueError):
        return None


@dataclass
class WarmChild:
    pid: int
    socket_path: str
    server: Path


def take_warm_child(device: str | None, env: dict[str, str], wait_s: float = 20.0) -> WarmChild | None:
    """A warm child for this evaluation, or None (no pool, another environment, none ready in time)."""
    server = server_socket_path(device)
    if not server.exists():
        return None
    # The staging folder the pool removes if this process dies (SIGKILL) before it can.
    reply = _request(server, {"op": "take", "fingerprint": startup_fingerprint(env, device), "wait_s": wait_s,
                              "pid": os.getpid(), "staging": env.get(STAGING_CLEANUP_ENV)}, timeout=wait_s + 5)
    if not reply or not reply.get("ok"):
        return None
    return WarmChild(pid=int(reply["pid"]), socket_path=reply["socket"], server=server)


def hand_job(child: WarmChild, job_path: Path, env: dict[str, str], fds: list[int]) -> bool:
    """Give the child its job, the invoker's environment and the channel and log descriptors."""
    return send_job(child.socket_path, job_path, env, fds, answer=True)


def wait_exit_code(child: WarmChild, timeout: float) -> int | None:
    """Exit status of a handed-out child, as the server (its parent) saw it."""
    reply = _request(child.server, {"op": "wait", "pid": child.pid, "timeout": timeout}, timeout=timeout + 5)
    return None if not reply or reply.get("returncode") is None else int(reply["returncode"])


def pool_answers(child: WarmChild) -> bool:
    """Whether the pool that handed out ``child`` still answers."""
    return _request(child.server, {"op": "status"}, timeout=2) is not None


def pool_status(device: str | None) -> dict[str, Any] | None:
    return _request(server_socket_path(device), {"op": "status"}, timeout=5)


def stop_pool(device: str | None) -> dict[str, Any] | None:
    """Ask the pool to stop; its reply (``already_stopping`` when another stop came first), or
    None when no pool answered."""
    return _request(server_socket_path(device), {"op": "stop"}, timeout=10)


def start_pool(device: str | None, spares: int, idle_timeout_s: float, owner_pid: int | None = None) -> subprocess.Popen:
    """Start the pool server in the background (its own session, output to a log in the runtime dir).
    With ``owner_pid`` it also ends, within half a second, once that process is gone."""
    log = open(pool_file(device, "log"), "ab")
    command = [sys.executable, "-m", "sol_execbench.evaluate.parent.warm_pool", "--spares", str(spares),
               "--idle-timeout", str(idle_timeout_s)] + (["--device", device] if device else []) \
        + (["--exit-with-pid", str(owner_pid)] if owner_pid else [])
    return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)


@contextlib.contextmanager
def warm_pools(devices: Iterable[str | None], spares: int = 1, answer_s: float = 10.0) -> Iterator[list[str | None]]:
    """A warm pool for each device, for the length of the block, unless one started with ``worker
    start`` answers for every device: then that one serves. Otherwise the pools are this process's
    own, named in its environment (``POOL_NAME_ENV``) so that no other run takes from them or sees
    them stop, ended with this process (also when it is killed) and stopped after the block. Yields
    the devices whose pool this started, once each answers or ``answer_s`` passed; an evaluation
    then waits for the pool's first warm child as it would for a fresh one."""
    wanted = list(dict.fromkeys(devices))
    if all(pool_status(device) is not None for device in wanted):
        yield []
        return
    before = os.environ.get(POOL_NAME_ENV)
    os.environ[POOL_NAME_ENV] = f"run{os.getpid()}"
    started: list[tuple[str | None, subprocess.Popen]] = []
    try:
        for device in wanted:
            started.append((device, start_pool(device, spares, idle_timeout_s=600.0, owner_pid=os.getpid())))
        deadline = time.monotonic() + answer_s
        for device, proc in started:
            while proc.poll() is None and time.monotonic() < deadline and pool_status(device) is None:
                time.sleep(0.05)
        yield [device for device, _ in started]
    finally:
        for device, proc in started:
            stop_pool(device)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                end_process(proc)
            log = pool_file(device, "log")  # named after this run: kept only when the pool wrote to it
            with contextlib.suppress(OSError):
                if log.stat().st_size == 0:
                    log.unlink()
        if before is None:
            os.environ.pop(POOL_NAME_ENV, None)
        else:
            os.environ[POOL_NAME_ENV] = before


# -- the server --------------------------------------------------------------------------------

class PoolServer:
    def __init__(self, device: str | None, spares: int, idle_timeout_s: float, owner_pid: int | None = None):
        self.device, self.spares, self.idle_timeout_s = device, max(1, spares), idle_timeout_s
        self.owner_pid = owner_pid
        self.fingerprint = startup_fingerprint(dict(os.environ), device)
        self.waiting: list[tuple[subprocess.Popen | ForkedChild, str]] = []  # warming or warm, not yet handed out
        self.handed: dict[int, subprocess.Popen | ForkedChild] = {}
        self.forks: ForkServer | None = None  # started by serve()
        self.cleanups: dict[int, tuple[int, str]] = {}  # handed pid -> (taker's pid, its staging folder)
        self.swept: set[int] = set()  # handed children that ended and whose session was killed
        self.turned_away = 0  # children that exited for their launch level (evaluate/launch_level.py)
        self.takes = TakeWaits()  # how long evaluations waited for a warm child
        self.lock = threading.Lock()
        self.last_request = time.monotonic()
        self.stopping = False
        self.life_read, self._life_write = os.pipe()  # the write end closes only when the pool dies
        # The default pool also keeps a warm command line ready (``cli/warm_front.py``); a run's own
        # pool and a pool for a named device do not.
        self.keeps_front = device is None and not os.environ.get(POOL_NAME_ENV)
        self.front: subprocess.Popen | None = None  # the front waiting for a command line
        self.front_pipe: int | None = None  # its pipe: a byte when it took one, else only the end
        self.front_failures = 0

    def _spawn_front(self) -> None:
        """Start the next front, unless the pool is stopping or fronts keep ending untaken."""
        if not self.keeps_front or self.stopping or self.front_failures >= FRONT_FAILURES:
            return
        pipe_read, pipe_write = os.pipe()
        args = [sys.executable, "-m", FRONT_MODULE, str(front_socket_path()), str(pipe_write), str(self.life_read)]
        try:
            self.front = subprocess.Popen(args, stdin=subprocess.DEVNULL, start_new_session=True,
                                          pass_fds=(pipe_write, self.life_read))
        except OSError:
            os.close(pipe_read)
            self.front_failures = FRONT_FAILURES
            return
        finally:
            os.close(pipe_write)
        self.front_pipe = pipe_read

    def _front_moved(self) -> None:
        """The front's pipe turned readable: it took a command line (busy now, no longer the
        pool's) or ended without one; either way the next one starts."""
        try:
            took = os.read(self.front_pipe, 1) == FRONT_TAKEN
        except OSError:
            took = False
        os.close(self.front_pipe)
        self.front_pipe, self.front = None, None
        self.front_failures = 0 if took else self.front_failures + 1
        self._spawn_front()

    def _spawn(self) -> None:
        path = str(runtime_socket(CHILD_SOCKET_PREFIX))
        forked = self.forks.fork(path) if self.forks is not None else None
        if forked is not None:
            self.waiting.append((forked, path))
            return
        env = child_environment({WARM_CHILD_ENV: path})
        args = [sys.executable, "-m", "sol_execbench.evaluate.child.warm_child"] + ([self.device] if self.device else [])
        # A warm child dies with the pool, however the pool dies (it is blocked in accept otherwise):
        # it watches the read end of a pipe whose write end only the pool holds. (The parent-death
        # signal would fire when the request thread that spawned it ends.)
        env[POOL_PIPE_ENV] = str(self.life_read)
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, env=env, start_new_session=True,
                                pass_fds=(self.life_read,))
        self.waiting.append((proc, path))

    def _start_fork_server(self) -> None:
        """Start the fork server, unless ``SOL_EXECBENCH_WARM_FORK=0``. Until it is ready (its
        imports take as long as a warm child's) the pool starts no child: it would import beside it."""
        if os.environ.get(WARM_FORK_ENV, "1") != "0":
            self.forks = ForkServer(self.device, child_environment({}), self.life_read)

    def _fork_server_starting(self) -> bool:
        return self.forks is not None and self.forks.starting()

    def _replenish_due(self) -> bool:
        """Whether the serve loop should replenish: a child is missing (the fork server just became
        ready or failed), a waiting one ended, or the server is gone and forked ones still wait."""
        orphaned = self.forks is not None and self.forks.failed
        return len(self.waiting) < self.spares or any(
            p.poll() is not None or (orphaned and isinstance(p, ForkedChild)) for p, _ in self.waiting)

    def _replenish(self) -> None:
        with self.lock:
            ended = [(p, s) for p, s in self.waiting if p.poll() is not None]
            for _, sock in ended:
                Path(sock).unlink(missing_ok=True)  # of a child that ended before it was handed out
            self.waiting = [item for item in self.waiting if item not in ended]
            self.turned_away += sum(p.returncode == EXIT_SLOW_LAUNCH for p, _ in ended)
            if self.forks is not None:
                if any(isinstance(p, ForkedChild) and p.returncode != EXIT_SLOW_LAUNCH for p, _ in ended):
                    self.forks.give_up()  # a forked child failed before it was handed out: start them afresh
                if self.forks.failed:
                    # Once the server is gone, nobody can report how its children end: none is handed out.
                    for proc, sock in [item for item in self.waiting if isinstance(item[0], ForkedChild)]:
                        self.waiting.remove((proc, sock))
                        _discard(proc, sock)
            if self._fork_server_starting():
                return
            while len(self.waiting) < self.spares and not self.stopping:
                self._spawn()

    def _ending(self) -> bool:
        """Whether a handed-out child is ending: its main thread gone, the process not yet reaped
        (its other threads are still tearing down its device context)."""
        return any(proc.poll() is None and not process_alive(pid) for pid, proc in list(self.handed.items()))

    def _take(self, request: dict[str, Any]) -> dict[str, Any]:
        if request.get("fingerprint") != self.fingerprint:
            return {"ok": False, "reason": "different start-up environment"}
        began = time.monotonic()
        deadline = began + float(request.get("wait_s", 20))
        # The next evaluation starts once the last one's child is gone: it would see that child's
        # device context as another process on the GPU, and its teardown beside the timed calls.
        ending_deadline = began + ENDING_WAIT_S
        while self._ending() and time.monotonic() < ending_deadline:
            time.sleep(0.01)
        ended = time.monotonic()
        reply = self._hand_out(request, deadline)
        with self.lock:
            self.takes.add(ending_s=ended - began, ready_s=time.monotonic() - ended, handed=reply["ok"])
        return reply

    def _hand_out(self, request: dict[str, Any], deadline: float) -> dict[str, Any]:
        while time.monotonic() < deadline:
            with self.lock:
                for item in list(self.waiting):
                    proc, path = item
                    if proc.poll() is None and os.path.exists(path):
                        self.waiting.remove(item)
                        self.handed[proc.pid] = proc
                        staging = request.get("staging")
                        if isinstance(staging, str) and isinstance(request.get("pid"), int):
                            self.cleanups[proc.pid] = (request["pid"], staging)
                        return {"ok": True, "pid": proc.pid, "socket": path}
            self._replenish()
            time.sleep(0.02)
        return {"ok": False, "reason": "no warm child ready in time"}

    def _wait(self, request: dict[str, Any]) -> dict[str, Any]:
        proc = self.handed.get(int(request.get("pid", -1)))
        if proc is None:
            return {"returncode": None}
        try:
            code = proc.wait(timeout=float(request.get("timeout", 5)))
        except subprocess.TimeoutExpired:
            return {"returncode": None}
        self.handed.pop(proc.pid, None)
        self.swept.discard(proc.pid)
        return {"returncode": code}

    def handle(self, conn: socket.socket) -> None:
        with conn:
            data = b""
            while not data.endswith(b"\n") and len(data) < _MAX_MESSAGE:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            refused = peer_refusal(conn)  # no sandboxed child may take or steer a warm one
            if refused:
                conn.sendall(json.dumps({"ok": False, "reason": refused}).encode() + b"\n")
                return
            request = json.loads(data)
            op = request.get("op")
            if op == "take":
                reply = self._take(request)
                conn.sendall(json.dumps(reply).encode() + b"\n")  # before the replacement is started
                self._replenish()
                return
            elif op == "wait":
                reply = self._wait(request)
            elif op == "stop":
                reply = {"ok": True, "pid": os.getpid(), "already_stopping": self.stopping,
                         "warm": len(self.waiting), "handed_out": len(self.handed)}
                self.stopping = True
            else:
                reply = WorkerStatus(ok=True, pid=os.getpid(), device=self.device, spares=self.spares,
                                     warm=sum(os.path.exists(s) for _, s in self.waiting), handed_out=len(self.handed),
                                     forking=self.forks is not None and self.forks.usable,
                                     front=self.front is not None and front_socket_path().exists(),
                                     turned_away=self.turned_away, takes=self.takes.count,
                                     take_wait_s=round(self.takes.ready_s, 3), take_wait_max_s=round(self.takes.ready_max_s, 3),
                                     ending_wait_s=round(self.takes.ending_s, 3),
                                     fingerprint=self.fingerprint,
                                     idle_timeout_s=self.idle_timeout_s).model_dump(exclude_none=True)
            conn.sendall(json.dumps(reply).encode() + b"\n")

    def serve(self) -> None:
        path = server_socket_path(self.device)
        for left in (path, Path(pending_socket_path(str(path)))):  # by a pool killed outright
            left.unlink(missing_ok=True)
        remove_orphaned_sockets(CHILD_SOCKET_PREFIX)  # of a pool killed outright, whose children then ended
        if self.keeps_front:  # a front left waiting by a pool killed outright ended with that pool
            front = front_socket_path()
            for left in (front, Path(pending_socket_path(str(front)))):
                left.unlink(missing_ok=True)
        with listening_socket(str(path), backlog=16) as listener:
            self._start_fork_server()
            self._replenish()
            self._spawn_front()
            try:
                while not self.stopping and time.monotonic() - self.last_request < self.idle_timeout_s \
                        and (self.owner_pid is None or process_alive(self.owner_pid)):
                    watched = [listener] + ([self.front_pipe] if self.front_pipe is not None else [])
                    ready, _, _ = select.select(watched, [], [], 0.05 if self._fork_server_starting() else 0.5)
                    if listener in ready:
                        conn, _ = listener.accept()
                        self.last_request = time.monotonic()
                        threading.Thread(target=self._safe_handle, args=(conn,), daemon=True).start()
                    if self.front_pipe is not None and self.front_pipe in ready:
                        self._front_moved()
                    self._reap()
                    if self._replenish_due():
                        self._replenish()
            finally:
                self._shutdown(path)

    def _safe_handle(self, conn: socket.socket) -> None:
        try:
            self.handle(conn)
        except (OSError, ValueError):
            pass

    def _reap(self) -> None:
        for pid, proc in list(self.handed.items()):
            if proc.poll() is not None:
                if pid not in self.swept:  # what the child left in its session, should its evaluation be gone
                    self.swept.add(pid)
                    kill_session(pid, settle_s=0.5)
                self._clean_after(pid)
            if proc.poll() is not None and time.monotonic() - self.last_request > 60:
                self.handed.pop(pid, None)
                self.swept.discard(pid)

    def _clean_after(self, pid: int, abandoned: bool = False) -> None:
        """A handed-out child ended: if the evaluation that took it is gone too (killed by SIGKILL,
        it removed nothing) or ``abandoned`` it, remove its staging folder. Only a folder of the
        evaluation's own making: named ``sol-execbench-*``, holding its job file."""
        taker, staging = self.cleanups.pop(pid, (0, ""))
        if not staging or (process_alive(taker) and not abandoned):
            return
        folder = Path(staging)
        if folder.name.startswith("sol-execbench-") and (folder / "job.json").is_file():
            shutil.rmtree(folder, ignore_errors=True)

    def _shutdown(self, path: Path) -> None:
        self.stopping = True
        if self.owner_pid is not None:
            # A run's own pool stops as its run ends (or dies): a child still out belongs to an
            # evaluation the run abandoned (SIGTERM), whose thread will not remove its staging folder.
            for pid, proc in list(self.handed.items()):
                if proc.poll() is None:
                    end_process(proc)
                self._clean_after(pid, abandoned=True)
        if self.front_pipe is not None and select.select([self.front_pipe], [], [], 0)[0]:
            self._front_moved()  # it has just taken a command line (stopping: no next one starts)
        waiting = list(self.waiting) + ([(self.front, str(front_socket_path()))] if self.front is not None else [])
        for proc, sock in waiting:  # a front that took a command line is that command's: it runs on
            _discard(proc, sock)
        if self.forks is not None:  # after the children it forked: it reports their ends
            self.forks.close()
        path.unlink(missing_ok=True)


@dataclass
class TakeWaits:
    """Evaluations' requests for a warm child since the pool started: how many were answered with
    one, the seconds they waited for the last evaluation's child to be gone, and those they waited
    for a ready child (a child turned away for its launch level, or one still warming up, makes the
    next evaluation wait)."""

    count: int = 0
    ending_s: float = 0.0
    ready_s: float = 0.0
    ready_max_s: float = 0.0

    def add(self, ending_s: float, ready_s: float, handed: bool) -> None:
        self.count += handed
        self.ending_s += ending_s
        self.ready_s += ready_s
        self.ready_max_s = max(self.ready_max_s, ready_s)


def _discard(proc: subprocess.Popen | ForkedChild, sock: str) -> None:
    """End a process the pool has not handed out, and remove its socket."""
    end_process(proc)
    Path(sock).unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m sol_execbench.evaluate.parent.warm_pool")
    parser.add_argument("--device", default=None)
    parser.add_argument("--spares", type=int, default=2)
    parser.add_argument("--idle-timeout", type=float, default=900.0)
    parser.add_argument("--exit-with-pid", type=int, default=None)
    args = parser.parse_args(argv)
    PoolServer(args.device, args.spares, args.idle_timeout, args.exit_with_pid).serve()


if __name__ == "__main__":
    main()
