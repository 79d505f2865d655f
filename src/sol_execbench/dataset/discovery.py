"""Finding the problems of a dataset: a folder holding ``definition.json`` and ``workload.jsonl`` is
a problem, named by its path relative to the root (``L1/rmsnorm``). Category folders may nest; a
problem's category is the path above it. A root that is itself a problem is named by its folder's
name (category empty)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from sol_execbench.schema.base import closest_name

DEFINITION_FILE = "definition.json"
WORKLOAD_FILE = "workload.jsonl"


class DatasetUsageError(Exception):
    """A bad argument or input file of a dataset run: one line naming the file or flag and the fix."""


@dataclass(frozen=True)
class DatasetProblem:
    key: str
    """Path relative to the dataset root, POSIX separators."""
    folder: Path

    @property
    def category(self) -> str:
        parent = PurePosixPath(self.key).parent
        return "" if str(parent) == "." else str(parent)

    @property
    def definition_path(self) -> Path:
        return self.folder / DEFINITION_FILE

    @property
    def workload_path(self) -> Path:
        return self.folder / WORKLOAD_FILE


def is_problem_folder(folder: Path) -> bool:
    return (folder / DEFINITION_FILE).is_file() and (folder / WORKLOAD_FILE).is_file()


def discover(root: Path, skip: Path | None = None) -> list[DatasetProblem]:
    """Every problem below ``root`` in path order; ``skip`` (the run's output folder when it lies
    inside the root) is not searched. Folders starting with '.' are not searched either."""
    if is_problem_folder(root):
        return [DatasetProblem(root.name, root)]
    skip_real = os.path.realpath(skip) if skip is not None else None
    found: list[DatasetProblem] = []
    seen: set[str] = set()  # real paths: a link back up the tree is searched once
    for folder, names, _files in os.walk(root, followlinks=True):
        real = os.path.realpath(folder)
        if real in seen or real == skip_real:
            names[:] = []
            continue
        seen.add(real)
        path = Path(folder)
        if path != root and is_problem_folder(path):
            found.append(DatasetProblem(path.relative_to(root).as_posix(), path))
            names[:] = []  # a problem folder holds no further problems
            continue
        names[:] = sorted(n for n in names if not n.startswith("."))
    return sorted(found, key=lambda p: p.key)


def select(problems: list[DatasetProblem], categories: tuple[str, ...], limit: int | None) -> list[DatasetProblem]:
    """The problems of the given categories (each a category path: ``L1`` or ``L1/norms``), at
    most ``limit`` of them, in path order."""
    chosen = problems
    if categories:
        known = sorted({p.category for p in problems if p.category})
        for category in categories:
            wanted = category.strip("/")
            if not any(p.key.startswith(f"{wanted}/") for p in problems):
                hint = closest_name(wanted, known)
                raise DatasetUsageError(f"--category {category}: no problem below it"
                                        + (f" (did you mean '{hint}'?)" if hint else "")
                                        + f"; the categories are: {', '.join(known) or 'none'}")
        chosen = [p for p in problems if any(p.key.startswith(f"{c.strip('/')}/") for c in categories)]
    return chosen[:limit] if limit is not None else chosen
