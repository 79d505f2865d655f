"""SOL scores of a dataset run (``--amd-score-report``) and the baseline times they may be scored
against (``--scoring-baseline``). docs/scoring.md gives every formula."""

from __future__ import annotations

from typing import Annotated, Literal, Optional

from pydantic import Field

from .base import NonEmptyString, NonNegativeInt, SchemaModel
from .bound import HardwarePeaks
from .trace import SpeedupInterval

SCORE_REPORT_VERSION = "1"
SCORING_BASELINE_VERSION = "1"


class ScoringBaseline(SchemaModel):
    """``--scoring-baseline FILE``: the baseline time T_b of each workload, in milliseconds, keyed by
    problem path (relative to the dataset root) and workload uuid."""

    schema_version: Literal["1"] = SCORING_BASELINE_VERSION
    description: Optional[str] = None
    """What the times are (e.g. "torch.compile max-autotune on an MI300X, release 2026.1")."""
    hardware: Optional[str] = None
    """The GPU the times were taken on."""
    latency_ms: dict[NonEmptyString, dict[NonEmptyString, Annotated[float, Field(gt=0)]]]
    """``{"L1/rmsnorm": {"<workload uuid>": 0.0123}}``; every time above 0."""


ScoreFlagKind = Literal["solution_below_sol", "reference_below_sol", "bound_far_from_reference", "no_bound",
                        "no_baseline_time"]


class ScoreFlag(SchemaModel):
    """Something a reader of the scores must know: a measurement or a bound not to trust as is."""

    problem: NonEmptyString
    workload: NonEmptyString
    kind: ScoreFlagKind
    """``solution_below_sol`` / ``reference_below_sol``: a PASSED latency under T_SOL on datasheet
    ceilings (a measurement fault or an undercounted bound); ``bound_far_from_reference``: the
    reference's own time over 100x T_SOL (a bound that may not be tight); ``no_bound``: no T_SOL (the
    problem could not be bounded); ``no_baseline_time``: no T_b for a PASSED workload."""
    detail: NonEmptyString


class WorkloadScore(SchemaModel):
    uuid: NonEmptyString
    status: NonEmptyString
    """The trace's status, or ``MISSING`` where the problem has no trace of this workload."""
    latency_ms: Optional[float] = None
    """T_k: the solution's latency (PASSED only)."""
    reference_latency_ms: Optional[float] = None
    """The reference's own latency in the same evaluation (0 in the trace reads as null here)."""
    baseline_ms: Optional[float] = None
    """T_b: the reference latency, or the scoring baseline's time."""
    t_sol_ms: Optional[float] = None
    bound_by: Optional[Literal["compute", "memory"]] = None
    bytes_only: bool = False
    """T_SOL from bytes alone (the reference could not be counted)."""
    speedup: Optional[float] = None
    """T_b / T_k."""
    sol_score: Optional[float] = None
    """1 / (1 + (T_k - T_SOL) / (T_b - T_SOL)), with the edge rules; 0 for a workload that did not
    pass; null where T_SOL or T_b is unknown (then it is left out of the means)."""
    sol_fraction: Optional[float] = None
    """T_SOL / T_k; 0 for a workload that did not pass."""
    speedup_interval: Optional[SpeedupInterval] = None
    """The trace's paired interval of the speedup over the reference, where timed so."""


class ProblemScore(SchemaModel):
    problem: NonEmptyString
    """Path relative to the dataset root."""
    category: str
    definition: Optional[str] = None
    statuses: dict[str, NonNegativeInt] = Field(default_factory=dict)
    workloads: list[WorkloadScore] = Field(default_factory=list)
    sol_score: Optional[float] = None
    """Mean of the workloads' scores (failed workloads 0, unscored ones left out); 0 for a problem
    without traces; null when no workload could be scored."""
    sol_fraction: Optional[float] = None
    """Mean of the workloads' fractions of SOL over the same workloads."""
    speedup_geomean: Optional[float] = None
    """Geometric mean of T_b / T_k over the PASSED workloads with a T_b."""
    note: Optional[str] = None


class ScoreTotals(SchemaModel):
    """Problems of a category (or the whole run), each weighted equally."""

    category: str
    """Empty for the whole run."""
    problems: NonNegativeInt
    problems_scored: NonNegativeInt
    workloads: NonNegativeInt
    workloads_passed: NonNegativeInt
    sol_score: Optional[float] = None
    """Mean of the problems' scores."""
    sol_fraction: Optional[float] = None
    speedup_geomean: Optional[float] = None
    """Geometric mean of the problems' speedup geomeans."""


class ScoreBaselineSource(SchemaModel):
    kind: Literal["reference", "file"]
    """``reference``: T_b is each trace's reference latency; ``file``: a ``--scoring-baseline``."""
    path: Optional[str] = None
    sha256: Optional[str] = None
    description: Optional[str] = None


class ScoreReport(SchemaModel):
    """``--amd-score-report FILE``: SOL scores of a dataset run's traces (vendor-neutral content)."""

    schema_version: Literal["1"] = SCORE_REPORT_VERSION
    root: NonEmptyString
    output: NonEmptyString
    """The run directory whose traces were scored."""
    created_at: NonEmptyString
    hardware: HardwarePeaks
    """The part whose datasheet peaks priced T_SOL."""
    ceilings: Literal["datasheet"] = "datasheet"
    baseline: ScoreBaselineSource
    totals: ScoreTotals
    categories: list[ScoreTotals] = Field(default_factory=list)
    problems: list[ProblemScore] = Field(default_factory=list)
    flags: list[ScoreFlag] = Field(default_factory=list)
