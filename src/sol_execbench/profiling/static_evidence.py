"""``--static-evidence auto``: what the compiler gave each kernel (registers, shared/LDS memory,
local memory, stack, spills), read without running it.

- CUDA C++ and the other native languages on NVIDIA: ``cuobjdump --dump-resource-usage`` on the
  library the build cache holds (asked of the builder with the same flags, so the cache key is the
  evaluation's and a cached build is not rebuilt);
- HIP C++ on ROCm: the AMDGPU code objects inside that library (found by their ELF header), their
  metadata notes read by ``llvm-readelf --notes``;
- Triton: the compiled kernels' metadata (``n_regs``, ``n_spills``, ``shared``), read in a child
  that has run each workload once.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import struct
import subprocess
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

from sol_execbench.build import BuildFailure, builder_for
from sol_execbench.build.base import write_sources
from sol_execbench.evaluate import EvalOptions
from sol_execbench.schema import BenchmarkConfig, Definition, Language, Solution, Workload
from sol_execbench.schema.profiling import KernelResources, StaticEvidenceSidecar

from .profile_run import run_profiling_child

_TOOL_TIMEOUT_S = 120
EM_AMDGPU = 224
_RESOURCE_LINE = re.compile(r"([A-Z_]+(?:\[\d+\])?):(\d+)")


# ------------------------------------------------------------------ tools


def find_cuobjdump() -> str | None:
    """cuobjdump on PATH, in the CUDA toolkit, or from a wheel (nvidia-cuda-cuobjdump; Triton ships one)."""
    found = shutil.which("cuobjdump")
    if found:
        return found
    roots = [os.environ.get("CUDA_HOME", ""), os.environ.get("CUDA_PATH", ""), "/usr/local/cuda"]
    candidates = [os.path.join(r, "bin", "cuobjdump") for r in roots if r]
    site = sysconfig.get_paths().get("purelib", "")
    for pattern in ("nvidia/cu*/bin/cuobjdump", "nvidia/cuda_cuobjdump/bin/cuobjdump", "triton/backends/nvidia/bin/cuobjdump"):
        candidates += sorted(glob.glob(os.path.join(site, pattern)))
    return next((c for c in candidates if os.access(c, os.X_OK)), None)


def find_llvm_readelf() -> str | None:
    found = shutil.which("llvm-readelf") or next((shutil.which(f"llvm-readelf-{v}") for v in range(22, 13, -1)
                                                  if shutil.which(f"llvm-readelf-{v}")), None)
    rocm = "/opt/rocm/llvm/bin/llvm-readelf"
    return found or (rocm if os.access(rocm, os.X_OK) else None)


def _run(command: list[str]) -> tuple[str | None, str | None]:
    """(stdout, None) or (None, why it failed)."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=_TOOL_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{Path(command[0]).name} failed: {exc}"
    if done.returncode != 0:
        return None, f"{Path(command[0]).name} exited with {done.returncode}: {(done.stderr or done.stdout)[-400:].strip()}"
    return done.stdout, None


# ------------------------------------------------------------------ NVIDIA


def parse_cuobjdump_resource_usage(text: str) -> list[KernelResources]:
    """``cuobjdump --dump-resource-usage`` output: per ``Function <mangled>:`` line, its
    ``REG:n STACK:n SHARED:n LOCAL:n CONSTANT[i]:n ...`` line, under the ``arch = sm_XX`` it follows."""
    kernels = []
    arch = None
    lines = text.splitlines()
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("arch ="):
            arch = stripped.split("=", 1)[1].strip()
        if not stripped.startswith("Function ") or not stripped.endswith(":") or i + 1 >= len(lines):
            continue
        values = {k: int(v) for k, v in _RESOURCE_LINE.findall(lines[i + 1])}
        details: dict[str, object] = {k: v for k, v in values.items() if k not in ("REG", "STACK", "SHARED", "LOCAL")}
        kernels.append(KernelResources(name=stripped[len("Function "):-1].strip(), source="cuobjdump", arch=arch,
                                       registers=values.get("REG"), shared_bytes=values.get("SHARED"),
                                       local_bytes=values.get("LOCAL"), stack_bytes=values.get("STACK"),
                                       details=details))
    return kernels


def cuda_resources(library: Path) -> tuple[list[KernelResources], list[str]]:
    tool = find_cuobjdump()
    if tool is None:
        return [], ["cuobjdump not found (PATH, CUDA_HOME/bin, /usr/local/cuda/bin, or pip install nvidia-cuda-cuobjdump)"]
    text, error = _run([tool, "--dump-resource-usage", str(library)])
    if text is None:
        return [], [error or "cuobjdump failed"]
    kernels = parse_cuobjdump_resource_usage(text)
    return kernels, [] if kernels else [f"cuobjdump listed no kernel functions in {library}"]


# ------------------------------------------------------------------ AMD


def _kv(body: str) -> tuple[str, str]:
    key, _, value = body.partition(":")
    return key.strip(), value.strip()


def parse_amdgpu_notes(text: str) -> list[KernelResources]:
    """The ``amdhsa.kernels`` list of ``llvm-readelf --notes`` output (the NT_AMDGPU_METADATA note
    printed as YAML): each kernel's own keys, not those of its nested ``.args``."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == "amdhsa.kernels:"), None)
    if start is None:
        return []
    target = next((_kv(line.strip())[1] for line in lines if line.strip().startswith("amdhsa.target:")), "")
    arch = target.rsplit("-", 1)[-1] or None
    base = len(lines[start]) - len(lines[start].lstrip())
    entries: list[dict[str, str]] = []
    item_indent = key_indent = None
    for line in lines[start + 1:]:
        body = line.strip()
        if not body:
            continue
        indent = len(line) - len(line.lstrip())
        if indent <= base and not body.startswith("-"):
            break
        if body.startswith("- ") and (item_indent is None or indent == item_indent):
            item_indent, key_indent = indent, indent + 2
            entries.append({})
            body = body[2:].strip()
        elif indent != key_indent:
            continue
        if entries and body.startswith("."):
            key, value = _kv(body)
            entries[-1][key] = value
    return [_amd_kernel(entry, arch) for entry in entries if entry.get(".name")]


def _int(entry: dict[str, str], key: str) -> int | None:
    try:
        return int(entry[key])
    except (KeyError, ValueError):
        return None


def _amd_kernel(entry: dict[str, str], arch: str | None) -> KernelResources:
    spills = [v for v in (_int(entry, ".vgpr_spill_count"), _int(entry, ".sgpr_spill_count")) if v is not None]
    details: dict[str, object] = {k.lstrip("."): _int(entry, k) for k in (".agpr_count", ".wavefront_size",
                                                                          ".max_flat_workgroup_size", ".vgpr_spill_count",
                                                                          ".sgpr_spill_count") if _int(entry, k) is not None}
    return KernelResources(name=entry[".name"], source="amdgpu-metadata", arch=arch, registers=_int(entry, ".vgpr_count"),
                           scalar_registers=_int(entry, ".sgpr_count"),
                           shared_bytes=_int(entry, ".group_segment_fixed_size"),
                           local_bytes=_int(entry, ".private_segment_fixed_size"),
                           spills=sum(spills) if spills else None, details=details)


def amdgpu_code_objects(data: bytes) -> tuple[list[bytes], list[str]]:
    """The AMDGPU ELF code objects inside a file (a HIP library's offload bundle holds them whole;
    the file itself may be one). Compressed bundles (``CCOB``) cannot be read this way: noted."""
    found, notes = [], []
    at = data.find(b"\x7fELF")
    while at >= 0:
        header = data[at:at + 64]
        if len(header) == 64 and header[4] == 2 and struct.unpack_from("<H", header, 18)[0] == EM_AMDGPU:
            shoff, = struct.unpack_from("<Q", header, 0x28)
            shentsize, shnum = struct.unpack_from("<HH", header, 0x3A)
            end = at + shoff + shentsize * shnum
            if shoff and end <= len(data):
                found.append(data[at:end])
                at = data.find(b"\x7fELF", end)
                continue
        at = data.find(b"\x7fELF", at + 4)
    if not found and b"CCOB" in data:
        notes.append("the library's offload bundle is compressed (CCOB): build without --offload-compress to read it")
    return found, notes


def amd_resources(library: Path) -> tuple[list[KernelResources], list[str]]:
    tool = find_llvm_readelf()
    if tool is None:
        return [], ["llvm-readelf not found (PATH, /opt/rocm/llvm/bin; apt install llvm)"]
    try:
        objects, errors = amdgpu_code_objects(library.read_bytes())
    except OSError as exc:
        return [], [f"{library}: {exc}"]
    if not objects:
        return [], errors or [f"no AMDGPU code object found in {library}"]
    kernels: list[KernelResources] = []
    with tempfile.TemporaryDirectory(prefix="sol-execbench-amdgpu-") as folder:
        for index, blob in enumerate(objects):
            path = Path(folder) / f"code_object_{index}.o"
            path.write_bytes(blob)
            text, error = _run([tool, "--notes", str(path)])
            if text is None:
                errors.append(error or "llvm-readelf failed")
                continue
            kernels.extend(parse_amdgpu_notes(text))
    return kernels, errors


# ------------------------------------------------------------------ Triton


def triton_resources(entries: list[dict[str, Any]]) -> list[KernelResources]:
    """The child's reading of Triton's compiled kernels (``profile_calls.triton_kernels``)."""
    out = []
    for entry in entries:
        details = {k: entry[k] for k in ("num_warps", "num_stages") if entry.get(k) is not None}
        out.append(KernelResources(name=str(entry["name"]), source="triton", arch=entry.get("target"),
                                   registers=entry.get("n_regs"), spills=entry.get("n_spills"),
                                   shared_bytes=entry.get("shared"), details=details))
    return out


# ------------------------------------------------------------------ the sidecar


def _native_library(solution: Solution, base: EvalOptions, vendor: str) -> tuple[Path | None, str | None]:
    """The library the build cache holds for this solution (built now only if the cache lacks it)."""
    with tempfile.TemporaryDirectory(prefix="sol-execbench-static-") as folder:
        source_dir = Path(folder) / "solution"
        write_sources(solution, source_dir)
        try:
            outcome = builder_for(solution).prepare(solution, source_dir, vendor=vendor, timeout_s=base.compile_timeout_s,
                                                    use_cache=True, isolation=base.isolation)
        except BuildFailure as exc:
            return None, f"the build failed: {exc.message[-400:]}"
    library = outcome.artifacts.get("library")
    return (Path(library), None) if library else (None, "the build left no library to read")


def static_evidence(definition: Definition, workloads: list[Workload], solution: Solution, config: BenchmarkConfig,
                    base: EvalOptions, vendor: str) -> StaticEvidenceSidecar:
    languages = [lang.value for lang in solution.spec.languages]
    sidecar = StaticEvidenceSidecar(definition=definition.name, solution=solution.name, language=",".join(languages))
    if solution.spec.is_native:
        library, why = _native_library(solution, base, vendor)
        if library is None:
            sidecar.errors.append(why or "no library")
            return sidecar
        sidecar.sources.append(str(library))
        amd = vendor == "rocm" or Language.HIP_CPP.value in languages
        kernels, errors = amd_resources(library) if amd else cuda_resources(library)
        sidecar.kernels.extend(kernels)
        sidecar.errors.extend(errors)
    if Language.TRITON.value in languages:
        with tempfile.TemporaryDirectory(prefix="sol-execbench-static-") as folder:
            outcome = run_profiling_child(definition, workloads, solution, config, base, "none", [], 1, Path(folder),
                                          triton_metadata=True)
        entries = [e for msg in outcome.messages.values() for e in msg.get("triton_kernels", [])]
        sidecar.sources.append("the Triton kernels compiled in a child that ran each workload once")
        sidecar.kernels.extend(triton_resources(entries))
        if not entries:
            failed = next((m.get("error") for m in outcome.messages.values() if m.get("error")), None)
            sidecar.errors.append(failed or "no compiled Triton kernel was found in the child (the CPU interprets "
                                            "Triton kernels: nothing is compiled there)")
    if not solution.spec.is_native and Language.TRITON.value not in languages:
        sidecar.errors.append(f"no static evidence for {', '.join(languages)} solutions: their kernels are PyTorch's "
                              "own or compiled at run time")
    return sidecar
