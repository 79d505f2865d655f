"""Base model shared by every format.

Models keep keys they do not know (``extra="allow"``) so that a file round-trips unchanged and
so that loaders can warn about each unknown key instead of dropping it silently.
"""

from __future__ import annotations

import ast
import difflib
import inspect
import textwrap
from dataclasses import dataclass
from functools import cache
from typing import Annotated, Any, Iterable, Iterator

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue

NonEmptyString = Annotated[str, Field(min_length=1)]
NonNegativeInt = Annotated[int, Field(ge=0)]


class SchemaModel(BaseModel):
    """Base for all formats: unknown keys are kept; attribute docstrings describe the fields in the
    JSON Schema (``DocumentedJsonSchema``)."""

    # Not pydantic's use_attribute_docstrings: it parses every model's source at import, about 35 ms
    # of each command's start (a fifth of an evaluation's imports), for a schema only `contract` prints.
    model_config = ConfigDict(extra="allow")


@cache
def _own_attribute_docstrings(cls: type) -> dict[str, str]:
    """The string literal right below each annotated attribute of ``cls``'s own body."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError, SyntaxError):  # no source (a frozen or zipped install): no descriptions
        return {}
    body = next((node.body for node in ast.walk(tree) if isinstance(node, ast.ClassDef)), [])
    docs = {}
    for node, after in zip(body, body[1:]):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(after, ast.Expr) \
                and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str):
            docs[node.target.id] = inspect.cleandoc(after.value.value)
    return docs


def _field_docstring(cls: type, name: str) -> str | None:
    """The docstring of field ``name`` as the class that declares it last wrote it (None if it wrote none)."""
    for klass in cls.__mro__:
        if name in inspect.get_annotations(klass):
            return _own_attribute_docstrings(klass).get(name)
    return None


class DocumentedJsonSchema(GenerateJsonSchema):
    """JSON Schema generation that describes each model field without a description of its own by
    its attribute docstring."""

    def model_schema(self, schema: Any) -> JsonSchemaValue:
        json_schema = super().model_schema(schema)
        cls = schema["cls"]
        properties = json_schema.get("properties", {})
        for name, info in cls.model_fields.items():
            prop = properties.get(info.alias or name)
            if prop is not None and "description" not in prop and (doc := _field_docstring(cls, name)):
                prop["description"] = doc
                ordered = sorted(prop.items())  # the keys in pydantic's own order (it sorts them)
                prop.clear()
                prop.update(ordered)
        return json_schema


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
