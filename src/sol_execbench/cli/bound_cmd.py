"""``sol-execbench bound <problem_dir> [--hardware NAME] [--ceilings datasheet|measured] [--device D] [--json]``:
speed-of-light bounds per workload."""

from __future__ import annotations

from pathlib import Path

import click

from sol_execbench.cli.errors import fail as _fail
from sol_execbench.cli.main import cli


def _pricing_part(hardware: str | None, ceilings: str, device_spec: str | None):  # noqa: ANN202 - a PricingPart
    from sol_execbench.platform import current
    from sol_execbench.platform.ceilings import CeilingsError, ceilings_for
    from sol_execbench.platform.peaks import known_parts

    device = None
    if ceilings == "measured" or not hardware:
        try:
            device = current(device_spec)
        except ValueError as exc:
            _fail(f"--device: {exc}")
        if ceilings == "datasheet" and not device.is_gpu:
            _fail(f"no GPU found here to bound for; pass --hardware NAME (known parts: {', '.join(known_parts())})")
        if ceilings == "measured" and not device.is_gpu and device_spec is None:
            _fail("no GPU found here: --ceilings measured prices on this GPU's calibration "
                  "(--device cpu uses the CPU's, made by 'sol-execbench calibrate --device cpu')")
    try:
        return ceilings_for(ceilings, hardware, device)
    except CeilingsError as exc:
        _fail(str(exc))


def _print_table(report) -> None:  # noqa: ANN001 - a ProblemBound
    from rich.console import Console
    from rich.table import Table

    hw = report.hardware
    table = Table(title=f"{report.definition} on {hw.label} ({report.ceilings} ceilings)")
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
    if hw.measured:
        console.print(f"measured ceilings: {', '.join(hw.measured)}; the other rates are the datasheet's")
    console.print(f"peaks: {hw.source}")


@cli.command("bound")
@click.argument("problem_dir", type=click.Path(path_type=Path))
@click.option("--hardware", "hardware", metavar="NAME",
              help="Part to price the bound on (H100, H100PCIE, H100NVL, H200, H200NVL, B200, A100, MI300X, MI325X, MI355X, or a device name); "
                   "default: the GPU here.")
@click.option("--ceilings", type=click.Choice(["datasheet", "measured"]), default="datasheet", show_default=True,
              help="Price on the vendor's datasheet peaks, or on this device's calibrated ceilings "
                   "('sol-execbench calibrate'; rates it did not measure stay the datasheet's).")
@click.option("--device", "device_spec", metavar="D",
              help="Device whose datasheet entry or calibration prices the bound (cpu, N or cuda:N); default: the GPU here.")
@click.option("--json", "as_json", is_flag=True, help="Print the bound as JSON (the 'bound' format of contract --json).")
def bound_command(problem_dir: Path, hardware: str | None, ceilings: str, device_spec: str | None, as_json: bool) -> None:
    """Speed-of-light bound of each workload: fewest bytes, FLOPs by dtype, T_SOL on datasheet or measured ceilings."""
    from sol_execbench.scoring import BoundInputError, bound_problem

    if not problem_dir.is_dir():
        _fail(f"{problem_dir}: not a directory; give a problem directory holding definition.json and workload.jsonl")
    part = _pricing_part(hardware, ceilings, device_spec)
    try:
        report = bound_problem(problem_dir, part.peaks, part.resolved_from)
    except BoundInputError as exc:
        _fail(str(exc))
    if as_json:
        click.echo(report.model_dump_json(indent=2))
    else:
        _print_table(report)
