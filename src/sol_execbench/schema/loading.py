"""Reading the formats from files: one clear message per problem, warnings for unknown keys."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from .base import FieldError, UnknownKey, closest_name, unknown_keys
from .config import BenchmarkConfig
from .definition import AxisVar, Definition
from .solution import Solution, normalise_source_path
from .workload import CustomInput, Workload

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
    source_files: list[Path] = field(default_factory=list)  # solution sources read from disk (empty content)


def _describe_validation(err: ValidationError) -> str:
    lines = []
    for item in err.errors():
        loc = [str(p) for p in item["loc"] if not (isinstance(p, str) and p in _UNION_TAGS)]
        message = item["msg"]
        raised = item.get("ctx", {}).get("error")
        if isinstance(raised, ValueError):
            message = str(raised)  # without pydantic's "Value error, " prefix
        if isinstance(raised, FieldError):
            loc.append(raised.field)
        lines.append(f"field '{'.'.join(loc)}': {message}" if loc else message)
    return "; ".join(lines)


# pydantic names union members in error locations; they say nothing to a user.
_UNION_TAGS = {"AxisConst", "AxisVar", "AxisExpr", "RandomInput", "ScalarInput", "SafetensorsInput", "CustomInput"}


def read_text(path: Path) -> str:
    try:
        if not path.exists():
            raise FormatError(path, "file not found")
        if path.is_dir():
            raise FormatError(path, "is a directory, expected a file")
    except (OSError, ValueError) as exc:  # a NUL byte, a name longer than the file system allows
        raise FormatError(str(path).replace("\0", "\\0"), f"is not a usable path ({exc}): give the path of an existing file") from None
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise FormatError(path, f"is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})") from None
    except OSError as exc:
        raise FormatError(path, f"cannot be read: {exc}") from exc


def parse_json(text: str, path: Path, line: int | None = None) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        at = f"line {line}" if line is not None else f"line {exc.lineno} column {exc.colno}"
        raise FormatError(path, f"malformed JSON at {at}: {exc.msg}") from exc
    except RecursionError:
        where = f" at line {line}" if line is not None else ""
        raise FormatError(path, f"JSON nested too deeply{where} (more than about {sys.getrecursionlimit()} levels): "
                                "flatten it") from None


def validate(model: type[M], data: Any, path: Path | str, what: str, notes: Loaded | None, prefix: str = "") -> M:
    """Validate ``data`` as ``model``; unknown keys become warnings naming the file.

    ``prefix`` says where in the file the object is (``"line 3: "``); it leads every message.
    """
    if not isinstance(data, dict):
        raise FormatError(path, f"{prefix}{what} must be a JSON object, got {type(data).__name__}")
    try:
        obj = model.model_validate(data)
    except ValidationError as exc:
        raise FormatError(path, f"{prefix}not a valid {what}: {_describe_validation(exc)}") from None
    except RecursionError:
        raise FormatError(path, f"{prefix}{what} nested too deeply to validate: flatten it") from None
    if notes is not None:
        notes.warnings.extend(f"{path}: {prefix}{unknown.describe()}" for unknown in unknown_keys(obj))
    return obj


def check_workload(definition: Definition, workload: Workload, path: Path | str, notes: Loaded | None,
                   prefix: str = "") -> None:
    """Cross-check a workload against its definition (``path`` and ``prefix`` as for ``validate``).

    Var axes it gives no value for, and custom inputs without a ``custom_inputs_entrypoint``, are
    errors. Axis and input names the definition does not have are warnings, since the file is
    otherwise valid: such an input is ignored and the real one silently made random.
    """
    unknown_axes = [a for a in workload.axes if a not in definition.axes]
    missing = [a for a, spec in definition.axes.items() if isinstance(spec, AxisVar) and a not in workload.axes]
    if missing:
        hint = f" (it gives {unknown_axes}, which the definition does not have)" if unknown_axes else ""
        raise FormatError(path, f"{prefix}workload '{workload.uuid}' gives no value for axes {missing}{hint}")
    if any(isinstance(i, CustomInput) for i in workload.inputs.values()) and not definition.custom_inputs_entrypoint:
        raise FormatError(path, f"{prefix}workload '{workload.uuid}' has custom inputs but the definition has no "
                                "custom_inputs_entrypoint")
    if notes is None:
        return
    axes_left = [a for a in definition.axes if a not in workload.axes]
    inputs_left = [n for n in definition.inputs if n not in workload.inputs]
    unknown = [UnknownKey("axes", a, closest_name(a, axes_left), f"definition '{definition.name}' has no such axis")
               for a in unknown_axes]
    unknown += [UnknownKey("inputs", n, closest_name(n, inputs_left), f"definition '{definition.name}' has no such input")
                for n in workload.inputs if n not in definition.inputs]
    notes.warnings.extend(f"{path}: {prefix}{u.describe()}" for u in unknown)


def load_model(model: type[M], path: Path | str, what: str, notes: Loaded | None = None) -> M:
    """A JSON file holding one object of ``model`` (``what`` names the format in messages)."""
    path = Path(path)
    return validate(model, parse_json(read_text(path), path), path, what, notes)


def load_definition(path: Path | str, notes: Loaded | None = None) -> Definition:
    return load_model(Definition, path, "definition", notes)


def load_workloads(path: Path | str, notes: Loaded | None = None, definition: Definition | None = None) -> list[Workload]:
    """A JSONL file, one workload per line (blank lines skipped); checked against ``definition`` if given."""
    path = Path(path)
    workloads: list[Workload] = []
    seen: set[str] = set()
    for number, line in enumerate(read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        data = parse_json(line, path, number)
        wl = validate(Workload, data, path, "workload", notes, prefix=f"line {number}: ")
        if definition is not None:
            check_workload(definition, wl, path, notes, prefix=f"line {number}: ")
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
    data = parse_json(read_text(path), path)
    if isinstance(data, dict) and isinstance(data.get("sources"), list):
        for i, src in enumerate(data["sources"]):
            if isinstance(src, dict) and not src.get("content") and isinstance(src.get("path"), str):
                try:  # checked before anything is read: a path like '../x' names no file of the solution
                    relative = normalise_source_path(src["path"])
                except ValueError as exc:
                    raise FormatError(path, f"field 'sources.{i}.path': {exc}") from None
                beside = path.parent / relative
                if not beside.is_file():
                    raise FormatError(
                        path, f"field 'sources.{i}.content' is empty and {beside} does not exist to fill it"
                    )
                try:
                    src["content"] = read_text(beside)
                except FormatError as exc:
                    raise FormatError(path, f"field 'sources.{i}.content' is empty and {beside} {exc.message}") from None
                if notes is not None:
                    notes.source_files.append(beside)
    return validate(Solution, data, path, "solution", notes)


def load_config(path: Path | str, notes: Loaded | None = None) -> dict[str, Any]:
    """The fields a config file sets (validated), for field-by-field merging."""
    path = Path(path)
    data = parse_json(read_text(path), path)
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
