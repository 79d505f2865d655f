"""``sol-execbench-baseline --format json``: a candidate's traces against one or more baselines'."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field

from .base import NonEmptyString, NonNegativeInt, SchemaModel

COMPARISON_VERSION = "1"

ComparisonClass = Literal["win", "parity", "loss", "failed", "missing", "baseline_failed"]
CLASSES: tuple[str, ...] = ("win", "parity", "loss", "failed", "missing", "baseline_failed")


class WorkloadComparison(SchemaModel):
    problem: NonEmptyString
    """Problem path in a run directory; the definition name in a flat trace file."""
    workload: NonEmptyString
    classification: ComparisonClass
    """``win``: pct >= win_pct; ``parity``: -parity_pct <= pct < win_pct; ``loss``: below; ``failed``:
    the candidate's trace did not PASS; ``missing``: no candidate trace; ``baseline_failed``: the
    baseline's trace did not PASS (nothing to compare against)."""
    baseline_ms: Optional[float] = None
    candidate_ms: Optional[float] = None
    pct: Optional[float] = None
    """100 * (T_b - T_c) / T_b: how much faster the candidate is, in percent of the baseline's time."""
    speedup: Optional[float] = None
    """T_b / T_c."""
    pct_low: Optional[float] = None
    """pct over the traces' speedup intervals, where they carry them (docs/scoring.md)."""
    pct_high: Optional[float] = None
    spans_threshold: Optional[str] = None
    """The threshold the interval [pct_low, pct_high] straddles (``win`` or ``parity``): the class is
    not settled by the measurement."""
    candidate_status: Optional[str] = None
    baseline_status: Optional[str] = None


class ComparisonTotals(SchemaModel):
    compared: NonNegativeInt
    """Workloads of the baseline."""
    counts: dict[str, NonNegativeInt] = Field(default_factory=dict)
    """Workloads per class (every class listed)."""
    both_passed: NonNegativeInt
    speedup_geomean: Optional[float] = None
    """Geometric mean of T_b / T_c over the workloads PASSED on both sides."""
    unsettled: NonNegativeInt = 0
    """Comparisons whose interval spans a threshold."""
    candidate_only: NonNegativeInt = 0
    """Candidate workloads this baseline lacks (not compared)."""


class BaselineSection(SchemaModel):
    baseline: NonEmptyString
    """The baseline source as given."""
    totals: ComparisonTotals
    workloads: list[WorkloadComparison] = Field(default_factory=list)


class BaselineComparison(SchemaModel):
    schema_version: Literal["1"] = COMPARISON_VERSION
    candidate: NonEmptyString
    win_pct: float
    parity_pct: float
    amd_native_claim: bool = False
    """``--amd-native-claim``: the output is labelled as a claim about AMD GPUs."""
    candidate_hardware: list[str] = Field(default_factory=list)
    """Distinct hardware the candidate's traces name (``evaluation.device.name``, else the environment's)."""
    warnings: list[str] = Field(default_factory=list)
    sections: list[BaselineSection] = Field(default_factory=list)
    totals: ComparisonTotals
    """Every baseline's workloads together."""
