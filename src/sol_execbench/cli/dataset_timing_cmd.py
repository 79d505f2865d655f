"""``sol-execbench dataset timing-evidence ROOT -o OUTPUT``: each workload's reported latency tied to
a profiler's kernel time (ncu or rocprofv3), with the dataset's coverage (docs/profiling.md).

Exit 0 when written (1 with --require-profiler-complete when some denominator problem lacks full
coverage), 2 on bad input.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from sol_execbench.cli.dataset_cmd import PATH, build_options, dataset_group, timing_evidence_options
from sol_execbench.cli.evaluate_cmd import SECONDS, check_device, check_seconds


def run_timing_evidence(options, as_json: bool = False) -> int:  # noqa: ANN001
    from sol_execbench.cli.errors import fail
    from sol_execbench.dataset.discovery import DatasetUsageError
    from sol_execbench.dataset.timing_evidence import collect_timing_evidence, result_json

    try:
        result = collect_timing_evidence(options, None if as_json else lambda line: click.echo(line, err=True))
    except DatasetUsageError as exc:
        fail(str(exc))
    if as_json:
        click.echo(result_json(result))
    else:
        s = result.summary
        click.echo(f"timing evidence in {result.folder}: {s.full} full, {s.partial} partial, {s.none} none of "
                   f"{s.problems} problem(s) (denominator {s.denominator}, complete: {'yes' if s.complete else 'no'})")
    return result.exit_code


@dataset_group.command("timing-evidence")
@click.argument("root", type=PATH)
@click.option("-o", "--output", type=PATH, default=Path("out"), show_default=True,
              help="The dataset run's output folder (its traces are the reported latencies).")
@click.option("--timing-evidence-dir", type=PATH, help="Where the evidence goes [default: OUTPUT/timing_evidence].")
@click.option("--timing-tool-version", default="rocprofv3", show_default=True,
              help="Tool version recorded in the evidence [default value: the profiler's own --version].")
@click.option("--gpu-architecture", default="unknown", show_default=True,
              help="GPU architecture recorded in the evidence [default value: the traces' device arch].")
@click.option("--category", "categories", multiple=True, help="Only problems below this category (repeatable).")
@click.option("--limit", type=click.IntRange(min=1), help="At most this many problems.")
@click.option("--solution-name", help="The solution file each problem folder holds [default: what the run evaluated].")
@click.option("--timeout", default=300.0, show_default=True, type=SECONDS, callback=check_seconds,
              help="Seconds per profiler run.")
@click.option("--device", default=None, callback=check_device, help="cpu, N or cuda:N [default: the first GPU].")
@click.option("--keep-staging", is_flag=True, help="Keep the profiler's staging folders.")
@click.option("--json", "as_json", is_flag=True, help="Print the coverage summary as JSON.")
@timing_evidence_options
def dataset_timing_evidence(root, output, timing_evidence_dir, as_json, **kw) -> None:
    """Tie each workload's reported latency to ncu's or rocprofv3's kernel time; write coverage."""
    options = build_options(root, output, timing_evidence_dir, **kw)
    sys.exit(run_timing_evidence(options, as_json))
