"""``dataset migrate-kernelbench``: Model/get_inputs/get_init_inputs files into problem folders whose
reference wraps the model and whose inputs come from a seeded custom-inputs entry point."""

from __future__ import annotations

import json
from pathlib import Path

from .trees import (KB_LINEAR, evaluate_reference, kernelbench_tree, load_problem, migrate,
                    migrated, tree_bytes)


def test_round_trip_and_blockers(tmp_path: Path):
    src, out = kernelbench_tree(tmp_path / "KernelBench"), tmp_path / "out"
    manifest = migrated("migrate-kernelbench", src, out, "--source-revision", "v0.1")
    assert [(p["path"], p["migrated"]) for p in manifest["problems"]] == [
        ("L1/1_Matmul", True), ("L1/2_DataDependent", False), ("L1/3_Complex", False), ("L2/1_Linear_ReLU_Sum", True)]
    assert [(b["code"], b["problem"]) for b in manifest["blockers"]] == [
        ("shape_discovery_failed", "L1/2_DataDependent"), ("unsupported_value", "L1/3_Complex")]
    assert "complex64" in manifest["blockers"][1]["detail"]

    definition, workloads = load_problem(out / "L1/1_Matmul")
    assert list(definition.inputs) == ["A", "B"] and definition.inputs["A"].shape == ["8", "16"]
    assert definition.outputs["output"].shape == ["8", "4"] and definition.custom_inputs_entrypoint
    assert [w.inputs["A"].type for w in workloads] == ["custom"] and workloads[0].tolerance.required_matched_ratio == 1.0

    definition, _ = load_problem(out / "L2/1_Linear_ReLU_Sum")
    assert definition.inputs["scale"].shape is None and definition.inputs["scale"].dtype.value == "float32"
    assert list(definition.outputs) == ["output_0", "output_1"] and definition.outputs["output_1"].shape == ["3"]
    assert definition.reference.startswith(KB_LINEAR.rstrip("\n"))
    for problem in ("L1/1_Matmul", "L2/1_Linear_ReLU_Sum"):
        traces = evaluate_reference(out / problem)
        assert [t.evaluation.status.value for t in traces] == ["PASSED"], traces[0].evaluation.log


def test_inputs_are_made_on_the_device_the_evaluator_names(tmp_path: Path):
    """The entry point runs get_inputs under ``with torch.device(device)`` (meta here: nothing allocated)."""
    import torch

    src, out = kernelbench_tree(tmp_path / "kb"), tmp_path / "out"
    assert migrate("migrate-kernelbench", src / "KernelBench/level1", out).exit_code == 0
    definition, _ = load_problem(out / "L1/1_Matmul")
    namespace: dict = {}
    exec(definition.reference, namespace)
    made = namespace[definition.custom_inputs_entrypoint]({}, torch.device("meta"))
    assert {name: (t.device.type, tuple(t.shape)) for name, t in made.items()} == {"A": ("meta", (8, 16)),
                                                                                   "B": ("meta", (16, 4))}


def test_a_lone_file_and_determinism(tmp_path: Path):
    src = kernelbench_tree(tmp_path / "kb") / "KernelBench/level2/1_Linear_ReLU_Sum.py"
    first, second = tmp_path / "one", tmp_path / "two"
    result = migrate("migrate-kernelbench", src, first, "--json")
    assert json.loads(result.stdout)["problems"][0]["path"] == "L2/1_Linear_ReLU_Sum"  # the file's print went to stderr
    assert migrate("migrate-kernelbench", src, second).exit_code == 0
    assert tree_bytes(first) == tree_bytes(second)
    assert (first / "L2/1_Linear_ReLU_Sum/definition.json").is_file()
