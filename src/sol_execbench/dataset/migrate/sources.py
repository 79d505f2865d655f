"""Reading source files for a migration: JSON and text that cannot be read end the migration with one
line naming the file (``MigrationError``); what reads but does not load here becomes a blocker later."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sol_execbench.schema import FormatError
from sol_execbench.schema.loading import parse_json, read_text

from .collect import MigrationError

REDOWNLOAD = "fix the file or take a fresh copy of the dataset"


def existing_source(src: Path) -> Path:
    try:
        if src.exists():
            return src
    except (OSError, ValueError) as exc:  # a NUL byte, a name too long for the file system
        raise MigrationError(repr(str(src)[:80]), "SRC", f"is not a usable path ({exc})", "give an existing path") from None
    raise MigrationError(str(src), "SRC", "does not exist", "give the dataset's folder or file")


def where(path: Path, root: Path) -> str:
    """``path`` below the source root, as manifests and messages name it."""
    try:
        relative = path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()
    return relative if relative != "." else path.name


def text_of(path: Path, root: Path) -> str:
    try:
        return read_text(path)
    except FormatError as exc:
        raise MigrationError(where(path, root), None, exc.message, REDOWNLOAD) from None


def json_of(path: Path, root: Path) -> Any:
    """A JSON file's value."""
    return json_in(text_of(path, root), where(path, root))


def json_in(text: str, at: str, field_name: str | None = None, line: int | None = None) -> Any:
    """The JSON value of ``text``, which lies at ``at`` (a file, or a row of one), at ``line`` of it if given."""
    try:
        return parse_json(text, Path(at), line)
    except FormatError as exc:
        raise MigrationError(at, field_name, exc.message, REDOWNLOAD) from None


def jsonl_of(path: Path, root: Path) -> list[tuple[str, Any]]:
    """A JSONL file's values (blank lines skipped), each with where it is: ``file line N``."""
    at = where(path, root)
    return [(f"{at} line {number}", json_in(line, at, line=number))
            for number, line in enumerate(text_of(path, root).splitlines(), start=1) if line.strip()]


def visible_dirs(folder: Path) -> list[Path]:
    """Sub-folders in name order, without hidden and private ones (``.git``, ``__pycache__``)."""
    return sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))
