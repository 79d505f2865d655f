"""The declared container targets (``docker/rocm-targets.json``, ``docker/cuda-targets.json``) and
how one is selected: by id, the ROCm manifest's default, or an undeclared id let through by
``--allow-unknown-target`` with ``ROCM_DOCKER_IMAGE``/``ROCM_DOCKER_TAG``."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from sol_execbench.schema.containers import (ContainerPlatform, DockerTarget, DockerTargetManifest, TargetSelection,
                                             ValidationStatus)
from sol_execbench.schema.loading import load_model

MANIFEST_FILES = {ContainerPlatform.ROCM: "docker/rocm-targets.json", ContainerPlatform.CUDA: "docker/cuda-targets.json"}
DEFAULT_PLATFORM = ContainerPlatform.ROCM
"""Whose manifest's ``default_target_id`` is the default target (the configuration reference's)."""
DEFAULT_IMAGE_NAME = "sol-execbench"
TARGET_ENV = "SOL_EXECBENCH_CONTAINER_TARGET"
"""Set in the images to their target id: the default ``--target`` there, and a preflight that finds
it equal to the selected target runs inside that target's container (its Python stack is the container's)."""
UNKNOWN_TARGET_IMAGE = "rocm/dev-ubuntu-24.04"
"""``ROCM_DOCKER_IMAGE``'s default for an undeclared target."""


class TargetError(Exception):
    """A target that cannot be selected; the message says which and what to do."""


def find_repo_root(start: Path | None = None) -> Path | None:
    """The folder holding ``docker/rocm-targets.json``: the first from ``start`` (the current
    folder) upward, else the source checkout this package was imported from."""
    here = (start or Path.cwd()).resolve()
    package_checkout = Path(__file__).resolve().parents[3]
    for folder in (here, *here.parents, package_checkout):
        if (folder / MANIFEST_FILES[DEFAULT_PLATFORM]).is_file():
            return folder
    return None


def load_manifests(repo_root: Path) -> dict[ContainerPlatform, DockerTargetManifest]:
    """Both manifests, validated (``FormatError`` names the file and the field)."""
    return {platform: load_model(DockerTargetManifest, repo_root / rel, "Docker target manifest")
            for platform, rel in MANIFEST_FILES.items()}


@dataclass(frozen=True)
class TargetRequest:
    """What the command line asks for: ``--target``, ``--allow-unknown-target`` and the variables."""

    target_id: str | None = None
    """``--target``, else the image's own target (``SOL_EXECBENCH_CONTAINER_TARGET``), else the default."""
    allow_unknown_target: bool = False
    image_name: str | None = None
    """``IMAGE_NAME``; None: ``sol-execbench``."""
    image_tag: str | None = None
    """``IMAGE_TAG``; None: ``<platform>-<base image tag>``."""
    unknown_image: str | None = None
    """``ROCM_DOCKER_IMAGE``: only with ``--allow-unknown-target``."""
    unknown_tag: str | None = None
    """``ROCM_DOCKER_TAG``: only with ``--allow-unknown-target``."""

    @classmethod
    def from_environ(cls, target_id: str | None, allow_unknown_target: bool, environ: dict[str, str] | None = None) -> "TargetRequest":
        env = os.environ if environ is None else environ
        return cls(target_id or env.get(TARGET_ENV) or None, allow_unknown_target, env.get("IMAGE_NAME") or None, env.get("IMAGE_TAG") or None,
                   env.get("ROCM_DOCKER_IMAGE") or None, env.get("ROCM_DOCKER_TAG") or None)


def build_args(target: DockerTarget) -> dict[str, str]:
    """The ``--build-arg`` values of ``target`` for its Dockerfile (HOST_* are added at build time)."""
    wheels = target.pytorch_dependency_policy
    if target.platform is ContainerPlatform.ROCM:
        return {
            "ROCM_DOCKER_IMAGE": target.docker_image_repository,
            "ROCM_DOCKER_TAG": target.docker_image_tag,
            "PYTORCH_TORCH_VERSION": wheels.torch_version,
            "PYTORCH_TORCHVISION_VERSION": wheels.torchvision_version,
            "PYTORCH_ROCM_INDEX_URL": wheels.index_url,
            "TRITON_ROCM_VERSION": wheels.triton_version,
            "TRITON_ROCM_INDEX_URL": wheels.triton_index_url,
        }
    return {
        "CUDA_DOCKER_IMAGE": target.docker_image_repository,
        "CUDA_DOCKER_TAG": target.docker_image_tag,
        "PYTORCH_TORCH_VERSION": wheels.torch_version,
        "PYTORCH_TORCHVISION_VERSION": wheels.torchvision_version,
        "PYTORCH_CUDA_INDEX_URL": wheels.index_url,
        "TRITON_VERSION": wheels.triton_version,
        "TRITON_INDEX_URL": wheels.triton_index_url,
    }


def _unknown_target(target_id: str, request: TargetRequest, default: DockerTarget) -> DockerTarget:
    """An undeclared ROCm target: the given base image, the default target's wheel stack, not tested."""
    return default.model_copy(update={
        "target_id": target_id,
        "docker_image_repository": request.unknown_image or UNKNOWN_TARGET_IMAGE,
        "docker_image_tag": request.unknown_tag or target_id,
        "validation_status": ValidationStatus.NOT_TESTED,
    })


@dataclass(frozen=True)
class SelectedTarget:
    target: DockerTarget
    selection: TargetSelection


def select_target(manifests: dict[ContainerPlatform, DockerTargetManifest], request: TargetRequest) -> SelectedTarget:
    """The target ``request`` names (the default one without ``--target``); ``TargetError`` otherwise."""
    declared = {t.target_id: t for manifest in manifests.values() for t in manifest.targets}
    default_manifest = manifests[DEFAULT_PLATFORM]
    target_id = request.target_id or default_manifest.default_target_id
    target = declared.get(target_id)
    if target is None:
        if not request.allow_unknown_target:
            raise TargetError(f"--target '{target_id}' is not declared in {' or '.join(MANIFEST_FILES.values())} "
                              f"(declared: {', '.join(sorted(declared))}); to try another ROCm base image, add "
                              "--allow-unknown-target with ROCM_DOCKER_IMAGE and ROCM_DOCKER_TAG")
        default = next(t for t in default_manifest.targets if t.target_id == default_manifest.default_target_id)
        target = _unknown_target(target_id, request, default)
    elif request.unknown_image or request.unknown_tag:
        if request.allow_unknown_target:
            raise TargetError(f"ROCM_DOCKER_IMAGE/ROCM_DOCKER_TAG apply to undeclared targets only; '{target_id}' is "
                              f"declared with {target.docker_image_repository}:{target.docker_image_tag}: unset them")
    tag = request.image_tag or f"{target.platform.value}-{target.docker_image_tag}"
    selection = TargetSelection(
        target_id=target.target_id,
        platform=target.platform,
        declared=target_id in declared,
        validation_status=target.validation_status,
        base_image=f"{target.docker_image_repository}:{target.docker_image_tag}",
        image=f"{request.image_name or DEFAULT_IMAGE_NAME}:{tag}",
        dockerfile=target.dockerfile,
        build_args=build_args(target),
    )
    return SelectedTarget(target, selection)
