"""``sol_execbench.evaluate(...)`` loads as the command line does: config layers and warnings.

The evaluation itself is replaced by a recorder: these tests are about what reaches it.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from sol_execbench.evaluate import api, load_problem
from sol_execbench.schema import BenchmarkConfig, FormatError

from .problems import add_definition, solution, workloads, write_problem

ADD = "def run(a, b):\n    return a + b\n"


@pytest.fixture
def received(monkeypatch) -> dict:
    """What the API hands to the evaluator, instead of evaluating."""
    seen: dict = {}

    def record(definition, workloads, solution, config, options):
        seen.update(definition=definition, workloads=workloads, solution=solution, config=config, options=options)
        return []

    monkeypatch.setattr(api, "evaluate_problem", record)
    return seen


@pytest.fixture
def problem(tmp_path: Path) -> Path:
    root = write_problem(tmp_path / "vector_add", add_definition(), workloads(8), solution(ADD))
    (root / "config.json").write_text(json.dumps({"iterations": 7, "seed": 3}))
    return root


def _paths(root: Path) -> tuple[Path, Path, Path]:
    return root / "definition.json", root / "workload.jsonl", root / "solution.json"


def test_config_beside_the_definition_applies_under_the_given_config(problem: Path, received: dict):
    api.evaluate(*_paths(problem), {"seed": 5})
    cfg = received["config"]
    assert (cfg.iterations, cfg.seed, cfg.warmup_runs) == (7, 5, 10)
    # The command line layers the same way.
    loaded = load_problem(*_paths(problem), config_path=None)
    assert (loaded.config.iterations, loaded.config.seed) == (7, 3)


def test_a_config_object_overrides_the_fields_it_was_given(problem: Path, received: dict):
    api.evaluate(*_paths(problem), BenchmarkConfig(seed=9))
    assert (received["config"].iterations, received["config"].seed) == (7, 9)


def test_a_definition_object_has_no_directory_to_read_a_config_from(problem: Path, received: dict):
    api.evaluate(add_definition(), workloads(8), solution(ADD), {"seed": 5})
    assert (received["config"].iterations, received["config"].seed) == (BenchmarkConfig().iterations, 5)


def test_dict_inputs_get_the_same_warnings_as_files(received: dict):
    definition = add_definition() | {"extra_def": 1}
    wls = workloads(8)
    wls[0]["tolerance"] = {"required_match_ratio": 0.9}
    wls[0]["inputs"]["bb"] = wls[0]["inputs"].pop("b")
    sol = solution(ADD) | {"extra_sol": 1}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        api.evaluate(definition, wls, sol, {"iteratons": 3})
    messages = [str(w.message) for w in caught if w.category is UserWarning]
    expected = ["unknown key 'extra_def'", "item 0: unknown key 'tolerance.required_match_ratio'",
                "did you mean 'required_matched_ratio'?", "item 0: unknown key 'inputs.bb'", "did you mean 'b'?",
                "unknown key 'extra_sol'", "unknown key 'iteratons'", "did you mean 'iterations'?"]
    for text in expected:
        assert any(text in m for m in messages), (text, messages)
    assert received["options"].warnings == messages


def test_dict_schema_violations_name_the_argument_and_field(received: dict):
    bad = workloads(8)
    bad[0]["axes"]["N"] = -1
    with pytest.raises(FormatError) as info:
        api.evaluate(add_definition(), bad, solution(ADD))
    assert info.value.path == "workloads argument" and "item 0: not a valid workload: field 'axes.N'" in info.value.message
    with pytest.raises(FormatError, match="unknown axis 'nope'"):
        api.evaluate(add_definition() | {"axes": {"N": {"type": "var"}, "T": {"type": "expr", "expression": "N * nope"}}},
                     workloads(8), solution(ADD))
    missing = [{"uuid": "m", "axes": {}}]
    with pytest.raises(FormatError, match="gives no value for axes \\['N'\\]"):
        api.evaluate(add_definition(), missing, solution(ADD))


def test_the_command_line_warns_about_workload_names_the_definition_lacks(problem: Path):
    wls = workloads(8)
    wls[0]["axes"]["bogus_axis"] = 3
    (problem / "workload.jsonl").write_text(json.dumps(wls[0]) + "\n")
    loaded = load_problem(*_paths(problem))
    assert [w for w in loaded.warnings if "line 1: unknown key 'axes.bogus_axis'" in w and "workload.jsonl" in w]
