"""Migrations: other layouts (upstream SOL-ExecBench folders and parquet, flashinfer-bench trace sets,
KernelBench problem files) into problem folders our loader reads unchanged, with a deterministic
manifest. Each ``migrate_*`` reads its source into a ``Migration`` (nothing written yet);
``write_migration`` writes it."""

from .collect import Migration, MigrationError
from .flashinfer import migrate_flashinfer
from .kernelbench import migrate_kernelbench
from .output import check_output, write_migration
from .sol import migrate_sol

__all__ = ["Migration", "MigrationError", "check_output", "migrate_flashinfer", "migrate_kernelbench", "migrate_sol", "write_migration"]
