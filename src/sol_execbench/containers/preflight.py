"""Preflight: can the selected target's container reach a GPU here, and does the observed Python
stack match the target's wheels? One ``DockerPreflight`` document, built from the environment
probe's snapshot, the device nodes, and (unless a dry run) the docker CLI; each
``SOL_EXECBENCH_*`` override replaces the one fact it names."""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from sol_execbench import __version__
from sol_execbench.envprobe._common import find_tool, run_command
from sol_execbench.envprobe.toolchain import detect_by_id
from sol_execbench.schema.containers import (ContainerPlatform, DependencyFacts, DeviceNode, DockerPreflight, DockerTarget,
                                             HostFacts, PreflightClassification, TargetSelection)

from .targets import TARGET_ENV

class OverrideError(ValueError):
    """An override variable whose value cannot stand for its fact (the message names both)."""


def _flag(name: str, text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise OverrideError(f"{name}={text!r}: give 1 or 0 (true or false)")


def _count(name: str, text: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        value = -1
    if value < 0:
        raise OverrideError(f"{name}={text!r}: give a device count (0, 1, 2, ...)")
    return value


def _text(name: str, text: str) -> str:
    return text


# variable -> (section, field path, parser). Section "host" or "dependencies"; a dotted path names a nested field.
OVERRIDES: dict[str, tuple[str, str, Callable[[str, str], Any]]] = {
    "SOL_EXECBENCH_DOCKER_CONTEXT": ("host", "docker_context", _text),
    "SOL_EXECBENCH_DOCKER_HOST": ("host", "docker_host", _text),
    "SOL_EXECBENCH_DEV_KFD_PRESENT": ("host", "dev_kfd.present", _flag),
    "SOL_EXECBENCH_DEV_KFD_ACCESSIBLE": ("host", "dev_kfd.accessible", _flag),
    "SOL_EXECBENCH_DEV_DRI_PRESENT": ("host", "dev_dri.present", _flag),
    "SOL_EXECBENCH_DEV_DRI_ACCESSIBLE": ("host", "dev_dri.accessible", _flag),
    "SOL_EXECBENCH_NVIDIA_CONTAINER_RUNTIME": ("host", "nvidia_container_runtime", _flag),
    "SOL_EXECBENCH_GPU_ACCESSIBLE": ("host", "gpu_accessible", _flag),
    "SOL_EXECBENCH_HOST_ROCM_VERSION": ("host", "host_rocm_version", _text),
    "SOL_EXECBENCH_HOST_DRIVER_VERSION": ("host", "host_driver_version", _text),
    "SOL_EXECBENCH_IMAGE_DIGEST": ("host", "image_digest", _text),
    "SOL_EXECBENCH_RUNTIME_DEVICE_COUNT": ("host", "runtime_device_count", _count),
    "SOL_EXECBENCH_RUNTIME_DEVICE_NAME": ("host", "runtime_device_name", _text),
    "SOL_EXECBENCH_RUNTIME_GFX_ARCHITECTURE": ("host", "runtime_gfx_architecture", _text),
    "SOL_EXECBENCH_DEPENDENCY_TORCH_DISTRIBUTION_VERSION": ("dependencies", "torch_distribution_version", _text),
    "SOL_EXECBENCH_DEPENDENCY_TORCH_VERSION": ("dependencies", "torch_version", _text),
    "SOL_EXECBENCH_DEPENDENCY_TORCH_LOCAL_VERSION": ("dependencies", "torch_local_version", _text),
    "SOL_EXECBENCH_DEPENDENCY_TORCH_ROCM_TARGET": ("dependencies", "torch_rocm_target", _text),
    "SOL_EXECBENCH_DEPENDENCY_TORCH_HIP_VERSION": ("dependencies", "torch_hip_version", _text),
    "SOL_EXECBENCH_DEPENDENCY_TORCH_CUDA_VERSION": ("dependencies", "torch_cuda_version", _text),
    "SOL_EXECBENCH_DEPENDENCY_TORCH_DEVICE_AVAILABLE": ("dependencies", "torch_device_available", _flag),
    "SOL_EXECBENCH_DEPENDENCY_TORCH_IMPORT_ERROR": ("dependencies", "torch_import_error", _text),
    "SOL_EXECBENCH_DEPENDENCY_TORCHVISION_DISTRIBUTION_VERSION": ("dependencies", "torchvision_distribution_version", _text),
    "SOL_EXECBENCH_DEPENDENCY_TRITON_ROCM_DISTRIBUTION_VERSION": ("dependencies", "triton_distribution_version", _text),
    "SOL_EXECBENCH_DEPENDENCY_TRITON_ROCM_STATUS": ("dependencies", "triton_status", _text),
    "SOL_EXECBENCH_DEPENDENCY_CONTAINER_ROCM_USER_SPACE_VERSION": ("dependencies", "container_rocm_user_space_version", _text),
    "SOL_EXECBENCH_DEPENDENCY_HIPCC_VERSION": ("dependencies", "hipcc_version", _text),
    "SOL_EXECBENCH_DEPENDENCY_NVCC_VERSION": ("dependencies", "nvcc_version", _text),
    "SOL_EXECBENCH_DEPENDENCY_TOOLCHAIN_ROCM_VERSION": ("dependencies", "toolchain_rocm_version", _text),
}


@dataclass(frozen=True)
class PreflightRequest:
    """Everything a preflight reads besides the docker CLI and the device nodes."""

    selection: TargetSelection
    target: DockerTarget
    snapshot: dict[str, Any]
    """An environment probe snapshot (``envprobe.snapshot.collect()``)."""
    environ: Mapping[str, str]
    dry_run: bool
    allow_mixed_version_dependencies: bool = False


def _node(path: str, children: tuple[str, ...] = ()) -> DeviceNode:
    """``/dev/kfd`` (a device) or ``/dev/dri`` (a folder whose render/card nodes are the devices)."""
    if not os.path.exists(path):
        return DeviceNode(present=False, accessible=False)
    targets = [p for pattern in children for p in glob.glob(os.path.join(path, pattern))] if children else [path]
    return DeviceNode(present=True, accessible=any(os.access(p, os.R_OK | os.W_OK) for p in targets))


def _docker_facts(host: HostFacts, selection: TargetSelection, dry_run: bool, reasons: list[str]) -> None:
    """Context, host, NVIDIA runtime and image digest from the docker CLI; nothing in a dry run."""
    if dry_run:
        reasons.append("host.docker_*: not probed (dry run: no docker command is run)")
        return
    if host.in_target_container:
        reasons.append("host.docker_*: not probed (inside the target's container)")
        return
    docker = find_tool("docker")
    if docker is None:
        reasons.append("host.docker_context: the docker CLI is not on PATH")
        return
    context = run_command([docker, "context", "show"])
    host.docker_context = context.stdout.strip() or None if context.ok else None
    if not context.ok:
        reasons.append(f"host.docker_context: {context.error}")
    endpoint = run_command([docker, "context", "inspect", "--format", '{{ (index .Endpoints "docker").Host }}'])
    host.docker_host = endpoint.stdout.strip() or None if endpoint.ok else None
    runtimes = run_command([docker, "info", "--format", "{{json .Runtimes}}"])
    host.docker_daemon_reachable = runtimes.ok
    if not runtimes.ok:
        reasons.append(f"host.docker_daemon_reachable: {runtimes.error}")
    elif selection.platform is ContainerPlatform.CUDA:
        host.nvidia_container_runtime = '"nvidia"' in runtimes.stdout
    digest = run_command([docker, "image", "inspect", "--format", "{{.Id}}", selection.image])
    host.image_digest = digest.stdout.strip() or None if digest.ok else None


def host_facts(request: PreflightRequest, reasons: list[str]) -> HostFacts:
    snap = request.snapshot
    accelerator, rocm, nvidia = snap.get("accelerator") or {}, snap.get("rocm") or {}, snap.get("nvidia") or {}
    devices = accelerator.get("devices") or []
    host = HostFacts(
        gpu_vendor_hint=accelerator.get("vendor_hint"),
        dev_kfd=_node("/dev/kfd"),
        dev_dri=_node("/dev/dri", ("renderD*", "card*")),
        host_rocm_version=rocm.get("version"),
        host_driver_version=nvidia.get("driver_version"),
        runtime_device_count=accelerator.get("device_count"),
        runtime_device_name=devices[0].get("name") if devices else None,
        runtime_gfx_architecture=devices[0].get("arch") if devices and accelerator.get("vendor") == "rocm" else None,
        in_target_container=request.environ.get(TARGET_ENV) == request.selection.target_id,
    )
    if request.selection.platform is ContainerPlatform.ROCM:
        host.gpu_accessible = bool(host.dev_kfd.accessible and host.dev_dri.accessible)
    else:
        host.gpu_accessible = host.gpu_vendor_hint == "cuda" and os.access("/dev/nvidiactl", os.R_OK | os.W_OK)
    _docker_facts(host, request.selection, request.dry_run, reasons)
    return host


def _torch_import_error(snap: dict[str, Any]) -> str | None:
    if (snap.get("packages") or {}).get("torch") is None or (snap.get("pytorch_build") or {}).get("version"):
        return None
    return next((r.partition(": ")[2] for r in snap.get("partial_reasons") or [] if r.startswith("pytorch_build")),
                "torch is installed but its build could not be read")


def dependency_facts(request: PreflightRequest) -> DependencyFacts:
    snap, policy = request.snapshot, request.target.pytorch_dependency_policy
    packages, build = snap.get("packages") or {}, snap.get("pytorch_build") or {}
    rocm = snap.get("rocm") or {}
    version = build.get("version") or packages.get("torch")
    local = version.partition("+")[2] or None if version else None
    triton = packages.get(policy.triton_distribution)
    facts = DependencyFacts(
        torch_distribution_version=packages.get("torch"),
        torch_version=build.get("version"),
        torch_local_version=local,
        torch_rocm_target=local if local and local.startswith("rocm") else None,
        torch_hip_version=build.get("hip_version"),
        torch_cuda_version=build.get("cuda_version"),
        torch_device_available=(snap.get("accelerator") or {}).get("torch_sees_gpu"),
        torch_import_error=_torch_import_error(snap),
        torchvision_distribution_version=packages.get("torchvision"),
        triton_distribution=policy.triton_distribution,
        triton_distribution_version=triton,
        triton_status="installed" if triton else "missing",
        container_rocm_user_space_version=rocm.get("version"),
        toolchain_rocm_version=rocm.get("version_header"),
    )
    compiler = "hipcc" if request.selection.platform is ContainerPlatform.ROCM else "nvcc"
    setattr(facts, f"{compiler}_version", detect_by_id(compiler)["version"])
    return facts


def apply_overrides(host: HostFacts, dependencies: DependencyFacts, environ: Mapping[str, str]) -> dict[str, str]:
    """Replace each fact an override names; the applied overrides, by variable."""
    applied: dict[str, str] = {}
    sections = {"host": host, "dependencies": dependencies}
    for name, (section, path, parse) in OVERRIDES.items():
        text = environ.get(name)
        if text is None or text == "":
            continue
        owner: Any = sections[section]
        *parents, leaf = path.split(".")
        for part in parents:
            owner = getattr(owner, part)
        setattr(owner, leaf, parse(name, text))
        applied[name] = text
    return applied


def _host_problems(selection: TargetSelection, host: HostFacts, dry_run: bool) -> list[tuple[str, str]]:
    """``(status, reason)`` for each thing that keeps the container from a GPU, most basic first."""
    problems: list[tuple[str, str]] = []
    if host.docker_context is None and not dry_run and not host.in_target_container:
        problems.append(("docker_unavailable", "no Docker context: install Docker and check 'docker context show' "
                                               "(or set SOL_EXECBENCH_DOCKER_CONTEXT)"))
    elif host.docker_daemon_reachable is False:
        problems.append(("docker_unavailable", "the Docker daemon does not answer ('docker info' failed): start it, "
                                               "or check the context's endpoint (docker_host)"))
    if selection.platform is ContainerPlatform.ROCM:
        for label, node in (("/dev/kfd", host.dev_kfd), ("/dev/dri", host.dev_dri)):
            if node.present is False:
                problems.append(("runtime_unavailable", f"{label} is missing: load the amdgpu driver (ROCm targets "
                                                        "need an AMD GPU host)"))
            elif node.accessible is False:
                problems.append(("device_permission_denied", f"{label} is not readable and writable by this user: "
                                                             "add it to the video and render groups"))
    elif host.nvidia_container_runtime is False:
        problems.append(("runtime_unavailable", "Docker has no 'nvidia' runtime: install the NVIDIA Container Toolkit "
                                                "(CUDA targets need an NVIDIA GPU host)"))
    if host.gpu_accessible is False and not any(s in ("runtime_unavailable", "device_permission_denied") for s, _ in problems):
        problems.append(("gpu_unavailable", "no GPU is accessible to this user here"))
    return problems


def _dependency_status(target: DockerTarget, deps: DependencyFacts) -> tuple[str, list[str]]:
    if deps.torch_import_error:
        return "import_error", [f"torch cannot be imported: {deps.torch_import_error}"]
    if deps.torch_distribution_version is None and deps.torch_version is None:
        return "not_installed", ["torch is not installed in this environment"]
    policy = target.pytorch_dependency_policy
    wanted = {
        "torch": (policy.torch_version, deps.torch_distribution_version or deps.torch_version),
        "torchvision": (policy.torchvision_version, deps.torchvision_distribution_version),
        policy.triton_distribution: (policy.triton_version, deps.triton_distribution_version),
    }
    mixed = [f"{name} {have or 'missing'} (the target installs {want})" for name, (want, have) in wanted.items() if have != want]
    user_space = target.requested_rocm_user_space_version
    if user_space and deps.container_rocm_user_space_version and not deps.container_rocm_user_space_version.startswith(user_space):
        mixed.append(f"ROCm user space {deps.container_rocm_user_space_version} (the target requests {user_space})")
    return ("mixed_version", mixed) if mixed else ("match", [])


def classify(request: PreflightRequest, host: HostFacts, deps: DependencyFacts, overridden: bool) -> PreflightClassification:
    hint = host.gpu_vendor_hint
    if host.dev_kfd.present or hint == "rocm":
        kind = "amd"
    elif hint == "cuda" or host.nvidia_container_runtime:
        kind = "nvidia"
    else:
        kind = "no_gpu"
    problems = _host_problems(request.selection, host, request.dry_run)
    scope = "container" if host.in_target_container or overridden else "host"
    dep_status, dep_notes = _dependency_status(request.target, deps)
    reasons = [reason for _, reason in problems]
    allowed = not problems
    if scope == "container" and dep_status != "match":
        if dep_status == "mixed_version" and request.allow_mixed_version_dependencies:
            reasons += [f"allowed by --allow-mixed-version-dependencies: {note}" for note in dep_notes]
        else:
            allowed = False
            fix = " (--allow-mixed-version-dependencies lets it run, without validation claims)" if dep_status == "mixed_version" else ""
            reasons += [f"{note}{fix}" for note in dep_notes]
    return PreflightClassification(host_kind=kind, host_status=problems[0][0] if problems else "ready",
                                   dependency_status=dep_status, dependency_scope=scope, benchmark_allowed=allowed,
                                   reasons=reasons)


def build_preflight(request: PreflightRequest) -> DockerPreflight:
    """The preflight document (``OverrideError`` for an override that cannot be read)."""
    reasons: list[str] = []
    host = host_facts(request, reasons)
    deps = dependency_facts(request)
    applied = apply_overrides(host, deps, request.environ)
    overridden = any(name.startswith("SOL_EXECBENCH_DEPENDENCY_") for name in applied)
    return DockerPreflight(
        tool_version=__version__,
        dry_run=request.dry_run,
        target=request.selection,
        host=host,
        dependencies=deps,
        overrides=applied,
        classification=classify(request, host, deps, overridden),
        partial_reasons=reasons,
    )
