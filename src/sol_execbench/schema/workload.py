"""Workload: concrete axis values, how each input is made, and the tolerance."""

from __future__ import annotations

from typing import Literal, Optional, Union

from pydantic import Field, model_validator

from .base import NonEmptyString, NonNegativeInt, SchemaModel


class RandomInput(SchemaModel):
    """Random data, shaped by the definition (with upstream's name heuristics)."""

    type: Literal["random"] = "random"


class ScalarInput(SchemaModel):
    """A literal scalar value."""

    type: Literal["scalar"] = "scalar"
    value: Union[bool, int, float]


class SafetensorsInput(SchemaModel):
    """A tensor read from a safetensors file."""

    type: Literal["safetensors"] = "safetensors"
    path: NonEmptyString
    """Relative to the staging directory, then to FLASHINFER_TRACE_DIR (leading parts may be dropped)."""
    tensor_key: NonEmptyString


class CustomInput(SchemaModel):
    """Made by the definition's ``custom_inputs_entrypoint``; all inputs of the workload then are."""

    type: Literal["custom"] = "custom"


InputSpec = Union[RandomInput, ScalarInput, SafetensorsInput, CustomInput]


class ToleranceSpec(SchemaModel):
    """An element matches when ``|out - ref| <= max_atol + max_rtol * |ref|``."""

    max_atol: float = 1e-2
    max_rtol: float = 1e-2
    required_matched_ratio: float = Field(default=0.99, ge=0.0, le=1.0)
    """Fraction of elements that must match."""
    max_error_cap: Optional[float] = None
    """If set, any absolute error above it fails, whatever the matched ratio."""
    allow_negative_inf: bool = False
    """Positions where output and reference are both -inf count as matching."""


class Workload(SchemaModel):
    """One concrete instance of a definition."""

    axes: dict[str, NonNegativeInt]
    inputs: dict[str, InputSpec] = Field(default_factory=dict)
    uuid: NonEmptyString
    tolerance: ToleranceSpec = Field(default_factory=ToleranceSpec)

    @model_validator(mode="after")
    def _custom_all_or_none(self) -> "Workload":
        custom = [n for n, i in self.inputs.items() if isinstance(i, CustomInput)]
        if custom and len(custom) != len(self.inputs):
            others = [n for n in self.inputs if n not in custom]
            raise ValueError(f"custom inputs {custom} cannot be mixed with other inputs {others}")
        return self

    def scalar_values(self) -> dict[str, bool | int | float]:
        return {n: i.value for n, i in self.inputs.items() if isinstance(i, ScalarInput)}
