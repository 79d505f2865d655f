"""Which GPU architectures a native build targets.

One table maps named parts (``target_hardware``) to archs. ``LOCAL`` means the GPUs present,
found without importing torch when a vendor tool answers (``nvidia-smi``, ``rocm_agent_enumerator``,
``rocminfo``), else by a short torch probe in a subprocess. ``PYTORCH_ROCM_ARCH`` overrides on
ROCm; arch flags written in the solution's own flags win over everything (then none are added).
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field

from sol_execbench.platform import cuda_arch_name
from sol_execbench.platform.parts import match_part

LOCAL = "LOCAL"
_TOOL_TIMEOUT_S = 15.0

# Named part -> (vendor, arch). The one home of this fact; keys are normalised (platform.parts).
TARGET_ARCHS: dict[str, tuple[str, str]] = {
    "B200": ("cuda", "sm_100a"), "GB200": ("cuda", "sm_100a"),
    "B300": ("cuda", "sm_103a"), "GB300": ("cuda", "sm_103a"),
    "H100": ("cuda", "sm_90a"), "H200": ("cuda", "sm_90a"), "H800": ("cuda", "sm_90a"),
    "H20": ("cuda", "sm_90a"), "GH200": ("cuda", "sm_90a"),
    "A100": ("cuda", "sm_80"), "A800": ("cuda", "sm_80"), "A10": ("cuda", "sm_86"), "A10G": ("cuda", "sm_86"),
    "L40S": ("cuda", "sm_89"), "L40": ("cuda", "sm_89"), "L4": ("cuda", "sm_89"), "RTX4090": ("cuda", "sm_89"),
    "RTX5090": ("cuda", "sm_120a"), "RTXPRO6000": ("cuda", "sm_120a"),
    "MI300X": ("rocm", "gfx942"), "MI300A": ("rocm", "gfx942"), "MI325X": ("rocm", "gfx942"),
    "MI350X": ("rocm", "gfx950"), "MI355X": ("rocm", "gfx950"),
    "MI250X": ("rocm", "gfx90a"), "MI250": ("rocm", "gfx90a"), "MI210": ("rocm", "gfx90a"),
    "MI100": ("rocm", "gfx908"),
}

# Flags that already choose the device arch (nvcc and hipcc spellings).
_EXPLICIT_ARCH = re.compile(r"^(-gencode|--generate-code|-arch\b|-arch=|--gpu-architecture|-code=|--gpu-code"
                            r"|--offload-arch|--amdgpu-target)")
_GFX = re.compile(r"\bgfx[0-9a-f]{3,4}\b")


class ArchError(Exception):
    """No arch could be chosen; the message says why and what to do."""


@dataclass(frozen=True)
class ArchChoice:
    archs: tuple[str, ...]  # sm_90a / gfx942; empty for host-only builds or explicit flags
    source: str  # "local", "named", "PYTORCH_ROCM_ARCH", "explicit flags", "host"
    notes: tuple[str, ...] = field(default=())

    def key(self) -> str:
        return f"{self.source}:{','.join(self.archs)}"


def lookup_target(name: str) -> tuple[str, str] | None:
    """(vendor, arch) of a named part; "NVIDIA H100 80GB HBM3" finds H100 (longest known prefix)."""
    key = match_part(name, TARGET_ARCHS)
    return TARGET_ARCHS[key] if key else None


def has_explicit_arch(flags: list[str]) -> bool:
    return any(_EXPLICIT_ARCH.match(flag.strip()) for flag in flags)


def explicit_rocm_archs(flags: list[str]) -> tuple[str, ...]:
    """gfx names in --offload-arch flags (torch needs them again as PYTORCH_ROCM_ARCH)."""
    found = [m for flag in flags if "offload-arch" in flag or "amdgpu-target" in flag for m in _GFX.findall(flag)]
    return tuple(dict.fromkeys(found))


def cuda_arch_flags(archs: tuple[str, ...]) -> list[str]:
    """nvcc flags for exactly these archs: SASS only, no PTX (only the needed arch is built)."""
    return [f"-gencode=arch=compute_{a.removeprefix('sm_')},code={a}" for a in archs]


def parse_compute_caps(text: str) -> tuple[str, ...]:
    """``nvidia-smi --query-gpu=compute_cap --format=csv,noheader`` -> (sm_90a, ...)."""
    archs = []
    for line in text.splitlines():
        match = re.match(r"^\s*(\d+)\.(\d+)\s*$", line)
        if match:
            archs.append(cuda_arch_name(int(match.group(1)), int(match.group(2))))
    return tuple(dict.fromkeys(archs))


def parse_rocm_agents(text: str) -> tuple[str, ...]:
    """``rocm_agent_enumerator`` (one gfx per line) or ``rocminfo`` (``Name: gfx942``) -> GPU archs.

    gfx000 is the CPU agent; feature suffixes (``:sramecc+:xnack-``) are dropped."""
    archs = []
    for line in text.splitlines():
        line = line.strip()
        match = re.match(r"^(?:Name:\s*)?(gfx[0-9a-f]+)(?::\S*)?$", line)
        if match and match.group(1) != "gfx000":
            archs.append(match.group(1))
    return tuple(dict.fromkeys(archs))


def _tool_output(argv: list[str]) -> str | None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=_TOOL_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def _rocm_tool(name: str) -> str:
    root = os.environ.get("ROCM_PATH") or os.environ.get("ROCM_HOME") or "/opt/rocm"
    candidate = os.path.join(root, "bin", name)
    return candidate if os.path.exists(candidate) else name


_PROBE = ("import json, torch\n"
          "from sol_execbench.platform import current\n"
          "n = torch.cuda.device_count() if torch.cuda.is_available() else 0\n"
          "print(json.dumps(sorted({current(str(i)).arch for i in range(n)})))\n")


def _torch_probe() -> tuple[str, ...]:
    """Last resort: ask torch in a subprocess (the parent does not import torch)."""
    out = _tool_output([sys.executable, "-c", _PROBE])
    try:
        return tuple(json.loads(out.strip().splitlines()[-1])) if out else ()
    except (ValueError, IndexError):
        return ()


@functools.lru_cache(maxsize=4)
def detect_local_archs(vendor: str) -> tuple[str, ...]:
    """Archs of the GPUs of ``vendor`` on this machine; empty when none is found."""
    if vendor == "cuda":
        out = _tool_output(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"])
        archs = parse_compute_caps(out) if out else ()
    elif vendor == "rocm":
        out = _tool_output([_rocm_tool("rocm_agent_enumerator")])
        archs = parse_rocm_agents(out) if out else ()
        if not archs:
            out = _tool_output([_rocm_tool("rocminfo")])
            archs = parse_rocm_agents(out) if out else ()
    else:
        return ()
    return archs or _torch_probe()


def _named_archs(targets: list[str], vendor: str) -> tuple[tuple[str, ...], list[str]]:
    archs, notes = [], []
    for name in targets:
        entry = lookup_target(name)
        if entry is None:
            notes.append(f"target_hardware '{name}' is not in the arch table; ignored")
        elif entry[0] == vendor:
            archs.append(entry[1])
    return tuple(dict.fromkeys(archs)), notes


def choose_archs(vendor: str, target_hardware: list[str], device_flags: list[str]) -> ArchChoice:
    """The archs to build for. Raises ArchError when none can be chosen."""
    if vendor not in ("cuda", "rocm"):
        return ArchChoice((), "host")
    if has_explicit_arch(device_flags):
        return ArchChoice(explicit_rocm_archs(device_flags) if vendor == "rocm" else (), "explicit flags")
    if vendor == "rocm" and os.environ.get("PYTORCH_ROCM_ARCH", "").strip():
        return ArchChoice(tuple(_GFX.findall(os.environ["PYTORCH_ROCM_ARCH"])), "PYTORCH_ROCM_ARCH")
    wants_local = not target_hardware or any(t.strip().upper() == LOCAL for t in target_hardware)
    named, notes = _named_archs([t for t in target_hardware if t.strip().upper() != LOCAL], vendor)
    if wants_local:
        local = detect_local_archs(vendor)
        if local:
            return ArchChoice(local, "local", tuple(notes))
        notes.append(f"target_hardware LOCAL: no {vendor.upper()} GPU found here; building for the named parts")
    if named:
        return ArchChoice(named, "named", tuple(notes))
    tool = "nvidia-smi" if vendor == "cuda" else "rocm_agent_enumerator/rocminfo"
    known = ", ".join(k for k, (v, _) in TARGET_ARCHS.items() if v == vendor)
    raise ArchError(f"no {vendor.upper()} arch to build for: target_hardware is {target_hardware or ['LOCAL']}, "
                    f"{'and ' + tool + ' found no GPU, ' if wants_local else ''}"
                    f"and no named part of this vendor is listed (known: {known}); "
                    f"name one, or put an explicit arch flag in compile_options.cuda_cflags")
