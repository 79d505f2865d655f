"""The diagnostic sidecars of ``--profile``, ``--static-evidence`` and timing evidence.

They never change a trace: each is a file of its own beside ``-o`` (docs/profiling.md).
``summarize_kernels`` turns one profiler's kernel launches into the per-kernel rows every
sidecar shares; it is plain Python, so the evaluation child (torch profiler) and the parent
(ncu, rocprofv3) make the same rows.
"""

from __future__ import annotations

import statistics
from typing import Iterable, Literal, NamedTuple, Optional

from pydantic import Field

from .base import NonEmptyString, NonNegativeInt, SchemaModel

PROFILE_SCHEMA_VERSION = "1"
ProfileTool = Literal["torch", "ncu", "rocprofv3"]
PROFILE_CHOICES = ("none", "torch", "ncu", "rocprofv3", "auto")
STATIC_EVIDENCE_CHOICES = ("none", "auto")
DEFAULT_PROFILE_CALLS = 20
Coverage = Literal["full", "partial", "none"]
# The protocol between the profiling child and the parent that reads ncu's and rocprofv3's records:
# each profiled call sits between two launches of MARKER_KERNEL, inside the NVTX range PROFILE_RANGE.
PROFILE_RANGE = "sol_execbench_profile"
MARKER_KERNEL = "spin_kernel"  # torch.cuda._sleep's kernel


class KernelLaunch(NamedTuple):
    """One recorded launch (not a format of its own: what the readers hand ``summarize_kernels``)."""

    name: str
    duration_ns: float
    grid: tuple[int, ...] | None = None
    block: tuple[int, ...] | None = None
    registers: int | None = None
    dram_bytes_read: float | None = None
    dram_bytes_write: float | None = None
    flops: float | None = None  # None: the metrics to count them were not recorded


class KernelProfile(SchemaModel):
    """One kernel name's launches during the profiled calls."""

    name: NonEmptyString
    calls: NonNegativeInt
    """Launches recorded (over every profiled call)."""
    total_us: float = Field(ge=0)
    """Device time of all its launches, in microseconds."""
    median_us: float = Field(ge=0)
    """Median device time of one launch."""
    per_call_us: Optional[float] = None
    """total_us over the profiled solution calls: this kernel's share of one call."""
    grid: Optional[list[int]] = None
    """Grid of the first launch (blocks per dimension; ROCm: work-items), where the profiler gives it."""
    block: Optional[list[int]] = None
    """Block (work-group) of the first launch, where the profiler gives it."""
    registers_per_thread: Optional[int] = None
    dram_bytes_read: Optional[float] = None
    """ncu: DRAM bytes read over all launches (dram__bytes_read.sum)."""
    dram_bytes_write: Optional[float] = None
    """ncu: DRAM bytes written over all launches (dram__bytes_write.sum)."""
    flops: Optional[float] = None
    """ncu: floating-point operations over all launches from the SASS instruction counters (an FMA is 2)."""
    achieved_bandwidth_gbps: Optional[float] = None
    """(read + written DRAM bytes) / total device time, in GB/s (1e9 bytes)."""
    achieved_tflops: Optional[float] = None
    """flops / total device time, in TFLOP/s."""


def _first(values: Iterable[object]) -> object:
    return next((v for v in values if v is not None), None)


def _sum_known(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return float(sum(known)) if known else None


def summarize_kernels(launches: Iterable[KernelLaunch], calls: int | None) -> list[KernelProfile]:
    """Per kernel name, longest total first; ``calls``: the solution calls the launches came from."""
    groups: dict[str, list[KernelLaunch]] = {}
    for launch in launches:
        groups.setdefault(launch.name, []).append(launch)
    rows = []
    for name, group in groups.items():
        total_ns = float(sum(k.duration_ns for k in group))
        read = _sum_known([k.dram_bytes_read for k in group])
        write = _sum_known([k.dram_bytes_write for k in group])
        flops = _sum_known([k.flops for k in group])
        seconds = total_ns / 1e9
        moved = (read or 0.0) + (write or 0.0) if read is not None or write is not None else None
        grid, block = _first(k.grid for k in group), _first(k.block for k in group)
        rows.append(KernelProfile(
            name=name or "(unnamed)", calls=len(group), total_us=total_ns / 1e3,
            median_us=statistics.median(k.duration_ns for k in group) / 1e3,
            per_call_us=total_ns / 1e3 / calls if calls else None,
            grid=list(grid) if grid else None, block=list(block) if block else None,
            registers_per_thread=_first(k.registers for k in group), dram_bytes_read=read, dram_bytes_write=write,
            flops=flops, achieved_bandwidth_gbps=moved / seconds / 1e9 if moved is not None and seconds > 0 else None,
            achieved_tflops=flops / seconds / 1e12 if flops is not None and seconds > 0 else None))
    return sorted(rows, key=lambda r: -r.total_us)


class ProfilerAttempt(SchemaModel):
    """One profiler tried: whether it recorded kernels, and if not, its error."""

    tool: ProfileTool
    ok: bool
    error: Optional[str] = None
    """Why it gave nothing: not found, exited with an error (its output's tail), recorded no kernels."""
    command: list[str] = Field(default_factory=list)
    """The profiler's command prefix."""
    version: Optional[str] = None
    staging: Optional[str] = None
    """Its staging folder (the profiler's raw output), when kept by --keep-staging."""


class WorkloadProfile(SchemaModel):
    """One workload's profiled calls."""

    uuid: NonEmptyString
    calls: NonNegativeInt
    """Solution calls made under the profiler (each after an L2 flush, outside the profiled range)."""
    kernel_us_per_call: Optional[float] = None
    """Sum of every kernel's device time over the calls: the profiler's device time of one call."""
    trace_latency_ms: Optional[float] = None
    """The normal evaluation's reported latency of this workload (its trace), for comparison."""
    kernels: list[KernelProfile] = Field(default_factory=list)
    error: Optional[str] = None
    """Why this workload has no profile (its profiling call failed, or no kernels fell in its calls)."""


class ProfileSidecar(SchemaModel):
    """``<stem>.profile.<tool>.json``: what a profiler saw of the solution's calls (``--profile``)."""

    kind: Literal["sol-execbench profile"] = "sol-execbench profile"
    schema_version: str = PROFILE_SCHEMA_VERSION
    requested: Literal["torch", "ncu", "rocprofv3", "auto"]
    tool: Optional[ProfileTool] = None
    """The profiler whose records fill ``workloads`` (None: none recorded anything)."""
    definition: NonEmptyString
    solution: NonEmptyString
    device: Optional[str] = None
    calls_per_workload: int = Field(ge=1)
    attempts: list[ProfilerAttempt] = Field(default_factory=list)
    workloads: list[WorkloadProfile] = Field(default_factory=list)
    kernels: list[KernelProfile] = Field(default_factory=list)
    """Every workload's launches together, per kernel name (per_call_us over all profiled calls)."""
    process_kernels: list[KernelProfile] = Field(default_factory=list)
    """rocprofv3 --stats: every kernel the profiled process ran (the reference, input making and the
    L2 flush included; calls, total and median from its kernel_stats.csv, median as its average)."""
    note: str = ("diagnostic only: the traces' numbers come from the normal evaluation; not the evaluation child's "
                 "cProfile (SOL_EXECBENCH_CHILD_PROFILE)")


class KernelResources(SchemaModel):
    """What the compiler gave one kernel."""

    name: NonEmptyString
    source: Literal["cuobjdump", "amdgpu-metadata", "triton"]
    arch: Optional[str] = None
    registers: Optional[int] = None
    """Registers per thread (NVIDIA REG, AMD .vgpr_count, Triton n_regs)."""
    scalar_registers: Optional[int] = None
    """AMD .sgpr_count."""
    shared_bytes: Optional[int] = None
    """Static shared memory (NVIDIA SHARED, AMD LDS .group_segment_fixed_size, Triton metadata.shared)."""
    local_bytes: Optional[int] = None
    """Per-thread local memory: spills and local arrays (NVIDIA LOCAL, AMD .private_segment_fixed_size)."""
    stack_bytes: Optional[int] = None
    """NVIDIA STACK."""
    spills: Optional[int] = None
    """Spilled registers where the compiler counts them (AMD .vgpr_spill_count + .sgpr_spill_count, Triton n_spills)."""
    details: dict[str, object] = Field(default_factory=dict)
    """The rest the tool printed (constant banks, wavefront size, warps)."""


class StaticEvidenceSidecar(SchemaModel):
    """``<stem>.static-evidence.json``: per kernel, registers, shared/LDS, local memory and stack (``--static-evidence``)."""

    kind: Literal["sol-execbench static evidence"] = "sol-execbench static evidence"
    schema_version: str = PROFILE_SCHEMA_VERSION
    definition: NonEmptyString
    solution: NonEmptyString
    language: str
    sources: list[str] = Field(default_factory=list)
    """Where the numbers were read: the cached build's library, the Triton kernels compiled in the child."""
    kernels: list[KernelResources] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)
    """Why a source gave nothing (tool missing, no code object, a compressed bundle)."""


class WorkloadTimingEvidence(SchemaModel):
    """One workload: its reported latency next to the profiler's kernel time."""

    uuid: NonEmptyString
    status: Literal["profiled", "failed", "blocked", "no-trace"]
    """profiled: the profiler recorded its kernels; failed: the profiling run did not; blocked: marked
    with --mark-blocked-problem; no-trace: no PASSED trace to compare with."""
    reported_latency_ms: Optional[float] = None
    trace_status: Optional[str] = None
    profiler_kernel_ms_per_call: Optional[float] = None
    ratio: Optional[float] = None
    """reported_latency_ms / profiler_kernel_ms_per_call."""
    calls: NonNegativeInt = 0
    kernels: list[KernelProfile] = Field(default_factory=list)
    error: Optional[str] = None


class ProblemTimingEvidence(SchemaModel):
    """``<evidence dir>/<problem>/timing_evidence.json``: every workload of one problem."""

    kind: Literal["sol-execbench timing evidence"] = "sol-execbench timing evidence"
    schema_version: str = PROFILE_SCHEMA_VERSION
    problem: NonEmptyString
    """Path relative to the dataset root."""
    definition: NonEmptyString
    solution: Optional[str] = None
    tool: Optional[Literal["ncu", "rocprofv3"]] = None
    """The profiler (None: none applies on this host, e.g. the CPU)."""
    tool_version: str
    gpu_architecture: str
    workloads: list[WorkloadTimingEvidence] = Field(default_factory=list)
    workloads_expected: NonNegativeInt = 0
    """Workloads of the problem in the selected slice."""
    coverage: Coverage
    reason: str


class ProblemCoverage(SchemaModel):
    problem: NonEmptyString
    coverage: Coverage
    workloads_expected: NonNegativeInt
    workloads_profiled: NonNegativeInt
    reason: str
    target_status: Optional[str] = None
    """A status the audit assigns by problem (--target-status), e.g. blocked."""


class TimingCoverage(SchemaModel):
    """``coverage.json``: full, partial or no profiler-backed timing per problem, and why."""

    kind: Literal["sol-execbench timing coverage"] = "sol-execbench timing coverage"
    schema_version: str = PROFILE_SCHEMA_VERSION
    dataset_root: str
    evidence_dirs: list[str]
    expected_problem_denominator: Optional[int] = None
    problems: list[ProblemCoverage] = Field(default_factory=list)


class TimingCoverageSummary(SchemaModel):
    """``coverage-summary.json``: the counts of coverage.json."""

    kind: Literal["sol-execbench timing coverage summary"] = "sol-execbench timing coverage summary"
    schema_version: str = PROFILE_SCHEMA_VERSION
    problems: NonNegativeInt
    full: NonNegativeInt
    partial: NonNegativeInt
    none: NonNegativeInt
    denominator: NonNegativeInt
    """expected_problem_denominator, else the problems found."""
    complete: bool
    """Every denominator problem has full profiler-backed timing."""
