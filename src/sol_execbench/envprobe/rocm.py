"""Block ``rocm``: ROCm release, HIP toolchain, GPU agents, libraries, CK/Tensile/AOTriton, clocks.

A host with no ROCm installation, no ``/dev/kfd`` and no ROCm build of torch gets ``present:
false`` and no partial reasons (nothing is missing that should be there).
"""

from __future__ import annotations

import os
import re
from collections import Counter
from functools import partial
from typing import Any

from ._common import UNREAD, Context, Reasons, find_tool, read_text, rocm_root, run_command, run_parts, start_vendor_block
from .rocm_libs import ROCM_LIBS, aotriton, composable_kernel, describe, empty_library, parse_version_header, tensile
from .rocm_smi import empty as empty_smi
from .rocm_smi import read_smi


def empty() -> dict[str, Any]:
    return {
        "present": False,
        "rocm_path": None,
        "version": None,
        "version_header": None,
        "hip": {"version": None, "platform": None, "compiler": None, "runtime": None, "hip_path": None, "clang_version": None},
        "agents": {"agent_count": None, "gfx_targets": None, "arch_counts": None},
        "libraries": {lib.key: empty_library() for lib in ROCM_LIBS},
        "composable_kernel": {"version": None, "commit": None, "ck_tile_present": None},
        "tensile": {"package_version": None, "kernel_db_fingerprint": None, "kernel_db_files": None},
        "aotriton": {
            "bundled_present": None, "bundled_version": None, "bundled_lib_path": None, "bundled_lib_hash": None,
            "bundled_images_dir_present": None, "installed_prefix": None,
        },
        "smi": empty_smi(),
    }


def parse_info_version(text: str) -> str | None:
    """``$ROCM_PATH/.info/version``: ``6.2.0-66`` -> ``6.2.0-66`` (first non-empty line)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines and re.match(r"\d+\.\d+", lines[0]) else None


def parse_agents(text: str) -> dict[str, Any]:
    """``rocm_agent_enumerator`` output -> counts per gfx target, without the ``gfx000`` host-CPU agent."""
    agents = [line.strip() for line in text.splitlines() if re.fullmatch(r"gfx[0-9a-f]+", line.strip())]
    gpus = [a for a in agents if a != "gfx000"]
    counts = Counter(gpus)
    return {"agent_count": len(gpus), "gfx_targets": sorted(counts) or None, "arch_counts": dict(sorted(counts.items())) or None}


def parse_hipconfig_full(text: str) -> dict[str, Any]:
    """``hipconfig --full`` -> version, platform, compiler, runtime, HIP path, clang version line."""

    def field(name: str) -> str | None:
        match = re.search(rf"^\s*{name}\s*:\s*(.+?)\s*$", text, re.M)
        return match.group(1) if match else None

    clang = re.search(r"^(.*clang version .+)$", text, re.M)
    return {
        "version": field("HIP version"),
        "platform": field("HIP_PLATFORM"),
        "compiler": field("HIP_COMPILER"),
        "runtime": field("HIP_RUNTIME"),
        "hip_path": field("HIP_PATH"),
        "clang_version": clang.group(1).strip() if clang else None,
    }


def parse_hipconfig_version(text: str) -> str | None:
    """``hipconfig --version`` prints ``6.2.41133-dd7f95766`` (no newline on some releases)."""
    match = re.search(r"\d+\.\d+\.\d+[\w.\-]*", text)
    return match.group(0) if match else None


def installed() -> bool:
    """A ROCm installation or the amdgpu compute device is here (no torch needed to tell)."""
    return os.path.exists("/dev/kfd") or rocm_root().is_dir()


def _bin_dirs() -> tuple[str, ...]:
    return (str(rocm_root() / "bin"),)


def _hip(why: Reasons) -> dict[str, Any]:
    tool = find_tool("hipconfig", _bin_dirs())
    if tool is None:
        why.add("hip", "hipconfig is not on PATH or in $ROCM_PATH/bin")
        return empty()["hip"]
    full = run_command([tool, "--full"])
    if full.ok:
        return parse_hipconfig_full(full.stdout)
    short = run_command([tool, "--version"])
    why.add("hip", f"{full.error}; only the version was read" if short.ok else f"{full.error}; {short.error}")
    return {**empty()["hip"], "version": parse_hipconfig_version(short.stdout) if short.ok else None}


def _agents(why: Reasons) -> dict[str, Any]:
    tool = find_tool("rocm_agent_enumerator", _bin_dirs())
    if tool is None:
        why.add("agents", "rocm_agent_enumerator is not on PATH or in $ROCM_PATH/bin")
        return empty()["agents"]
    result = run_command([tool])
    if not result.ok:
        why.add("agents", result.error or "failed")
        return empty()["agents"]
    return parse_agents(result.stdout)


def _versions(block: dict[str, Any], why: Reasons) -> None:
    root = rocm_root()
    info = read_text(root / ".info" / "version")
    block["version"] = parse_info_version(info) if info else None
    if block["version"] is None:
        why.add("version", f"{root / '.info' / 'version'} missing or unreadable")
    header = read_text(root / "include" / "rocm-core" / "rocm_version.h")
    block["version_header"] = parse_version_header(header, "ROCM_VERSION_")[0] if header else None
    if block["version_header"] is None:
        why.add("version_header", f"{root / 'include/rocm-core/rocm_version.h'} missing or has no ROCM_VERSION_* lines")


def _smi(why: Reasons) -> dict[str, Any]:
    block, failure = read_smi()
    if failure:
        why.add("smi", failure)
    return block


def read_tools() -> tuple[dict[str, Any], list[str]] | None:
    """Release, HIP, agents, amd-smi and CK headers (needs no torch), or None without a ROCm install.

    The snapshot starts this before the torch import: hipconfig and amd-smi take a while.
    """
    if not installed():
        return None
    fields: dict[str, Any] = {"rocm_path": os.path.realpath(rocm_root())}
    why = Reasons("rocm")
    _versions(fields, why)
    results, lines = run_parts("rocm", {"hip": _hip, "agents": _agents, "smi": _smi})
    why.lines.extend(lines)
    fields.update(results)
    fields["composable_kernel"] = composable_kernel(why)
    return fields, why.lines


def probe(ctx: Context, tools: Any = UNREAD) -> tuple[dict[str, Any], list[str]]:
    """The whole block; ``tools`` is ``read_tools()``'s result when the caller ran it already."""
    block = empty()
    found = read_tools() if tools is UNREAD else tools
    cause = "ROCm build of torch but no ROCm installation ($ROCM_PATH or /opt/rocm) and no /dev/kfd"
    why = start_vendor_block(block, "rocm", found, ctx.hip_build, cause)
    if why is None:
        return block, []  # not a ROCm host: nothing is missing
    loaded = ctx.libraries()
    parts = {lib.key: partial(describe, lib, loaded, refresh=ctx.refresh) for lib in ROCM_LIBS}
    block["libraries"], lines = run_parts("rocm", parts)
    block["tensile"] = tensile(block["libraries"])
    block["aotriton"] = aotriton(ctx.refresh)
    return block, why.lines + lines
