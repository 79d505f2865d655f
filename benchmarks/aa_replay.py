"""Replay the stopping rules on recorded rounds: where each evaluation's host rounds would have
stopped at another precision (of both sides, or of a lone host-set side), host shift between
processes or round factor, which of its added device passes it would have run at another device
precision, and what that does to the A/A targets (``benchmarks/aa.py``) and to the intervals.

    python benchmarks/aa_replay.py ROUNDS_DIR [--precision 0.0125,0.02] [--lone-precision 0.025,0.05]
        [--process-shift 0,0.2] [--interval-shift 0,0.2] [--factor 12,20] [--device-precision 0.005,0.01] [--device-share 0.5,0.75]
        [--only nemotron,olmo] [--out replay.json]

ROUNDS_DIR holds the files runs wrote with ``SOL_EXECBENCH_TIMING_ROUNDS`` (one per workload and
process: an A/A run's, ``scripts/device/aa_rounds.sh``, or any evaluations of a solution against its
reference); the files of one workload from different processes are its runs. For each precision and
factor, each file's host rounds are cut where the rule
(``paired.host_rounds_wanted``, in batches of the device pass's rounds, each batch to both sides)
would have stopped; where it wants more rounds than were recorded,
it gets those recorded, so replaying a precision tighter than the run's own overstates how well it
would do. Each added device pass that ran then stays while ``paired.device_rounds_wanted`` at the
device precision asks for it, for the sides ``paired.device_extended_sides`` names (one that did
not run cannot be added). The speedup, its interval and the latency then come from the package's
own statistics, and each workload is judged as ``aa.py`` judges it. Prints a table (per setting:
workloads meeting every A/A target, intervals containing 1.00, host rounds and added device passes
used, the median interval's width as a share of its speedup, and how often a run's interval holds
the other runs' speedups); writes JSON; exit 0. For a solution against its reference only the last
three say something: its true speedup is not 1.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from aa import judge, spread  # noqa: E402
from sol_execbench.evaluate.child.timing import paired  # noqa: E402
from sol_execbench.evaluate.child.timing.statistics import PROCESS_HOST_SHIFT, speedup_interval  # noqa: E402
from sol_execbench.schema import TimingRounds  # noqa: E402


def load(folder: Path) -> dict[str, list[TimingRounds]]:
    """The recorded evaluations by workload (``definition/workload``), one per process, in file order."""
    runs: dict[str, list[TimingRounds]] = {}
    for path in sorted(folder.glob("*.json")):
        record = TimingRounds.model_validate_json(path.read_text())
        if record.speedup_interval is not None and len(record.sides) == 2:
            runs.setdefault(f"{record.definition}/{record.workload}", []).append(record)
    return runs


def _cut(record: TimingRounds, host_rounds: dict[str, int],
         device_rounds: dict[str, int] | None = None) -> tuple[paired.SideMeasurement, paired.SideMeasurement]:
    """(reference, solution), each with at most its ``host_rounds`` host rounds and, where given,
    its first ``device_rounds`` device rounds."""
    sides = {s.name: paired.SideMeasurement(
        name=s.name, instrument=s.instrument,
        device_ms=tuple(s.device_ms[:device_rounds[s.name]] if device_rounds is not None else s.device_ms),
        host_ms=tuple(s.host_ms[:host_rounds[s.name]]),
        sync_floor_ms=s.sync_floor_ms, allowance_ms=s.launch_allowance_ms) for s in record.sides}
    return sides["reference"], sides["solution"]


def _pass_rounds(record: TimingRounds) -> int:
    """Rounds of one pass: a side's host pass begins right after the calls of its first device pass
    (added device passes, where they ran, come after the host pass)."""
    side = record.sides[0]
    if side.device_call_indices and side.host_call_indices:
        return side.host_call_indices[0] - side.device_call_indices[0]
    return len(side.device_ms)


@dataclass(frozen=True)
class Setting:
    """The stopping rules' constants to replay (``paired``'s names): ``precision``
    (``SPEEDUP_PRECISION``), ``factor`` (``HOST_ROUNDS_FACTOR``), ``device_precision``
    (``DEVICE_SPEEDUP_PRECISION``), ``lone_precision`` (``LONE_SIDE_PRECISION``),
    ``device_share`` (``DEVICE_SHARE``) and ``process_shift`` (``PROCESS_HOST_SHIFT``, for the stop);
    ``interval_shift``: the host shift between processes the interval carries (``PROCESS_HOST_SHIFT``)."""

    precision: float = paired.SPEEDUP_PRECISION
    factor: int = paired.HOST_ROUNDS_FACTOR
    device_precision: float = paired.DEVICE_SPEEDUP_PRECISION
    lone_precision: float = paired.LONE_SIDE_PRECISION
    device_share: float = paired.DEVICE_SHARE
    process_shift: float = paired.PROCESS_HOST_SHIFT
    interval_shift: float = PROCESS_HOST_SHIFT


def replay(record: TimingRounds, setting: Setting) -> dict[str, Any]:
    """The record as the rules at ``setting`` would have left it: a row as ``aa.py`` makes one from
    a trace, the host rounds it used and the device passes it added. As in a run, each batch of
    added host rounds goes to both sides (until either has no more recorded), judged on the first
    device pass alone; then each added device pass that ran stays while ``paired.device_rounds_wanted`` at
    the setting's device precision and share asks for it, for the sides
    ``paired.device_extended_sides`` names (one that did not run cannot be added)."""
    base = _pass_rounds(record)
    recorded = {s.name: len(s.host_ms) for s in record.sides}
    limit = {name: min(n, setting.factor * base) for name, n in recorded.items()}
    counts = {name: min(base, n) for name, n in recorded.items()}
    device = {s.name: min(base, len(s.device_ms)) for s in record.sides}
    reference, solution = _cut(record, counts, device)
    precision = paired.HostPrecision(setting.precision, setting.lone_precision, setting.process_shift)
    while paired.host_rounds_wanted(solution, reference, precision):
        if any(counts[name] >= limit[name] for name in counts):
            break
        counts = {name: min(n + base, limit[name]) for name, n in counts.items()}
        reference, solution = _cut(record, counts, device)
    device_recorded = {s.name: len(s.device_ms) for s in record.sides}
    added = 0
    while paired.device_rounds_wanted(solution, reference, setting.device_precision, setting.device_share):
        names = paired.device_extended_sides(solution, reference)
        if not names or any(device[name] >= device_recorded[name] for name in names):
            break
        for name in names:
            device[name] = min(device[name] + base, device_recorded[name])
        added += 1
        reference, solution = _cut(record, counts, device)
    interval = speedup_interval(reference.spans, solution.spans, process_shift=setting.interval_shift)
    return {"status": "PASSED", "speedup": interval.point, "low": interval.low, "high": interval.high,
            "latency_ms": solution.latency_ms, "host_bound": solution.host_bound,
            "host_rounds": len(reference.host_ms) + len(solution.host_ms), "added_device_passes": added}


def evaluate(runs: dict[str, list[TimingRounds]], setting: Setting) -> dict[str, Any]:
    """Every workload replayed at one setting: the A/A targets over them, and how wide the intervals
    are and how well each run's interval holds the other runs' speedups (``interval_spread``)."""
    workloads = {key: [replay(r, setting) for r in records] for key, records in runs.items()}
    verdicts = {key: judge(rows) for key, rows in workloads.items()}
    covered = sum(v.get("covered", 0) for v in verdicts.values())
    total = sum(v.get("runs", 0) for v in verdicts.values())
    return {**asdict(setting), "workloads": len(verdicts),
            "meeting_every_target": sum(v["ok"] for v in verdicts.values()),
            "intervals_containing_one": covered, "workload_runs": total,
            "host_rounds": sum(row["host_rounds"] for rows in workloads.values() for row in rows),
            "added_device_passes": sum(row["added_device_passes"] for rows in workloads.values() for row in rows),
            **interval_spread(list(workloads.values())),
            "missed": sorted(key for key, v in verdicts.items() if not v["ok"])}


def interval_spread(workloads: list[list[dict[str, Any]]]) -> dict[str, float | None]:
    """Over replayed runs grouped by workload: the median and 90th percentile of each interval's
    width as a share of its speedup; the share of (run, other run of the same workload) pairs whose
    interval holds the other run's speedup; the median over workloads of their speedups' spread
    (largest less smallest, over the median). None where no run or no workload of two runs."""
    widths = sorted((row["high"] - row["low"]) / row["speedup"] for rows in workloads for row in rows if row["speedup"])
    repeated = [rows for rows in workloads if len(rows) >= 2]
    pairs = [(a, b) for rows in repeated for a in rows for b in rows if a is not b]
    spreads = [spread([r["speedup"] for r in rows]) for rows in repeated]
    return {"interval_width_median": statistics.median(widths) if widths else None,
            "interval_width_p90": widths[int(0.9 * len(widths))] if widths else None,
            "rerun_coverage": sum(a["low"] <= b["speedup"] <= a["high"] for a, b in pairs) / len(pairs) if pairs else None,
            "speedup_spread_median": statistics.median(spreads) if spreads else None}


def _share(value: float | None) -> str:
    return f"{100 * value:5.1f}%" if value is not None else f"{'-':>6s}"


def _numbers(text: str, kind: type) -> list[Any]:
    return [kind(part) for part in text.split(",") if part.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rounds_dir", type=Path, help="a folder of SOL_EXECBENCH_TIMING_ROUNDS files")
    parser.add_argument("--precision", default=str(paired.SPEEDUP_PRECISION),
                        help="comma-separated standard errors of the log speedup to stop at")
    parser.add_argument("--factor", default=str(paired.HOST_ROUNDS_FACTOR),
                        help="comma-separated limits on host rounds, as multiples of the device pass's rounds")
    parser.add_argument("--device-precision", default=str(paired.DEVICE_SPEEDUP_PRECISION),
                        help="comma-separated standard errors of the log speedup from the device rounds above "
                             "which another device pass runs")
    parser.add_argument("--lone-precision", default=str(paired.LONE_SIDE_PRECISION),
                        help="comma-separated standard errors of the log speedup to stop at where only one side's "
                             "host time may set its latency")
    parser.add_argument("--device-share", default=str(paired.DEVICE_SHARE),
                        help="comma-separated shares of the host rounds' standard error that the device rounds' "
                             "must reach for another device pass")
    parser.add_argument("--process-shift", default=str(paired.PROCESS_HOST_SHIFT),
                        help="comma-separated shifts of every host time between processes (log) below whose effect "
                             "on the speedup the host rounds stop")
    parser.add_argument("--interval-shift", default=str(PROCESS_HOST_SHIFT),
                        help="comma-separated shifts of both sides' host times between processes (log) that the "
                             "interval carries")
    parser.add_argument("--only", help="comma-separated parts of 'definition/workload' to keep")
    parser.add_argument("--out", type=Path, help="write the results here as JSON")
    args = parser.parse_args(argv)
    runs = load(args.rounds_dir)
    if args.only:
        runs = {key: records for key, records in runs.items() if any(part in key for part in args.only.split(","))}
    if not runs:
        print(f"{args.rounds_dir}: no timing-rounds files with both sides", file=sys.stderr)
        return 2
    settings = [Setting(precision=p, factor=f, device_precision=d, lone_precision=lone, device_share=share,
                        process_shift=shift, interval_shift=interval_shift)
                for p, f, d, lone, share, shift, interval_shift in itertools.product(
                    _numbers(args.precision, float), _numbers(args.factor, int), _numbers(args.device_precision, float),
                    _numbers(args.lone_precision, float), _numbers(args.device_share, float),
                    _numbers(args.process_shift, float), _numbers(args.interval_shift, float))]
    results = [evaluate(runs, setting) for setting in settings]
    print(f"{'precision':>9s} {'lone':>6s} {'shift':>5s} {'ishift':>6s} {'factor':>6s} {'device':>7s} {'share':>5s} {'targets met':>12s} "
          f"{'intervals':>10s} {'host rounds':>11s} {'dev passes':>10s} {'width':>6s} {'p90':>6s} {'rerun':>6s}  missed")
    for r in results:
        print(f"{r['precision']:9.4f} {r['lone_precision']:6.4f} {r['process_shift']:5.2f} {r['interval_shift']:6.2f} "
              f"{r['factor']:6d} "
              f"{r['device_precision']:7.4f} {r['device_share']:5.2f} "
              f"{r['meeting_every_target']:5d} of {r['workloads']:<3d} {r['intervals_containing_one']:4d}/"
              f"{r['workload_runs']:<5d} {r['host_rounds']:11d} {r['added_device_passes']:10d} "
              f"{_share(r['interval_width_median'])} {_share(r['interval_width_p90'])} {_share(r['rerun_coverage'])}  "
              f"{', '.join(k.split('/')[-1][:12] for k in r['missed'])}")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"rounds_dir": str(args.rounds_dir), "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
