"""Block ``host``: kernel, C library, CPU, memory, and whether we run in a container."""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path
from typing import Any

from sol_execbench.platform import host_memory_bytes
from sol_execbench.platform.host import cpu_model

from ._common import Reasons, read_text

_CONTAINER_ID = re.compile(r"(?:docker|containers|libpod|crio|cri-containerd)[-/]([0-9a-f]{64})")


def empty() -> dict[str, Any]:
    return {
        "hostname": None,
        "kernel_release": None,
        "kernel_version": None,
        "machine": None,
        "os_release": None,
        "glibc_version": None,
        "cpu_model": None,
        "cpu_count": None,
        "cpu_governor": None,
        "numa_nodes": None,
        "memory_bytes": None,
        "container": {"type": None, "id": None, "image_digest": None},
    }


def parse_os_release(text: str) -> str | None:
    """``PRETTY_NAME`` of an /etc/os-release text (falls back to ``NAME VERSION_ID``)."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            fields[key.strip()] = value.strip().strip('"')
    if "PRETTY_NAME" in fields:
        return fields["PRETTY_NAME"]
    joined = " ".join(v for v in (fields.get("NAME"), fields.get("VERSION_ID")) if v)
    return joined or None


def container_id(*texts: str | None) -> str | None:
    """The 64-hex container id named in /proc/self/cgroup or /proc/self/mountinfo, if any."""
    for text in texts:
        match = _CONTAINER_ID.search(text or "")
        if match:
            return match.group(1)
    return None


def container_type(environ: dict[str, str], root: Path = Path("/"), cgroup: str | None = None) -> str:
    """docker, podman, kubernetes, lxc, wsl, or none."""
    if "KUBERNETES_SERVICE_HOST" in environ:
        return "kubernetes"
    if (root / "run/.containerenv").exists() or environ.get("container") == "podman":
        return "podman"
    if (root / ".dockerenv").exists() or "docker" in (cgroup or ""):
        return "docker"
    if environ.get("container") == "lxc" or "/lxc/" in (cgroup or ""):
        return "lxc"
    if "WSL_DISTRO_NAME" in environ:
        return "wsl"
    return "none"


def _numa_nodes() -> int | None:
    try:
        return len([n for n in os.listdir("/sys/devices/system/node") if re.fullmatch(r"node\d+", n)]) or None
    except OSError:
        return None


def _glibc() -> str | None:
    try:
        value = os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError, AttributeError):
        return None
    return value.split()[-1] if value else None


def probe() -> tuple[dict[str, Any], list[str]]:
    block, why = empty(), Reasons("host")
    uname = os.uname()
    block.update(
        hostname=socket.gethostname() or None,
        kernel_release=uname.release,
        kernel_version=uname.version,
        machine=uname.machine,
        cpu_model=cpu_model(),
        cpu_count=os.cpu_count(),
        numa_nodes=_numa_nodes(),
        memory_bytes=host_memory_bytes(),
    )
    block["glibc_version"] = _glibc()
    if block["glibc_version"] is None:
        why.add("glibc_version", "os.confstr(CS_GNU_LIBC_VERSION) gave nothing (not a glibc system?)")
    os_release = read_text("/etc/os-release")
    block["os_release"] = parse_os_release(os_release) if os_release else None
    if block["os_release"] is None:
        why.add("os_release", "/etc/os-release is missing or has no PRETTY_NAME")
    governor = read_text("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
    block["cpu_governor"] = governor.strip() if governor else None  # null: no cpufreq (VMs, containers)
    cgroup = read_text("/proc/self/cgroup")
    kind = container_type(dict(os.environ), cgroup=cgroup)
    block["container"] = {
        "type": kind,
        "id": container_id(cgroup, read_text("/proc/self/mountinfo")) if kind != "none" else None,
        "image_digest": os.environ.get("SOL_EXECBENCH_IMAGE_DIGEST"),
    }
    return block, why.lines
