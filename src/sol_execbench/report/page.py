"""``sol-execbench report RUN_DIR``: one self-contained HTML page of a dataset run.

Per category and per problem: status counts, geometric-mean speedup, SOL fraction and SOL score;
the distributions of speedup and SOL fraction; each workload's latency against its T_SOL; the score
report's flags. Figures are PNGs embedded as data URIs; the page loads nothing else.

The SOL columns come from a score report (``--scores FILE``), else are computed here from the run's
``summary.json`` root (the problems' definitions) on ``--hardware`` or the GPU the traces name."""

from __future__ import annotations

import html
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from pydantic import ValidationError

from sol_execbench.dataset.discovery import DatasetProblem, DatasetUsageError
from sol_execbench.dataset.summary import speedups
from sol_execbench.schema import EvaluationStatus, Trace
from sol_execbench.schema.dataset_run import DatasetSummary
from sol_execbench.schema.scores import ScoreReport
from sol_execbench.schema.trace_files import TraceFileError, read_trace_set
from sol_execbench.scoring.score import geomean

from . import figures

SUMMARY_FILE = "summary.json"
STATUS_ORDER = [s.value for s in EvaluationStatus]


class ReportInputError(Exception):
    """A run directory or score report that cannot make a page; the message names it and the fix."""


@dataclass
class ProblemRow:
    problem: str
    category: str
    statuses: Counter = field(default_factory=Counter)
    speedups: list[float] = field(default_factory=list)
    sol_score: float | None = None
    sol_fraction: float | None = None
    note: str | None = None


@dataclass(frozen=True)
class RunData:
    run_dir: Path
    problems: list[ProblemRow]
    scores: ScoreReport | None
    scores_note: str | None
    """Why there are no SOL columns."""


def _category(problem: str) -> str:
    parent = PurePosixPath(problem).parent
    return "" if str(parent) == "." else str(parent)


def _summary(run_dir: Path) -> DatasetSummary | None:
    try:
        return DatasetSummary.model_validate_json((run_dir / SUMMARY_FILE).read_bytes())
    except (OSError, ValidationError, ValueError):
        return None


def _scores(run_dir: Path, summary: DatasetSummary | None, scores_path: Path | None,
            hardware: str | None) -> tuple[ScoreReport | None, str | None]:
    if scores_path is not None:
        try:
            return ScoreReport.model_validate_json(scores_path.read_bytes()), None
        except OSError as exc:
            raise ReportInputError(f"--scores {scores_path}: cannot be read ({exc.strerror or exc}); give a score "
                                   "report (dataset run --amd-score-report)") from None
        except ValidationError as exc:
            error = exc.errors()[0]
            raise ReportInputError(f"--scores {scores_path}: {'.'.join(map(str, error['loc'])) or 'the document'}: "
                                   f"{error['msg']}; give a score report (dataset run --amd-score-report)") from None
    if summary is None:
        return None, f"no SOL columns: {run_dir / SUMMARY_FILE} is missing; pass --scores FILE"
    root = Path(summary.root)
    keys = [p.problem for p in summary.problems]
    if not root.is_dir():
        return None, f"no SOL columns: the run's dataset root {root} is not here; pass --scores FILE"
    from sol_execbench.dataset.derived import score_run

    try:
        return score_run(root, run_dir, [DatasetProblem(k, root / k) for k in keys], hardware), None
    except DatasetUsageError as exc:
        return None, f"no SOL columns: {exc}"


def collect(run_dir: Path, scores_path: Path | None = None, hardware: str | None = None) -> RunData:
    """The run's problems from its traces (and its summary's skipped problems), with the scores."""
    if not run_dir.is_dir():
        raise ReportInputError(f"{run_dir}: not a directory; give a dataset run's output folder (-o)")
    summary = _summary(run_dir)
    try:
        traces = read_trace_set(run_dir).traces
    except TraceFileError as exc:
        raise ReportInputError(str(exc)) from None
    by_problem: dict[str, list[Trace]] = {}
    for (problem, _uuid), trace in traces.items():
        by_problem.setdefault(problem, []).append(trace)
    rows = {key: ProblemRow(key, _category(key), Counter(t.status.value if t.status else "NO_EVALUATION" for t in ts),
                            speedups(ts)) for key, ts in by_problem.items()}
    for skipped in (summary.problems if summary else []):
        if skipped.problem not in rows:
            rows[skipped.problem] = ProblemRow(skipped.problem, skipped.category, note=skipped.note or skipped.outcome)
    scores, note = _scores(run_dir, summary, scores_path, hardware)
    for scored in (scores.problems if scores else []):
        row = rows.get(scored.problem)
        if row is not None:
            row.sol_score, row.sol_fraction = scored.sol_score, scored.sol_fraction
    return RunData(run_dir, sorted(rows.values(), key=lambda r: (r.category, r.problem)), scores, note)


# -- rendering ----------------------------------------------------------------------------------------

STYLE = """body{font-family:system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:1em 0}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#eef}td.l,th.l{text-align:left}
.bad{color:#b03a2e}.ok{color:#1e7b34}figure{display:inline-block;margin:0 1em 1em 0}p.note{color:#555}"""


def _fmt(value: float | None, form: str = ".3f", suffix: str = "") -> str:
    return f"{value:{form}}{suffix}" if value is not None else "-"


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _table(table_id: str, header: list[str], rows: list[list[str]], left: int = 1) -> str:
    head = "".join(f'<th class="l">{html.escape(h)}</th>' if i < left else f"<th>{html.escape(h)}</th>"
                   for i, h in enumerate(header))
    body = "".join("<tr>" + "".join(f'<td class="l">{c}</td>' if i < left else f"<td>{c}</td>" for i, c in enumerate(r))
                   + "</tr>" for r in rows)
    return f'<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _status_cells(statuses: Counter, columns: list[str]) -> list[str]:
    cells = []
    for status in columns:
        count = statuses.get(status, 0)
        css = "ok" if status == "PASSED" else "bad"
        cells.append(f'<span class="{css}">{count}</span>' if count else "0")
    return cells


def _aggregate(name: str, rows: list[ProblemRow], columns: list[str]) -> list[str]:
    statuses: Counter = Counter()
    for row in rows:
        statuses.update(row.statuses)
    every = [s for row in rows for s in row.speedups]
    scored = [r for r in rows if r.sol_score is not None]
    return [html.escape(name), str(len(rows)), str(sum(statuses.values())), *_status_cells(statuses, columns),
            _fmt(geomean(every), ".3g", "x"),
            _fmt(_mean([r.sol_fraction for r in scored if r.sol_fraction is not None]), ".4f"),
            _fmt(_mean([r.sol_score for r in scored]))]


def _figures(data: RunData) -> str:
    parts = []
    speedup_values = figures.finite_positive([s for row in data.problems for s in row.speedups])
    if speedup_values:
        parts.append(("speedup", figures.histogram(speedup_values, "speedup over the reference (PASSED workloads)",
                                                   "speedup (log)", log=True)))
    if data.scores is not None:
        workloads = [w for p in data.scores.problems for w in p.workloads]
        fractions = figures.finite_positive([w.sol_fraction for w in workloads if w.status == "PASSED"])
        if fractions:
            parts.append(("sol-fraction", figures.histogram(fractions, "fraction of SOL (T_SOL / latency)",
                                                            "fraction of SOL (log)", log=True)))
        flagged = {(f.problem, f.workload) for f in data.scores.flags if f.kind == "solution_below_sol"}
        points = [(w.t_sol_ms, w.latency_ms, (p.problem, w.uuid) in flagged) for p in data.scores.problems
                  for w in p.workloads if w.latency_ms and w.t_sol_ms]
        if points:
            parts.append(("latency-vs-sol", figures.latency_against_sol(points)))
    return "".join(f'<figure id="fig-{name}"><img alt="{name}" src="{uri}"></figure>' for name, uri in parts)


def render(data: RunData) -> str:
    columns = [s for s in STATUS_ORDER if any(r.statuses.get(s) for r in data.problems)] or ["PASSED"]
    header = ["", "workloads", *columns, "speedup (geomean)", "SOL fraction", "SOL score"]
    categories = sorted({r.category for r in data.problems})
    category_rows = [_aggregate(c or "(root)", [r for r in data.problems if r.category == c], columns) for c in categories]
    category_rows.append(_aggregate("all", data.problems, columns))
    problem_rows = [[html.escape(r.problem), str(sum(r.statuses.values())), *_status_cells(r.statuses, columns),
                     _fmt(geomean(r.speedups), ".3g", "x"), _fmt(r.sol_fraction, ".4f"), _fmt(r.sol_score)]
                    + ([html.escape(r.note)] if r.note else [""]) for r in data.problems]
    scores = data.scores
    if scores is not None:
        about = (f"T_SOL on {html.escape(scores.hardware.label)} ({scores.ceilings} ceilings); T_b: "
                 f"{html.escape(scores.baseline.kind)}. SOL score S = 1 / (1 + (T_k - T_SOL) / (T_b - T_SOL)), "
                 "problems weighted equally, failed workloads 0 (docs/scoring.md).")
        flag_rows = [[html.escape(f.problem), html.escape(f.workload), html.escape(f.kind), html.escape(f.detail)]
                     for f in scores.flags]
        flags = (f"<h2>Flags ({len(flag_rows)})</h2>"
                 + (_table("flags", ["problem", "workload", "kind", "detail"], flag_rows, left=4) if flag_rows
                    else '<p id="flags">none</p>'))
    else:
        about, flags = html.escape(data.scores_note or "no SOL columns"), ""
    title = f"sol-execbench run {data.run_dir.name}"
    return (f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>"
            f'<p class="note">{html.escape(str(data.run_dir))}: {len(data.problems)} problem(s). {about}</p>'
            f"<h2>Categories</h2>{_table('categories', ['category', 'problems', *header[1:]], category_rows)}"
            f"<h2>Problems</h2>{_table('problems', ['problem', *header[1:], 'note'], problem_rows)}"
            f"<h2>Distributions</h2>{_figures(data)}{flags}</body></html>\n")


def build_report(run_dir: Path, scores_path: Path | None = None, hardware: str | None = None) -> str:
    """The page's HTML. Raises ReportInputError naming the input and the fix."""
    return render(collect(run_dir, scores_path, hardware))
