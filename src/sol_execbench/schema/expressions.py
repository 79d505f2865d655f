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
# An axis is a tensor dimension: no value needs more than 2**62. Bounding every intermediate, and
# the exponent before ``**`` is computed, keeps ``n ** n ** n ** n`` from computing until a timeout.
MAX_AXIS_VALUE = 2**62
MAX_EXPONENT = 64
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_ALLOWED_NODES = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Name, ast.Load, *_BINARY, *_UNARY)


def parse_expression(expression: str) -> ast.Expression:
    """The syntax tree of an axis expression, refused unless it is arithmetic over numbers and names."""
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"expression '{expression}' is not valid: {exc.msg}") from None
    for node in ast.walk(tree):
        is_number = isinstance(node, ast.Constant) and type(node.value) in (int, float)
        if not (is_number or isinstance(node, _ALLOWED_NODES)):
            raise ValueError(f"expression '{expression}' may only use numbers, axes and + - * / // % **")
    return tree


def names_in(expression: str) -> list[str]:
    """Axis names an expression refers to, in order of appearance, each once."""
    found = [node.id for node in ast.walk(parse_expression(expression)) if isinstance(node, ast.Name)]
    return list(dict.fromkeys(found))


def evaluate_expression(expression: str, values: dict[str, int]) -> int:
    """Integer value of an arithmetic expression over named integers; nothing else is allowed."""

    def walk(node: ast.AST) -> int | float:
        # parse_expression admitted only these node kinds.
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in values:
                raise ValueError(f"expression '{expression}' uses unknown axis '{node.id}'")
            return values[node.id]
        if isinstance(node, ast.BinOp):
            left, right = walk(node.left), walk(node.right)
            if isinstance(node.op, ast.Pow) and abs(left) > 1 and abs(right) > MAX_EXPONENT:
                raise ValueError(f"expression '{expression}' raises to the power {right}, above the limit "
                                 f"{MAX_EXPONENT} for axes {values}")
            return _bounded(_BINARY[type(node.op)](left, right))
        return _bounded(_UNARY[type(node.op)](walk(node.operand)))

    def _bounded(value: int | float) -> int | float:
        if isinstance(value, complex):
            raise ValueError(f"expression '{expression}' is not a real number for axes {values}")
        if abs(value) > MAX_AXIS_VALUE:
            raise ValueError(f"expression '{expression}' exceeds {MAX_AXIS_VALUE} (2**62) for axes {values}: "
                             "no tensor dimension is that large")
        return value

    try:
        value = walk(parse_expression(expression).body)
    except ZeroDivisionError:
        raise ValueError(f"expression '{expression}' divides by zero for axes {values}") from None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int):
        raise ValueError(f"expression '{expression}' is not an integer ({value!r})")
    return value
