"""``sol-execbench calibrate [--json] [--device D] [--refresh]``: this GPU's achievable ceilings."""

from __future__ import annotations

import click

from sol_execbench.cli.errors import fail
from sol_execbench.cli.main import cli


def _rate(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M")):
        if value >= scale:
            return f"{value / scale:,.1f} {prefix}{unit}"
    return f"{value:,.0f} {unit}"


def _print_table(calibration) -> None:  # noqa: ANN001 - a Calibration
    from rich.console import Console
    from rich.table import Table

    key = calibration.key
    origin = f"cached {calibration.measured_at}" if calibration.from_cache else f"measured {calibration.measured_at}"
    part = f" = {calibration.part}" if calibration.part else " (no datasheet entry)"
    table = Table(title=f"Ceilings of {key.device_name}{part}, {origin}")
    for column in ("ceiling", "rate", "shape", "latency ms", "IQR %", "measured", "datasheet", "fraction"):
        table.add_column(column, justify="left" if column in ("ceiling", "rate") else "right")
    for c in calibration.ceilings:
        unit = "B/s" if c.rate == "memory" else "FLOP/s"
        table.add_row(c.name, c.rate, "x".join(map(str, c.shape)), f"{c.latency_ms:.3f}", f"{100 * c.relative_iqr:.1f}",
                      _rate(c.achieved_per_s, unit), _rate(c.datasheet_per_s, unit),
                      f"{c.fraction_of_datasheet:.2f}" if c.fraction_of_datasheet is not None else "-")
    console = Console(highlight=False, soft_wrap=True)
    console.print(table)
    for c in calibration.ceilings:
        for note in c.notes:
            console.print(f"{c.name}: {note}")
    for s in calibration.skipped:
        console.print(f"not measured: {s.name}: {s.reason}")
    console.print(f"key: {key.device_id}, driver {key.driver}, torch {key.torch}; cache: {calibration.cache_file}")


@cli.command("calibrate")
@click.option("--device", "device_spec", metavar="D",
              help="GPU to calibrate (N or cuda:N; default: the first). 'cpu' calibrates the CPU with small sizes "
                   "(a check of the path, for tests).")
@click.option("--refresh", is_flag=True, help="Measure again even when the cache holds this device, driver and torch.")
@click.option("--json", "as_json", is_flag=True, help="Print the calibration as JSON (the 'calibration' format of contract --json).")
def calibrate_command(device_spec: str | None, refresh: bool, as_json: bool) -> None:
    """Achievable ceilings of this GPU: a large GEMM per dtype and a large copy, timed as an evaluation times a call."""
    from sol_execbench.platform import use_device
    from sol_execbench.scoring.calibration import calibrate

    try:
        device = use_device(device_spec)
    except ValueError as exc:
        fail(f"--device: {exc}")
    if not device.is_gpu and device_spec is None:
        fail("calibrate needs a GPU, and torch sees none here; '--device cpu' calibrates the CPU "
             "(small sizes: a check of the path, not a ceiling worth pricing on)")
    progress = (lambda _: None) if as_json else (lambda line: click.echo(line, err=True))
    calibration = calibrate(device, refresh=refresh, progress=progress)
    if as_json:
        click.echo(calibration.model_dump_json(indent=2))
    else:
        _print_table(calibration)
