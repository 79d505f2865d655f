"""docs/configuration.md against the code, both ways: commands and options (with defaults), config
fields, environment variables. Each failure line says what to add to or remove from the page."""

from __future__ import annotations

import ast
import re
import tomllib

import pytest

from sol_execbench.cli.main import _register, cli
from sol_execbench.schema import BenchmarkConfig

from .configuration_reference import (PAGE, REPO, SRC, command_tree, config_fields, mentioned_outside_src, read_page,
                                      scanned_variables, variables_read_in)

_register()
PAGE_TEXT = PAGE.read_text(encoding="utf-8")
DOC = read_page(PAGE_TEXT)
WHERE = "docs/configuration.md"


def _says(cell: str, default: str) -> bool:
    """Whether a default cell names ``default`` as a whole word (``60`` is not ``600``)."""
    return re.search(rf"(?<![\w.]){re.escape(default)}(?![\w.])", cell) is not None


def _fail_with(problems: list[str]) -> None:
    if problems:
        pytest.fail(f"{WHERE} and the code disagree ({len(problems)}):\n  " + "\n  ".join(problems), pytrace=False)


def test_every_command_and_option_with_its_default():
    tree, problems = command_tree(cli), []
    for path, options in tree.items():
        if options is None:
            continue  # a group: its commands have their own sections
        heading = f"### `sol-execbench {path}`"
        if path not in DOC.commands:
            problems.append(f"missing command 'sol-execbench {path}': add a '{heading}' section with one table row per option")
            continue
        rows = DOC.commands[path]
        known = {flag for option in options for flag in option.flags}
        for option in options:
            for flag in option.flags:
                if flag not in rows:
                    problems.append(f"'sol-execbench {path}': missing option {flag} (a row under '{heading}')")
            cell = next((rows[f] for f in option.flags if f in rows), None)
            if option.default is not None and cell is not None and not _says(cell, option.default):
                problems.append(f"'sol-execbench {path}' {option.flags[-1]}: the default is {option.default!r}, "
                                f"the page's default cell says {cell!r}")
        for flag in sorted(set(rows) - known):
            problems.append(f"'sol-execbench {path}': stale option {flag} (the command has no such option: remove the row)")
    for path in sorted(set(DOC.commands) - set(tree)):
        problems.append(f"stale command 'sol-execbench {path}' (no such command: remove its section)")
    _fail_with(problems)


def test_every_config_field_with_its_default():
    fields, problems = config_fields(BenchmarkConfig), []
    for name, default in fields.items():
        if name not in DOC.config:
            problems.append(f"missing config field '{name}' (default {default}): add a row under '## Benchmark config'")
        elif not _says(DOC.config[name], default):
            problems.append(f"config field '{name}': the default is {default}, the page says {DOC.config[name]!r}")
    problems += [f"stale config field '{name}' (BenchmarkConfig has no such field)" for name in sorted(set(DOC.config) - set(fields))]
    _fail_with(problems)


def _click_variables() -> dict[str, str]:
    found = {}
    for path, options in command_tree(cli).items():
        for option in options or []:
            if option.envvar:
                found.setdefault(option.envvar, f"sol-execbench {path} {option.flags[-1]}")
    return found


def _string_constants() -> set[str]:
    return {node.value for path in SRC.rglob("*.py") for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)}


def test_every_environment_variable():
    read = {**scanned_variables(), **_click_variables()}
    problems = [f"missing variable {name} (read in {where}): add a row under '## Environment variables'"
                for name, where in sorted(read.items()) if name not in DOC.variables]
    named_in_src = _string_constants()
    for name in sorted(DOC.variables - set(read)):
        if name not in named_in_src and not mentioned_outside_src(name):
            problems.append(f"stale variable {name} (read nowhere in src/, scripts/ or docker/): remove it from the table")
    _fail_with(problems)


def test_the_deviations_name_the_package_as_it_is():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    deviations = PAGE_TEXT.split("## Deviations from the configuration reference", 1)[1]
    assert f"`{project['version']}`" in deviations and "`1.0.2`" in deviations
    assert f"`{project['requires-python']}`" in deviations and "`>=3.12,<3.14`" in deviations
    torch = next(d for d in project["dependencies"] if d.startswith("torch"))
    assert f"`{torch}`" in deviations and "traces.jsonl" in deviations and "traces.json`" in deviations


def test_the_scan_finds_each_kind_of_read():
    code = '''
import os
from os import getenv
a = os.environ.get("A_GET"); b = os.environ["B_ITEM"]; c = getenv("C_GETENV"); d = "D_IN" in os.environ
def f(environ): return environ.get("E_PASSED"), environ.setdefault("F_DEFAULT", "1")
os.environ["NOT_A_READ"] = "1"
TABLE = ("SOL_EXECBENCH_BY_NAME",)
x = os.environ.get(name_from_elsewhere)
'''
    assert variables_read_in(ast.parse(code)) == {"A_GET", "B_ITEM", "C_GETENV", "D_IN", "E_PASSED", "F_DEFAULT",
                                                 "SOL_EXECBENCH_BY_NAME"}


def test_the_page_reader_sees_sections_rows_and_names():
    page = read_page("## Commands\n### `sol-execbench x y`\n| option | default | x |\n|---|---|---|\n"
                     "| `-o`, `--out` | 5 | z |\n| `ARG` | | |\n## Benchmark config\n| f | d | e |\n|---|---|---|\n"
                     "| `seed` | 200 | |\n## Environment variables\n| v | d | e |\n|---|---|---|\n| `A_B`, `CC` | | |\n")
    assert page.commands == {"x y": {"-o": "5", "--out": "5", "ARG": ""}}
    assert page.config == {"seed": "200"} and page.variables == {"A_B", "CC"}
