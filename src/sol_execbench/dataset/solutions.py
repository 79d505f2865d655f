"""The solution a dataset run evaluates for a problem: the definition's reference as its own
solution (upstream's default), or a file named by ``--solution-name`` in the problem folder."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from sol_execbench.schema import Definition, Solution

REFERENCE_ORIGIN = "reference"
RUNNER_AUTHOR = "sol-execbench dataset run"


@dataclass(frozen=True)
class GeneratedSolution:
    """A solution made from each problem's definition by the caller of a run (a bench's
    ``torch.compile`` wrapper of the reference), recorded under ``origin``."""

    origin: str
    make: Callable[[Definition], Solution]


def last_run_parameter(code: str) -> str | None:
    """The name of the last positional parameter of the top-level ``run`` in ``code``, if any."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "run":
            params = [*node.args.posonlyargs, *node.args.args]
            return params[-1].arg if params else None
    return None


def writes_into_outputs(code: str, definition: Definition) -> bool:
    """Destination passing style, as upstream infers it: the last ``run`` parameter is named like
    the definition's last output."""
    outputs = list(definition.outputs)
    return bool(outputs) and last_run_parameter(code) == outputs[-1]


def python_solution(definition: Definition, code: str, *, name: str, entry_file: str, description: str) -> Solution:
    """A pytorch solution of one file whose ``run`` is the entry point."""
    return Solution.model_validate({
        "name": name, "definition": definition.name, "author": RUNNER_AUTHOR, "description": description,
        "spec": {"languages": ["pytorch"], "target_hardware": ["LOCAL"], "entry_point": f"{entry_file}::run",
                 "dependencies": ["torch"], "destination_passing_style": writes_into_outputs(code, definition)},
        "sources": [{"path": entry_file, "content": code}],
    })


def reference_solution(definition: Definition) -> Solution:
    """The definition's reference as a solution: ``reference.py::run``, returning its outputs (the
    reference's parameters are the inputs only, so it is never destination passing)."""
    return python_solution(definition, definition.reference, name=f"reference_{definition.name}",
                           entry_file="reference.py", description="The definition's reference as its own solution.")


def wrapped_python_file(definition: Definition, path: Path, code: str) -> Solution:
    """A ``.py`` file of the problem folder as a pytorch solution (``solution.py::run``)."""
    return python_solution(definition, code, name=f"custom_{definition.name}", entry_file="solution.py",
                           description=f"{path.name} of the problem folder.")
