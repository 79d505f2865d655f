"""``bench fast-p`` and ``bench compare-hardware``: a run's traces against a baseline file, and two
machines' baselines against each other.

fast_p (KernelBench): the fraction of *all* the baseline's problems that are correct and whose
speedup = baseline mean / candidate latency is strictly above p; a problem the traces lack counts
as not fast. A problem of several workloads is correct when every workload PASSED, and its latency
is the geometric mean over them (as the baseline's fields are)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from sol_execbench.schema import EvaluationStatus, Trace
from sol_execbench.schema.benches import (BaselineFile, FastPLevel, FastPProblem, FastPReport, HardwareComparison,
                                          HardwareRatio)

from .baselines import geometric_mean, level_name, problem_name
from .errors import BenchUsageError

DEFAULT_P = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)
ALL = "all"


def problem_key(name: str) -> str:
    """KernelBench names its problems by file (``1_Square_matrix_multiplication_.py``); migrated
    folders drop the ``.py``."""
    return name[:-3] if name.endswith(".py") else name


@dataclass(frozen=True)
class Candidate:
    correct: bool
    latency_ms: float | None
    interval_low: float | None  # the lowest of the workloads' lower bounds, where all have one
    interval_high: float | None
    note: str | None = None


def candidate(traces: list[Trace]) -> Candidate:
    passed = bool(traces) and all(t.evaluation is not None and t.evaluation.status == EvaluationStatus.PASSED
                                  and t.evaluation.performance is not None and t.evaluation.performance.latency_ms > 0
                                  for t in traces)
    if not passed:
        bad = next((t.evaluation.status.value for t in traces if t.evaluation is not None
                    and t.evaluation.status != EvaluationStatus.PASSED), "no timed trace")
        return Candidate(False, None, None, None, note=bad)
    latency = geometric_mean([t.evaluation.performance.latency_ms for t in traces])
    intervals = [t.evaluation.performance.speedup_interval for t in traces]
    if all(i is not None for i in intervals):
        return Candidate(True, latency, min(i.low for i in intervals), max(i.high for i in intervals))
    return Candidate(True, latency, None, None)


def read_run_dir(root: Path) -> dict[tuple[str, str], Candidate]:
    """Every problem folder with traces below a dataset run's output, by (level, problem)."""
    from sol_execbench.schema.trace_files import read_traces, traces_file

    if not root.is_dir():
        raise BenchUsageError(f"--traces {root}: no such directory; give a dataset run's output folder")
    found: dict[tuple[str, str], Candidate] = {}
    for folder, names, _files in os.walk(root):
        names[:] = sorted(n for n in names if not n.startswith("."))
        path = traces_file(Path(folder))
        if path is None or Path(folder) == root:
            continue
        key = Path(folder).relative_to(root).as_posix()
        category = str(Path(key).parent) if str(Path(key).parent) != "." else ""
        try:
            traces = read_traces(path)
        except ValueError as exc:
            raise BenchUsageError(f"{exc}; fix the file or remove it") from None
        found[(level_name(category), problem_key(problem_name(key)))] = candidate(traces)
    return found


def _level_summary(level: str, rows: list[FastPProblem], ps: tuple[float, ...], with_intervals: bool) -> FastPLevel:
    n = len(rows)
    fast = {f"{p:g}": (sum(1 for r in rows if r.correct and r.speedup is not None and r.speedup > p) / n if n else 0.0)
            for p in ps}
    clears = {f"{p:g}": sum(1 for r in rows if r.correct and r.interval_low is not None and r.interval_low > p)
              for p in ps} if with_intervals else {}
    return FastPLevel(level=level, problems=n, correct=sum(r.correct for r in rows), fast_p=fast, interval_clears=clears)


def fast_p_report(baseline: BaselineFile, baseline_path: Path, traces_root: Path,
                  ps: tuple[float, ...] = DEFAULT_P) -> FastPReport:
    candidates = read_run_dir(traces_root)
    rows: list[FastPProblem] = []
    for level, problems in sorted(baseline.root.items()):
        for name, entry in sorted(problems.items()):
            got = candidates.get((level, problem_key(name)))
            row = FastPProblem(level=level, problem=name, baseline_ms=entry.mean, correct=False)
            if got is None:
                row.note = "not in the traces: not fast"
            elif entry.mean is None:
                row.note = f"the baseline has no time ({entry.error or entry.status}): not fast"
                row.correct = got.correct
            else:
                row.correct, row.candidate_ms, row.note = got.correct, got.latency_ms, got.note
                row.interval_low, row.interval_high = got.interval_low, got.interval_high
                if got.correct and got.latency_ms:
                    row.speedup = entry.mean / got.latency_ms
            rows.append(row)
    with_intervals = any(r.interval_low is not None for r in rows)
    levels = [_level_summary(level, [r for r in rows if r.level == level], ps, with_intervals)
              for level in sorted({r.level for r in rows})]
    return FastPReport(baseline=str(baseline_path), traces=str(traces_root), p=list(ps), levels=levels,
                       overall=_level_summary(ALL, rows, ps, with_intervals), problems=rows)


def _hardware(baseline: BaselineFile) -> str | None:
    return next((e.hardware for problems in baseline.root.values() for e in problems.values()), None)


def compare_hardware(a: BaselineFile, a_path: Path, b: BaselineFile, b_path: Path) -> HardwareComparison:
    """b / a for every problem both machines timed; geometric means per level and overall."""
    rows: list[HardwareRatio] = []
    for level in sorted(set(a.root) | set(b.root)):
        a_level = {problem_key(k): v for k, v in a.root.get(level, {}).items()}
        b_level = {problem_key(k): v for k, v in b.root.get(level, {}).items()}
        for name in sorted(set(a_level) | set(b_level)):
            a_ms = a_level[name].mean if name in a_level else None
            b_ms = b_level[name].mean if name in b_level else None
            ratio = b_ms / a_ms if a_ms and b_ms else None
            rows.append(HardwareRatio(level=level, problem=name, a_ms=a_ms, b_ms=b_ms, ratio=ratio))

    def geomean(chosen: list[HardwareRatio]) -> float | None:
        ratios = [r.ratio for r in chosen if r.ratio]
        return geometric_mean(ratios) if ratios else None

    by_level = {level: geomean([r for r in rows if r.level == level]) for level in sorted({r.level for r in rows})}
    return HardwareComparison(a=str(a_path), b=str(b_path), a_hardware=_hardware(a), b_hardware=_hardware(b),
                              geomean_ratio={**by_level, ALL: geomean(rows)}, problems=rows)
