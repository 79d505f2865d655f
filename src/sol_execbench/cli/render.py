"""Rendering traces for people: a rich table and a one-line summary."""

from __future__ import annotations

from collections import Counter

from rich.console import Console
from rich.table import Table

from sol_execbench.schema import EvaluationStatus, Trace
from sol_execbench.schema.config import CPU_BUDGET_WARNING

_STATUS_STYLE = {EvaluationStatus.PASSED: "green", EvaluationStatus.TIMEOUT: "yellow",
                 EvaluationStatus.REWARD_HACK: "bold red"}


def _ms(value: float | None) -> str:
    if not value:
        return "-"
    return f"{value * 1000:.2f} us" if value < 1 else f"{value:.3f} ms"


# Long enough for any one-line message the evaluator writes; the table wraps it.
NOTE_LIMIT = 400
SEE_FULL_LOG = "(see --json for the full log)"


def note_of(log: str, limit: int = NOTE_LIMIT) -> str:
    """The log's first non-empty line, and a pointer to the rest when anything was left out."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    if not lines:
        return ""
    first = lines[0]
    if len(first) > limit:
        return f"{first[:limit]}... {SEE_FULL_LOG}"
    return f"{first} {SEE_FULL_LOG}" if len(lines) > 1 else first


def traces_table(traces: list[Trace], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for column, justify in (("workload", "left"), ("status", "left"), ("latency", "right"),
                            ("reference", "right"), ("speedup", "right"), ("max abs err", "right"),
                            ("note", "left")):
        table.add_column(column, justify=justify, overflow="fold", no_wrap=column in ("workload", "status"))
    for t in traces:
        ev = t.evaluation
        perf, corr = ev.performance, ev.correctness
        style = _STATUS_STYLE.get(ev.status, "red")
        table.add_row(
            t.workload.uuid[:36], f"[{style}]{ev.status.value}[/{style}]",
            _ms(perf.latency_ms) if perf else "-", _ms(perf.reference_latency_ms) if perf else "-",
            _speedup(perf),
            f"{corr.max_absolute_error:.3g}" if corr else "-",
            "" if ev.status is EvaluationStatus.PASSED else note_of(ev.log),
        )
    return table


def ratio_text(value: float) -> str:
    """A speedup as a table shows it: two decimals from 0.1 to 100 (1.30, not 1.3, beside 1.14),
    whole numbers above, two significant digits below."""
    if value >= 100:
        return f"{value:.0f}"
    return f"{value:.2f}" if value >= 0.1 else f"{value:.2g}"


def _speedup(perf) -> str:
    """The speedup with its interval and verdict where the reference was timed beside the solution."""
    if not perf or not perf.speedup_factor:
        return "-"
    interval = perf.speedup_interval
    if interval is None:
        return f"{ratio_text(perf.speedup_factor)}x"
    return (f"{ratio_text(perf.speedup_factor)}x [{ratio_text(interval.low)}, {ratio_text(interval.high)}] "
            f"{interval.verdict}")


def timing_line(traces: list[Trace]) -> str | None:
    """One line when the times are the host clock's on the CPU, not a GPU measurement, saying how
    many workloads ran fewer rounds than configured to fit ``cpu_budget_s``."""
    methods = {t.evaluation.performance.solution_timing.method for t in traces
               if t.evaluation.performance is not None and t.evaluation.performance.solution_timing is not None}
    if "cpu" not in methods:
        return None
    line = "timed on the CPU by the host clock (no GPU visible): not a GPU measurement"
    cut = sum(any(w.startswith(CPU_BUDGET_WARNING) for w in t.evaluation.warnings) for t in traces)
    if cut:
        line += f"; {cut} workload(s) ran fewer rounds to fit cpu_budget_s (each trace's warnings give the counts)"
    return line


def summary_line(traces: list[Trace]) -> str:
    counts = Counter(t.evaluation.status.value for t in traces)
    parts = [f"{n} {s}" for s, n in sorted(counts.items(), key=lambda kv: kv[0] != "PASSED")]
    return f"{len(traces)} workload(s): " + ", ".join(parts)


def print_traces(traces: list[Trace], title: str, console: Console) -> None:
    console.print(traces_table(traces, title))
    if (line := timing_line(traces)) is not None:
        console.print(line)
    console.print(summary_line(traces))
    unsandboxed = isolation_line(traces)
    if unsandboxed:
        console.print(unsandboxed, highlight=False)


def isolation_line(traces: list[Trace]) -> str | None:
    """One line when the solution ran without an enforced sandbox (docs/security.md), else None."""
    records = [t.evaluation.isolation for t in traces if t.evaluation and t.evaluation.isolation]
    loose = next((r for r in records if not r.enforced), None)
    if loose is None:
        return None
    return f"not sandboxed: {loose.reason or 'no sandbox mechanism'} (--isolation, docs/security.md)"
