"""``sol-execbench dataset ...``: suites of problems (run, migrate)."""

from __future__ import annotations

from sol_execbench.cli.main import cli


@cli.group("dataset")
def dataset_group() -> None:
    """Suites of problems: run a whole dataset root, or migrate another layout into it.

    \b
    sol-execbench dataset run ROOT [-o out]
    sol-execbench dataset migrate-sol SRC OUT
    """
