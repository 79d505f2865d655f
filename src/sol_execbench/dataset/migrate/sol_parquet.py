"""Upstream SOL-ExecBench's parquet export: one row per problem, ``axes``, ``inputs``, ``outputs`` and
``workloads`` as JSON strings, the other columns (name, description, reference, ...) as they are.

A file's category is the first folder below SRC (``L1/train/0000.parquet`` is L1); a file given as
SRC, or lying in SRC itself, takes its category from a single ``--category``. ``pyarrow`` is needed
only here and imported only here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .collect import Migration, MigrationError, ProblemDraft, Record
from .sources import json_in, where

PARQUET_SUFFIX = ".parquet"
JSON_COLUMNS = ("axes", "inputs", "outputs", "workloads")
LIST_COLUMNS = ("constraints", "tags")  # JSON strings in an export that flattens them; decoded when they are
REQUIRED_COLUMNS = ("name", "reference", *JSON_COLUMNS)


def parquet_files(src: Path) -> list[Path]:
    """The parquet files of SRC: SRC itself, or those below it (none when it also holds problem folders)."""
    if src.is_file():
        return [src] if src.suffix == PARQUET_SUFFIX else []
    if any(src.rglob("definition.json")):
        return []
    return sorted(p for p in src.rglob(f"*{PARQUET_SUFFIX}") if not any(part.startswith(".") for part in p.parts))


def _category_of(path: Path, src: Path, categories: tuple[str, ...]) -> str:
    parts = path.relative_to(src).parts if path != src else ()
    if len(parts) > 1:
        return parts[0]
    if len(categories) == 1:
        return categories[0]
    raise MigrationError(where(path, src), None, "lies in no category folder, so its category is unknown",
                         "put it in a folder named after its category (L1/...) or give --category once")


def _rows(path: Path, src: Path) -> list[dict[str, Any]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise MigrationError(where(path, src), None, "reading parquet needs the package 'pyarrow', which is not "
                             "installed", "pip install pyarrow") from None
    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow's own errors (ArrowInvalid ...) and OSError alike
        raise MigrationError(where(path, src), None, f"is not a readable parquet file ({str(exc)[:200]})",
                             "give a parquet export of the dataset") from None
    missing = [c for c in REQUIRED_COLUMNS if c not in table.column_names]
    if missing:
        raise MigrationError(where(path, src), f"column {missing[0]}", "is missing",
                             f"give an export with the columns {', '.join(REQUIRED_COLUMNS)}")
    return table.to_pylist()


def _decoded(value: Any, at: str, column: str) -> Any:
    if isinstance(value, str) and (column in JSON_COLUMNS or value.lstrip().startswith("[")):
        return json_in(value, at, column)
    if value is None and column in JSON_COLUMNS:
        raise MigrationError(at, column, "is empty", "give the column's JSON text")
    return value


def _row_problem(row: dict[str, Any], at: str, category: str) -> ProblemDraft:
    name = row["name"]
    if not isinstance(name, str) or not name.strip():
        raise MigrationError(at, "name", f"is {name!r}, not a problem name", "give each row a non-empty name")
    decoded = {column: _decoded(value, at, column) for column, value in row.items()}
    workloads = decoded.pop("workloads")
    if not isinstance(workloads, list):
        raise MigrationError(at, "workloads", f"is a JSON {type(workloads).__name__}, not a list of workloads",
                             "give the workloads as a JSON list")
    return ProblemDraft(category=category, name=name, source=at, definition=decoded,
                        workloads=[Record(f"{at} workloads[{i}]", w) for i, w in enumerate(workloads)])


def collect_parquet(src: Path, files: list[Path], categories: tuple[str, ...], migration: Migration) -> None:
    chosen = [(path, _category_of(path, src, categories)) for path in files]
    found = {category for _, category in chosen}
    unknown = sorted(set(categories) - found)
    if unknown:
        raise MigrationError(str(src), "--category", f"names {', '.join(unknown)}, which SRC does not have",
                             f"choose from {', '.join(sorted(found))}")
    for path, category in chosen:
        if categories and category not in categories:
            continue
        for number, row in enumerate(_rows(path, src), start=1):
            migration.add(_row_problem(row, f"{where(path, src)} row {number}", category))
