"""``dataset migrate-kernelbench``: KernelBench problem files (a ``Model`` with ``forward``,
``get_inputs`` and ``get_init_inputs``) into problem folders of category ``L<level>``.

The definition's reference is the problem file with a wrapper appended (``KERNELBENCH_WRAPPER``): its
``run`` calls one ``Model`` per device, built from ``get_init_inputs()`` under a fixed seed, and its
custom-inputs entry point runs ``get_inputs()`` under ``with torch.device(device):``, so inputs are
made on the evaluation device from the RNG the evaluator seeds for each round. Shapes and dtypes are
found by running the problem on torch's meta device (no memory, no compute); torch is imported only
for that. The problem files are executed: migrate only files you would run.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import re
import sys
import uuid
from pathlib import Path
from typing import Any

from sol_execbench.schema import DType
from sol_execbench.schema.migration import BlockerCode, MigrationSource, MigrationSourceKind

from .collect import Migration, MigrationError, ProblemDraft, Record
from .kernelbench_wrapper import INPUTS_ENTRYPOINT, wrapped_reference
from .sources import existing_source, text_of, visible_dirs, where

LEVEL_FOLDER = re.compile(r"^level(\d+)$")
REQUIRED_NAMES = ("Model", "get_inputs", "get_init_inputs")
# KernelBench's own check: torch.allclose(atol=1e-2, rtol=1e-2) over every element.
KERNELBENCH_TOLERANCE = {"max_atol": 1e-2, "max_rtol": 1e-2, "required_matched_ratio": 1.0}
_DTYPE_NAMES = {d.value for d in DType}


def migrate_kernelbench(src: Path, categories: tuple[str, ...] = (), revision: str | None = None) -> Migration:
    """Read KernelBench's root, a ``level<N>`` folder or one problem file into a ``Migration``."""
    src = existing_source(src)
    migration = Migration(MigrationSource(kind=MigrationSourceKind.KERNELBENCH, name=src.absolute().name,
                                          revision=revision, categories=sorted(set(categories))))
    for category, path in _problem_files(src, categories):
        migration.add(_problem(path, category, src))
    return migration


def _level_category(folder: Path) -> str | None:
    match = LEVEL_FOLDER.match(folder.name)
    return f"L{match[1]}" if match else None


def _problem_files(src: Path, categories: tuple[str, ...]) -> list[tuple[str, Path]]:
    if src.is_file():
        category = _level_category(src.parent) or (categories[0] if len(categories) == 1 else None)
        if category is None:
            raise MigrationError(str(src), None, "lies in no level<N> folder, so its level is unknown",
                                 "put it in a folder named level1 (level2 ...) or give --category L<level> once")
        return [(category, src)]
    levels: dict[str, Path] = {}
    for root in (src, src / "KernelBench"):
        if root.is_dir() and not levels:
            levels = {c: d for d in visible_dirs(root) if (c := _level_category(d))}
    if not levels and (category := _level_category(src)):
        levels = {category: src}
    if not levels:
        raise MigrationError(str(src), "SRC", "holds no KernelBench level folders (level1/, level2/ ...)",
                             "give KernelBench's root, one of its level folders, or a problem file")
    unknown = sorted(set(categories) - set(levels))
    if unknown:
        raise MigrationError(str(src), "--category", f"names {', '.join(unknown)}, which SRC does not have",
                             f"choose from {', '.join(sorted(levels))}")
    chosen = sorted((c for c in levels if not categories or c in categories), key=lambda c: int(c[1:]))
    return [(c, p) for c in chosen for p in sorted(levels[c].glob("*.py")) if not p.name.startswith("_")]


def _checked_source(path: Path, src: Path) -> str:
    """The file's text, once it is known to be Python that defines what a KernelBench problem must."""
    source = text_of(path, src)
    try:
        tree = ast.parse(source, filename=path.name)
    except SyntaxError as exc:
        raise MigrationError(where(path, src), None, f"is not valid Python (line {exc.lineno}: {exc.msg})",
                             "fix the file") from None
    defined = {node.name for node in tree.body if isinstance(node, (ast.ClassDef, ast.FunctionDef))}
    missing = [name for name in REQUIRED_NAMES if name not in defined]
    if missing:
        raise MigrationError(where(path, src), missing[0], "is not defined at the top level",
                             "a KernelBench problem defines class Model (with forward), get_inputs() and "
                             "get_init_inputs(); move other files out of the level folders")
    return source


def _problem(path: Path, category: str, src: Path) -> ProblemDraft:
    source = _checked_source(path, src)
    draft = ProblemDraft(category=category, name=path.stem, source=where(path, src))
    try:
        names, inputs, outputs = _discover(source, path)
    except Exception as exc:  # anything the problem's own code raises on the meta device
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        draft.blocker = (BlockerCode.SHAPE_DISCOVERY_FAILED, f"{type(exc).__name__}: {message}"[:300])
        return draft
    output_values = list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]
    output_names = _output_names(len(output_values), set(names))
    values = {**dict(zip(names, inputs)), **dict(zip(output_names, output_values))}
    specs = {name: _spec(value, scalars=name in names) for name, value in values.items()}
    unsupported = next((name for name, spec in specs.items() if spec is None), None)
    if unsupported is not None:
        value = values[unsupported]
        kind = f"a tensor of {value.dtype}" if hasattr(value, "dtype") else type(value).__name__
        draft.blocker = (BlockerCode.UNSUPPORTED_VALUE, f"'{unsupported}' is {kind}: neither a tensor of a dtype "
                         "this harness knows nor a number")
        return draft
    level = category[1:]
    draft.definition = {
        "name": path.stem, "description": f"KernelBench level {level} problem {path.stem}", "axes": {},
        "custom_inputs_entrypoint": INPUTS_ENTRYPOINT, "inputs": {n: specs[n] for n in names},
        "outputs": {n: specs[n] for n in output_names},
        "reference": wrapped_reference(source, names),
    }
    draft.workloads = [Record(draft.source, {
        "uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"kernelbench/{category}/{path.stem}")), "axes": {},
        "inputs": {name: {"type": "custom"} for name in names}, "tolerance": dict(KERNELBENCH_TOLERANCE)})]
    return draft


def _discover(source: str, path: Path) -> tuple[list[str], list[Any], Any]:
    """Input names, input values and the forward's result, all on the meta device."""
    import torch

    namespace: dict[str, Any] = {"__name__": f"kernelbench_{path.stem}", "__file__": str(path)}
    # What the problem prints goes to stderr: stdout carries the manifest under --json.
    with contextlib.redirect_stdout(sys.stderr):
        exec(compile(source, str(path), "exec"), namespace)
        model_class = namespace["Model"]
        with torch.device("meta"), torch.no_grad():
            model = model_class(*namespace["get_init_inputs"]())
            inputs = list(namespace["get_inputs"]())
            outputs = model(*inputs)
    return _input_names(model_class.forward, len(inputs)), inputs, outputs


def _input_names(forward: Any, count: int) -> list[str]:
    """``forward``'s positional parameter names, or ``input_<i>`` when it takes ``*args``."""
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    params = [p.name for p in list(inspect.signature(forward).parameters.values())[1:] if p.kind in kinds]
    return params[:count] if len(params) >= count else [f"input_{i}" for i in range(count)]


def _output_names(count: int, taken: set[str]) -> list[str]:
    base = "output"
    while base in taken or any(f"{base}_{i}" in taken for i in range(count)):
        base = f"{base}_"
    return [base] if count == 1 else [f"{base}_{i}" for i in range(count)]


def _spec(value: Any, scalars: bool = True) -> dict[str, Any] | None:
    """A definition's tensor spec for a value, None when it has no counterpart here."""
    import torch

    if isinstance(value, torch.Tensor):
        dtype = str(value.dtype).removeprefix("torch.")
        return {"shape": [str(d) for d in value.shape], "dtype": dtype} if dtype in _DTYPE_NAMES else None
    if not scalars:
        return None
    for python_type, dtype in ((bool, "bool"), (int, "int64"), (float, "float32")):
        if isinstance(value, python_type):
            return {"shape": None, "dtype": dtype}
    return None

