"""A candidate's traces against baselines' (``sol-execbench-baseline``): per workload win, parity,
loss, failed or missing. No torch: this runs wherever the trace files are.

pct = 100 * (T_b - T_c) / T_b. Where the traces carry speedup intervals (the paired rounds of the
timing), the interval of pct is taken from them: each side's interval relative to its own speedup
is its latency's relative uncertainty, and the two combine as a ratio (docs/scoring.md)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from sol_execbench.platform.peaks import UnknownPartError, peaks_for
from sol_execbench.schema import EvaluationStatus, Trace
from sol_execbench.schema.comparison import (CLASSES, BaselineComparison, BaselineSection, ComparisonTotals,
                                             WorkloadComparison)
from sol_execbench.schema.trace_files import TraceKey, TraceSet

from .score import geomean

DEFAULT_WIN_PCT = 2.0
DEFAULT_PARITY_PCT = 5.0
# AMD GPU names without a peak table entry (an "AMD EPYC" host CPU is not one)
AMD_GPU_NAME = re.compile(r"\b(INSTINCT|RADEON|MI\d{3}[A-Z]?|GFX\d{3,4}[A-Z]?)\b")


@dataclass(frozen=True)
class Thresholds:
    win_pct: float = DEFAULT_WIN_PCT
    parity_pct: float = DEFAULT_PARITY_PCT


def _passed_latency(trace: Trace | None) -> float | None:
    if trace is None or trace.evaluation is None or trace.evaluation.status is not EvaluationStatus.PASSED:
        return None
    latency = trace.evaluation.performance.latency_ms
    return latency if latency > 0 else None


def _relative_interval(trace: Trace) -> tuple[float, float] | None:
    performance = trace.evaluation.performance
    interval = performance.speedup_interval
    if interval is None or performance.speedup_factor <= 0:
        return None
    return interval.low / performance.speedup_factor, interval.high / performance.speedup_factor


def _pct(ratio: float) -> float:
    """pct of a speedup T_b / T_c: 100 * (1 - T_c / T_b)."""
    return 100.0 * (1.0 - 1.0 / ratio)


def classify(pct: float, thresholds: Thresholds) -> str:
    if pct >= thresholds.win_pct:
        return "win"
    if pct >= -thresholds.parity_pct:
        return "parity"
    return "loss"


def _spans(low: float, high: float, thresholds: Thresholds) -> str | None:
    spanned = [name for name, edge in (("win", thresholds.win_pct), ("parity", -thresholds.parity_pct))
               if low < edge <= high]
    return " and ".join(spanned) or None


def compare_workload(key: TraceKey, baseline: Trace, candidate: Trace | None, thresholds: Thresholds) -> WorkloadComparison:
    problem, uuid = key
    base = WorkloadComparison(problem=problem, workload=uuid, classification="missing",
                              baseline_status=baseline.status.value if baseline.status else None,
                              candidate_status=candidate.status.value if candidate and candidate.status else None)
    if candidate is None:
        return base
    t_c, t_b = _passed_latency(candidate), _passed_latency(baseline)
    if t_c is None:
        return base.model_copy(update={"classification": "failed"})
    if t_b is None:
        return base.model_copy(update={"classification": "baseline_failed", "candidate_ms": t_c})
    ratio = t_b / t_c
    pct = 100.0 * (t_b - t_c) / t_b
    update = {"classification": classify(pct, thresholds), "baseline_ms": t_b, "candidate_ms": t_c, "pct": pct,
              "speedup": ratio}
    c_rel, b_rel = _relative_interval(candidate), _relative_interval(baseline)
    if c_rel is not None or b_rel is not None:
        c_low, c_high = c_rel or (1.0, 1.0)
        b_low, b_high = b_rel or (1.0, 1.0)
        low, high = _pct(ratio * c_low / b_high), _pct(ratio * c_high / b_low)
        update.update(pct_low=low, pct_high=high, spans_threshold=_spans(low, high, thresholds))
    return base.model_copy(update=update)


def totals_of(rows: list[WorkloadComparison], candidate_only: int = 0) -> ComparisonTotals:
    counts = {name: sum(r.classification == name for r in rows) for name in CLASSES}
    ratios = [r.speedup for r in rows if r.speedup is not None]
    return ComparisonTotals(compared=len(rows), counts=counts, both_passed=len(ratios), speedup_geomean=geomean(ratios),
                            unsettled=sum(r.spans_threshold is not None for r in rows), candidate_only=candidate_only)


def hardware_of(trace: Trace) -> str | None:
    evaluation = trace.evaluation
    if evaluation is None:
        return None
    if evaluation.device is not None and evaluation.device.name:
        return evaluation.device.name
    return evaluation.environment.hardware


def made_on_amd(trace: Trace) -> bool:
    """``evaluation.device.vendor`` where recorded, else the hardware string: a known AMD part, or
    an AMD GPU's name in it (Instinct, Radeon, MI300X, gfx942)."""
    evaluation = trace.evaluation
    if evaluation is None:
        return False
    if evaluation.device is not None:
        return evaluation.device.vendor == "rocm"
    hardware = evaluation.environment.hardware
    try:
        return peaks_for(hardware).vendor == "rocm"
    except UnknownPartError:
        return AMD_GPU_NAME.search(hardware.upper()) is not None


def _claim_warnings(candidate: TraceSet) -> list[str]:
    elsewhere = [t for t in candidate.traces.values() if t.evaluation is not None and not made_on_amd(t)]
    if not elsewhere:
        return []
    seen = sorted({hardware_of(t) or "unknown" for t in elsewhere})
    return [f"--amd-native-claim: {len(elsewhere)} of {len(candidate.traces)} candidate trace(s) were not made on an "
            f"AMD GPU ({', '.join(seen)}); they do not support an AMD-native claim"]


def compare_sets(candidate: TraceSet, baselines: list[TraceSet], thresholds: Thresholds,
                 amd_native_claim: bool = False) -> BaselineComparison:
    sections, every = [], []
    warnings = _claim_warnings(candidate) if amd_native_claim else []
    for baseline in baselines:
        rows = [compare_workload(key, trace, candidate.traces.get(key), thresholds)
                for key, trace in sorted(baseline.traces.items())]
        candidate_only = sum(key not in baseline.traces for key in candidate.traces)
        if rows and all(r.classification == "missing" for r in rows) and candidate.flat != baseline.flat:
            warnings.append(f"{baseline.source}: no workload in common with the candidate: a flat file keys on the "
                            "definition name, a run directory on the problem path; compare like with like")
        sections.append(BaselineSection(baseline=str(baseline.source), totals=totals_of(rows, candidate_only),
                                        workloads=rows))
        every.extend(rows)
    hardware = sorted({h for t in candidate.traces.values() if (h := hardware_of(t))})
    return BaselineComparison(candidate=str(candidate.source), win_pct=thresholds.win_pct,
                              parity_pct=thresholds.parity_pct, amd_native_claim=amd_native_claim,
                              candidate_hardware=hardware, warnings=warnings, sections=sections, totals=totals_of(every))
