"""``dataset migrate-sol``: upstream folders and the parquet export, round-tripped through the real
loader and evaluator; blockers and denominators; byte-identical reruns; bad input exits 2 in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .trees import (check_manifest, evaluate_reference, load_problem, migrate, migrated, parquet_rows, sol_tree,
                    tree_bytes, write_parquet)


def test_folders_round_trip(tmp_path: Path):
    src, out = sol_tree(tmp_path / "SOL-ExecBench"), tmp_path / "out"
    manifest = migrated("migrate-sol", src, out, "--source-revision", "abc123")
    assert manifest["source"] == {"kind": "sol-execbench", "name": "SOL-ExecBench", "revision": "abc123", "categories": []}
    assert manifest["denominators"]["problems"] == {"seen": 4, "migrated": 2, "blocked": 2}
    assert manifest["denominators"]["workloads"] == {"seen": 6, "migrated": 4, "blocked": 2}
    blockers = {(b["code"], b["scope"], b["problem"]) for b in manifest["blockers"]}
    assert blockers == {("missing_file", "problem", "L1/002_no_workloads"),
                        ("definition_rejected", "problem", "L1/003_bad_reference"),
                        ("workload_rejected", "workload", "L1/001_vector_add")}
    assert sorted(p.name for p in (out / "L1/001_vector_add").iterdir()) == [
        "config.json", "definition.json", "reference.py", "workload.jsonl"]
    definition, workloads = load_problem(out / "L1/001_vector_add")
    assert definition.reference == (src / "benchmark/L1/001_vector_add/reference.py").read_text()
    assert [w.uuid for w in workloads] == ["w0-8", "w1-16"]
    load_problem(out / "L2/001_scale")
    assert not (out / "L1/002_no_workloads").exists()
    traces = evaluate_reference(out / "L1/001_vector_add")
    assert [t.evaluation.status.value for t in traces] == ["PASSED", "PASSED"], traces[0].evaluation.log


def test_category_filter(tmp_path: Path):
    src, out = sol_tree(tmp_path / "src"), tmp_path / "out"
    result = migrate("migrate-sol", src, out, "--category", "L2", "--json")
    assert result.exit_code == 0, result.output
    summary = migrate("migrate-sol", src, tmp_path / "again")
    assert summary.stdout.startswith("migrated 2 of 4 problems (4 of 6 workloads, 0 of 0 solutions)")
    assert "blocked problem benchmark/L1/002_no_workloads: missing_file" in summary.stdout
    manifest = json.loads(result.stdout)
    assert [p["path"] for p in manifest["problems"]] == ["L2/001_scale"] and manifest["source"]["categories"] == ["L2"]
    assert result.stdout == (out / "migration-manifest.json").read_text()


def test_parquet_round_trip(tmp_path: Path):
    src, out = tmp_path / "export", tmp_path / "out"
    write_parquet(src / "L1/train/0000.parquet", parquet_rows())
    manifest_path = tmp_path / "manifests/sol.json"
    result = migrate("migrate-sol", src, out, "--manifest", manifest_path)
    assert result.exit_code == 0, result.output
    manifest = json.loads(manifest_path.read_text())
    assert not (out / "migration-manifest.json").exists()
    check_manifest(out, manifest)
    assert manifest["source"]["kind"] == "sol-execbench-parquet"
    assert [p["path"] for p in manifest["problems"]] == ["L1/scale", "L1/vector_add"]
    assert manifest["denominators"]["workloads"] == {"seen": 4, "migrated": 4, "blocked": 0}
    definition, _ = load_problem(out / "L1/vector_add")
    assert definition.description == "the vector_add problem" and definition.axes["N"].type == "var"
    traces = evaluate_reference(out / "L1/scale")
    assert [t.evaluation.status.value for t in traces] == ["PASSED", "PASSED"], traces[0].evaluation.log


def test_a_lone_parquet_file_takes_its_category_from_the_option(tmp_path: Path):
    src = write_parquet(tmp_path / "sol.parquet", parquet_rows()[:1])
    result = migrate("migrate-sol", src, tmp_path / "out", "--category", "Quant")
    assert result.exit_code == 0, result.output
    load_problem(tmp_path / "out/Quant/vector_add")


def test_duplicate_rows_keep_the_first(tmp_path: Path):
    rows = parquet_rows()
    src = write_parquet(tmp_path / "src/L1/a.parquet", [rows[0], rows[0]])
    result = migrate("migrate-sol", tmp_path / "src", tmp_path / "out", "--json")
    manifest = json.loads(result.stdout)
    assert [(b["code"], b["source"]) for b in manifest["blockers"]] == [("duplicate_problem", "L1/a.parquet row 2")]
    assert manifest["denominators"]["problems"] == {"seen": 2, "migrated": 1, "blocked": 1}
    assert src.exists()


@pytest.mark.parametrize("layout", ["folders", "parquet"])
def test_two_runs_write_identical_bytes(tmp_path: Path, layout: str):
    src = tmp_path / "src"
    if layout == "folders":
        sol_tree(src)
    else:
        write_parquet(src / "L1/0000.parquet", parquet_rows())
    first, second = tmp_path / "one", tmp_path / "two"
    assert migrate("migrate-sol", src, first).exit_code == 0
    assert migrate("migrate-sol", src, second).exit_code == 0
    assert tree_bytes(first) == tree_bytes(second)


def test_the_contract_lists_the_manifest_the_blockers_and_the_commands():
    from click.testing import CliRunner

    from sol_execbench.cli.main import cli
    from sol_execbench.schema import BlockerCode

    doc = json.loads(CliRunner().invoke(cli, ["contract", "--json"]).stdout)
    assert "denominators" in doc["formats"]["migration_manifest"]["properties"]
    assert [b["code"] for b in doc["migration_blockers"]] == [code.value for code in BlockerCode]
    assert {"dataset migrate-sol"} <= {c["name"] for c in doc["cli_commands"]}


def test_the_upstream_corpus_migrates_whole_and_unchanged(tmp_path: Path):
    """Upstream's own sample problems (a category folder): every problem, workload and solution carried
    over; definitions and workloads equal to the source's as JSON values."""
    from ..conftest import CONFORMANCE

    src = CONFORMANCE / "samples"
    manifest = migrated("migrate-sol", src, tmp_path / "out")
    problems = sorted(p.name for p in src.iterdir() if (p / "definition.json").is_file())
    assert [p["path"] for p in manifest["problems"]] == [f"samples/{name}" for name in problems]
    assert manifest["blockers"] == [] and manifest["denominators"]["problems"]["migrated"] == len(problems)
    for name in problems:
        out = tmp_path / "out/samples" / name
        assert json.loads((out / "definition.json").read_text()) == json.loads((src / name / "definition.json").read_text())
        source_lines = [json.loads(line) for line in (src / name / "workload.jsonl").read_text().splitlines() if line.strip()]
        assert [json.loads(line) for line in (out / "workload.jsonl").read_text().splitlines()] == source_lines
        assert sorted(p.name for p in out.glob("solution*.json")) == sorted(p.name for p in (src / name).glob("solution*.json"))
