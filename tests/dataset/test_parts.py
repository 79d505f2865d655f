"""The runner's parts that need no evaluation: discovery, shards, solutions, readers, reuse rule,
slots, ordering, the wrapper script, and that nothing before the evaluations imports torch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sol_execbench.dataset.devices import evaluation_slots
from sol_execbench.dataset.discovery import DatasetUsageError, discover, select
from sol_execbench.dataset.events import ProblemOrder, RunEvent
from sol_execbench.schema.trace_files import read_traces
from sol_execbench.dataset.reuse import hash_mismatch
from sol_execbench.dataset.shards import TimeoutPlan, plan_shards
from sol_execbench.dataset.solutions import reference_solution, writes_into_outputs
from sol_execbench.schema import Definition, Workload
from sol_execbench.schema.dataset_inputs import TimeoutOverrides
from sol_execbench.schema.dataset_run import RunHashes

from ..conftest import CONFORMANCE
from ..problems import add_definition
from .conftest import ROOT, add_problem


def test_discovery_names_problems_by_path_and_skips_the_output(tmp_path: Path):
    root = tmp_path / "data"
    for key in ("L1/a", "L1/deeper/b", "L2/a", ".hidden/c", "out/d"):
        add_problem(root, key)
    (root / "L1" / "notes").mkdir()
    found = discover(root, skip=root / "out")
    assert [p.key for p in found] == ["L1/a", "L1/deeper/b", "L2/a"]
    assert [p.category for p in found] == ["L1", "L1/deeper", "L2"]
    assert [p.key for p in select(found, ("L1/deeper",), None)] == ["L1/deeper/b"]
    assert [p.key for p in select(found, ("L1", "L2"), 2)] == ["L1/a", "L1/deeper/b"]
    (single,) = discover(root / "L2" / "a")
    assert single.key == "a" and single.category == ""
    with pytest.raises(DatasetUsageError, match="the categories are: L1, L1/deeper, L2"):
        select(found, ("Quant",), None)


def _workloads(*uuids: str) -> list[Workload]:
    return [Workload(uuid=u, axes={"N": 8}) for u in uuids]


def test_shards_in_workload_order_with_overrides_alone():
    plan = TimeoutPlan(300, TimeoutOverrides(default=200, problems={"L1/p": 100},
                                             workloads={"L1/p:b": 5, "d": 7, "L2/q:a": 9}))
    shards = plan_shards("L1/p", _workloads("a", "b", "c", "d", "e", "f", "g"), plan, shard_size=2)
    assert [([w.uuid for w in s.workloads], s.timeout_s) for s in shards] == [
        (["a"], 100), (["b"], 5), (["c"], 100), (["d"], 7), (["e", "f"], 100), (["g"], 100)]
    assert [s.timeout_s for s in plan_shards("L2/q", _workloads("a", "x"), plan, None)] == [9, 200]
    assert [s.timeout_s for s in plan_shards("L3/r", _workloads("x"), TimeoutPlan(300, TimeoutOverrides()), None)] == [300]


def test_destination_passing_is_inferred_from_the_last_parameter():
    definition = Definition.model_validate(add_definition())
    assert writes_into_outputs("def run(a, b, c):\n    c.copy_(a + b)\n", definition)
    assert not writes_into_outputs("def run(a, b):\n    return a + b\n", definition)
    assert not writes_into_outputs("def run(a, b, out):\n    pass\n", definition)
    solution = reference_solution(definition)
    assert solution.spec.entry_point == "reference.py::run" and not solution.spec.destination_passing_style
    assert solution.spec.languages[0].value == "pytorch" and solution.sources[0].content == definition.reference


def test_traces_are_read_from_jsonl_and_from_upstreams_json_array(tmp_path: Path):
    trace = {"definition": "d", "workload": {"uuid": "w", "axes": {}}, "solution": "s",
             "evaluation": {"status": "RUNTIME_ERROR", "environment": {"hardware": "cpu"}, "timestamp": "t"}}
    (tmp_path / "traces.jsonl").write_text(json.dumps(trace) + "\n\n" + json.dumps(trace) + "\n")
    (tmp_path / "traces.json").write_text(json.dumps([trace], indent=2))
    assert len(read_traces(tmp_path / "traces.jsonl")) == 2 and len(read_traces(tmp_path / "traces.json")) == 1
    (tmp_path / "bad.jsonl").write_text(json.dumps(trace) + "\n" + json.dumps({"definition": "d"}) + "\n")
    with pytest.raises(ValueError, match="bad.jsonl: line 2 is not a trace"):
        read_traces(tmp_path / "bad.jsonl")


def test_the_reuse_rule_compares_provenance_only_where_this_run_gives_it():
    recorded = RunHashes(solution="s", definition="d", workloads="w", config="c", evaluator_version="1",
                         environment="e", readiness="r1")
    assert hash_mismatch(recorded, recorded.model_copy(update={"readiness": None})) is None
    assert hash_mismatch(recorded, recorded.model_copy(update={"readiness": "r2"})) == "the readiness hash changed"
    assert hash_mismatch(recorded, recorded.model_copy(update={"environment": None})) == "the environment hash changed"
    assert hash_mismatch(recorded, recorded.model_copy(update={"dataset_manifest": "m"})) == \
        "the dataset manifest hash changed"


def test_slots_one_per_device():
    assert evaluation_slots(None, "1") == [None]
    assert evaluation_slots("cpu", "3") == ["cpu", "cpu", "cpu"]
    assert evaluation_slots("cuda:1", "1") == ["cuda:1"]
    with pytest.raises(DatasetUsageError, match="drop --device"):
        evaluation_slots("cuda:1", "2")


def test_problem_order_holds_a_finished_problem_until_those_before_it():
    told: list[str] = []
    order = ProblemOrder(lambda e: told.append(e.problem), ["a", "b", "c", "d"], by_problem=True)
    order.finished(RunEvent("finish", "b"))
    order.finished(RunEvent("finish", "c"))
    assert told == []
    order.finished(RunEvent("finish", "a"))
    assert told == ["a", "b", "c"]
    order.dropped("d")
    assert told == ["a", "b", "c"]


def test_the_wrapper_script_takes_the_same_flags():
    env = {"PYTHONPATH": str(ROOT / "src")}
    script = subprocess.run([sys.executable, str(ROOT / "scripts" / "run_dataset.py"), "--help"], capture_output=True,
                            text=True, env=env, timeout=60)
    command = subprocess.run([sys.executable, "-c", "from sol_execbench.cli.main import main; main()", "dataset",
                              "run", "--help"], capture_output=True, text=True, env=env, timeout=60)
    assert script.returncode == 0 and script.stdout == command.stdout
    for flag in ("--category", "--ready-subset", "--timeout-overrides", "--blob-precheck", "--gpu-jobs",
                 "--amd-score-report", "--gpu-architecture", "--solution-name", "--config", "--device"):
        assert flag in script.stdout


def test_nothing_before_the_evaluations_imports_torch(tmp_path: Path):
    """Discovery, loading and the blob precheck (here failing, so nothing is evaluated) in a fresh
    interpreter: torch is never imported."""
    problem = tmp_path / "suite" / "FlashInfer-Bench" / "gqa"
    problem.mkdir(parents=True)
    for name in ("definition.json", "workload.jsonl"):
        (problem / name).write_bytes((CONFORMANCE / "samples" / "gqa_paged_decode" / name).read_bytes())
    code = ("import sys\nfrom sol_execbench.cli.main import _register, cli\n_register()\n"
            f"try:\n    cli(['dataset', 'run', {str(tmp_path / 'suite')!r}, '-o', {str(tmp_path / 'out')!r}])\n"
            "except SystemExit as exc:\n    print('exit', exc.code, 'torch' in sys.modules)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                            env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})
    assert result.stdout.strip().endswith("exit 2 False"), result.stdout + result.stderr
    assert "blob(s) not found" in result.stderr

