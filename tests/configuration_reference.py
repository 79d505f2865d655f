"""What docs/configuration.md must list, read from the code, and what the page lists, read from the
page: the click command tree (walked in process), BenchmarkConfig's fields, and every environment
variable read in src/ (an AST scan) or named by a click option. tests/test_configuration_reference.py
compares the two."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
from pydantic import BaseModel

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src" / "sol_execbench"
PAGE = REPO / "docs" / "configuration.md"
OWN_VARIABLE = re.compile(r"^(SOL_EXECBENCH|SOLEXECBENCH)_[A-Z0-9_]+$")
VARIABLE = re.compile(r"^[A-Z][A-Z0-9_]*[A-Z0-9]$")
ENVIRON_NAMES = {"environ", "env", "environment"}
"""Names a mapping of environment variables goes by in src/ (``os.environ`` passed down)."""
COMMAND_HEADING = re.compile(r"^### `sol-execbench ([a-z][a-z -]*)`")
OTHER_SOURCES = ("scripts", "docker")
"""Where a variable the page lists may be read instead of src/ (shell wrappers, images)."""


# ---- code side -------------------------------------------------------------------------------

def _is_environ(node: ast.AST) -> bool:
    if isinstance(node, ast.Attribute) and node.attr == "environ":
        return True
    return isinstance(node, ast.Name) and node.id in ENVIRON_NAMES


def _constant(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def variables_read_in(tree: ast.AST) -> set[str]:
    """``os.environ.get("X")``, ``os.environ["X"]``, ``os.getenv("X")``, ``"X" in os.environ`` (also on a
    mapping called environ/env), and any string that is one of this tool's own variable names."""
    found: set[str] = set()
    for node in ast.walk(tree):
        name = None
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in ("get", "setdefault", "pop") and _is_environ(func.value):
                name = _constant(node.args[0])
            elif (isinstance(func, ast.Attribute) and func.attr == "getenv") or (isinstance(func, ast.Name) and func.id == "getenv"):
                name = _constant(node.args[0])
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_environ(node.value):
            name = _constant(node.slice)
        elif isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn)):
            if _is_environ(node.comparators[0]):
                name = _constant(node.left)
        elif (text := _constant(node)) and OWN_VARIABLE.match(text):
            name = text
        if name and VARIABLE.match(name):
            found.add(name)
    return found


def scanned_variables() -> dict[str, str]:
    """Every variable read in src/, with the first file that reads it."""
    found: dict[str, str] = {}
    for path in sorted(SRC.rglob("*.py")):
        for name in sorted(variables_read_in(ast.parse(path.read_text(encoding="utf-8"), str(path)))):
            found.setdefault(name, str(path.relative_to(REPO)))
    return found


@dataclass(frozen=True)
class CodeOption:
    flags: tuple[str, ...]
    """Every spelling (``-o``, ``--output``; ``--wait``, ``--no-wait``); an argument: its NAME."""
    default: str | None
    """What the page's default cell must contain; None: nothing to check."""
    envvar: str | None = None


def render_default(value: Any) -> str | None:
    if value is None or value is False or isinstance(value, (tuple, list)) or type(value).__name__ == "Sentinel":
        return None
    if value is True:
        return "on"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def command_tree(group: click.Group, prefix: str = "") -> dict[str, list[CodeOption] | None]:
    """Command path -> its options (None for a group)."""
    tree: dict[str, list[CodeOption] | None] = {}
    for name in sorted(group.commands):
        command, path = group.commands[name], f"{prefix}{name}"
        if isinstance(command, click.Group):
            tree[path] = None
            tree.update(command_tree(command, f"{path} "))
            continue
        options = []
        for param in command.params:
            if param.name == "help":
                continue
            if isinstance(param, click.Option):
                envvar = param.envvar if isinstance(param.envvar, str) else None
                options.append(CodeOption(tuple(param.opts + param.secondary_opts), render_default(param.default), envvar))
            else:
                options.append(CodeOption((param.name.upper(),), None))
        tree[path] = options
    return tree


def config_fields(model: type[BaseModel], prefix: str = "") -> dict[str, str]:
    """BenchmarkConfig's fields (nested models dotted) -> default as JSON writes it."""
    fields: dict[str, str] = {}
    for name, info in model.model_fields.items():
        annotation = info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            fields.update(config_fields(annotation, f"{prefix}{name}."))
            continue
        default = info.get_default(call_default_factory=True)
        fields[f"{prefix}{name}"] = "true" if default is True else "false" if default is False else f"{default:g}" if isinstance(default, float) else str(default)
    return fields


# ---- page side -------------------------------------------------------------------------------

@dataclass
class Page:
    commands: dict[str, dict[str, str]] = field(default_factory=dict)
    """Command path -> flag or ARGUMENT -> the default cell of its row."""
    config: dict[str, str] = field(default_factory=dict)
    variables: set[str] = field(default_factory=set)


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _ticked(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def read_page(text: str) -> Page:
    page, section, command = Page(), "", None
    for line in text.splitlines():
        if line.startswith("## "):
            section, command = line[3:].strip().lower(), None
            continue
        heading = COMMAND_HEADING.match(line)
        if heading:
            command = heading.group(1).strip()
            page.commands.setdefault(command, {})
            continue
        if not line.startswith("|") or set(line.replace("|", "").strip()) <= set("-: "):
            continue
        cells = _cells(line)
        names = [w for token in _ticked(cells[0]) for w in re.split(r"[,/ ]+", token) if w]
        default = cells[1] if len(cells) > 1 else ""
        if command is not None:
            for word in names:
                if word.startswith("-") or re.match(r"^[A-Z][A-Z0-9_]*$", word):
                    page.commands[command][word] = default
        elif section.startswith("benchmark config"):
            for word in names:
                page.config[word] = default
        elif section.startswith("environment variables"):
            page.variables.update(word for word in names if VARIABLE.match(word))
    return page


def mentioned_outside_src(name: str) -> bool:
    pattern = re.compile(rf"\b{re.escape(name)}\b")
    return any(pattern.search(p.read_text(encoding="utf-8", errors="replace"))
               for folder in OTHER_SOURCES for p in (REPO / folder).rglob("*") if p.is_file())
