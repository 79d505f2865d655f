"""Reading the formats from files: one clear message per problem, warnings for unknown keys."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from .base import unknown_keys
from .config import BenchmarkConfig
from .definition import Definition
from .solution import Solution
from .workload import Workload

M = TypeVar("M", bound=BaseModel)


class FormatError(Exception):
    """A file that is missing, not JSON, or does not follow its format. The message names both."""

    def __init__(self, path: Path | str, message: str):
        self.path = str(path)
        self.message = message
        super().__init__(f"{path}: {message}")


@dataclass
class Loaded:
    """Warnings gathered while loading (unknown keys, name mismatches)."""

    warnings: list[str] = field(default_factory=list)


def _describe_validation(err: ValidationError, prefix: str = "") -> str:
    lines = []
    for item in err.errors():
        loc = ".".join(str(p) for p in item["loc"] if not (isinstance(p, str) and p in _UNION_TAGS))
        where = f"{prefix}{loc}" if loc else (prefix.rstrip(".") or "(top level)")
        lines.append(f"field '{where}': {item['msg']}")
    return "; ".join(lines)


# pydantic names union members in error locations; they say nothing to a user.
_UNION_TAGS = {"AxisConst", "AxisVar", "AxisExpr", "RandomInput", "ScalarInput", "SafetensorsInput", "CustomInput"}


def _read_text(path: Path) -> str:
    if not path.exists():
        raise FormatError(path, "file not found")
    if path.is_dir():
        raise FormatError(path, "is a directory, expected a file")
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise FormatError(path, f"cannot be read: {exc}") from exc


def _parse_json(text: str, path: Path, line: int | None = None) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        at = f"line {line}" if line is not None else f"line {exc.lineno} column {exc.colno}"
        raise FormatError(path, f"malformed JSON at {at}: {exc.msg}") from exc


def validate(model: type[M], data: Any, path: Path | str, what: str, notes: Loaded | None, prefix: str = "") -> M:
    """Validate ``data`` as ``model``; unknown keys become warnings naming the file."""
    if not isinstance(data, dict):
        raise FormatError(path, f"{what} must be a JSON object, got {type(data).__name__}")
    try:
        obj = model.model_validate(data)
    except ValidationError as exc:
        raise FormatError(path, f"not a valid {what}: {_describe_validation(exc, prefix)}") from exc
    if notes is not None:
        for unknown in unknown_keys(obj):
            loc = f"{prefix}{unknown.location}".rstrip(".")
            shown = type(unknown)(loc, unknown.key, unknown.suggestion)
            notes.warnings.append(f"{path}: {shown.describe()}")
    return obj


def load_definition(path: Path | str, notes: Loaded | None = None) -> Definition:
    path = Path(path)
    return validate(Definition, _parse_json(_read_text(path), path), path, "definition", notes)


def load_workloads(path: Path | str, notes: Loaded | None = None) -> list[Workload]:
    """A JSONL file, one workload per line (blank lines skipped)."""
    path = Path(path)
    workloads: list[Workload] = []
    seen: set[str] = set()
    for number, line in enumerate(_read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        data = _parse_json(line, path, number)
        wl = validate(Workload, data, path, "workload", notes, prefix=f"line {number}: ")
        if wl.uuid in seen:
            raise FormatError(path, f"line {number}: workload uuid '{wl.uuid}' appears twice")
        seen.add(wl.uuid)
        workloads.append(wl)
    if not workloads:
        raise FormatError(path, "holds no workloads")
    return workloads


def load_solution(path: Path | str, notes: Loaded | None = None) -> Solution:
    """A solution JSON; sources with empty content are read from files beside it."""
    path = Path(path)
    data = _parse_json(_read_text(path), path)
    if isinstance(data, dict) and isinstance(data.get("sources"), list):
        for i, src in enumerate(data["sources"]):
            if isinstance(src, dict) and not src.get("content") and isinstance(src.get("path"), str):
                beside = path.parent / src["path"]
                if not beside.is_file():
                    raise FormatError(
                        path, f"field 'sources.{i}.content' is empty and {beside} does not exist to fill it"
                    )
                src["content"] = beside.read_text(encoding="utf-8")
    return validate(Solution, data, path, "solution", notes)


def load_config(path: Path | str, notes: Loaded | None = None) -> dict[str, Any]:
    """The fields a config file sets (validated), for field-by-field merging."""
    path = Path(path)
    data = _parse_json(_read_text(path), path)
    validate(BenchmarkConfig, data, path, "benchmark config", notes)
    return data


def merge_configs(*layers: dict[str, Any] | BenchmarkConfig | None) -> BenchmarkConfig:
    """Defaults, overridden field by field by each later layer."""
    merged: dict[str, Any] = {}
    for layer in layers:
        if layer is None:
            continue
        if isinstance(layer, BenchmarkConfig):
            layer = layer.model_dump(exclude_unset=True)
        merged.update(layer)
    return BenchmarkConfig.model_validate(merged)
