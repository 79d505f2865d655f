"""``sol-execbench report RUN_DIR [-o report.html]``: one self-contained HTML page of a dataset run."""

from __future__ import annotations

from pathlib import Path

import click

from sol_execbench.cli.errors import fail
from sol_execbench.cli.main import cli


@cli.command("report")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Write the page here [default: RUN_DIR/report.html].")
@click.option("--scores", "scores_path", type=click.Path(path_type=Path),
              help="A score report (dataset run --amd-score-report) for the SOL columns [default: computed here].")
@click.option("--hardware", metavar="NAME", help="Part that prices T_SOL when computed here [default: the GPU the traces name].")
def report_command(run_dir: Path, output: Path | None, scores_path: Path | None, hardware: str | None) -> None:
    """One HTML page of a dataset run: status counts, speedup, SOL fraction and score per category and
    problem, their distributions, latency against T_SOL, and the flags. Figures embedded."""
    from sol_execbench.platform.peaks import UnknownPartError, peaks_for
    from sol_execbench.report import ReportInputError, build_report

    if hardware is not None:
        try:
            peaks_for(hardware)
        except UnknownPartError as exc:
            fail(f"--hardware: {exc}")
    try:
        page = build_report(run_dir, scores_path, hardware)
    except ReportInputError as exc:
        fail(str(exc))
    except ImportError as exc:
        fail(f"the figures need matplotlib ({exc}); pip install 'sol-execbench[plot]'")
    target = output or run_dir / "report.html"
    try:
        target.write_text(page, encoding="utf-8")
    except OSError as exc:
        fail(f"-o {target}: cannot be written ({exc.strerror or exc}); give a writable path")
    click.echo(f"report written to {target}")
