"""Bad input to the migrations: exit 2, one line on stderr naming the file, the field and the fix, no
traceback, and no output folder."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

import pytest

from .trees import KB_MATMUL, flashinfer_tree, kernelbench_tree, migrate, parquet_rows, sol_tree, write_parquet


def _broken_definition(src: Path) -> None:
    sol_tree(src)
    (src / "benchmark/L1/001_vector_add/definition.json").write_text('{"name": "vector_add",')


def _broken_workload_line(src: Path) -> None:
    sol_tree(src)
    with open(src / "benchmark/L2/001_scale/workload.jsonl", "a") as fh:
        fh.write("{not json}\n")


def _parquet_without(column: str) -> Callable[[Path], None]:
    def write(src: Path) -> None:
        write_parquet(src / "L1/0000.parquet", [{k: v for k, v in row.items() if k != column} for row in parquet_rows()])
    return write


def _parquet_cell(column: str, value: object) -> Callable[[Path], None]:
    def write(src: Path) -> None:
        rows = parquet_rows()
        rows[1][column] = value
        write_parquet(src / "L1/0000.parquet", rows)
    return write


def _not_parquet(src: Path) -> None:
    (src / "L1").mkdir(parents=True)
    (src / "L1/0000.parquet").write_text("not parquet")


def _empty(src: Path) -> None:
    (src / "nothing-here").mkdir(parents=True)


# (name, how the source is made, extra arguments, what the one line must say)
SOL_CASES = [
    ("missing source", None, [], ["does not exist"]),
    ("no problems", _empty, [], ["holds no SOL-ExecBench problems", "give the dataset root"]),
    ("unknown category", sol_tree, ["--category", "L9"], ["--category names L9", "choose from L1, L2"]),
    ("definition not JSON", _broken_definition, [], ["L1/001_vector_add/definition.json", "malformed JSON"]),
    ("workload line not JSON", _broken_workload_line, [], ["L2/001_scale/workload.jsonl", "line 3"]),
    ("parquet without a column", _parquet_without("workloads"), [], ["L1/0000.parquet", "column workloads", "is missing"]),
    ("parquet cell not JSON", _parquet_cell("axes", "{oops"), [], ["row 2", "field 'axes'", "malformed JSON"]),
    ("parquet workloads not a list", _parquet_cell("workloads", "{}"), [], ["row 2", "field 'workloads'", "not a list"]),
    ("parquet row without a name", _parquet_cell("name", ""), [], ["row 2", "field 'name'"]),
    ("not a parquet file", _not_parquet, [], ["L1/0000.parquet", "not a readable parquet file"]),
]


def _assert_one_line_exit_2(result, expected: list[str]) -> None:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    for text in expected:
        assert text in lines[0], lines[0]


def test_lone_parquet_file_without_category(tmp_path: Path):
    src = write_parquet(tmp_path / "sol.parquet", parquet_rows())
    _assert_one_line_exit_2(migrate("migrate-sol", src, tmp_path / "out"), ["sol.parquet", "give --category once"])


def test_output_folder_not_empty(tmp_path: Path):
    src, out = sol_tree(tmp_path / "src"), tmp_path / "out"
    (out / "keep").mkdir(parents=True)
    _assert_one_line_exit_2(migrate("migrate-sol", src, out), ["is not empty", "give another OUT"])
    assert [p.name for p in out.iterdir()] == ["keep"]


def test_an_empty_output_folder_is_used(tmp_path: Path):
    src, out = sol_tree(tmp_path / "src"), tmp_path / "out"
    out.mkdir()
    assert migrate("migrate-sol", src, out).exit_code == 0 and (out / "L2/001_scale/definition.json").is_file()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no staging folder left


def test_manifest_inside_source(tmp_path: Path):
    src = sol_tree(tmp_path / "src")
    _assert_one_line_exit_2(migrate("migrate-sol", src, tmp_path / "out", "--manifest", src / "m.json"),
                            ["--manifest lies in the source", "changes nothing in its source"])


def test_output_inside_source(tmp_path: Path):
    src = sol_tree(tmp_path / "src")
    _assert_one_line_exit_2(migrate("migrate-sol", src, src / "migrated"), ["overlaps the source"])


def test_manifest_path_is_a_folder(tmp_path: Path):
    src = sol_tree(tmp_path / "src")
    (tmp_path / "m").mkdir()
    _assert_one_line_exit_2(migrate("migrate-sol", src, tmp_path / "out", "--manifest", tmp_path / "m"),
                            ["--manifest is a folder"])


def test_parquet_without_pyarrow(tmp_path: Path, monkeypatch):
    write_parquet(tmp_path / "src/L1/0000.parquet", parquet_rows())
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # what an environment without the package gives
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    _assert_one_line_exit_2(migrate("migrate-sol", tmp_path / "src", tmp_path / "out"),
                            ["needs the package 'pyarrow'", "pip install pyarrow"])


def _kernelbench_file(name: str, text: str) -> Callable[[Path], None]:
    def write(src: Path) -> None:
        kernelbench_tree(src)
        (src / f"KernelBench/level1/{name}").write_text(text)
    return write


KERNELBENCH_CASES = [
    ("missing source", None, [], ["does not exist"]),
    ("no level folders", _empty, [], ["holds no KernelBench level folders"]),
    ("unknown category", kernelbench_tree, ["--category", "L7"], ["--category names L7", "choose from L1, L2"]),
    ("not Python", _kernelbench_file("9_Broken.py", "def get_inputs(:\n"), [], ["level1/9_Broken.py", "line 1"]),
    ("no get_inputs", _kernelbench_file("9_NoInputs.py", KB_MATMUL.replace("def get_inputs", "def inputs")), [],
     ["level1/9_NoInputs.py", "field 'get_inputs' is not defined", "move other files out"]),
]


def test_kernelbench_lone_file_without_level(tmp_path: Path):
    (tmp_path / "problem.py").write_text(KB_MATMUL)
    _assert_one_line_exit_2(migrate("migrate-kernelbench", tmp_path / "problem.py", tmp_path / "out"),
                            ["problem.py", "give --category L<level> once"])


def _flashinfer_with(folder: str, name: str, text: str) -> Callable[[Path], None]:
    def write(src: Path) -> None:
        flashinfer_tree(src)
        path = src / folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return write


FLASHINFER_CASES = [
    ("no definitions folder", _empty, [], ["is not a flashinfer-bench trace set", "definitions/"]),
    ("definition not JSON", _flashinfer_with("definitions", "x.json", "{"), [], ["definitions/x.json", "malformed JSON"]),
    ("definition without a name", _flashinfer_with("definitions", "x.json", '{"axes": {}}'),
     [], ["definitions/x.json", "field 'name'", "give the record a non-empty 'name'"]),
    ("workload line without a workload", _flashinfer_with("workloads", "x.jsonl", '{"definition": "vector_add"}\n'),
     [], ["workloads/x.jsonl line 1", "field 'workload'"]),
    ("solution without a definition", _flashinfer_with("solutions", "x.json", '{"name": "s"}'),
     [], ["solutions/x.json", "field 'definition'"]),
]


CASES = ([("migrate-sol", *case) for case in SOL_CASES] + [("migrate-kernelbench", *case) for case in KERNELBENCH_CASES]
         + [("migrate-flashinfer", *case) for case in FLASHINFER_CASES])


@pytest.mark.parametrize("command,make,extra,expected", [(c[0], *c[2:]) for c in CASES],
                         ids=[f"{c[0]}: {c[1]}" for c in CASES])
def test_bad_input(tmp_path: Path, command: str, make, extra: list[str], expected: list[str]):
    src, out = tmp_path / "src", tmp_path / "out"
    if make is not None:
        src.mkdir()
        make(src)
    _assert_one_line_exit_2(migrate(command, src, out, *extra), expected)
    assert not out.exists()
