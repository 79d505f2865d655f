"""Container formats: the declared Docker targets (``docker/rocm-targets.json``,
``docker/cuda-targets.json``), the preflight document of ``sol-execbench docker preflight``, and the
compatibility records (one entry per target and run, and the matrix that merges them)."""

from __future__ import annotations

from enum import Enum
from typing import Literal, Optional

from pydantic import Field, model_validator

from .base import NonEmptyString, SchemaModel

TARGETS_SCHEMA_VERSION = "sol_execbench.docker_targets.v1"
PREFLIGHT_SCHEMA_VERSION = "sol_execbench.docker_preflight.v1"
COMPATIBILITY_SCHEMA_VERSION = "sol_execbench.docker_compatibility.v1"


class ContainerPlatform(str, Enum):
    ROCM = "rocm"
    CUDA = "cuda"


class ValidationStatus(str, Enum):
    NOT_TESTED = "not_tested"
    """Declared, never run through the wrapper on real hardware: smoke runs need
    ``--allow-untested-target-smoke`` and make no validation claim."""
    CONTAINER_VALIDATED = "container_validated"
    """A smoke run in this target's container passed and was recorded (``--record-container-validation``)."""


class WheelPolicy(SchemaModel):
    """The PyTorch wheel stack a target installs (the Docker build arguments come from it)."""

    wheel_target: NonEmptyString
    """The local version torch wheels of this stack carry: ``rocm7.1``, ``cu128``."""
    torch_version: NonEmptyString
    torchvision_version: NonEmptyString
    index_url: NonEmptyString
    """The PyTorch wheel index of ``wheel_target``."""
    triton_distribution: Literal["triton-rocm", "triton"]
    """``triton-rocm`` on ROCm targets, ``triton`` on CUDA targets."""
    triton_version: NonEmptyString
    triton_index_url: NonEmptyString

    @model_validator(mode="after")
    def _wheels_match_target(self) -> "WheelPolicy":
        for name in ("torch_version", "torchvision_version"):
            local = getattr(self, name).partition("+")[2]
            if local != self.wheel_target:
                raise ValueError(f"{name} '{getattr(self, name)}' is not a '+{self.wheel_target}' wheel (wheel_target)")
        return self


class DockerTarget(SchemaModel):
    """One declared container: base image, wheel stack, and how far it has been validated."""

    target_id: NonEmptyString
    platform: ContainerPlatform
    requested_rocm_user_space_version: Optional[str] = None
    """ROCm targets: the ROCm user space of the base image (``7.1.1``)."""
    requested_cuda_version: Optional[str] = None
    """CUDA targets: the CUDA toolkit of the base image (``12.8``)."""
    docker_image_repository: NonEmptyString
    docker_image_tag: NonEmptyString
    dockerfile: NonEmptyString
    """Relative to the repository root."""
    pytorch_dependency_policy: WheelPolicy
    validation_status: ValidationStatus
    validation_scope: Literal["container_user_space"] = "container_user_space"
    """What a validation of this target covers: the container's user space and wheels, not the host."""
    does_not_claim: list[NonEmptyString] = Field(default_factory=list)
    """Claims the target makes no matter its status (native host, paper parity, leaderboard, a GPU model...)."""

    @model_validator(mode="after")
    def _version_of_platform(self) -> "DockerTarget":
        wanted = "requested_rocm_user_space_version" if self.platform is ContainerPlatform.ROCM else "requested_cuda_version"
        other = "requested_cuda_version" if self.platform is ContainerPlatform.ROCM else "requested_rocm_user_space_version"
        if not getattr(self, wanted):
            raise ValueError(f"a {self.platform.value} target needs '{wanted}'")
        if getattr(self, other) is not None:
            raise ValueError(f"a {self.platform.value} target has no '{other}'")
        triton = "triton-rocm" if self.platform is ContainerPlatform.ROCM else "triton"
        if self.pytorch_dependency_policy.triton_distribution != triton:
            raise ValueError(f"a {self.platform.value} target installs '{triton}' (pytorch_dependency_policy.triton_distribution)")
        return self


class DockerTargetManifest(SchemaModel):
    """``docker/<platform>-targets.json``: the targets of one platform and its default."""

    schema_version: Literal["sol_execbench.docker_targets.v1"]
    platform: ContainerPlatform
    default_target_id: NonEmptyString
    targets: list[DockerTarget] = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> "DockerTargetManifest":
        ids = [t.target_id for t in self.targets]
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        if repeated:
            raise ValueError(f"target ids {repeated} are declared more than once (targets)")
        if self.default_target_id not in ids:
            raise ValueError(f"default_target_id '{self.default_target_id}' is not one of the targets {ids}")
        strays = [t.target_id for t in self.targets if t.platform is not self.platform]
        if strays:
            raise ValueError(f"targets {strays} are not {self.platform.value} targets (platform)")
        return self


class DeviceNode(SchemaModel):
    present: Optional[bool] = None
    accessible: Optional[bool] = None
    """Readable and writable by this user (for ``/dev/dri``: some render or card node is)."""


class HostFacts(SchemaModel):
    """What the host offers a container. Null: not known (not probed, or not applicable)."""

    gpu_vendor_hint: Optional[str] = None
    """``cuda``, ``rocm`` or ``cpu``: which vendor's driver this host has."""
    docker_context: Optional[str] = None
    docker_host: Optional[str] = None
    docker_daemon_reachable: Optional[bool] = None
    """Whether ``docker info`` answered (null: not asked, as in a dry run)."""
    dev_kfd: DeviceNode = Field(default_factory=DeviceNode)
    dev_dri: DeviceNode = Field(default_factory=DeviceNode)
    nvidia_container_runtime: Optional[bool] = None
    """Whether the Docker daemon lists the ``nvidia`` runtime (CUDA targets)."""
    gpu_accessible: Optional[bool] = None
    host_rocm_version: Optional[str] = None
    host_driver_version: Optional[str] = None
    image_digest: Optional[str] = None
    runtime_device_count: Optional[int] = None
    runtime_device_name: Optional[str] = None
    runtime_gfx_architecture: Optional[str] = None
    in_target_container: Optional[bool] = None
    """Whether this preflight runs inside the selected target's own image (``SOL_EXECBENCH_CONTAINER_TARGET``
    names it): then its dependencies are the container's."""


class DependencyFacts(SchemaModel):
    """The Python stack of the environment the preflight runs in."""

    torch_distribution_version: Optional[str] = None
    torch_version: Optional[str] = None
    torch_local_version: Optional[str] = None
    torch_rocm_target: Optional[str] = None
    """The ROCm wheel target of torch's local version (``rocm7.1``), if it is a ROCm wheel."""
    torch_hip_version: Optional[str] = None
    torch_cuda_version: Optional[str] = None
    torch_device_available: Optional[bool] = None
    torch_import_error: Optional[str] = None
    torchvision_distribution_version: Optional[str] = None
    triton_distribution: Optional[str] = None
    """The Triton distribution the target installs (``triton-rocm`` or ``triton``)."""
    triton_distribution_version: Optional[str] = None
    triton_status: Optional[str] = None
    """``installed`` or ``missing`` (or what an override says)."""
    container_rocm_user_space_version: Optional[str] = None
    hipcc_version: Optional[str] = None
    nvcc_version: Optional[str] = None
    toolchain_rocm_version: Optional[str] = None


HostStatus = Literal["ready", "docker_unavailable", "runtime_unavailable", "device_permission_denied", "gpu_unavailable"]
DependencyStatus = Literal["match", "mixed_version", "not_installed", "import_error"]


class PreflightClassification(SchemaModel):
    host_kind: Literal["amd", "nvidia", "no_gpu"]
    """What the host is, from its driver and device nodes."""
    host_status: HostStatus
    """``ready``: the selected target's container can reach a GPU here."""
    dependency_status: DependencyStatus
    """The observed Python stack against the target's wheel policy."""
    dependency_scope: Literal["host", "container"]
    """``container``: the stack was observed in a container (or given by overrides) and gates the run;
    ``host``: the host's own stack, recorded only (the container brings its own)."""
    benchmark_allowed: bool
    reasons: list[str] = Field(default_factory=list)
    """Why the run is not allowed, or what was let through by an allow flag; each names the fix."""


class TargetSelection(SchemaModel):
    target_id: NonEmptyString
    platform: ContainerPlatform
    declared: bool
    """False: an undeclared id let through by ``--allow-unknown-target``."""
    validation_status: ValidationStatus
    base_image: NonEmptyString
    image: NonEmptyString
    """The local image ``docker build`` tags and ``docker run`` starts (``IMAGE_NAME:IMAGE_TAG``)."""
    dockerfile: NonEmptyString
    build_args: dict[str, str]


class DockerPreflight(SchemaModel):
    """``sol-execbench docker preflight`` (and ``--preflight-only``): one JSON document."""

    schema_version: Literal["sol_execbench.docker_preflight.v1"] = PREFLIGHT_SCHEMA_VERSION
    tool_version: str
    dry_run: bool
    """True: no docker command was run; what only docker can tell is null unless overridden."""
    target: TargetSelection
    host: HostFacts
    dependencies: DependencyFacts
    overrides: dict[str, str] = Field(default_factory=dict)
    """The ``SOL_EXECBENCH_*`` variables that replaced a probed fact, with their values."""
    classification: PreflightClassification
    partial_reasons: list[str] = Field(default_factory=list)
    """Facts that could not be read, and why."""


CompatibilityStatus = Literal["preflight_passed", "preflight_failed", "smoke_refused", "run_failed", "run_succeeded",
                              "container_validated"]


class CompatibilityEntry(SchemaModel):
    """What one wrapper run found for one target (``--compatibility-entry``)."""

    schema_version: Literal["sol_execbench.docker_compatibility.v1"] = COMPATIBILITY_SCHEMA_VERSION
    target_id: NonEmptyString
    platform: ContainerPlatform
    status: CompatibilityStatus
    recorded_at: NonEmptyString
    """UTC, ISO 8601 with seconds; the newest entry of a target wins in a matrix."""
    tool_version: str
    dry_run: bool = False
    image: Optional[str] = None
    image_digest: Optional[str] = None
    command: list[str] = Field(default_factory=list)
    """The container command (empty for a preflight-only record)."""
    exit_code: Optional[int] = None
    host_kind: Optional[str] = None
    host_status: Optional[str] = None
    dependency_status: Optional[str] = None
    host: HostFacts = Field(default_factory=HostFacts)
    dependencies: DependencyFacts = Field(default_factory=DependencyFacts)
    reasons: list[str] = Field(default_factory=list)


class CompatibilityMatrix(SchemaModel):
    """``--compatibility-matrix`` and ``docker compat``: the newest entry of every target, by target id."""

    schema_version: Literal["sol_execbench.docker_compatibility.v1"] = COMPATIBILITY_SCHEMA_VERSION
    updated_at: Optional[str] = None
    """The newest ``recorded_at`` among the entries (not the time of writing: the same entries give the same file)."""
    entries: list[CompatibilityEntry] = Field(default_factory=list)
