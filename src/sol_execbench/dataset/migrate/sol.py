"""``dataset migrate-sol``: upstream SOL-ExecBench, as category folders of problem folders or as its
parquet export, into problem folders our loader reads unchanged.

Folder layout: ``SRC/<category>/<problem>/{definition.json, workload.jsonl, reference.py, config.json,
solution*.json}``, also below ``SRC/benchmark/``, or SRC a single category folder. A reference kept
only in ``reference.py`` is written into the definition too; solutions are written with their
sources inlined.
"""

from __future__ import annotations

from pathlib import Path

from sol_execbench.schema import FormatError, load_solution
from sol_execbench.schema.migration import BlockerCode, MigrationSource, MigrationSourceKind

from .collect import (CONFIG_FILE, DEFINITION_FILE, REFERENCE_FILE, WORKLOAD_FILE, Migration, MigrationError,
                      ProblemDraft, Record, json_text)
from .sol_parquet import collect_parquet, parquet_files
from .sources import existing_source, json_of, jsonl_of, text_of, visible_dirs, where

BENCHMARK_FOLDER = "benchmark"  # upstream's download puts the category folders below it


def migrate_sol(src: Path, categories: tuple[str, ...] = (), revision: str | None = None) -> Migration:
    """Read SRC (folders or parquet) into a ``Migration``; raises ``MigrationError`` on bad input."""
    src = existing_source(src)
    parquet = parquet_files(src)
    kind = MigrationSourceKind.SOL_EXECBENCH_PARQUET if parquet else MigrationSourceKind.SOL_EXECBENCH
    migration = Migration(MigrationSource(kind=kind, name=src.absolute().name, revision=revision,
                                          categories=sorted(set(categories))))
    if parquet:
        collect_parquet(src, parquet, categories, migration)
        return migration
    for category, folder in _selected(_category_folders(src), categories, src):
        for problem_dir in visible_dirs(folder):
            migration.add(_folder_problem(problem_dir, category, src))
    return migration


def _is_problem(folder: Path) -> bool:
    return (folder / DEFINITION_FILE).is_file()


def _is_category(folder: Path) -> bool:
    return any(_is_problem(p) for p in visible_dirs(folder))


def _category_folders(src: Path) -> dict[str, Path]:
    if src.is_dir():
        for root in (src, src / BENCHMARK_FOLDER):
            if root.is_dir() and (found := {p.name: p for p in visible_dirs(root) if _is_category(p)}):
                return found
        if _is_category(src):
            return {src.absolute().name: src}
    raise MigrationError(str(src), "SRC", "holds no SOL-ExecBench problems (no <category>/<problem>/definition.json "
                         "and no .parquet file)", "give the dataset root, its benchmark/ folder, or a parquet export")


def _selected(found: dict[str, Path], categories: tuple[str, ...], src: Path) -> list[tuple[str, Path]]:
    unknown = sorted(set(categories) - set(found))
    if unknown:
        raise MigrationError(str(src), "--category", f"names {', '.join(unknown)}, which SRC does not have",
                             f"choose from {', '.join(sorted(found))}")
    return [(name, found[name]) for name in sorted(found) if not categories or name in categories]


def _folder_problem(folder: Path, category: str, src: Path) -> ProblemDraft:
    draft = ProblemDraft(category=category, name=folder.name, source=where(folder, src))
    missing = [name for name in (DEFINITION_FILE, WORKLOAD_FILE) if not (folder / name).is_file()]
    if missing:
        draft.blocker = (BlockerCode.MISSING_FILE, f"the folder has no {' and no '.join(missing)}")
        return draft
    draft.definition = json_of(folder / DEFINITION_FILE, src)
    draft.workloads = [Record(at, data) for at, data in jsonl_of(folder / WORKLOAD_FILE, src)]
    if (folder / REFERENCE_FILE).is_file():
        reference = text_of(folder / REFERENCE_FILE, src)
        draft.extra_files[REFERENCE_FILE] = reference
        if isinstance(draft.definition, dict) and not draft.definition.get("reference"):
            draft.definition["reference"] = reference
    if (folder / CONFIG_FILE).is_file():
        draft.extra_files[CONFIG_FILE] = json_text(json_of(folder / CONFIG_FILE, src))
    for path in sorted(folder.glob("solution*.json")):
        draft.solutions.append(_solution_record(path, src))
    return draft


def _solution_record(path: Path, src: Path) -> Record:
    """A solution with its sources inlined (upstream may keep them beside the JSON, with empty content)."""
    json_of(path, src)  # a file that is not JSON is bad input, not a blocker
    at = where(path, src)
    try:
        solution = load_solution(path)
    except FormatError as exc:
        return Record(at, None, path.name, (BlockerCode.SOLUTION_REJECTED, exc.message))
    return Record(at, solution.model_dump(mode="json", exclude_unset=True), path.name)
