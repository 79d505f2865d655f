"""The COMPILE_ERROR message: the compiler's first errors from recorded gcc and nvcc output (captured
from torch's ninja build), without command lines, with paths made relative."""

from __future__ import annotations

from sol_execbench.build.compile_errors import first_errors

from .helpers import DATA

STAGING = ["/tmp/STAGING/solution", "/tmp/STAGING/build"]


def test_gcc_errors_keep_source_lines_and_drop_commands():
    text = first_errors((DATA / "gcc_error.txt").read_text(), STAGING)
    assert text.splitlines()[0] == "src/main.cpp:2:26: error: expected primary-expression before ‘;’ token"
    assert "    2 | int f(int x) { return x +; }" in text
    assert "src/main.cpp:3:18: error: ‘undefined_name’ was not declared in this scope" in text
    assert "-isystem" not in text and "ninja: build stopped" not in text and "/tmp/STAGING" not in text


def test_nvcc_errors_are_kept_with_their_caret_lines():
    text = first_errors((DATA / "nvcc_error.txt").read_text(), STAGING)
    lines = text.splitlines()
    assert lines[0] == 'kernel.cu(1): error: expected a ";"'
    assert any(line.strip() == "^" for line in lines)
    assert 'kernel.cu(2): error: identifier "y" is undefined' in text
    assert "errors detected" not in text and "--expt-relaxed-constexpr" not in text


def test_error_count_and_size_are_bounded():
    output = "\n".join(f"a.cpp:{i}:1: error: problem {i}\n  {i} | code\n    | ^" for i in range(1, 40))
    text = first_errors(output, max_errors=3)
    assert text.count("error: problem") == 3 and "and 36 more error line(s)" in text
    assert len(first_errors("x" * 10000 + " error: long", max_chars=500)) < 700


def test_output_without_error_lines_falls_back_to_its_tail():
    output = "\n".join(f"line {i}" for i in range(100))
    text = first_errors(output)
    assert text.splitlines()[-1] == "line 99" and "line 10\n" not in text
