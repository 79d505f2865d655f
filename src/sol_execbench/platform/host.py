"""Host facts that need no torch."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import platform
import signal
import socket
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

CACHE_DIR_ENV = "SOL_EXECBENCH_CACHE_DIR"
BYTECODE_CACHE_ENV = "SOL_EXECBENCH_BYTECODE_CACHE"


def runtime_dir() -> Path:
    """This user's private folder (0700) for the warm pool's sockets, logs and GPU locks."""
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    if len(base) > 60:  # socket paths inside must stay under the 107-byte limit of AF_UNIX
        base = "/tmp"
    path = Path(base) / f"sol-execbench-{os.getuid()}"
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    return path


def runtime_socket(prefix: str) -> Path:
    """A new socket path in the runtime folder named after this process
    (``<prefix><pid>-<random>.sock``), so that ``remove_orphaned_sockets`` knows whose it is."""
    return runtime_dir() / f"{prefix}{os.getpid()}-{uuid.uuid4().hex[:12]}.sock"


def pending_socket_path(path: str) -> str:
    """Where ``listening_socket`` binds a socket meant for ``path`` (a ``.sock`` name) until it
    listens: as long as ``path`` (a socket's path has a length limit), ending ``.soc~``, so that
    ``remove_orphaned_sockets`` finds it as well."""
    return path[:-1] + "~"


def listening_socket(path: str, backlog: int = 1) -> socket.socket:
    """A Unix socket listening on ``path`` (``backlog`` connections may wait), which only this user
    may connect to. The path appears only once it listens, so whoever sees it may connect at once (a
    connection between bind and listen is refused): bound under ``pending_socket_path``, then
    renamed."""
    pending = pending_socket_path(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(pending)
    os.chmod(pending, 0o600)
    listener.listen(backlog)
    os.rename(pending, path)
    return listener


def remove_orphaned_sockets(prefix: str) -> None:
    """Sockets named by ``runtime_socket(prefix)`` whose process is gone: it was killed before it
    could remove them (or, bound under ``pending_socket_path``, before it listened)."""
    for path in runtime_dir().glob(f"{prefix}*.soc[k~]"):
        pid = path.name[len(prefix):].split("-", 1)[0]
        if pid.isdigit() and not process_alive(int(pid)):
            with contextlib.suppress(OSError):
                path.unlink()


def cache_root() -> Path:
    """The tool's cache folder: ``$SOL_EXECBENCH_CACHE_DIR``, else ``$XDG_CACHE_HOME/sol-execbench``,
    else ``~/.cache/sol-execbench``. Builds and probe caches live below it."""
    if os.environ.get(CACHE_DIR_ENV):
        return Path(os.environ[CACHE_DIR_ENV]).expanduser()
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser()
    return base / "sol-execbench"


# Distributions that install the ``triton`` package, as pip names them.
TRITON_DISTRIBUTIONS = ("triton", "triton-rocm", "pytorch-triton", "pytorch-triton-rocm")


def distribution_version(name: str) -> str | None:
    """The installed version of distribution ``name``, or None when it is not installed."""
    import importlib.metadata  # here: 10 to 14 ms that every command line's start would pay

    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None
    except Exception:  # noqa: BLE001 - a broken dist-info is "unknown", not a crash
        return None


def torch_dir() -> Path | None:
    """The installed ``torch`` package folder, found without importing torch."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    return Path(spec.origin).parent


def bytecode_cache_prefix(env: dict[str, str], package: Path | None = None,
                          dont_write: bool | None = None) -> str | None:
    """A folder for the compiled bytecode of the tool's Python processes when a package's own is not kept.

    Where torch was installed without ``__pycache__`` files, and Python may not write them beside
    it (a folder this user cannot write, or ``PYTHONDONTWRITEBYTECODE`` as container images often
    set), every fresh interpreter compiles each imported torch module from source: 6 s of a 24 s
    evaluation on the H100 machine here (the profiler pulls in torch._dynamo and sympy), and again
    in every native build's compile process. The children then keep their bytecode under the
    tool's cache (``PYTHONPYCACHEPREFIX``). Not used where the package's bytecode exists (the prefix
    would make Python ignore it), where the user chose a prefix, or with
    ``SOL_EXECBENCH_BYTECODE_CACHE=0``. ``package``: the package to look at (default torch);
    ``dont_write``: whether Python may not write bytecode (default: ``PYTHONDONTWRITEBYTECODE``)."""
    return bytecode_source(env, package, dont_write)[1]


def bytecode_source(env: dict[str, str], package: Path | None = None,
                    dont_write: bool | None = None) -> tuple[str, str | None]:
    """Where ``package``'s modules load their bytecode from, and the tool's cache folder where that
    is the answer (else None): ``"no package"``, ``"beside"`` (kept beside the sources),
    ``"written beside"`` (Python writes it there on first use), ``"user prefix"``
    (``PYTHONPYCACHEPREFIX``), ``"off"`` (none: ``SOL_EXECBENCH_BYTECODE_CACHE=0``, compiled each
    time) or ``"cache"``. Arguments as for ``bytecode_cache_prefix``."""
    package = package or torch_dir()
    if package is None:
        return "no package", None
    if bytecode_kept_beside(package / "__init__.py"):
        return "beside", None
    dont_write = bool(env.get("PYTHONDONTWRITEBYTECODE")) if dont_write is None else dont_write
    if os.access(package, os.W_OK) and not dont_write:
        return "written beside", None
    if env.get("PYTHONPYCACHEPREFIX"):
        return "user prefix", None
    if env.get(BYTECODE_CACHE_ENV) == "0":
        return "off", None
    return "cache", str(cache_root() / "pycache")


def bytecode_kept_beside(source: Path) -> bool:
    """Whether ``source``'s bytecode is where Python keeps it without a prefix. Not
    ``cache_from_source``: it answers under ``sys.pycache_prefix`` once this process has one
    (``use_bytecode_cache_here``), where the children's own copy of torch's bytecode would pass for
    torch's, and no child after the first would be given the cache."""
    return (source.parent / "__pycache__" / f"{source.stem}.{sys.implementation.cache_tag}.pyc").exists()


def use_bytecode_cache(env: dict[str, str]) -> dict[str, str]:
    """Point a child's environment (changed in place, and returned) at the bytecode cache above."""
    prefix = bytecode_cache_prefix(env)
    if prefix:
        env["PYTHONPYCACHEPREFIX"] = prefix
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def use_bytecode_cache_here() -> str | None:
    """The same for the command-line process itself, before it imports the tool's commands: with
    no bytecode kept beside this package, each ``sol-execbench`` call compiled some 110 modules
    (the tool's and pydantic's) from source, 0.45 s of a 2.8 s evaluation on the H100 machine.
    Only the CLI calls this; a process that imports the package as a library keeps its settings."""
    if sys.pycache_prefix:
        return None
    prefix = bytecode_cache_prefix(dict(os.environ), Path(__file__).resolve().parent.parent,
                                   dont_write=sys.dont_write_bytecode)
    if prefix:
        sys.pycache_prefix, sys.dont_write_bytecode = prefix, False
    return prefix


CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100  # /proc stat times count in these


@dataclass(frozen=True)
class ProcessInfo:
    pid: int
    ppid: int
    session: int
    state: str  # R, S, D, Z (zombie), X (dead), ...
    cpu_ms: float  # user + system time so far


def process_table() -> dict[int, ProcessInfo]:
    """Every process /proc shows (Linux; empty elsewhere), read from ``/proc/<pid>/stat``."""
    found: dict[int, ProcessInfo] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if entry.isdigit() and (info := _read_stat(int(entry))) is not None:
            found[info.pid] = info
    return found


def _read_stat(pid: int) -> ProcessInfo | None:
    """``/proc/<pid>/stat`` (None for a process gone or unreadable)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        return ProcessInfo(pid, int(fields[1]), int(fields[3]), fields[0].decode(),
                           (int(fields[11]) + int(fields[12])) * 1000.0 / CLK_TCK)
    except (OSError, IndexError, ValueError):
        return None


class ProcessScan:
    """The processes of interest among those /proc shows, re-read cheaply.

    A full ``process_table`` reads every process's stat file (15 ms with 80 processes on a loaded
    two-core machine, 3 ms with 183 on an H200 host), and both the run's session watch (every 50 ms)
    and the child's activity watch (before and after each workload's timed calls) poll. ``related``
    picks, from the processes read, those of interest; a process that was not, is not later either
    for the predicates used here (its session only changes to its own, by ``setsid``; its parent
    only to init or a subreaper), so its stat file is not read again. Every ``full_scan_s`` all of
    them are, in case a pid was reused; a pid gone from /proc is read when it appears again."""

    def __init__(self, related: Callable[[dict[int, ProcessInfo]], set[int]], full_scan_s: float = 2.0):
        self.related, self.full_scan_s = related, full_scan_s
        self._unrelated: set[int] = set()
        self._scanned = float("-inf")

    def __call__(self) -> dict[int, ProcessInfo]:
        try:
            pids = {int(entry) for entry in os.listdir("/proc") if entry.isdigit()}
        except OSError:
            return {}
        now = time.monotonic()
        if now - self._scanned > self.full_scan_s:
            self._unrelated, self._scanned = set(), now
        self._unrelated &= pids
        table = {pid: info for pid in pids - self._unrelated if (info := _read_stat(pid)) is not None}
        related = self.related(table)
        self._unrelated |= set(table) - related
        return {pid: table[pid] for pid in related}


class SessionWatch:
    """The live processes of one session, polled often and cheaply (``ProcessScan``)."""

    def __init__(self, session_id: int, refresh_s: float = 2.0):
        self.session_id = session_id
        self._scan = ProcessScan(lambda table: {pid for pid, info in table.items() if info.session == session_id},
                                 refresh_s)

    def members(self) -> list[int]:
        return [pid for pid, info in self._scan().items() if info.state not in ("Z", "X")]


def process_alive(pid: int) -> bool:
    """Whether ``pid`` names a live process (a zombie is not), as this process's /proc shows it."""
    info = _read_stat(pid)
    return info is not None and info.state not in ("Z", "X")


def session_processes(session_id: int) -> list[int]:
    """Live (not zombie) processes whose session is ``session_id``."""
    return [p.pid for p in process_table().values() if p.session == session_id and p.state not in ("Z", "X")]


def kill_session(session_id: int, settle_s: float = 5.0) -> None:
    """SIGKILL the process group ``session_id`` and every live process of that session, until none
    is left (bounded by ``settle_s``; one sweep of the session at least). A process may move to a
    group of its own inside the session (ninja does so for every command it runs), which a group
    kill misses; only ``setsid`` leaves it."""
    try:
        os.killpg(session_id, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    end = time.monotonic() + settle_s
    while members := session_processes(session_id):  # at least one sweep, even with settle_s=0
        for pid in members:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if time.monotonic() >= end:
            break
        time.sleep(0.02)


def host_loaded() -> bool:
    """More runnable threads than cores over the last minute (load average), where readable."""
    try:
        return os.getloadavg()[0] > (os.cpu_count() or 1)
    except (OSError, AttributeError):
        return False


def host_memory_bytes() -> int | None:
    """Physical memory of the host (cgroup limit when lower), or None if unreadable."""
    total: int | None = None
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        pass
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as fh:
                raw = fh.read().strip()
        except OSError:
            continue
        if raw.isdigit() and (total is None or int(raw) < total):
            total = int(raw)
    return total


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "CPU"


def cpu_l2_bytes() -> int | None:
    try:
        raw = open("/sys/devices/system/cpu/cpu0/cache/index2/size").read().strip()
    except OSError:
        return None
    units = {"K": 1024, "M": 1024**2}
    if raw and raw[-1] in units and raw[:-1].isdigit():
        return int(raw[:-1]) * units[raw[-1]]
    return int(raw) if raw.isdigit() else None
