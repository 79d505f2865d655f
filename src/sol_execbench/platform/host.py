"""Host facts that need no torch."""

from __future__ import annotations

import importlib.util
import os
import platform
from pathlib import Path

CACHE_DIR_ENV = "SOL_EXECBENCH_CACHE_DIR"


def cache_root() -> Path:
    """The tool's cache folder: ``$SOL_EXECBENCH_CACHE_DIR``, else ``$XDG_CACHE_HOME/sol-execbench``,
    else ``~/.cache/sol-execbench``. Builds and probe caches live below it."""
    if os.environ.get(CACHE_DIR_ENV):
        return Path(os.environ[CACHE_DIR_ENV]).expanduser()
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser()
    return base / "sol-execbench"


def torch_dir() -> Path | None:
    """The installed ``torch`` package folder, found without importing torch."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    return Path(spec.origin).parent


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
            raw = open(path).read().strip()
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
