"""Base model shared by every format.

Models keep keys they do not know (``extra="allow"``) so that a file round-trips unchanged and
so that loaders can warn about each unknown key instead of dropping it silently.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Annotated, Any, Iterator

from pydantic import BaseModel, ConfigDict, Field

NonEmptyString = Annotated[str, Field(min_length=1)]
NonNegativeInt = Annotated[int, Field(ge=0)]


class SchemaModel(BaseModel):
    """Base for all formats: attribute docstrings feed the JSON Schema; unknown keys are kept."""

    model_config = ConfigDict(use_attribute_docstrings=True, extra="allow")


@dataclass(frozen=True)
class UnknownKey:
    """A key a file holds that its format does not define."""

    location: str  # dotted path of the object holding the key, e.g. "tolerance"
    key: str
    suggestion: str | None

    def describe(self) -> str:
        where = f"{self.location}.{self.key}" if self.location else self.key
        hint = f" (did you mean '{self.suggestion}'?)" if self.suggestion else ""
        return f"unknown key '{where}' is ignored{hint}"


def _children(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    if isinstance(value, BaseModel):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _children(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _children(v, f"{path}[{i}]")


def unknown_keys(model: BaseModel, path: str = "") -> list[UnknownKey]:
    """Every key in ``model`` (recursively) that its schema does not define."""
    found: list[UnknownKey] = []
    known = list(type(model).model_fields)
    for key in model.model_extra or {}:
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        found.append(UnknownKey(path, key, close[0] if close else None))
    for name in type(model).model_fields:
        child = getattr(model, name)
        child_path = f"{path}.{name}" if path else name
        for sub_path, sub in _children(child, child_path):
            found.extend(unknown_keys(sub, sub_path))
    return found
