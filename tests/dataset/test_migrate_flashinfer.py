"""``dataset migrate-flashinfer``: a flashinfer-bench trace set into problem folders; default tolerances,
solutions converted or blocked (tvm-ffi), traces kept beside; byte-identical reruns."""

from __future__ import annotations

import json
from pathlib import Path

from sol_execbench import evaluate
from sol_execbench.schema import load_solution

from ..problems import LIGHT_CONFIG
from .trees import evaluate_reference, flashinfer_tree, load_problem, migrate, migrated, tree_bytes


def test_round_trip_solutions_and_blockers(tmp_path: Path):
    src, out = flashinfer_tree(tmp_path / "flashinfer-trace"), tmp_path / "out"
    manifest = migrated("migrate-flashinfer", src, out, "--source-revision", "main@1234")
    assert manifest["source"]["kind"] == "flashinfer-bench" and manifest["source"]["revision"] == "main@1234"
    counts = manifest["denominators"]
    assert counts["problems"] == {"seen": 3, "migrated": 1, "blocked": 2}
    assert counts["workloads"] == {"seen": 3, "migrated": 2, "blocked": 1}
    assert counts["solutions"] == {"seen": 4, "migrated": 2, "blocked": 2}
    assert counts["traces"] == {"seen": 2, "migrated": 2, "blocked": 0}
    assert sorted((b["code"], b["scope"]) for b in manifest["blockers"]) == [
        ("duplicate_problem", "problem"), ("no_workloads", "problem"), ("tvm_ffi_binding", "solution"),
        ("unknown_definition", "workload"), ("unsupported_language", "solution")]

    folder = out / "FlashInfer-Bench/vector_add"
    assert sorted(p.name for p in folder.iterdir()) == [
        "definition.json", "flashinfer-traces.jsonl", "solution_add_cuda_torch.json", "solution_add_python.json",
        "workload.jsonl"]
    definition, workloads = load_problem(folder)
    assert definition.op_type == "elementwise"
    assert all(w.tolerance.max_atol == 0.01 and w.tolerance.required_matched_ratio == 0.99 for w in workloads)
    assert "tolerance" in json.loads((folder / "workload.jsonl").read_text().splitlines()[0])
    cuda = load_solution(folder / "solution_add_cuda_torch.json")
    assert [lang.value for lang in cuda.spec.languages] == ["cuda_cpp"] and cuda.spec.binding.value == "torch"
    assert cuda.spec.target_hardware == ["LOCAL"]

    traces = evaluate_reference(folder)
    assert [t.evaluation.status.value for t in traces] == ["PASSED", "PASSED"], traces[0].evaluation.log
    traces = evaluate(folder / "definition.json", folder / "workload.jsonl", folder / "solution_add_python.json",
                      LIGHT_CONFIG, device="cpu")
    assert [t.evaluation.status.value for t in traces] == ["PASSED", "PASSED"], traces[0].evaluation.log


def test_two_runs_write_identical_bytes(tmp_path: Path):
    src = flashinfer_tree(tmp_path / "src")
    assert migrate("migrate-flashinfer", src, tmp_path / "one").exit_code == 0
    assert migrate("migrate-flashinfer", src, tmp_path / "two").exit_code == 0
    assert tree_bytes(tmp_path / "one") == tree_bytes(tmp_path / "two")
