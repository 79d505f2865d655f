"""Showing a dataset run: a live display on a terminal (problems done of total, failures, ETA,
what each device is evaluating), plain lines otherwise; then a table per category. Errors are one
line on stderr and exit 2."""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn
from rich.table import Table

from sol_execbench.dataset.derived import DerivedOutputs
from sol_execbench.dataset.events import RunEvent
from sol_execbench.dataset.options import RunOptions
from sol_execbench.schema.dataset_run import CategorySummary, DatasetSummary, ProblemSummary

from .render import ratio_text

PASSED = "PASSED"
MAX_FAILURES_LISTED = 20


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def _statuses(statuses: dict[str, int]) -> str:
    return ", ".join(f"{count} {status}" for status, count in statuses.items()) or "-"


def _speedup(value: float | None) -> str:
    return f"{ratio_text(value)}x" if value is not None else "-"


def _passed(summary: ProblemSummary | CategorySummary) -> bool:
    return summary.workloads > 0 and summary.statuses.get(PASSED, 0) == summary.workloads


class RunDisplay:
    """Receives the run's events (from its worker threads) and shows them."""

    def __init__(self, console: Console, live: bool):
        self.console, self.live = console, live
        self.lock = threading.Lock()
        self.total = self.done = self.failed = 0
        self.began = time.monotonic()
        self.running: dict[str, str] = {}  # problem -> where it runs (a Ray task learns its node at the end)
        self.progress: Progress | None = None
        self.task = None

    def __enter__(self) -> "RunDisplay":
        if self.live:
            self.progress = Progress(SpinnerColumn(), TextColumn("evaluating"), BarColumn(), MofNCompleteColumn(),
                                     TextColumn("{task.fields[failed]} failed  ETA {task.fields[eta]}  {task.fields[running]}"),
                                     console=self.console)
            self.progress.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.progress is not None:
            self.progress.stop()

    def _eta(self) -> str:
        if not self.done or self.done >= self.total:
            return "-" if not self.done else _clock(0)
        return _clock((time.monotonic() - self.began) / self.done * (self.total - self.done))

    def _print(self, text: str, markup: bool = True) -> None:
        self.console.print(text, markup=markup, highlight=False)

    def _refresh(self) -> None:
        if self.progress is None:
            return
        if self.task is None:
            self.task = self.progress.add_task("run", total=self.total, failed=0, eta="-", running="")
        running = "  ".join(f"{device}: {problem}" for problem, device in sorted(self.running.items(),
                                                                                  key=lambda item: item[::-1]))
        self.progress.update(self.task, completed=self.done, failed=self.failed, eta=self._eta(), running=running)

    def __call__(self, event: RunEvent) -> None:
        with self.lock:
            getattr(self, f"_on_{event.kind}")(event)
            self._refresh()

    def _on_plan(self, event: RunEvent) -> None:
        plan = event.plan
        self.total, self.began = plan.to_evaluate, time.monotonic()
        self._print(f"{plan.problems} problem(s): {plan.to_evaluate} to evaluate, {plan.reused} reused (finished "
                    f"earlier, every workload PASSED), {plan.skipped} skipped; {plan.mode} on {', '.join(plan.slots)}",
                    markup=False)

    def _on_start(self, event: RunEvent) -> None:
        self.running[event.problem or ""] = event.device or "default"
        if not self.live:
            self._print(f"[{self.done + len(self.running)}/{self.total}] {event.problem}: started on "
                        f"{event.device or 'the default device'}", markup=False)

    def _on_finish(self, event: RunEvent) -> None:
        self.running.pop(event.problem or "", None)
        summary = event.summary
        self.done += 1
        self.failed += not _passed(summary)
        mark = "[green]ok[/green]" if _passed(summary) else "[red]FAIL[/red]"
        self._print(f"{mark} [{self.done}/{self.total}] {summary.problem}: {_statuses(summary.statuses)}, median "
                    f"speedup {_speedup(summary.median_speedup)}, {summary.wall_s:.1f} s on {event.device or 'default'}"
                    f"{'' if self.live else f', ETA {self._eta()}'}")

    def _on_note(self, event: RunEvent) -> None:
        if event.text:
            self._print(f"note: {event.text}", markup=False)

    def _on_log(self, event: RunEvent) -> None:
        self._print(f"--- {event.problem} ---\n{event.text}", markup=False)


def summary_table(summary: DatasetSummary) -> Table:
    table = Table(title=f"{summary.root} -> {summary.output}", title_justify="left")
    for column in ("category", "problems", "all passed", "workloads", "statuses", "median speedup", "wall s"):
        table.add_column(column, justify="left" if column in ("category", "statuses") else "right")
    for row in [*summary.categories, summary.totals]:
        style = "green" if _passed(row) else "red"
        table.add_row(row.category or ("(root)" if row is not summary.totals else "[b]all[/b]"), str(row.problems),
                      str(row.problems_passed), str(row.workloads), f"[{style}]{_statuses(row.statuses)}[/{style}]",
                      _speedup(row.median_speedup), f"{row.wall_s:.1f}")
    return table


def render_summary(summary: DatasetSummary, out: Console) -> None:
    out.print(summary_table(summary))
    failing = [p for p in summary.problems if p.outcome != "skipped" and not _passed(p)]
    for problem in failing[:MAX_FAILURES_LISTED]:
        out.print(f"not passed: {problem.problem}: {_statuses(problem.statuses)}", markup=False, highlight=False)
    if len(failing) > MAX_FAILURES_LISTED:
        out.print(f"... and {len(failing) - MAX_FAILURES_LISTED} more (see summary.json)", highlight=False)
    for problem in (p for p in summary.problems if p.outcome == "skipped"):
        out.print(f"skipped: {problem.problem}: {problem.note}", markup=False, highlight=False)
    if summary.stopped:
        out.print(f"stopped: {summary.stopped}", markup=False, highlight=False)


def _score(value: float | None) -> str:
    return f"{value:.3f}" if value is not None else "-"


def render_derived(derived: DerivedOutputs, out: Console) -> None:
    report = derived.score_report
    if report is not None:
        table = Table(title=f"SOL scores on {report.hardware.label} ({report.ceilings} ceilings; T_b: "
                            f"{report.baseline.kind})", title_justify="left")
        for column in ("category", "problems", "scored", "workloads", "passed", "SOL score", "SOL fraction",
                       "speedup"):
            table.add_column(column, justify="left" if column == "category" else "right")
        for row in [*report.categories, report.totals]:
            table.add_row(row.category or ("(root)" if row is not report.totals else "[b]all[/b]"), str(row.problems),
                          str(row.problems_scored), str(row.workloads), str(row.workloads_passed),
                          _score(row.sol_score), _score(row.sol_fraction), _speedup(row.speedup_geomean))
        out.print(table)
        kinds = Counter(flag.kind for flag in report.flags)
        if kinds:
            out.print("flags: " + ", ".join(f"{count} {kind}" for kind, count in sorted(kinds.items())),
                      markup=False, highlight=False)
    out.print(f"derived: {len(derived.written)} file(s) written"
              + (f", score report {derived.written[-1]}" if report is not None else ""), markup=False, highlight=False)


def run_and_render(options: RunOptions) -> int:
    """Run the suite with the display; the exit status."""
    from sol_execbench.cli.evaluate_cmd import PROCESS_OWNER
    from sol_execbench.cli.run_signals import RunStopped, owned_run
    from sol_execbench.dataset.discovery import DatasetUsageError
    from sol_execbench.dataset.runner import BlobsMissing, run_dataset
    from sol_execbench.platform.lifetime import protect_from_children

    protect_from_children()  # this process's files are not the solutions' to read
    err = Console(stderr=True, soft_wrap=True)
    out = Console(soft_wrap=True) if sys.stdout.isatty() else Console(width=160, soft_wrap=True)
    try:
        with owned_run(PROCESS_OWNER[0]), RunDisplay(out, live=sys.stdout.isatty()) as display:
            result = run_dataset(options, display)
    except RunStopped as stop:
        err.print(f"stopped by {stop.name}; finished problems are in {options.output}", highlight=False)
        return 128 + stop.signum
    except BlobsMissing as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
        for line in exc.lines:
            err.print(f"  missing: {line}", markup=False, highlight=False)
        return 2
    except DatasetUsageError as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
        return 2
    except OSError as exc:
        err.print(f"[red]error:[/red] {escape(str(exc.filename or ''))}: {escape(str(exc.strerror or exc))} (the "
                  f"finished problems stay in {escape(str(options.output))})", highlight=False)
        return 2
    if result.summary is not None:
        render_summary(result.summary, out)
        out.print(f"summary written to {result.summary_path}", highlight=False)
    if result.derived is not None:
        render_derived(result.derived, out)
    if result.timing is not None:
        s = result.timing.summary
        out.print(f"timing evidence in {result.timing.folder}: {s.full} full, {s.partial} partial, {s.none} none of "
                  f"{s.problems} problem(s) (denominator {s.denominator}, complete: {'yes' if s.complete else 'no'})",
                  highlight=False)
    return result.exit_code
