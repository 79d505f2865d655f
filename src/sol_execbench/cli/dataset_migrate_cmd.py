"""``sol-execbench dataset migrate-sol|migrate-flashinfer|migrate-kernelbench``: other layouts into
problem folders, with a deterministic manifest (docs/migration.md).

Exit 0 when the migration was written (blockers are facts of the data: the summary and the manifest
list them), 2 on bad input: one line naming the file, the field and the fix.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

import click

from sol_execbench.cli.dataset_cmd import dataset_group
from sol_execbench.schema.migration import MIGRATION_MANIFEST_NAME

BLOCKERS_SHOWN = 10


def _migration_options(with_category: bool) -> Callable:
    def decorate(command: Callable) -> Callable:
        command = click.option("--json", "as_json", is_flag=True, help="Print the manifest JSON on stdout.")(command)
        command = click.option("--manifest", "manifest_path", type=click.Path(path_type=Path), default=None,
                               help="Write the manifest here [default: OUT/migration-manifest.json].")(command)
        command = click.option("--source-revision", default=None,
                               help="The source's dataset revision or commit, recorded in the manifest.")(command)
        if with_category:
            command = click.option("--category", "categories", multiple=True,
                                   help="Only this category (repeatable); names the category of a lone file.")(command)
        command = click.argument("out", type=click.Path(path_type=Path))(command)
        return click.argument("src", type=click.Path(path_type=Path))(command)
    return decorate


def _migrate(src: Path, out: Path, manifest_path: Path | None, as_json: bool, read: Callable) -> None:
    """Check OUT, read the source, write; render the manifest or a summary. Bad input exits 2."""
    from sol_execbench.dataset.migrate import MigrationError, check_output, write_migration

    try:
        check_output(src, out, manifest_path)
        manifest = write_migration(read(), out, manifest_path)
    except MigrationError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    if as_json:
        click.echo(manifest.to_json(), nl=False)
        return
    counts = manifest.denominators
    click.echo(f"migrated {counts.problems.migrated} of {counts.problems.seen} problems "
               f"({counts.workloads.migrated} of {counts.workloads.seen} workloads, {counts.solutions.migrated} of "
               f"{counts.solutions.seen} solutions) into {out}")
    for blocker in manifest.blockers[:BLOCKERS_SHOWN]:
        click.echo(f"  blocked {blocker.scope.value} {blocker.source}: {blocker.code.value}: {blocker.detail}")
    if len(manifest.blockers) > BLOCKERS_SHOWN:
        click.echo(f"  ... and {len(manifest.blockers) - BLOCKERS_SHOWN} more blockers (see the manifest)")
    click.echo(f"manifest: {manifest_path or out / MIGRATION_MANIFEST_NAME}")


@dataset_group.command("migrate-sol")
@_migration_options(with_category=True)
def migrate_sol_cmd(src: Path, out: Path, categories: tuple[str, ...], source_revision: str | None,
                    manifest_path: Path | None, as_json: bool) -> None:
    """Upstream SOL-ExecBench (category folders, or its parquet export) into problem folders under OUT."""
    from sol_execbench.dataset.migrate import migrate_sol

    _migrate(src, out, manifest_path, as_json, lambda: migrate_sol(src, categories, source_revision))


@dataset_group.command("migrate-flashinfer")
@_migration_options(with_category=False)
def migrate_flashinfer_cmd(src: Path, out: Path, source_revision: str | None, manifest_path: Path | None,
                           as_json: bool) -> None:
    """A flashinfer-bench trace set (definitions/, workloads/, solutions/, traces/) into OUT/FlashInfer-Bench/."""
    from sol_execbench.dataset.migrate import migrate_flashinfer

    _migrate(src, out, manifest_path, as_json, lambda: migrate_flashinfer(src, source_revision))


@dataset_group.command("migrate-kernelbench")
@_migration_options(with_category=True)
def migrate_kernelbench_cmd(src: Path, out: Path, categories: tuple[str, ...], source_revision: str | None,
                            manifest_path: Path | None, as_json: bool) -> None:
    """KernelBench problem files (root, level folder or one file) into problem folders of category L<level>.

    The problem files are run on torch's meta device to learn shapes and dtypes.
    """
    from sol_execbench.dataset.migrate import migrate_kernelbench

    _migrate(src, out, manifest_path, as_json, lambda: migrate_kernelbench(src, categories, source_revision))
