"""Statistics of timed rounds: summaries, and the speedup's interval from paired rounds."""

from __future__ import annotations

import math
import statistics as _stats
from dataclasses import dataclass

import numpy as np

from .rule import host_set, side_latency_ms

CONFIDENCE = 0.95
# A side's device time and its host time are each the mean of that pass's spans with this share cut
# from each end (``trimmed_mean``).
TRIM = 0.2
RESAMPLES = 2000
# Relative standard deviation of an offset between the device times of two sides within one
# process, which rounds do not show: identical calls at identical addresses, alternating, read up
# to 1.5% apart over hundreds of rounds, the slower side changing between processes and at times
# within one (A/A on an H100, docs/validation.md). Each resample draws one per side.
DEVICE_OFFSET = 0.005
# The same for host times: over 1,071 recorded pairs of identical sides (H100) the log ratio of their
# host times spread 1.90% against 1.68% from their rounds alone (docs/validation.md); of the 379
# pairs where a host time may set the latency, 92.6% of intervals contained 1.00 without this
# offset, 97.9% with it. It moves a latency only where the host time sets it, magnified there as
# the host time less the allowance is.
HOST_OFFSET = 0.005
# The log host time of one call moves between processes by about this (standard deviation), both
# sides of a process together: between warm-pool processes on one H200 a side's log host time
# spread by a median of 0.2 (68 sides of RMSNorm-family problems, three to six processes each), the
# log ratio of two sides' host times by less (0.07 and 0.13 in the two sets); an eager RMSNorm read
# 104, 118 and 157 us on an H100. 0.2 is the larger of two machines' figures: on another H100 the
# A/A sides of the same problems spread by a median of 0.03 (90th percentile 0.16) over three
# processes. A latency of host time less the allowance follows such a shift by
# host / (host - allowance), a device time not at all: where the sides follow it unequally, the
# speedup moves between processes by more than any rounds within one show. The interval draws it
# (``speedup_interval``); added host rounds stop where their error is well under it (``paired``).
PROCESS_HOST_SHIFT = 0.2
# The interval's bootstrap draws host rounds as this many runs of consecutive rounds, each
# rounds // HOST_BLOCKS long (single rounds below 2 x HOST_BLOCKS): host load comes by stretches, so
# rounds near each other share more than a bootstrap of single rounds assumes. Over 219 recorded
# pairs of identical sides with 200 host rounds and more (H200), the standard error of their paired
# differences from means of runs of 26 rounds was 1.11 times (median) that from single rounds.
# With the cap of HOST_ROUNDS_FACTOR passes (paired.py), a run is at most one pass's rounds.
HOST_BLOCKS = 24
# A percentile bootstrap over few rounds is too narrow: it reads the spread of the rounds as if it
# were known (their variance over n, not n - 1) and draws normal tails where Student's t belongs;
# over fewer than 6 rounds no resample reaches a 95% tail at all. Each resample's move of the log
# speedup from the rounds (not its offsets or shift, which are not estimated from them) is widened
# by sqrt(n / (n - 1)) t(n - 1) / z, n the fewest rounds of a pass that may move the speedup
# (``small_sample_widening``): 9.2 for 2 rounds, 2.7 for 3, 1.22 for 10, 1.07 for 26 (a GPU pass of
# the default 50 iterations), 1.02 for 100. Simulated identical sides scattering 10% held 1.00 in
# 71% of 3-round intervals without it, 94% with it (docs/validation.md).
_BOOTSTRAP_SEED = 0x5E1  # fixed: the same rounds always give the same interval
SE_RESAMPLES = 400  # for a standard error that decides whether to run more rounds, not for an interval


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


def trimmed_mean(spans: list[float] | tuple[float, ...]) -> float:
    """The mean of the spans less the lowest and highest fifth (``TRIM``).

    Host spans have a long upper tail (preemption, interrupts) that a mean would follow; a median,
    robust too, wastes most rounds: over the same recorded rounds on an H100 the trimmed mean held
    identical sides' host times 2 to 3 times closer than the median (docs/timing.md). Device spans
    of a kernel of a few microseconds fall on the records' steps (about 32 ns): their median moves
    by half a step or a whole one as the rounds fall, the trimmed mean by the share that changed."""
    ordered = sorted(spans)
    cut = int(len(ordered) * TRIM)
    return _stats.fmean(ordered[cut:len(ordered) - cut])


def host_time_ms(spans: list[float] | tuple[float, ...]) -> float:
    """A side's host time: the trimmed mean of its host spans."""
    return trimmed_mean(spans)


def _trimmed_rows(drawn: np.ndarray) -> np.ndarray:
    """``trimmed_mean`` of each row over its values that are not NaN (NaN for a row of none). Sorted
    as float32 (spans carry at least nanoseconds of noise against its 7 digits; the means are taken
    in float64): sorting 2,000 resamples of 600 rounds in float64 took 18 ms of a workload's time,
    float32 about half."""
    ordered = np.sort(drawn.astype(np.float32), axis=1)
    width = drawn.shape[1]
    missing = np.isnan(ordered[:, -1])  # NaN sorts last
    if not missing.any():
        cut = int(width * TRIM)
        return ordered[:, cut:width - cut].mean(axis=1, dtype=np.float64)
    counts = np.sum(~np.isnan(ordered), axis=1)
    cuts = (counts * TRIM).astype(np.int64)
    sums = np.zeros((len(ordered), width + 1))
    np.cumsum(np.nan_to_num(ordered), axis=1, dtype=np.float64, out=sums[:, 1:])
    rows, kept = np.arange(len(ordered)), counts - 2 * cuts
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(kept > 0, (sums[rows, counts - cuts] - sums[rows, cuts]) / kept, np.nan)


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


@dataclass(frozen=True)
class SideSpans:
    """One side's spans (ms) for the rule: device spans per device-pass round (``None`` where a call
    launched no device work; all ``None`` on the CPU) and host spans per host-pass round, floor
    already taken off. Round k of one side is paired with round k of the other."""

    device: tuple[float | None, ...]
    host: tuple[float, ...]
    allowance_ms: float

    def device_array(self) -> np.ndarray:
        return np.array([np.nan if d is None else d for d in self.device], dtype=float)

    def device_time_ms(self) -> float | None:
        """The trimmed mean over the calls that launched device work; None where none did."""
        measured = [d for d in self.device if d is not None]
        return trimmed_mean(measured) if measured else None

    def latency_ms(self) -> float:
        return side_latency_ms(self.device_time_ms(), host_time_ms(self.host), self.allowance_ms)


def _winsorised_deviations(host: tuple[float, ...]) -> np.ndarray:
    """Each host round's influence on the host time (the trimmed mean): its span winsorised (the cut
    fifths set to the nearest span kept), less their mean, over 1 - 2 x the cut share."""
    spans = np.asarray(host, dtype=float)
    ordered = np.sort(spans)
    n, cut = spans.size, int(spans.size * TRIM)
    winsorised = np.clip(spans, ordered[cut], ordered[n - cut - 1])
    return (winsorised - winsorised.mean()) / (1 - 2 * cut / n)


def host_time_se_ms(host: tuple[float, ...]) -> float:
    """Standard error of the host time (``host_time_ms``), from its rounds' influence."""
    return float(_winsorised_deviations(host).std(ddof=1) / len(host) ** 0.5) if len(host) >= 2 else float("inf")


def host_may_set(side: SideSpans, margin: float) -> bool:
    """Whether the side's host time may set its latency: it has a device time to weigh against, and
    its host time less the allowance, raised by ``margin`` standard errors of the host time, exceeds
    it. A host time clearly below the device time cannot move the latency, however many rounds."""
    device = side.device_time_ms()
    if device is None or len(side.host) < 2:
        return False
    return host_time_ms(side.host) - side.allowance_ms + margin * host_time_se_ms(side.host) > device


def _host_influence(side: SideSpans, margin: float) -> np.ndarray | None:
    """Each host round's influence on the side's log latency (``_winsorised_deviations`` over the
    latency); None where the host time cannot set the latency (``host_may_set``)."""
    if not host_may_set(side, margin):
        return None
    return _winsorised_deviations(side.host) / side.latency_ms()


def host_speedup_se(solution: SideSpans, reference: SideSpans | None, margin: float) -> float:
    """Standard error of the log speedup that the host rounds leave (0 where neither side's host
    time can set its latency, see ``_host_influence``). Paired where both sides' host times may set
    their latencies: round k of the reference less round k of the solution, so what a round shared
    (host load, clocks) cancels. Otherwise the one side's own error."""
    sides = [x for x in (_host_influence(solution, margin),
                         _host_influence(reference, margin) if reference is not None else None) if x is not None]
    if not sides:
        return 0.0
    if len(sides) == 2:
        paired = sides[1] - sides[0]
        return float(paired.std(ddof=1) / len(paired) ** 0.5)
    return float(sides[0].std(ddof=1) / len(sides[0]) ** 0.5)


def host_response(side: SideSpans, margin: float) -> tuple[tuple[float, float], ...]:
    """How far the side's latency follows a change of its host time: the values d log latency / d log
    host time takes over host times within ``margin`` standard errors of its own, as ranges. Where
    the host time less the allowance exceeds the device time, the host time over the latency
    (falling from (allowance + device) / device just above it towards 1); elsewhere 0 (the device
    time does not follow the host). Without a device time the latency is the host time itself: 1."""
    device = side.device_time_ms()
    if device is None or len(side.host) < 2:
        return ((1.0, 1.0),) if device is None else ((0.0, 0.0),)
    host, reach, allowance = host_time_ms(side.host), margin * host_time_se_ms(side.host), side.allowance_ms
    high, low = host + reach, max(host - reach, 0.0)
    if high - allowance <= device:
        return ((0.0, 0.0),)
    crosses = low - allowance <= device  # the margin reaches below the device time
    steepest = (allowance + device) / device if device > 0 else math.inf
    host_set_part = (high / (high - allowance), steepest if crosses else low / (low - allowance))
    return ((0.0, 0.0), host_set_part) if crosses else (host_set_part,)


def host_response_gap(solution: SideSpans, reference: SideSpans, margin: float) -> float:
    """The least difference between the two sides' ``host_response`` values: a shift of every host
    time by a factor k moves the log speedup by at least this times log k. 0 where either side's
    host time cannot set its latency within the margin: identical sides, one read as host-set and
    the other as device-set through a stretch of host load, must not look apart (A/A rounds
    recorded on an H200); where one side is host-set beside one far from it, ``paired`` gives the
    host-set side no added rounds anyway."""
    ranges = host_response(solution, margin), host_response(reference, margin)
    if any(r == ((0.0, 0.0),) for r in ranges):
        return 0.0
    return min(max(0.0, a_low - b_high, b_low - a_high) for a_low, a_high in ranges[0] for b_low, b_high in ranges[1])


def device_sets_latency(side: SideSpans) -> bool:
    """Whether the side's device time sets its latency (it has one, and its host time less the
    allowance is not above it)."""
    device = side.device_time_ms()
    return device is not None and not host_set(device, host_time_ms(side.host), side.allowance_ms)


def _device_picks(rng: np.random.Generator, sides: list[SideSpans], resamples: int) -> list[np.ndarray]:
    """Round numbers for each side's device rounds: the same for both sides where they ran as many
    (paired rounds), else each side its own (one ran added device passes alone)."""
    counts = {len(s.device) for s in sides}
    if len(counts) == 1:
        shared = rng.integers(0, max(1, counts.pop()), size=(resamples, len(sides[0].device)))
        return [shared] * len(sides)
    return [rng.integers(0, max(1, len(s.device)), size=(resamples, len(s.device))) for s in sides]


def device_speedup_se(solution: SideSpans, reference: SideSpans | None, resamples: int = SE_RESAMPLES) -> float:
    """Standard error of the log speedup that the device rounds leave: a bootstrap of the device
    times of the sides whose device time sets their latency, drawing the same round numbers for
    both sides where they ran as many rounds (0 where neither side's device time sets its latency).
    Without a reference, that of the solution's log latency. A side whose host time sets its
    latency contributes nothing: its device rounds cannot move it."""
    sides = [(s, sign) for s, sign in ((solution, -1.0), (reference, 1.0)) if s is not None and device_sets_latency(s)]
    if not sides:
        return 0.0
    if any(len(s.device) < 2 for s, _ in sides):
        return float("inf")
    picks = _device_picks(np.random.default_rng(_BOOTSTRAP_SEED), [s for s, _ in sides], resamples)
    log_ratio = sum(sign * np.log(_device_rows(s.device_array(), p)) for (s, sign), p in zip(sides, picks))
    log_ratio = log_ratio[np.isfinite(log_ratio)]
    return float(log_ratio.std(ddof=1)) if log_ratio.size >= 2 else float("inf")


def _device_rows(values: np.ndarray, picks: np.ndarray) -> np.ndarray:
    """The device time (``trimmed_mean``) of each resample (row of ``picks``) over the values that
    were measured (not NaN); NaN for a resample that drew none."""
    if values.size == 0:
        return np.full(len(picks), np.nan)
    return _trimmed_rows(values[picks])


def _t_two_sided_mass(t: float, dof: int) -> float:
    """P(|T| <= t) for Student's t with ``dof`` degrees of freedom, from its finite series in
    cos(theta), theta = atan(t / sqrt(dof)) (exact for whole degrees of freedom)."""
    theta = math.atan(t / math.sqrt(dof))
    c2, term, total = math.cos(theta) ** 2, 1.0, 1.0
    if dof % 2 == 0:
        for k in range(1, dof // 2):
            term *= c2 * (2 * k - 1) / (2 * k)
            total += term
        return math.sin(theta) * total
    if dof == 1:
        return 2 * theta / math.pi
    for k in range(1, (dof - 1) // 2):
        term *= c2 * (2 * k) / (2 * k + 1)
        total += term
    return 2 / math.pi * (theta + math.sin(theta) * math.cos(theta) * total)


def t_quantile(confidence: float, dof: int) -> float:
    """The t such that P(|T| <= t) = ``confidence`` for Student's t with ``dof`` degrees of freedom."""
    low, high = 0.0, 1.0
    while _t_two_sided_mass(high, dof) < confidence:
        low, high = high, high * 2
    for _ in range(100):
        middle = (low + high) / 2
        low, high = (middle, high) if _t_two_sided_mass(middle, dof) < confidence else (low, middle)
    return (low + high) / 2


def small_sample_widening(rounds: int, confidence: float = CONFIDENCE) -> float:
    """How much wider than the percentile bootstrap's an interval over ``rounds`` paired rounds must
    be: sqrt(n / (n - 1)) t(n - 1) / z at ``confidence`` (see ``_BOOTSTRAP_SEED``'s comment)."""
    if rounds < 2:
        return 1.0
    z = _stats.NormalDist().inv_cdf((1 + confidence) / 2)
    return math.sqrt(rounds / (rounds - 1)) * t_quantile(confidence, rounds - 1) / z


def _fewest_rounds(reference: SideSpans, solution: SideSpans) -> int:
    """The fewest rounds of a pass that may move the speedup: the host pass's, and the device passes'
    of a side whose device time sets its latency."""
    counts = [len(solution.host)] + [len(s.device) for s in (reference, solution) if device_sets_latency(s)]
    return min(counts)


def _host_picks(rng: np.random.Generator, rounds: int, resamples: int) -> np.ndarray:
    """Round numbers for ``resamples`` resamples of ``rounds`` host rounds: a moving-block
    bootstrap, each resample ``HOST_BLOCKS`` (or a few more) runs of ``rounds // HOST_BLOCKS``
    consecutive rounds cut to ``rounds``."""
    block = rounds // HOST_BLOCKS
    if block <= 1:
        return rng.integers(0, rounds, size=(resamples, rounds))
    starts = rng.integers(0, rounds - block + 1, size=(resamples, -(-rounds // block)))
    return (starts[:, :, None] + np.arange(block)).reshape(resamples, -1)[:, :rounds]


def _resampled_latencies(side: SideSpans, device_picks: np.ndarray, host_picks: np.ndarray,
                         offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``side_latency_ms`` of each resample, over arrays, from the rounds alone and with each time
    multiplied by its offset (``offsets``: device, host): the device time (NaN: none), the host time
    less the allowance where larger; the host time without a device time."""
    devices = _device_rows(side.device_array(), device_picks)
    hosts = _trimmed_rows(np.asarray(side.host, dtype=float)[host_picks])
    return (_latency_rows(devices, hosts, side.allowance_ms),
            _latency_rows(devices * offsets[0], hosts * offsets[1], side.allowance_ms))


def _latencies_under_shift(side: SideSpans, factors: np.ndarray) -> np.ndarray:
    """``side_latency_ms`` of the side's device and host times with the host time multiplied by each
    of ``factors``."""
    device = side.device_time_ms()
    return _latency_rows(np.nan if device is None else device, host_time_ms(side.host) * factors, side.allowance_ms)


def _latency_rows(devices: np.ndarray | float, hosts: np.ndarray, allowance_ms: float) -> np.ndarray:
    """``side_latency_ms`` over arrays: a NaN device time is none (the host time is the latency)."""
    return np.where(np.isnan(devices), hosts, np.maximum(devices, hosts - allowance_ms))


def _ratio_rows(reference: np.ndarray, solution: np.ndarray) -> np.ndarray:
    """Reference over solution latency per resample; NaN where the solution's is not positive."""
    return reference / np.where(solution > 0, solution, np.nan)


def speedup_interval(reference: SideSpans, solution: SideSpans, confidence: float = CONFIDENCE,
                     resamples: int = RESAMPLES, process_shift: float = PROCESS_HOST_SHIFT) -> SpeedupInterval:
    """The ratio of the two sides' latencies, and a percentile bootstrap of it: a resample draws
    whole rounds of each pass (the same round numbers for both sides where they ran as many), so
    both sides keep what each round shared (clock, heat, load), and an offset of each side's device
    time (``DEVICE_OFFSET``) and of its host time (``HOST_OFFSET``), each moving a latency only
    where its time sets it. Each resample also carries the move of the speedup that a shift of both
    sides' host times together by a factor drawn from ``process_shift`` (``PROCESS_HOST_SHIFT``)
    gives at the measured times: another process on the same host reads its host times shifted so.
    Identical sides follow it alike; where one side's host time sets its latency and the other's
    does not, or sets it less steeply, the interval widens as the speedup moves between processes."""
    if not reference.host or len(reference.host) != len(solution.host):
        raise ValueError("the interval pairs host rounds: both sides need the same number of them")
    sol_latency = solution.latency_ms()
    point = reference.latency_ms() / sol_latency if sol_latency > 0 else 0.0
    rounds = len(solution.host)
    if rounds < 2:
        return SpeedupInterval(point, point, point, confidence, rounds)
    rng = np.random.default_rng(_BOOTSTRAP_SEED)
    solution_device_picks, reference_device_picks = _device_picks(rng, [solution, reference], resamples)
    host_picks = _host_picks(rng, rounds, resamples)
    spread = np.array([DEVICE_OFFSET, HOST_OFFSET])[None, :, None]
    offsets = np.exp(spread * rng.standard_normal((2, 2, resamples)))  # side, (device, host), resample
    ref_rounds, ref_offset = _resampled_latencies(reference, reference_device_picks, host_picks, offsets[1])
    sol_rounds, sol_offset = _resampled_latencies(solution, solution_device_picks, host_picks, offsets[0])
    from_rounds = _ratio_rows(ref_rounds, sol_rounds)
    # What the rounds leave is widened for their number (``small_sample_widening``); the offsets and
    # the shift between processes are not estimated from the rounds and keep their own width.
    if point > 0:
        widening = small_sample_widening(_fewest_rounds(reference, solution), confidence)
        with np.errstate(invalid="ignore", divide="ignore"):
            widened = point * (from_rounds / point) ** widening
        ratios = widened * _ratio_rows(ref_offset, sol_offset) / from_rounds
    else:
        ratios = _ratio_rows(ref_offset, sol_offset)
    if process_shift > 0 and point > 0:
        factors = np.exp(process_shift * rng.standard_normal(resamples))
        ratios = ratios * _ratio_rows(_latencies_under_shift(reference, factors),
                                      _latencies_under_shift(solution, factors)) / point
    ratios = ratios[np.isfinite(ratios)]
    if ratios.size == 0:
        return SpeedupInterval(point, point, point, confidence, rounds)
    tail = (1.0 - confidence) / 2 * 100
    low, high = np.percentile(ratios, [tail, 100 - tail])
    return SpeedupInterval(point, float(min(low, point)), float(max(high, point)), confidence, rounds)
