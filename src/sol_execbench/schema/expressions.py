"""Safe evaluation of axis expressions such as ``"num_heads * head_dim"``."""

from __future__ import annotations

import ast
import operator

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}


def names_in(expression: str) -> list[str]:
    """Axis names an expression refers to."""
    tree = ast.parse(expression, mode="eval")
    return [node.id for node in ast.walk(tree) if isinstance(node, ast.Name)]


def evaluate_expression(expression: str, values: dict[str, int]) -> int:
    """Integer value of an arithmetic expression over named integers; nothing else is allowed."""

    def walk(node: ast.AST) -> int | float:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in values:
                raise ValueError(f"expression '{expression}' uses unknown axis '{node.id}'")
            return values[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            return _BINARY[type(node.op)](walk(node.left), walk(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return _UNARY[type(node.op)](walk(node.operand))
        raise ValueError(f"expression '{expression}' may only use numbers, axes and + - * / // % **")

    value = walk(ast.parse(expression, mode="eval").body)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int):
        raise ValueError(f"expression '{expression}' is not an integer ({value!r})")
    return value
