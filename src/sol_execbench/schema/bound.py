"""The speed-of-light bound of a problem's workloads: what a workload must compute and move (the
derivation, no hardware), and that priced on one part (``sol-execbench bound --json``)."""

from __future__ import annotations

from typing import Literal, Optional

from .base import NonEmptyString, NonNegativeInt, SchemaModel


class CountedFlops(SchemaModel):
    """FLOPs of one kind and dtype."""

    unit: Literal["matrix", "vector"]
    """``matrix``: matmul, convolution and attention FLOPs (tensor / matrix cores); ``vector``: the rest."""
    dtype: NonEmptyString
    """torch dtype name of the operands (matrix: the first input's; vector: the result's)."""
    flops: NonNegativeInt


class WorkloadDerivation(SchemaModel):
    """One workload's fewest bytes and FLOPs by kind and dtype, before any hardware prices them."""

    uuid: NonEmptyString
    axes: dict[str, int]
    """Every axis value (constants and expressions resolved)."""
    bytes_moved: NonNegativeInt
    """Each input read once and each output written once (Python scalars are free)."""
    flops: list[CountedFlops]
    """Empty when the bound is bytes-only."""
    total_flops: Optional[NonNegativeInt]
    arithmetic_intensity: Optional[float]
    """FLOPs per byte moved; null when bytes-only or nothing is moved."""
    bytes_only_reason: Optional[str] = None
    """Why the reference could not be counted (it ran into data it needs, e.g. ``.item()``)."""


class ProblemDerivation(SchemaModel):
    """``--solar-derivation DIR/<problem path>/derivation.json``: a problem's counts, per workload."""

    problem: NonEmptyString
    """The problem's path relative to the dataset root (the directory as given for one problem)."""
    definition: NonEmptyString
    workloads: list[WorkloadDerivation]


class PricedFlops(CountedFlops):
    """FLOPs of one kind and dtype, and the rate that prices them."""

    priced_as: NonEmptyString
    """The table rate used, e.g. ``matrix fp16`` (fp32 matmuls are priced as fp16, see docs/scoring.md)."""
    rate_flops_per_s: float
    time_s: float


class WorkloadBound(SchemaModel):
    """One workload's minimal bytes, FLOPs and the time neither can beat."""

    uuid: NonEmptyString
    axes: dict[str, int]
    """Every axis value (constants and expressions resolved)."""
    bytes_moved: NonNegativeInt
    """Each input read once and each output written once (Python scalars are free)."""
    flops: list[PricedFlops]
    """Empty when the bound is bytes-only."""
    total_flops: Optional[NonNegativeInt]
    arithmetic_intensity: Optional[float]
    """FLOPs per byte moved; null when bytes-only or nothing is moved."""
    compute_time_s: Optional[float]
    memory_time_s: float
    t_sol_s: float
    """max(compute_time_s, memory_time_s)."""
    bound_by: Literal["compute", "memory"]
    bytes_only_reason: Optional[str] = None
    """Why the reference could not be counted (it ran into data it needs, e.g. ``.item()``)."""


class HardwarePeaks(SchemaModel):
    """The table entry that priced the bound."""

    name: NonEmptyString
    label: NonEmptyString
    memory_bandwidth_bytes_per_s: float
    matrix_flops_per_s: dict[str, float]
    vector_flops_per_s: dict[str, float]
    source: NonEmptyString
    resolved_from: NonEmptyString
    """The name given (``--hardware``) or the detected device name."""
    measured: list[str] = []
    """With measured ceilings: the rates the calibration gave (``matrix bf16``, ``memory``); the
    others are the datasheet's. Empty with datasheet ceilings."""


class ProblemBound(SchemaModel):
    """A problem's bounds, one per workload."""

    problem: NonEmptyString
    """The problem directory as given."""
    definition: NonEmptyString
    hardware: HardwarePeaks
    ceilings: Literal["datasheet", "measured"] = "datasheet"
    """Which ceilings priced the bound: the vendor's datasheet, or this device's calibration
    (``sol-execbench calibrate``; ``hardware.measured`` lists the rates it gave)."""
    workloads: list[WorkloadBound]
