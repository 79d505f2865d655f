"""Base model shared by every format.

Models keep keys they do not know (``extra="allow"``) so that a file round-trips unchanged and
so that loaders can warn about each unknown key instead of dropping it silently.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Annotated, Any, Iterable, Iterator

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
    reason: str | None = None  # why the key is unknown, when it is not the schema's doing

    def describe(self) -> str:
        where = f"{self.location}.{self.key}" if self.location else self.key
        hints = [h for h in (self.reason, f"did you mean '{self.suggestion}'?" if self.suggestion else None) if h]
        return f"unknown key '{where}' is ignored" + (f" ({'; '.join(hints)})" if hints else "")


def closest_name(name: str, known: Iterable[str]) -> str | None:
    """The known name ``name`` was most likely meant to be, if any is close enough."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return close[0] if close else None


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
        found.append(UnknownKey(path, key, closest_name(key, known)))
    for name in type(model).model_fields:
        child = getattr(model, name)
        child_path = f"{path}.{name}" if path else name
        for sub_path, sub in _children(child, child_path):
            found.extend(unknown_keys(sub, sub_path))
    return found


class FieldError(ValueError):
    """A validator's error about one field below the model it validates (``axes.T.expression``):
    pydantic locates a model validator's errors at the model itself, and the loaders' messages name
    the field from this."""

    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(message)
