"""Trace: the outcome of one solution on one workload (upstream's JSONL shape).

Upstream fields keep their names and meaning; facts upstream lacks are new optional fields
(``Performance.solution_timing``, ``Evaluation.device``, ``Evaluation.build`` ...), which
upstream readers ignore.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Optional

from pydantic import Field, model_validator

from .base import NonEmptyString, SchemaModel
from .isolation import IsolationRecord
from .workload import Workload


class EvaluationStatus(str, Enum):
    PASSED = "PASSED"
    INCORRECT_SHAPE = "INCORRECT_SHAPE"
    INCORRECT_DTYPE = "INCORRECT_DTYPE"
    INCORRECT_NUMERICAL = "INCORRECT_NUMERICAL"
    RUNTIME_ERROR = "RUNTIME_ERROR"
    COMPILE_ERROR = "COMPILE_ERROR"
    TIMEOUT = "TIMEOUT"
    REWARD_HACK = "REWARD_HACK"
    INVALID_REFERENCE = "INVALID_REFERENCE"


STATUS_MEANING: dict[EvaluationStatus, str] = {
    EvaluationStatus.PASSED: "correct on every round; timed",
    EvaluationStatus.INCORRECT_SHAPE: "an output has the wrong shape",
    EvaluationStatus.INCORRECT_DTYPE: "an output has the wrong element type",
    EvaluationStatus.INCORRECT_NUMERICAL: "outputs differ from the reference beyond the tolerance",
    EvaluationStatus.RUNTIME_ERROR: "the solution raised, crashed, ran out of memory, or could not be run",
    EvaluationStatus.COMPILE_ERROR: "the solution could not be built or imported",
    EvaluationStatus.TIMEOUT: "the evaluation did not finish in time",
    EvaluationStatus.REWARD_HACK: "the solution tampered with the measurement",
    EvaluationStatus.INVALID_REFERENCE: "the definition's reference failed",
}


class Correctness(SchemaModel):
    max_relative_error: float = Field(default=0.0, ge=0.0)
    max_absolute_error: float = Field(default=0.0, ge=0.0)
    has_nan: bool = False
    has_inf: bool = False
    extra: Optional[dict[str, Any]] = None
    """matched_ratio, rounds, worst output and index."""


class TimingStats(SchemaModel):
    """One side's timed rounds, in milliseconds (docs/timing.md gives the rule)."""

    method: str
    """Where the device time came from: ``device`` (the profiler's activity records, any stream),
    ``events`` (device events on the current stream) or ``cpu`` (the host clock; no device time)."""
    count: int
    """Rounds of the pass that set the latency (device pass, or host pass where ``host_bound``);
    mean, std, iqr, min and max describe that pass's spans as the rule counts them."""
    median_ms: float
    """The latency: the rule applied to the device time and the host time (each the mean of its
    pass's spans without the lowest and highest fifth), docs/timing.md. Where the device sets it,
    the device time."""
    mean_ms: float
    std_ms: float
    iqr_ms: float
    min_ms: float
    max_ms: float
    note: Optional[str] = None
    """What needs a sentence: a fallback and why."""
    device_time_ms: Optional[float] = None
    """Device time of a call: the mean of its device spans (first start to last end of the device
    work it launched) without the lowest and highest fifth, where measured."""
    host_time_ms: Optional[float] = None
    """Host time of a call: the mean of its host spans (its start until the device was idle, no
    profiler, less the synchronisation floor) without the lowest and highest fifth."""
    host_bound: Optional[bool] = None
    """True when the host time, less the launch allowance, exceeded the device time: the
    host set the latency."""
    host_rounds: Optional[int] = None
    """Rounds of the host pass: the device pass's, or more where the host may set the latency."""
    sync_floor_ms: Optional[float] = None
    """Wall time of an empty synchronisation of the idle device, taken off every host span."""
    launch_allowance_ms: Optional[float] = None
    """Host time per call that is free (one launch); see ``timing.launch_allowance_us``."""
    relative_iqr: Optional[float] = None
    """Interquartile range over the median of the spans that set the latency: the spread of the rounds."""
    hold_us: Optional[float] = None
    """Median length of the spin kernel queued before each call of the device pass (NVIDIA), 0 without one."""
    input_sets: Optional[int] = None
    """Distinct input contents rotated over the timed calls (each call also gets a new address)."""
    sm_clock_median_mhz: Optional[float] = None
    """Median SM clock over the timed calls, read on the device right after each call by a kernel
    that spins for a known number of cycles (device method, NVIDIA)."""
    sm_clock_min_mhz: Optional[float] = None
    """Lowest SM clock so read over the timed calls."""


class SpeedupInterval(SchemaModel):
    """The speedup's confidence interval from paired rounds (reference and solution alternating),
    allowing for a shift of both sides' host times as between processes (docs/timing.md)."""

    low: float
    high: float
    confidence: float = 0.95
    verdict: str
    """``faster`` (the whole interval above 1), ``slower`` (below 1) or ``parity``."""
    rounds: int
    """Host rounds the bootstrap resampled, each run by both sides."""


class SideRounds(SchemaModel):
    """One side's timed calls as measured: device spans of the device pass and of a second one where
    it ran (``None`` where a call launched no device work) and host spans of the host pass, the floor
    already taken off."""

    name: str
    """``reference`` or ``solution``."""
    instrument: str
    device_ms: list[Optional[float]]
    host_ms: list[float]
    device_call_indices: list[int]
    """The input-bank call index each device span ran on (call k of both sides reads the same addresses)."""
    host_call_indices: list[int]
    device_opened_round: list[bool] = Field(default_factory=list)
    """Per device span: its call was the first of its round (each pass alternates which side opens
    round 0, so that the first call after a pause does not always fall on the same side)."""
    host_opened_round: list[bool] = Field(default_factory=list)
    """The same per host span."""
    sm_clock_mhz: list[float] = Field(default_factory=list)
    sync_floor_ms: float
    launch_allowance_ms: float
    hold_us: float = 0.0
    latency_ms: float


class TimingRounds(SchemaModel):
    """Every timed call of one workload, written where ``SOL_EXECBENCH_TIMING_ROUNDS`` names a
    folder (docs/configuration.md). Within a pass the sides alternate which goes first in a round;
    ``device_opened_round`` and ``host_opened_round`` say which went first."""

    definition: NonEmptyString
    workload: NonEmptyString
    sides: list[SideRounds]
    speedup: Optional[float] = None
    speedup_interval: Optional[SpeedupInterval] = None


class Performance(SchemaModel):
    latency_ms: float = Field(default=0.0, ge=0.0)
    """Median latency of the solution's timed rounds."""
    reference_latency_ms: float = Field(default=0.0, ge=0.0)
    speedup_factor: float = Field(default=0.0, ge=0.0)
    """reference_latency_ms / latency_ms (0 when the reference was not timed)."""
    solution_timing: Optional[TimingStats] = None
    reference_timing: Optional[TimingStats] = None
    speedup_interval: Optional[SpeedupInterval] = None
    """Where the reference was timed beside the solution."""
    peak_memory_bytes: Optional[int] = None
    """Peak device memory allocated by a warm-up call of the solution beyond its arguments (null on CPU)."""
    reference_peak_memory_bytes: Optional[int] = None


class DeviceRecord(SchemaModel):
    """Which device ran the evaluation."""

    vendor: str
    """cuda, rocm or cpu."""
    index: Optional[int] = None
    name: str
    arch: Optional[str] = None


class BuildRecord(SchemaModel):
    language: str
    build_time_s: Optional[float] = None
    """Compile (native) or import (Python) time."""
    jit_time_s: Optional[float] = None
    """Wall time of the first call, which includes Triton/DSL JIT compilation."""
    cached: Optional[bool] = None


class ClockSample(SchemaModel):
    """One reading of the device's clocks and state."""

    when: str
    """``start`` (child start), ``before_timing``, ``after_timing`` or ``under_load``."""
    sm_mhz: Optional[int] = None
    """Graphics/SM clock (gfx clock on AMD)."""
    mem_mhz: Optional[int] = None
    throttle_reasons: Optional[list[str]] = None
    """Active clock-event (throttle) reasons; empty when none."""
    temperature_c: Optional[float] = None
    power_w: Optional[float] = None
    power_state: Optional[str] = None
    """Performance state (P0..P12 on NVIDIA, perf level on AMD)."""


class ClockRecord(SchemaModel):
    """Clocks around the timed region, and what ``lock_clocks`` verification found."""

    source: str
    """Where readings came from: nvml, nvidia-smi, amd-smi, rocm-smi, or none."""
    samples: list[ClockSample] = Field(default_factory=list)
    expected_sm_mhz: Optional[int] = None
    """The locked clock lock_clocks expects (env override or device preset)."""
    expected_mem_mhz: Optional[int] = None
    lock_verified: Optional[bool] = None
    """lock_clocks only: clocks under load sat within tolerance of the expected values."""
    other_processes: Optional[list[int]] = None
    """Other processes the driver reports on this GPU (host pid numbering)."""
    capped_ms: Optional[dict[str, Optional[float]]] = None
    """Milliseconds the power and thermal policies held the clocks down between the before_timing and
    after_timing readings (NVML violation counters, warm-up included); null where not measured."""
    capped_region_ms: Optional[float] = None
    """Host milliseconds between those two readings."""
    partial_reasons: list[str] = Field(default_factory=list)
    """What could not be read, and why."""


class Environment(SchemaModel):
    """Upstream's environment block (hardware, libs), and the clocks around the timed region."""

    hardware: NonEmptyString
    libs: dict[str, str] = Field(default_factory=dict)
    clocks: Optional[ClockRecord] = None
    """GPU clocks, throttle reasons, temperature and power around the timed region (GPU only)."""
    launch_level_us: Optional[float] = None
    """The evaluation process's launch level: microseconds per one-element addition queued behind a
    spin kernel (NVIDIA only). It sets the gaps between a call's queued kernels, steady within a
    process and differing between processes; the warm pool keeps processes near the device's lowest."""


class SanitizerReport(SchemaModel):
    """``--sanitize``: one call of this workload under a memory checker."""

    tool: str
    """e.g. ``compute-sanitizer memcheck``, or ``none``."""
    ran: bool
    errors: Optional[int] = None
    """The tool's error count for this workload (null when unknown)."""
    findings: list[str] = Field(default_factory=list)
    """First line of each finding, e.g. 'Invalid __global__ write of size 4 bytes'."""
    note: Optional[str] = None


class Evaluation(SchemaModel):
    status: EvaluationStatus
    environment: Environment
    timestamp: NonEmptyString
    log: str = ""
    correctness: Optional[Correctness] = None
    performance: Optional[Performance] = None
    device: Optional[DeviceRecord] = None
    build: Optional[BuildRecord] = None
    env_hash: Optional[str] = None
    """Short hash of the environment snapshot's non-volatile content."""
    warnings: list[str] = Field(default_factory=list)
    sanitizer: Optional[SanitizerReport] = None
    """Findings of ``--sanitize`` (absent without the flag)."""
    isolation: Optional[IsolationRecord] = None
    """The sandbox the solution ran under (``--isolation``)."""

    @model_validator(mode="after")
    def _fields_match_status(self) -> "Evaluation":
        # Upstream's rule: correctness for PASSED and INCORRECT_NUMERICAL, performance for PASSED only.
        wants_correctness = self.status in (EvaluationStatus.PASSED, EvaluationStatus.INCORRECT_NUMERICAL)
        wants_performance = self.status is EvaluationStatus.PASSED
        if wants_correctness != (self.correctness is not None):
            raise ValueError(f"correctness must {'' if wants_correctness else 'not '}be present for {self.status.value}")
        if wants_performance != (self.performance is not None):
            raise ValueError(f"performance must {'' if wants_performance else 'not '}be present for {self.status.value}")
        return self


class Trace(SchemaModel):
    definition: NonEmptyString
    workload: Workload
    solution: Optional[str] = None
    evaluation: Optional[Evaluation] = None

    @property
    def status(self) -> Optional[EvaluationStatus]:
        return self.evaluation.status if self.evaluation else None

    def to_json_line(self) -> str:
        return self.model_dump_json(exclude_none=False)
