"""``sol-execbench bound <problem_dir> [--hardware NAME] [--json]``: speed-of-light bounds per workload."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from sol_execbench.cli.main import cli


def _fail(message: str) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(2)


def _detected_device_name() -> str:
    from sol_execbench.platform import current
    from sol_execbench.platform.peaks import known_parts

    device = current()
    if not device.is_gpu:
        _fail(f"no GPU found here to bound for; pass --hardware NAME (known parts: {', '.join(known_parts())})")
    return device.name


def _print_table(report) -> None:  # noqa: ANN001 - a ProblemBound
    from rich.console import Console
    from rich.table import Table

    hw = report.hardware
    table = Table(title=f"{report.definition} on {hw.label} (datasheet ceilings)")
    for column in ("workload", "bytes", "FLOPs", "FLOP/B", "compute us", "memory us", "T_SOL us", "bound"):
        table.add_column(column, justify="left" if column in ("workload", "bound") else "right")
    for w in report.workloads:
        table.add_row(w.uuid, f"{w.bytes_moved:,}", f"{w.total_flops:,}" if w.total_flops is not None else "-",
                      f"{w.arithmetic_intensity:.2f}" if w.arithmetic_intensity is not None else "-",
                      f"{w.compute_time_s * 1e6:.3f}" if w.compute_time_s is not None else "-",
                      f"{w.memory_time_s * 1e6:.3f}", f"{w.t_sol_s * 1e6:.3f}",
                      w.bound_by if w.bytes_only_reason is None else "memory (bytes only)")
    console = Console(highlight=False, soft_wrap=True)
    console.print(table)
    for reason in dict.fromkeys(w.bytes_only_reason for w in report.workloads if w.bytes_only_reason):
        console.print(f"bytes only: {reason}")
    console.print(f"peaks: {hw.source}")


@cli.command("bound")
@click.argument("problem_dir", type=click.Path(path_type=Path))
@click.option("--hardware", "hardware", metavar="NAME",
              help="Part to price the bound on (H100, H200, B200, A100, MI300X, MI325X, MI355X, or a device name); "
                   "default: the GPU here.")
@click.option("--json", "as_json", is_flag=True, help="Print the bound as JSON (the 'bound' format of contract --json).")
def bound_command(problem_dir: Path, hardware: str | None, as_json: bool) -> None:
    """Speed-of-light bound of each workload: fewest bytes, FLOPs by dtype, T_SOL on datasheet peaks."""
    from sol_execbench.platform.peaks import UnknownPartError, peaks_for
    from sol_execbench.scoring import BoundInputError, bound_problem

    if not problem_dir.is_dir():
        _fail(f"{problem_dir}: not a directory; give a problem directory holding definition.json and workload.jsonl")
    name = hardware if hardware else _detected_device_name()
    try:
        peaks = peaks_for(name)
    except UnknownPartError as exc:
        _fail(f"--hardware: {exc}" if hardware else f"the GPU here: {exc}; pass --hardware NAME")
    try:
        report = bound_problem(problem_dir, peaks, name)
    except BoundInputError as exc:
        _fail(str(exc))
    if as_json:
        click.echo(report.model_dump_json(indent=2))
    else:
        _print_table(report)
