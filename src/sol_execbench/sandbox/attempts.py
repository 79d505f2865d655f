"""Seeing what a solution tried: an audit hook that records writes outside the run, signals and
network connections, and digests of the harness's files checked after each call.

The sandbox refuses these operations; this module is how a refused (or, unsandboxed, a succeeded)
attempt becomes a verdict instead of a silent PASS. Attempts on the harness, a cache, the output or
another process are exploits (REWARD_HACK); a refused write elsewhere (``/tmp``) is a plain failure
(RUNTIME_ERROR). Python-level events only: a native library writing through libc is still refused by
the sandbox, and its effect on the harness's files is caught by the digests.
"""

from __future__ import annotations

import hashlib
import os
import socket
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
# The arguments of each audit event that name a path it changes (a rename changes both ends).
_PATH_EVENTS = {"os.remove": (0,), "os.rmdir": (0,), "os.mkdir": (0,), "os.rename": (0, 1), "os.replace": (0, 1),
                "os.truncate": (0,), "os.symlink": (1,), "os.link": (1,), "os.chmod": (0,), "os.chown": (0,),
                "os.utime": (0,), "shutil.rmtree": (0,)}


@dataclass(frozen=True)
class Attempt:
    operation: str  # "write", "signal", "network", "socket"
    target: str
    exploit: bool
    why: str  # what the target is, e.g. "the harness's installed files"

    def describe(self) -> str:
        return f"{self.operation} {self.target} ({self.why})"


@dataclass(frozen=True)
class Protected:
    """Folders and files whose change is an exploit, each with what it is."""

    places: tuple[tuple[Path, str], ...]

    def what(self, path: Path) -> str | None:
        for place, label in self.places:
            if path == place or place in path.parents:
                return label
        return None


class AttemptLog:
    """Records, once armed, what the solution tried outside its run (an audit hook cannot be removed)."""

    def __init__(self, private: list[Path], protected: Protected, sandboxed: bool):
        self.private = [p.resolve() for p in private] + [Path("/dev")]
        self.protected, self.sandboxed = protected, sandboxed
        self.attempts: list[Attempt] = []
        self.armed = False
        self.session = os.getsid(0)
        sys.addaudithook(self._hook)

    def take(self) -> list[Attempt]:
        """Attempts since the last call."""
        taken, self.attempts = self.attempts, []
        return taken

    def _hook(self, event: str, args: tuple) -> None:
        if not self.armed:
            return
        try:
            if event == "open":
                self._on_open(args)
            elif event in _PATH_EVENTS:
                for index in _PATH_EVENTS[event]:
                    self._on_path(event, args[index])
            elif event in ("os.kill", "os.killpg"):
                self._on_signal(event, int(args[0]), int(args[1]))
            elif event in ("socket.connect", "socket.bind", "socket.sendto"):
                self._on_socket(event, args[0], args[1])
        except Exception:  # noqa: BLE001  (an audit hook that raises would break the call it watches)
            pass

    def _on_open(self, args: tuple) -> None:
        path, mode, flags = args
        if isinstance(path, int) or path is None:
            return
        writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (mode is None and flags & _WRITE_FLAGS)
        if writes:
            self._on_path("write", path)

    def _on_path(self, event: str, raw: object) -> None:
        if isinstance(raw, int) or raw is None:
            return
        path = Path(os.path.realpath(os.fsdecode(raw)))  # a link into a protected folder counts as that folder
        if any(path == p or p in path.parents for p in self.private):
            return
        operation = "write" if event == "write" else event
        what = self.protected.what(path)
        if what is not None:
            self.attempts.append(Attempt(operation, str(path), True, what))
        elif self.sandboxed:
            self.attempts.append(Attempt(operation, str(path), False, "outside the run's private folder"))

    def _on_signal(self, event: str, pid: int, sig: int) -> None:
        if pid == os.getpid() or sig == 0:
            return
        if pid > 0 and pid != os.getppid() and _session_of(pid) == self.session:
            return  # the solution's own processes (the parent, a supervisor in the same session, is not)
        self.attempts.append(Attempt("signal", f"{event}({pid}, {sig})", True, "a process outside the run"))

    def _on_socket(self, event: str, sock: object, address: object) -> None:
        family = getattr(sock, "family", None)
        if family in (socket.AF_INET, socket.AF_INET6):
            self.attempts.append(Attempt("network", f"{event} {address}", True, "network access"))
        elif family == socket.AF_UNIX and isinstance(address, (str, bytes)):
            name = os.fsdecode(address)
            if name.startswith("\0") or not any(Path(name).resolve().is_relative_to(p) for p in self.private):
                self.attempts.append(Attempt("socket", f"{event} {name!r}", True, "a socket outside the run"))


def _session_of(pid: int) -> int | None:
    try:
        return os.getsid(pid)
    except OSError:
        return None


class TreeDigest:
    """sha256 of every file under some folders (the harness's own source tree), to compare later.

    ``changed`` hashes again only the files whose (inode, size, mtime, ctime) moved: a write
    always moves the ctime, which no unprivileged process can set back, and hashing the whole
    tree after every workload cost about 7 ms of each workload's time."""

    def __init__(self, roots: list[Path], suffixes: tuple[str, ...] = (".py",)):
        self.roots, self.suffixes = roots, suffixes
        self.signatures = self._signatures()
        self.digests = {path: self._hash(path) for path in self.signatures}

    def _signatures(self) -> dict[str, tuple[int, int, int, int]]:
        out = {}
        for root in self.roots:
            for folder, _, files in os.walk(root):
                for name in files:
                    if os.path.splitext(name)[1] not in self.suffixes:
                        continue
                    path = os.path.join(folder, name)
                    try:
                        st = os.stat(path)
                    except OSError:
                        continue
                    if stat.S_ISREG(st.st_mode):
                        out[path] = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        return out

    @staticmethod
    def _hash(path: str) -> str:
        try:
            return file_sha256(Path(path))
        except OSError:
            return "unreadable"

    def changed(self) -> list[str]:
        now = self._signatures()
        moved = [p for p in set(now) | set(self.signatures) if now.get(p) != self.signatures.get(p)]
        return sorted(p for p in moved
                      if p not in now or p not in self.digests or self._hash(p) != self.digests[p])


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
