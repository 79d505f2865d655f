"""Inputs that used to end in a traceback: each is exit 2 with one line naming the file and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from sol_execbench.cli.main import _register, cli
from sol_execbench.schema.expressions import evaluate_expression

from .problems import add_definition, solution, workloads, write_problem

_register()
ADD = "def run(a, b):\n    return a + b\n"


def _invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


@pytest.fixture
def problem(tmp_path: Path) -> Path:
    return write_problem(tmp_path / "p", add_definition(), workloads(8), solution(ADD))


@pytest.mark.parametrize("sources, words", [
    ([{"path": "a\0b.py", "content": "x"}], "NUL byte"),
    ([{"path": "k" * 300 + ".py", "content": "x"}], "longer than 255 bytes"),
    ([{"path": ".", "content": "x"}], "names a folder"),
    ([{"path": "./", "content": "x"}], "empty component"),
    ([{"path": "a/.", "content": "x"}], "names a folder"),
    ([{"path": "a//b.py", "content": "x"}], "empty component"),
    ([{"path": "a/b.py/", "content": "x"}], "empty component"),
    ([{"path": "./../b.py", "content": "x"}], "must not contain '..'"),
    ([{"path": "/etc/b.py", "content": "x"}], "must be relative"),
    ([{"path": "./kernel.py", "content": "x"}], "appears twice"),
    ([{"path": "a", "content": "x"}, {"path": "a/kernel.py", "content": "x"}], "both a file and the folder"),
])
def test_bad_source_paths(problem: Path, sources, words):
    sol = solution(ADD)
    sol["sources"] += sources
    (problem / "solution.json").write_text(json.dumps(sol))
    result = _invoke(str(problem))
    assert result.exit_code == 2, result.output
    assert words in result.output and "solution.json" in result.output and "sources." in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_a_source_path_outside_the_solution_is_refused_before_it_is_read(problem: Path):
    """An empty ``content`` is read from beside the solution; '../' would read a file of someone else's."""
    sol = solution(ADD)
    sol["sources"].append({"path": "../secret.py", "content": ""})
    (problem.parent / "secret.py").write_text("x = 1\n")
    (problem / "solution.json").write_text(json.dumps(sol))
    result = _invoke(str(problem))
    assert result.exit_code == 2 and "field 'sources.1.path'" in result.output and "'..'" in result.output


# The entry file checks where it was staged: the normalised path, no '.' component left in it.
STAGED_AT = """import os

def run(a, b):
    if "/./" in __file__ or not __file__.endswith(os.sep + {expected!r}.replace("/", os.sep)):
        raise RuntimeError("staged at " + __file__)
    return a + b
"""


@pytest.mark.parametrize("written, entry, expected", [
    ("./kernel.py", "./kernel.py", "kernel.py"),
    ("./kernel.py", "kernel.py", "kernel.py"),
    ("sub/./kernel.py", "sub/kernel.py", "sub/kernel.py"),
    ("./sub/kernel.py", "./sub/./kernel.py", "sub/kernel.py"),
])
def test_dot_components_are_accepted_and_normalised(problem: Path, light_config: Path,
                                                    written: str, entry: str, expected: str):
    sol = solution(STAGED_AT.format(expected=expected))
    sol["sources"] = [{"path": written, "content": ""}]  # read from the file beside the solution
    sol["spec"]["entry_point"] = f"{entry}::run"
    (problem / expected).parent.mkdir(parents=True, exist_ok=True)
    (problem / expected).write_text(STAGED_AT.format(expected=expected))
    (problem / "solution.json").write_text(json.dumps(sol))
    result = _invoke(str(problem), "--config", str(light_config), "--device", "cpu", "--no-warm-pool", "--json")
    assert result.exit_code == 0, result.output
    assert '"status":"PASSED"' in result.output


@pytest.mark.parametrize("name", ["definition.json", "workload.jsonl"])
def test_deep_json_nesting_is_a_clear_error(problem: Path, name: str):
    (problem / name).write_text("[" * 100000 + "]" * 100000 + "\n")
    result = _invoke(str(problem))
    assert result.exit_code == 2, result.output
    assert "nested too deeply" in result.output and name in result.output


def test_deep_json_in_env_diff(tmp_path: Path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100000 + "]" * 100000)
    result = _invoke("env", "diff", str(deep), str(deep))
    assert result.exit_code == 2 and "nested too deeply" in result.output


@pytest.mark.parametrize("arg", ["a\0b", "x" * 300])
def test_unusable_paths_on_the_command_line(problem: Path, arg: str):
    for args in ([arg], [str(problem), "--solution", arg]):
        result = _invoke(*args)
        assert result.exit_code == 2, result.output
        assert result.exception is None or isinstance(result.exception, SystemExit)


def test_unbounded_axis_expression_is_refused_before_computing():
    with pytest.raises(ValueError, match="above the limit"):
        evaluate_expression("n ** n ** n ** n", {"n": 5})
    with pytest.raises(ValueError, match="exceeds"):
        evaluate_expression("n * n * n * n * n", {"n": 2**20})
