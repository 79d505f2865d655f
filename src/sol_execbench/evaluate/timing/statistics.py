"""Statistics of timed rounds: summaries, and the speedup's interval from paired rounds."""

from __future__ import annotations

import statistics as _stats
from dataclasses import dataclass

import numpy as np

CONFIDENCE = 0.95
RESAMPLES = 2000
_BOOTSTRAP_SEED = 0x5E1  # fixed: the same rounds always give the same interval


@dataclass(frozen=True)
class Summary:
    count: int
    median: float
    mean: float
    std: float
    iqr: float
    minimum: float
    maximum: float

    @property
    def relative_iqr(self) -> float:
        return self.iqr / self.median if self.median > 0 else 0.0


def summarize(values: list[float]) -> Summary:
    ordered = sorted(values)
    n = len(ordered)
    if n >= 2:
        q = _stats.quantiles(ordered, n=4, method="inclusive")
        iqr, std = q[2] - q[0], _stats.stdev(ordered)
    else:
        iqr = std = 0.0
    return Summary(n, _stats.median(ordered), _stats.fmean(ordered), std, iqr, ordered[0], ordered[-1])


@dataclass(frozen=True)
class SpeedupInterval:
    """reference / solution latency, the interval at ``confidence`` and what it says."""

    point: float
    low: float
    high: float
    confidence: float
    rounds: int

    @property
    def verdict(self) -> str:
        if self.low > 1.0:
            return "faster"
        if self.high < 1.0:
            return "slower"
        return "parity"


def speedup_interval(reference_ms: list[float], solution_ms: list[float], confidence: float = CONFIDENCE,
                     resamples: int = RESAMPLES) -> SpeedupInterval:
    """The ratio of the medians, and a percentile bootstrap of it over the paired rounds: a
    resample draws whole rounds, so both sides keep what each round shared (clock, heat, load)."""
    ref, sol = np.asarray(reference_ms, dtype=float), np.asarray(solution_ms, dtype=float)
    if ref.shape != sol.shape or ref.size == 0:
        raise ValueError("paired rounds need as many reference as solution times, at least one")
    point = float(np.median(ref) / np.median(sol)) if np.median(sol) > 0 else 0.0
    if ref.size < 2:
        return SpeedupInterval(point, point, point, confidence, int(ref.size))
    rng = np.random.default_rng(_BOOTSTRAP_SEED)
    picks = rng.integers(0, ref.size, size=(resamples, ref.size))
    sol_medians = np.median(sol[picks], axis=1)
    ratios = np.median(ref[picks], axis=1) / np.where(sol_medians > 0, sol_medians, np.nan)
    ratios = ratios[np.isfinite(ratios)]
    if ratios.size == 0:
        return SpeedupInterval(point, point, point, confidence, int(ref.size))
    tail = (1.0 - confidence) / 2 * 100
    low, high = np.percentile(ratios, [tail, 100 - tail])
    return SpeedupInterval(point, float(min(low, point)), float(max(high, point)), confidence, int(ref.size))
