"""``sol-execbench-baseline``: compare a candidate's traces with one or more baselines' (no GPU, no
torch). Its own console script, as the configuration reference names it, and the same command as
``sol-execbench baseline``."""

from __future__ import annotations

from pathlib import Path

import click

from sol_execbench.cli.errors import fail
from sol_execbench.cli.main import cli
from sol_execbench.scoring.comparison import DEFAULT_PARITY_PCT, DEFAULT_WIN_PCT

PROG = "sol-execbench-baseline"
PATH = click.Path(path_type=Path)


def _number(value: float | None, form: str) -> str:
    return format(value, form) if value is not None else "-"


def _totals_line(totals) -> str:  # noqa: ANN001 - a ComparisonTotals
    counts = ", ".join(f"{count} {name}" for name, count in totals.counts.items() if count) or "nothing compared"
    extra = f"; {totals.unsettled} unsettled (interval spans a threshold)" if totals.unsettled else ""
    extra += f"; {totals.candidate_only} candidate-only workload(s) not compared" if totals.candidate_only else ""
    return (f"{totals.compared} workload(s): {counts}; geomean speedup over {totals.both_passed} passed on both sides: "
            f"{_number(totals.speedup_geomean, '.4g')}x{extra}")


def render_text(report) -> str:  # noqa: ANN001 - a BaselineComparison
    lines = []
    if report.amd_native_claim:
        lines.append("AMD-native claim: the candidate's results are presented as measured on AMD GPUs")
    lines.append(f"candidate: {report.candidate} ({', '.join(report.candidate_hardware) or 'hardware unknown'})")
    lines.append(f"win: pct >= {report.win_pct:g}; parity: -{report.parity_pct:g} <= pct < {report.win_pct:g}; "
                 "pct = 100 * (T_b - T_c) / T_b")
    lines.extend(f"warning: {w}" for w in report.warnings)
    header = f"{'problem/workload':<48} {'class':<15} {'T_b ms':>10} {'T_c ms':>10} {'pct':>8} {'interval':>17}  note"
    for section in report.sections:
        lines += ["", f"baseline: {section.baseline}", header]
        for row in section.workloads:
            interval = (f"[{row.pct_low:.1f}, {row.pct_high:.1f}]" if row.pct_low is not None else "-")
            note = f"spans the {row.spans_threshold} threshold" if row.spans_threshold else ""
            if row.classification in ("failed", "baseline_failed"):
                note = f"candidate {row.candidate_status}, baseline {row.baseline_status}"
            lines.append(f"{row.problem + '/' + row.workload:<48} {row.classification:<15} "
                         f"{_number(row.baseline_ms, '.4g'):>10} {_number(row.candidate_ms, '.4g'):>10} "
                         f"{_number(row.pct, '.1f'):>8} {interval:>17}  {note}".rstrip())
        lines.append(f"totals: {_totals_line(section.totals)}")
    if len(report.sections) > 1:
        lines += ["", f"all baselines: {_totals_line(report.totals)}"]
    return "\n".join(lines) + "\n"


@click.command(PROG, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--candidate", required=True, type=PATH, metavar="TRACES",
              help="Candidate traces: a trace file (traces.jsonl, or upstream's traces.json) or a run directory.")
@click.option("--baseline", "baselines", required=True, multiple=True, type=PATH, metavar="TRACES",
              help="Baseline traces, file or run directory; repeatable (one section each).")
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--output", type=PATH, help="Write here instead of stdout.")
@click.option("--win-pct", type=float, default=DEFAULT_WIN_PCT, show_default=True,
              help="A win: the candidate is at least this many percent faster.")
@click.option("--parity-pct", type=float, default=DEFAULT_PARITY_PCT, show_default=True,
              help="Parity: at most this many percent slower (and short of a win).")
@click.option("--amd-native-claim", is_flag=True,
              help="Label the output as an AMD-native claim; warn about candidate traces not made on an AMD GPU.")
def baseline_command(candidate: Path, baselines: tuple[Path, ...], output_format: str, output: Path | None,
                     win_pct: float, parity_pct: float, amd_native_claim: bool) -> None:
    """Compare a candidate's traces with baselines' per workload (problem path and uuid): win, parity,
    loss, failed, missing; totals and the geometric mean speedup. Exit 0, or 2 on a bad input."""
    from sol_execbench.schema.trace_files import TraceFileError, read_trace_set
    from sol_execbench.scoring.comparison import Thresholds, compare_sets

    if parity_pct < 0:
        fail(f"--parity-pct {parity_pct:g}: give a percentage of 0 or more")
    if win_pct < -parity_pct:
        fail(f"--win-pct {win_pct:g} is below -parity_pct ({-parity_pct:g}): give a win threshold above the parity one")
    try:
        sets = [read_trace_set(path) for path in (candidate, *baselines)]
    except (TraceFileError, OSError, UnicodeDecodeError) as exc:
        fail(str(exc) if isinstance(exc, TraceFileError) else f"{getattr(exc, 'filename', None) or candidate}: "
              f"cannot be read ({exc}); give a readable trace file or run directory")
    report = compare_sets(sets[0], sets[1:], Thresholds(win_pct, parity_pct), amd_native_claim)
    text = report.model_dump_json(indent=2) + "\n" if output_format == "json" else render_text(report)
    if output is not None or output_format == "json":  # the text on stdout already lists them
        for warning in report.warnings:
            click.echo(f"warning: {warning}", err=True)
    if output is None:
        click.echo(text, nl=False)
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        fail(f"--output {output}: cannot be written ({exc.strerror or exc}); give a writable path")


cli.add_command(baseline_command, "baseline")


def main() -> None:
    baseline_command(prog_name=PROG)
