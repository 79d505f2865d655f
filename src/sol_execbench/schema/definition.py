"""Definition: a kernel problem, its symbolic axes, tensors and PyTorch reference."""

from __future__ import annotations

import ast
from typing import Literal, Optional, Union

from pydantic import model_validator

from .base import FieldError, NonEmptyString, NonNegativeInt, SchemaModel
from .dtypes import DType
from .expressions import evaluate_expression, names_in


class AxisConst(SchemaModel):
    """An axis with a fixed value."""

    type: Literal["const"] = "const"
    value: NonNegativeInt
    """The axis value."""
    description: Optional[str] = None


class AxisVar(SchemaModel):
    """An axis whose value each workload gives."""

    type: Literal["var"] = "var"
    description: Optional[str] = None


class AxisExpr(SchemaModel):
    """An axis computed from other axes (``+ - * / // % **`` and parentheses)."""

    type: Literal["expr"] = "expr"
    expression: NonEmptyString
    description: Optional[str] = None


AxisSpec = Union[AxisConst, AxisVar, AxisExpr]


class TensorSpec(SchemaModel):
    """Shape and element type of one input or output.

    ``shape: null`` is a Python scalar; ``shape: []`` is a 0-d tensor. Shape entries are axis
    names or integer literals written as strings.
    """

    shape: Optional[list[NonEmptyString]]
    dtype: DType
    description: Optional[str] = None


def _top_level_function(tree: ast.Module, name: str) -> ast.FunctionDef | None:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    return None


class Definition(SchemaModel):
    """A kernel problem: axes, named inputs and outputs (order is the interface), reference."""

    name: NonEmptyString
    op_type: Optional[NonEmptyString] = None
    axes: dict[NonEmptyString, AxisSpec]
    custom_inputs_entrypoint: Optional[NonEmptyString] = None
    """Function in the reference that makes inputs: ``fn(axes_and_scalars, device) -> dict``."""
    inputs: dict[NonEmptyString, TensorSpec]
    outputs: dict[NonEmptyString, TensorSpec]
    reference: NonEmptyString
    """Python source with a top-level ``run`` whose parameters are the inputs, in order."""
    description: Optional[str] = None
    hf_id: Optional[NonEmptyString] = None
    constraints: Optional[list[str]] = None
    """Informational relations between axes (flashinfer-bench); not checked."""
    tags: Optional[list[str]] = None
    """Informational labels (upstream and flashinfer-bench: ``status:verified``, ``model:llama-3.1-8b``)."""

    @model_validator(mode="after")
    def _check_reference(self) -> "Definition":
        try:
            tree = ast.parse(self.reference, mode="exec")
        except SyntaxError as exc:
            raise ValueError(f"reference is not valid Python: {exc}") from exc
        run = _top_level_function(tree, "run")
        if run is None:
            raise ValueError("reference must define a top-level function 'run'")
        params = [a.arg for a in run.args.posonlyargs + run.args.args]
        expected = list(self.inputs)
        if params != expected:
            raise ValueError(
                f"reference run() parameters {params} must match the inputs {expected} in order"
            )
        entry = self.custom_inputs_entrypoint
        if entry is not None and _top_level_function(tree, entry) is None:
            raise ValueError(f"custom_inputs_entrypoint '{entry}' is not a top-level function of the reference")
        return self

    @model_validator(mode="after")
    def _check_names(self) -> "Definition":
        overlap = set(self.inputs) & set(self.outputs)
        if overlap:
            raise ValueError(f"names {sorted(overlap)} are both inputs and outputs")
        clash = set(self.inputs) & set(self.axes)
        if clash:
            raise ValueError(f"input names {sorted(clash)} are also axis names")
        for kind, tensors in (("input", self.inputs), ("output", self.outputs)):
            for tname, spec in tensors.items():
                for axis in spec.shape or []:
                    if not axis.isdigit() and axis not in self.axes:
                        raise ValueError(f"{kind} '{tname}' uses undefined axis '{axis}'")
        return self

    @model_validator(mode="after")
    def _check_expressions(self) -> "Definition":
        # At load time, so that a typo fails once with the field named instead of in every workload.
        depends: dict[str, list[str]] = {}
        for name, axis in self.axes.items():
            if not isinstance(axis, AxisExpr):
                continue
            field = f"axes.{name}.expression"
            try:
                depends[name] = names_in(axis.expression)
            except ValueError as exc:
                raise FieldError(field, str(exc)) from None
            unknown = [n for n in depends[name] if n not in self.axes]
            if unknown:
                raise FieldError(field, f"expression '{axis.expression}' uses unknown axis '{unknown[0]}' "
                                        f"(the axes are {', '.join(self.axes)})")
        # Expressions may use one another, but not in a cycle.
        resolved = {n for n in self.axes if n not in depends}
        while len(resolved) < len(self.axes):
            ready = [n for n, uses in depends.items() if n not in resolved and set(uses) <= resolved]
            if not ready:
                cycle = sorted(set(depends) - resolved)
                raise FieldError(f"axes.{cycle[0]}.expression", f"axis expressions {cycle} depend on one another in a cycle")
            resolved.update(ready)
        return self

    # -- resolving shapes ---------------------------------------------------------------------

    def resolve_axes(self, workload_axes: dict[str, int]) -> dict[str, int]:
        """Every axis value for one workload: constants, the workload's vars, then expressions."""
        values: dict[str, int] = {}
        for name, axis in self.axes.items():
            if isinstance(axis, AxisConst):
                values[name] = axis.value
            elif isinstance(axis, AxisVar):
                if name not in workload_axes:
                    raise ValueError(f"workload does not give a value for axis '{name}'")
                values[name] = int(workload_axes[name])
        pending = {n: a for n, a in self.axes.items() if isinstance(a, AxisExpr)}
        # Expressions may refer to one another; resolve until no progress is made.
        while pending:
            progressed = False
            for name, axis in list(pending.items()):
                try:
                    values[name] = evaluate_expression(axis.expression, values)
                except ValueError:
                    continue
                del pending[name]
                progressed = True
            if not progressed:
                name, axis = next(iter(pending.items()))
                evaluate_expression(axis.expression, values)  # raises with the reason
        return values

    def shape_of(self, spec: TensorSpec, axes: dict[str, int]) -> tuple[int, ...] | None:
        if spec.shape is None:
            return None
        return tuple(int(d) if d.isdigit() else axes[d] for d in spec.shape)

    def input_shapes(self, axes: dict[str, int]) -> dict[str, tuple[int, ...] | None]:
        return {n: self.shape_of(s, axes) for n, s in self.inputs.items()}

    def output_shapes(self, axes: dict[str, int]) -> dict[str, tuple[int, ...] | None]:
        return {n: self.shape_of(s, axes) for n, s in self.outputs.items()}
