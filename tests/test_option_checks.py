"""Options that cannot be meant are refused, by the CLI (exit 2) and by evaluate() (an error),
with the same words."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from sol_execbench import evaluate
from sol_execbench.cli.main import _register, cli

from .conftest import LIGHT_CONFIG
from .problems import add_definition, solution, workloads, write_problem

_register()
ADD = "def run(a, b):\n    return a + b\n"


@pytest.fixture
def problem(tmp_path: Path) -> Path:
    root = write_problem(tmp_path / "p", add_definition(), workloads(8), solution(ADD))
    (root / "light.json").write_text(json.dumps(LIGHT_CONFIG))
    return root


@pytest.mark.parametrize("flag, value", [("--timeout", "nan"), ("--timeout", "inf"), ("--timeout", "-5"),
                                         ("--compile-timeout", "0"), ("--memory-limit", "0"),
                                         ("--device", "gpu0")])
def test_cli_refuses(problem: Path, flag: str, value: str):
    result = CliRunner().invoke(cli, [str(problem), flag, value])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and flag in result.output


def test_problem_dir_and_definition_together_is_refused(problem: Path):
    result = CliRunner().invoke(cli, [str(problem), "--definition", str(problem / "definition.json")])
    assert result.exit_code == 2 and "both name the problem" in result.output


@pytest.mark.parametrize("options, error, words", [
    ({"timeout_s": -5}, ValueError, "--timeout (timeout_s) must be a finite number of seconds above 0"),
    ({"timeout_s": float("nan")}, ValueError, "must be a finite number"),
    ({"timeout_s": "10"}, TypeError, "must be a number of seconds"),
    ({"memory_limit_bytes": 0}, ValueError, "give 'none' for no limit"),
    ({"device": "gpu0"}, ValueError, "'gpu0' is not a device"),
    ({"child_prefix": "ncu --csv"}, TypeError, "child_prefix must be a list of non-empty strings"),
    ({"child_env": {"X": 1}}, TypeError, "child_env must map variable names to string values"),
])
def test_api_refuses_with_the_cli_words(options, error, words):
    with pytest.raises(error, match=words.replace("(", r"\(").replace(")", r"\)")):
        evaluate(add_definition(), workloads(8), solution(ADD), LIGHT_CONFIG, **options)


def test_api_refuses_no_workloads():
    with pytest.raises(ValueError, match="workloads is empty"):
        evaluate(add_definition(), [], solution(ADD), LIGHT_CONFIG)


NAN_REFERENCE = dict(add_definition(), reference="import torch\n\ndef run(a, b):\n    return (a + b) * float('nan')\n")


def test_a_reference_returning_nan_is_invalid_reference():
    traces = evaluate(NAN_REFERENCE, workloads(8), solution(ADD), LIGHT_CONFIG, device="cpu")
    assert traces[0].evaluation.status.value == "INVALID_REFERENCE"
    assert "NaN" in traces[0].evaluation.log


def test_a_timing_rounds_folder_that_cannot_be_made_is_refused_by_the_api(tmp_path: Path, monkeypatch):
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("SOL_EXECBENCH_TIMING_ROUNDS", str(tmp_path / "a-file" / "rounds"))
    with pytest.raises(ValueError, match="SOL_EXECBENCH_TIMING_ROUNDS=.*cannot be made"):
        evaluate(add_definition(), workloads(8), solution(ADD), LIGHT_CONFIG)
