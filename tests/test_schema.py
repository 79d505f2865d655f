"""Formats: every upstream file loads unchanged; bad files get one clear message; no torch import."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pydantic import Field

from sol_execbench.envprobe.contract import build_contract
from sol_execbench.schema import (BenchmarkConfig, Definition, FormatError, Loaded, Solution, Trace, load_config,
                                  load_definition, load_solution, load_workloads, merge_configs)
from sol_execbench.schema.base import DocumentedJsonSchema, SchemaModel

from .conftest import CONFORMANCE
from .problems import add_definition, solution, workloads, write_problem

PROBLEM_DIRS = sorted(p.parent for p in CONFORMANCE.rglob("definition.json"))


@pytest.mark.parametrize("problem", PROBLEM_DIRS, ids=lambda p: str(p.relative_to(CONFORMANCE)))
def test_conformance_files_load_unchanged(problem: Path):
    notes = Loaded()
    definition = load_definition(problem / "definition.json", notes)
    wls = load_workloads(problem / "workload.jsonl", notes, definition)
    sols = [load_solution(s, notes) for s in sorted(problem.glob("solution*.json"))]
    assert wls and sols
    # A round trip keeps every key the file had.
    original = json.loads((problem / "definition.json").read_text())
    dumped = definition.model_dump(mode="json", exclude_unset=True)
    assert set(original) == set(dumped)
    for w, line in zip(wls, (problem / "workload.jsonl").read_text().splitlines()):
        assert w.model_dump(mode="json", exclude_unset=True) == json.loads(line)
    assert not [w for w in notes.warnings if "unknown key" in w and "constraints" not in w], notes.warnings


def test_schema_imports_without_torch():
    code = ("import sys, sol_execbench.schema, sol_execbench.cli.main, sol_execbench.evaluate; "
            "assert 'torch' not in sys.modules, 'torch was imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_unknown_key_warns_with_intended_key(tmp_path: Path):
    wl = workloads(8)[0]
    wl["tolerance"] = {"max_atol": 0.1, "required_match_ratio": 0.9}
    root = write_problem(tmp_path / "p", add_definition(), [wl])
    notes = Loaded()
    loaded = load_workloads(root / "workload.jsonl", notes)
    assert loaded[0].tolerance.required_matched_ratio == 0.99  # the misspelt key does not apply
    assert len(notes.warnings) == 1
    message = notes.warnings[0]
    assert "workload.jsonl" in message and "required_match_ratio" in message
    assert "did you mean 'required_matched_ratio'" in message


def test_malformed_json_names_file_and_line(tmp_path: Path):
    path = tmp_path / "workload.jsonl"
    path.write_text('{"uuid": "a", "axes": {"N": 1}}\n{"uuid": "b", "axes": \n')
    with pytest.raises(FormatError) as info:
        load_workloads(path)
    assert str(path) in str(info.value) and "line 2" in info.value.message


def test_schema_violation_names_field(tmp_path: Path):
    d = add_definition()
    d["inputs"]["a"]["dtype"] = "float13"
    path = tmp_path / "definition.json"
    path.write_text(json.dumps(d))
    with pytest.raises(FormatError) as info:
        load_definition(path)
    assert "inputs.a.dtype" in info.value.message


def test_reference_parameters_must_match_inputs():
    d = add_definition()
    d["reference"] = "def run(b, a):\n    return a + b\n"
    with pytest.raises(ValueError, match="must match the inputs"):
        Definition.model_validate(d)


def test_missing_file_is_clear(tmp_path: Path):
    with pytest.raises(FormatError, match="file not found"):
        load_solution(tmp_path / "nope.json")


@pytest.mark.parametrize("bad", ["/etc/passwd", "../escape.py", "a/../../b.py"])
def test_source_paths_must_stay_inside(bad: str):
    sol = solution("def run(a, b):\n    return a + b\n")
    sol["sources"][0]["path"] = bad
    sol["spec"]["entry_point"] = f"{bad}::run"
    with pytest.raises(ValueError):
        Solution.model_validate(sol)


def test_empty_content_is_read_from_beside_the_solution(tmp_path: Path):
    (tmp_path / "kernel.py").write_text("def run(a, b):\n    return a + b\n")
    sol = solution("")
    (tmp_path / "solution.json").write_text(json.dumps(sol))
    loaded = load_solution(tmp_path / "solution.json")
    assert "return a + b" in loaded.sources[0].content


def test_config_layers_merge_field_by_field(tmp_path: Path):
    beside = tmp_path / "config.json"
    beside.write_text(json.dumps({"iterations": 7, "seed": 1}))
    flag = tmp_path / "flag.json"
    flag.write_text(json.dumps({"seed": 5}))
    cfg = merge_configs(load_config(beside), load_config(flag))
    assert (cfg.iterations, cfg.seed, cfg.warmup_runs, cfg.correctness_rounds) == (7, 5, 10, 10)
    defaults = BenchmarkConfig()
    assert (defaults.warmup_runs, defaults.iterations, defaults.lock_clocks, defaults.benchmark_reference,
            defaults.seed, defaults.correctness_rounds) == (10, 50, False, True, 200, 10)


@pytest.mark.parametrize("field,value", [("iterations", 0), ("warmup_runs", -1), ("correctness_rounds", 0),
                                         ("cpu_budget_s", -1)])
def test_config_bounds(tmp_path: Path, field: str, value: int):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({field: value}))
    with pytest.raises(FormatError, match=field):
        load_config(path)


def test_axis_expressions_resolve():
    d = Definition.model_validate({
        "name": "x", "axes": {"H": {"type": "const", "value": 4}, "D": {"type": "var"},
                              "HD": {"type": "expr", "expression": "H * D"}, "T": {"type": "expr", "expression": "HD // 2"}},
        "inputs": {"x": {"shape": ["HD"], "dtype": "float32"}, "s": {"shape": None, "dtype": "float32"},
                   "z": {"shape": [], "dtype": "int32"}},
        "outputs": {"y": {"shape": ["T", "2"], "dtype": "float32"}},
        "reference": "def run(x, s, z):\n    return x\n"})
    axes = d.resolve_axes({"D": 8})
    assert axes == {"H": 4, "D": 8, "HD": 32, "T": 16}
    assert d.input_shapes(axes) == {"x": (32,), "s": None, "z": ()}
    assert d.output_shapes(axes) == {"y": (16, 2)}


def test_trace_status_rules_follow_upstream():
    base = {"definition": "d", "workload": {"uuid": "u", "axes": {}},
            "evaluation": {"status": "RUNTIME_ERROR", "environment": {"hardware": "x"}, "timestamp": "t",
                           "correctness": {"max_absolute_error": 1.0}}}
    with pytest.raises(ValueError, match="correctness must not"):
        Trace.model_validate(base)
    base["evaluation"]["status"] = "INCORRECT_NUMERICAL"
    assert Trace.model_validate(base).status.value == "INCORRECT_NUMERICAL"


def _rmsnorm_like() -> dict:
    return {"name": "rmsnorm", "axes": {"rows": {"type": "var"}, "hidden": {"type": "var"}},
            "inputs": {"x": {"shape": ["rows", "hidden"], "dtype": "float32"}, "eps": {"shape": None, "dtype": "float32"}},
            "outputs": {"y": {"shape": ["rows", "hidden"], "dtype": "float32"}},
            "reference": "def run(x, eps):\n    return x\n"}


def test_workload_names_the_definition_lacks_are_warned_about(tmp_path: Path):
    good = {"uuid": "a", "axes": {"rows": 2, "hidden": 8}, "inputs": {"eps": {"type": "scalar", "value": 1e-6}}}
    typo = {"uuid": "b", "axes": {"rows": 2, "hidden": 8, "bogus_axis": 3}, "inputs": {"epz": {"type": "scalar", "value": 1e-6}}}
    root = write_problem(tmp_path / "p", _rmsnorm_like(), [good, typo])
    notes = Loaded()
    load_workloads(root / "workload.jsonl", notes, load_definition(root / "definition.json"))
    assert len(notes.warnings) == 2, notes.warnings
    axis_warning, input_warning = notes.warnings
    assert "workload.jsonl: line 2: unknown key 'axes.bogus_axis' is ignored" in axis_warning
    assert "has no such axis" in axis_warning
    assert "workload.jsonl: line 2: unknown key 'inputs.epz' is ignored" in input_warning
    assert "did you mean 'eps'?" in input_warning


def test_missing_var_axis_is_an_error_naming_line_and_the_stray_axis(tmp_path: Path):
    wl = {"uuid": "a", "axes": {"rows": 2, "hiden": 8}}
    root = write_problem(tmp_path / "p", _rmsnorm_like(), [wl])
    with pytest.raises(FormatError) as info:
        load_workloads(root / "workload.jsonl", Loaded(), load_definition(root / "definition.json"))
    assert info.value.path.endswith("workload.jsonl")
    assert "line 1:" in info.value.message and "['hidden']" in info.value.message and "hiden" in info.value.message


def test_top_level_unknown_key_is_named_plainly(tmp_path: Path):
    wl = workloads(8)[0]
    wl["extra_top"] = 1
    root = write_problem(tmp_path / "p", add_definition(), [wl])
    notes = Loaded()
    load_workloads(root / "workload.jsonl", notes)
    assert notes.warnings == [f"{root / 'workload.jsonl'}: line 1: unknown key 'extra_top' is ignored"]


def test_schema_violation_in_a_workload_names_line_and_field(tmp_path: Path):
    path = tmp_path / "workload.jsonl"
    path.write_text('{"uuid": "a", "axes": {"N": -1}}\n')
    with pytest.raises(FormatError) as info:
        load_workloads(path)
    assert info.value.message.startswith("line 1: not a valid workload: field 'axes.N'")


@pytest.mark.parametrize("axes,words", [
    ({"T": {"type": "expr", "expression": "N * nope"}}, ["axes.T.expression", "unknown axis 'nope'"]),
    ({"T": {"type": "expr", "expression": "N *"}}, ["axes.T.expression", "not valid"]),
    ({"T": {"type": "expr", "expression": "N.real"}}, ["axes.T.expression", "may only use"]),
    ({"T": {"type": "expr", "expression": "U + 1"}, "U": {"type": "expr", "expression": "T * 2"}},
     ["axes.T.expression", "cycle"]),
])
def test_axis_expressions_are_checked_when_the_definition_loads(tmp_path: Path, axes: dict, words: list[str]):
    d = add_definition()
    d["axes"].update(axes)
    path = tmp_path / "definition.json"
    path.write_text(json.dumps(d))
    with pytest.raises(FormatError) as info:
        load_definition(path)
    for word in words:
        assert word in info.value.message
    assert "Value error" not in info.value.message


def test_non_utf8_source_beside_the_solution_is_a_format_error(tmp_path: Path):
    (tmp_path / "kernel.py").write_bytes(b"def run(a, b):\n    return a + b  # caf\xe9\n")
    (tmp_path / "solution.json").write_text(json.dumps(solution("")))
    with pytest.raises(FormatError) as info:
        load_solution(tmp_path / "solution.json")
    assert info.value.path == str(tmp_path / "solution.json")
    assert "sources.0.content" in info.value.message
    assert str(tmp_path / "kernel.py") in info.value.message and "not UTF-8" in info.value.message


class _Documented(SchemaModel):
    plain: int = 0
    """Said below the field.

    Over two lines."""
    explicit: int = Field(default=0, description="said in the field")
    """Not this one."""
    silent: int = 0


class _Redeclared(_Documented):
    plain: int = 1  # declared again without a docstring: pydantic gives it none either
    added: str = ""
    """A field of the subclass."""


def test_json_schema_describes_fields_by_their_attribute_docstrings():
    properties = _Redeclared.model_json_schema(schema_generator=DocumentedJsonSchema)["properties"]
    assert properties["added"]["description"] == "A field of the subclass."
    assert properties["explicit"]["description"] == "said in the field"
    assert "description" not in properties["silent"]
    assert "description" not in properties["plain"]
    parent = _Documented.model_json_schema(schema_generator=DocumentedJsonSchema)["properties"]
    assert parent["plain"]["description"] == "Said below the field.\n\nOver two lines."


def test_contract_formats_carry_field_descriptions():
    """A nested model's field in a format the contract lists: described there as in its source."""
    trace = build_contract([])["formats"]["trace"]
    build = trace["$defs"]["BuildRecord"]["properties"]
    assert build["jit_time_s"]["description"].startswith("Wall time of the first call")
