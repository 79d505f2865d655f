"""The ``-o`` file: traces appended one complete line at a time, each flushed and fsynced the
moment it is known, under an exclusive lock so that two runs sharing the file keep every line.

Appending (not a temporary file renamed at the end) is what lets a run killed at any moment leave
every finished trace in place, and it never destroys what the file held before: a re-run adds
lines after the earlier ones, and says which earlier workloads its lines supersede."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
import sys
from pathlib import Path
from typing import Callable


class OutputRefused(Exception):
    """``-o`` cannot be used (it names an input, or cannot be opened); a one-line reason."""


def same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        try:
            return a.resolve() == b.resolve()
        except (OSError, ValueError, RuntimeError):
            return False


class TraceOutput:
    """Append-only trace JSONL at ``path``; ``note`` prints one line on stderr."""

    def __init__(self, path: Path, note: Callable[[str], None]):
        self.path, self.note = path, note
        self.fd: int | None = None
        self.start = 0  # where this run's lines begin
        self.written: list[bytes] = []
        self.failed: OSError | None = None

    def open(self, inputs: list[Path], run_keys: set[tuple[str, str, str]]) -> None:
        for source in inputs:
            if same_file(self.path, source):
                raise OutputRefused(f"--output {self.path} is an input of this run ({source}): give another file, "
                                    "traces are never written over an input")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except (OSError, ValueError) as exc:
            raise OutputRefused(f"cannot write --output {self.path}: {exc}") from None
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.note(f"waiting for another run writing {self.path} to finish (file lock)")
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        except OSError:
            pass  # a file system without locks: appends of whole lines still do not interleave
        info = os.fstat(self.fd)
        if stat.S_ISREG(info.st_mode):
            self.start = info.st_size
            if self.start:
                self._note_replaced(run_keys)

    def _note_replaced(self, run_keys: set[tuple[str, str, str]]) -> None:
        lines = superseded = 0
        try:
            with open(self.path, "rb") as fh:
                for raw in fh:
                    lines += 1
                    try:
                        record = json.loads(raw)
                        key = (record["definition"], record["solution"], record["workload"]["uuid"])
                    except (ValueError, KeyError, TypeError, RecursionError):
                        continue
                    superseded += key in run_keys
        except OSError:
            return
        self.note(f"{self.path} already holds {lines} line(s); this run appends after them"
                  + (f", and its traces supersede {superseded} earlier trace(s) of the same workloads "
                     "(the later line of a workload is the newer)" if superseded else ""))

    def write(self, line: str) -> None:
        data = line.encode() + b"\n"
        if self.failed is None and self.fd is not None:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(self.fd, view):]
                os.fsync(self.fd)
                self.written.append(data)
                return
            except OSError as exc:
                if exc.errno != errno.EINVAL:  # fsync of /dev/null and pipes is EINVAL: the write stands
                    self._fail(exc)
                else:
                    self.written.append(data)
                    return
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    def _fail(self, exc: OSError) -> None:
        """One error line; the complete lines already written stay, a partial one is cut off."""
        self.failed = exc
        good = self.start + sum(len(d) for d in self.written)
        try:
            if stat.S_ISREG(os.fstat(self.fd).st_mode):
                os.ftruncate(self.fd, good)
        except OSError:
            pass
        self.note(f"error: cannot write --output {self.path}: {exc.strerror or exc}; the {len(self.written)} "
                  "trace(s) written there stay, this and every later trace goes to stdout as a JSON line")

    def close(self) -> None:
        """Check that the lines after ``start`` are exactly this run's (a solution can find the
        path on the parent's command line and write into the file), rewrite them if not, unlock."""
        if self.fd is None:
            return
        try:
            if self.failed is None and stat.S_ISREG(os.fstat(self.fd).st_mode):
                expected = b"".join(self.written)
                with open(self.path, "rb") as fh:
                    fh.seek(self.start)
                    actual = fh.read(len(expected) + 1)
                if actual != expected:
                    os.ftruncate(self.fd, self.start)
                    os.write(self.fd, expected)
                    os.fsync(self.fd)
                    self.note(f"warning: {self.path} was modified by another process during the evaluation "
                              "(forged traces?); this run's lines were rewritten")
        except OSError as exc:
            self.note(f"error: could not verify --output {self.path}: {exc}")
        finally:
            os.close(self.fd)  # closing releases the lock
            self.fd = None
