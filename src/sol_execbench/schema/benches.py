"""What ``sol-execbench bench ...`` writes: the all-reduce sweep (``allreduce.json``), the GEMM sweep
(``gemm_sweep.json``), PyTorch baselines in KernelBench's layout (``baseline_time_torch*.json``), the
fast_p report and the comparison of two machines' baselines."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field, RootModel

from .base import NonEmptyString, NonNegativeInt, SchemaModel

BENCH_SCHEMA_VERSION = "1"

BufferKind = Literal["regular", "nccl_mem_pool", "symm_mem_one_shot", "symm_mem_two_shot", "cupy_nccl"]
Placement = Literal["in_place", "out_of_place"]
Launch = Literal["eager", "graph"]


# ---------------------------------------------------------------- all-reduce


class AllreduceMeasurement(SchemaModel):
    """One message size of one configuration (nccl-tests' columns)."""

    ranks: int = Field(ge=1)
    """Processes (one per GPU; CPU processes under gloo)."""
    buffer_kind: BufferKind
    placement: Placement
    bytes: NonNegativeInt
    """Message size S in bytes (count x element size)."""
    count: NonNegativeInt
    """Elements per rank."""
    launch: Launch = "eager"
    """eager: the calls one by one from the host; graph: ``iterations`` calls captured into one CUDA graph
    and replayed (the device's time for back-to-back calls, nccl-tests' graph mode)."""
    time_us: float = Field(ge=0)
    """Per call: the median window's (over ``windows`` windows of the timed calls), the slowest rank's."""
    time_us_min: Optional[float] = Field(default=None, ge=0)
    """Per call: the fastest window's, the slowest rank's (null where not recorded)."""
    host_time_us: Optional[float] = Field(default=None, ge=0)
    """Per call: the host clock's over the median host window, from before the start event to the end
    event's completion, the slowest rank's (null where not recorded)."""
    windows: int = Field(default=1, ge=1)
    """Timed windows of ``iterations`` calls each (the sweep's ``repeats``)."""
    algbw_gbps: float = Field(ge=0)
    """S / time, in GB/s (1e9 bytes)."""
    busbw_gbps: float = Field(ge=0)
    """algbw x 2(n-1)/n, in GB/s (nccl-tests' all-reduce bus bandwidth; 0 for one rank)."""
    checked: bool
    """Every rank's result equalled the exact sum."""
    max_abs_error: float = Field(ge=0)


class SkippedConfiguration(SchemaModel):
    ranks: int = Field(ge=1)
    buffer_kind: BufferKind
    reason: NonEmptyString
    launch: Optional[Launch] = None
    """The launch skipped; null: the kind under every launch."""


class ModelPoint(SchemaModel):
    bytes: NonNegativeInt
    measured_us: float
    model_us: float
    relative_error: float
    """(model - measured) / measured."""


class AlphaBetaFit(SchemaModel):
    """time(S) = alpha + S / beta, fitted on relative error over the sizes of one configuration."""

    ranks: int = Field(ge=1)
    buffer_kind: BufferKind
    placement: Placement
    launch: Launch = "eager"
    alpha_us: float
    """Latency term: the time of an empty message."""
    beta_gbps: Optional[float] = None
    """Bandwidth term in algbw terms (GB/s); busbw terms multiply it by 2(n-1)/n. Null where the
    sizes show no time growing with size (the fit is alpha alone)."""
    max_relative_error: float = Field(ge=0)
    points: list[ModelPoint]


class Topology(SchemaModel):
    source: Optional[str] = None
    """``nvidia-smi topo -m``, ``nvml``, ``amd-smi``, ``rocm-smi``, or null when none could be read."""
    devices: list[str] = Field(default_factory=list)
    links: list[list[str]] = Field(default_factory=list)
    """links[i][j]: the connection between device i and j as the source names it (X on the diagonal)."""
    raw: Optional[str] = None
    reason: Optional[str] = None
    """Why no topology was read (every source tried, each one's failure)."""


class AllreduceSweep(SchemaModel):
    """``allreduce.json``: every configuration's sizes, the skipped ones with why, the model fits."""

    schema_version: Literal["1"] = BENCH_SCHEMA_VERSION
    created_at: NonEmptyString
    backend: NonEmptyString
    """torch.distributed backend: nccl (NCCL or RCCL), gloo."""
    platform: Literal["cuda", "rocm", "cpu"]
    device_name: NonEmptyString
    torch_version: NonEmptyString
    dtype: NonEmptyString
    warmup: NonNegativeInt
    iterations: int = Field(ge=1)
    repeats: int = Field(default=1, ge=1)
    """Timed windows of ``iterations`` calls per measurement; the median window is the time."""
    environment: dict[str, str]
    """The variables the command set for every rank (multicast off)."""
    time_rule: NonEmptyString
    measurements: list[AllreduceMeasurement]
    skipped: list[SkippedConfiguration] = Field(default_factory=list)
    fits: list[AlphaBetaFit] = Field(default_factory=list)
    topology: Topology = Field(default_factory=Topology)
    link_datasheet_gbps: Optional[float] = Field(default=None, gt=0)
    """The GPU's datasheet NVLink / Infinity Fabric bandwidth to its peers, per direction, in GB/s (the
    peak table's ``link_bandwidth``); null on the CPU or for a part without a figure. A ring all-reduce's
    busbw is directly comparable to it."""
    link_source: Optional[str] = None
    """Where ``link_datasheet_gbps`` comes from (part and datasheet line), or why it is null."""


# ---------------------------------------------------------------- GEMM


class GemmPoint(SchemaModel):
    """One shape x dtype x variant, timed by the evaluator (its solution latency)."""

    shape: NonEmptyString
    family: Literal["square", "tall_skinny", "llm", "custom"]
    m: int = Field(ge=1)
    n: int = Field(ge=1)
    k: int = Field(ge=1)
    dtype: NonEmptyString
    variant: NonEmptyString
    status: NonEmptyString
    """The trace's status (PASSED, INCORRECT_NUMERICAL, COMPILE_ERROR, ...)."""
    latency_ms: Optional[float] = None
    tflops: Optional[float] = None
    """2MNK / latency, in 1e12 FLOP/s."""
    fraction_of_datasheet: Optional[float] = None
    fraction_of_calibrated: Optional[float] = None
    arithmetic_intensity: float
    """2MNK over the bytes of A, B and C read or written once (FLOP/byte)."""
    timing_method: Optional[str] = None
    note: Optional[str] = None


class GemmSweep(SchemaModel):
    """``gemm_sweep.json``."""

    schema_version: Literal["1"] = BENCH_SCHEMA_VERSION
    created_at: NonEmptyString
    device_name: NonEmptyString
    part: Optional[str] = None
    """The peak table's part for the device, null when it has none."""
    datasheet_tflops: dict[str, float] = Field(default_factory=dict)
    """dtype -> dense matrix peak (1e12 FLOP/s) of the part's datasheet."""
    memory_bandwidth_gbps: Optional[float] = None
    calibrated_tflops: Optional[dict[str, float]] = None
    """dtype -> calibrated peak, when a calibration cache exists; null otherwise."""
    calibrated_note: Optional[str] = None
    timing: NonEmptyString
    """How the latencies were taken (the evaluator's rule)."""
    points: list[GemmPoint]
    skipped: list[str] = Field(default_factory=list)
    """Dtypes or variants not run here, each with why."""


# ---------------------------------------------------------------- baselines and fast_p


class BaselineStats(SchemaModel):
    mean: float
    """Milliseconds."""
    std: float
    min: float
    max: float
    num_trials: NonNegativeInt
    median: Optional[float] = None
    """The evaluator's latency (the rule's median), milliseconds."""


class BaselineEntry(SchemaModel):
    """One problem in one mode, KernelBench's fields (milliseconds); several workloads: geometric
    means over them, each in ``workloads``. A failed problem has no times and an ``error``."""

    mean: Optional[float] = None
    std: Optional[float] = None
    min: Optional[float] = None
    max: Optional[float] = None
    num_trials: Optional[NonNegativeInt] = None
    hardware: str
    gpu_type: str
    device: str
    workloads: Optional[dict[str, BaselineStats]] = None
    compile_s: Optional[float] = None
    """Seconds of the first call under torch.compile (compilation), apart from the timed calls."""
    status: Optional[str] = None
    """PASSED, or the first status that was not."""
    error: Optional[str] = None


class BaselineFile(RootModel[dict[str, dict[str, BaselineEntry]]]):
    """``baseline_time_torch[_compile_<backend>_<mode>][_test].json``: level -> problem -> entry."""


class FastPLevel(SchemaModel):
    level: str
    """A level of the baseline, or ``all``."""
    problems: NonNegativeInt
    """Problems of the baseline (the denominator)."""
    correct: NonNegativeInt
    fast_p: dict[str, float]
    """p -> fraction of the problems correct and faster than the baseline by more than p."""
    interval_clears: dict[str, NonNegativeInt] = Field(default_factory=dict)
    """p -> problems whose speedup interval lies wholly above p (where the traces carry intervals)."""


class FastPProblem(SchemaModel):
    level: str
    problem: str
    baseline_ms: Optional[float] = None
    candidate_ms: Optional[float] = None
    speedup: Optional[float] = None
    correct: bool
    interval_low: Optional[float] = None
    interval_high: Optional[float] = None
    note: Optional[str] = None


class FastPReport(SchemaModel):
    schema_version: Literal["1"] = BENCH_SCHEMA_VERSION
    baseline: NonEmptyString
    traces: NonEmptyString
    p: list[float]
    levels: list[FastPLevel]
    overall: FastPLevel
    problems: list[FastPProblem]


class HardwareRatio(SchemaModel):
    level: str
    problem: str
    a_ms: Optional[float] = None
    b_ms: Optional[float] = None
    ratio: Optional[float] = None
    """b / a: above 1 where machine A is faster."""


class HardwareComparison(SchemaModel):
    schema_version: Literal["1"] = BENCH_SCHEMA_VERSION
    a: NonEmptyString
    b: NonEmptyString
    a_hardware: Optional[str] = None
    b_hardware: Optional[str] = None
    geomean_ratio: dict[str, Optional[float]]
    """level (and ``all``) -> geometric mean of b / a over the problems both timed."""
    problems: list[HardwareRatio]
