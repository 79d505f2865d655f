"""``sol-execbench env probe`` and ``sol-execbench env diff``.

Neither this module nor a warm probe imports torch (see ``envprobe.torch_facts``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from sol_execbench.cli.main import cli


@cli.group("env")
def env_group() -> None:
    """Environment snapshots: probe this host, compare two snapshots."""


def _console() -> Any:
    from rich.console import Console

    return Console(highlight=False, soft_wrap=True)


def _print_summary(snapshot: dict[str, Any], verbose: bool, written: Path | None) -> None:
    from rich.table import Table
    from rich.text import Text

    from sol_execbench.envprobe.summary import status_line, summary_lines

    console = _console()
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold cyan", no_wrap=True)
    table.add_column()
    for label, text in summary_lines(snapshot):
        table.add_row(Text(label), Text(text))
    console.print(table)
    reasons = snapshot["partial_reasons"]
    if reasons:
        console.print(Text(f"Partial reasons ({len(reasons)}):", style="bold yellow"))
        for reason in reasons:
            console.print(Text(f"  - {reason}"))
    if written:
        console.print(Text(f"Wrote {written}"))
    if verbose:
        click.echo(json.dumps(snapshot, indent=2, default=str))
    console.print(Text(status_line(snapshot), style="bold yellow" if reasons else "bold green"))


@env_group.command("probe")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write the snapshot JSON to this file.")
@click.option("--json", "as_json", is_flag=True, help="Print the snapshot JSON only.")
@click.option("-v", "--verbose", is_flag=True, help="Print the full JSON after the summary.")
@click.option("--extended", is_flag=True, help="Also run the expensive probes (nm symbol counts over libtorch), each time-boxed.")
@click.option("--no-cache", "no_cache", is_flag=True,
              help="Re-probe everything the probe caches (torch build and device facts, library hashes and versions) "
                   "and store the fresh results.")
def probe_cmd(output: Path | None, as_json: bool, verbose: bool, extended: bool, no_cache: bool) -> None:
    """Snapshot this host's environment: host, PyTorch build, GPUs, vendor libraries, variables.

    Never fails on what it cannot read: such fields are null and listed as partial reasons.
    """
    from sol_execbench.envprobe.snapshot import collect

    snapshot = collect(extended=extended, use_cache=not no_cache)
    text = json.dumps(snapshot, indent=2, default=str)
    if output is not None:
        try:
            output.parent.mkdir(parents=True, exist_ok=True)
            output.write_text(text + "\n")
        except OSError as exc:
            raise click.ClickException(f"{output}: cannot write the snapshot: {exc.strerror or exc}") from exc
    if as_json:
        click.echo(text)
        return
    _print_summary(snapshot, verbose, output)


def _load_snapshot(path: Path, param: str) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise click.BadParameter(f"{path}: cannot be read: {exc}", param_hint=param) from exc
    except ValueError as exc:
        raise click.BadParameter(f"{path}: not JSON ({exc})", param_hint=param) from exc
    except RecursionError:
        raise click.BadParameter(f"{path}: JSON nested too deeply to read: an environment snapshot is a few "
                                 "levels deep; make one with 'sol-execbench env probe -o FILE'", param_hint=param) from None
    if not isinstance(data, dict) or "schema_version" not in data:
        raise click.BadParameter(
            f"{path}: not an environment snapshot (no 'schema_version' field); make one with 'sol-execbench env probe -o FILE'",
            param_hint=param,
        )
    return data


def _short(value: Any) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, str) else value
    return text if len(text) <= 100 else text[:97] + "..."


def _print_diff(result: Any, a: Path, b: Path) -> None:
    from rich.text import Text

    console = _console()
    for block, entries in result.by_block():
        console.print(Text(block, style="bold cyan"))
        for e in entries:
            tag = "" if e.kind == "config" else f"  [{e.kind}]"
            line = Text(f"  {e.path}: {_short(e.a)} -> {_short(e.b)}", style="dim" if e.kind != "config" else "")
            line.append(tag, style="yellow")
            console.print(line)
    counts = result.counts()
    summary = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())) or "no differences"
    verdict = "environments differ" if result.differs else "same environment (only volatile or identity fields differ)"
    console.print(Text(f"{a} vs {b}: {summary}; {verdict}", style="bold red" if result.differs else "bold green"))


@env_group.command("diff")
@click.argument("a", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("b", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the differences as JSON.")
@click.pass_context
def diff_cmd(ctx: click.Context, a: Path, b: Path, as_json: bool) -> None:
    """Fields that differ between two snapshots, grouped by block, most timing-relevant first.

    Exit code 1 when a non-volatile field differs, 0 when only volatile fields (timestamps,
    current clocks, temperatures) or identity fields (hostname, GPU UUIDs) differ.
    """
    from sol_execbench.envprobe.diff import diff_snapshots

    result = diff_snapshots(_load_snapshot(a, "A"), _load_snapshot(b, "B"))
    if as_json:
        click.echo(json.dumps({"a": str(a), "b": str(b), **result.to_dict()}, indent=2, default=str))
    else:
        _print_diff(result, a, b)
    ctx.exit(result.exit_code)
