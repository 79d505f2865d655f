"""The block on C++ JIT builds in Python solutions, in a fresh interpreter: it costs nothing until
``torch.utils.cpp_extension`` is imported, and refuses its builds from then on."""

from __future__ import annotations

import pytest

from ..fresh_interpreter import run_program

_PROGRAM = """
import sys
import torch
from sol_execbench.evaluate.child import driver
{before}
driver._block_cpp_extension_jit()
print("imported before use:", "torch.utils.cpp_extension" in sys.modules)
from torch.utils.cpp_extension import load, load_inline
for build in (load, load_inline):
    try:
        build(name="x", sources=[]) if build is load else build(name="x", cpp_sources="")
    except RuntimeError as exc:
        print("refused" if "native language" in str(exc) else f"other: {exc}")
"""


@pytest.mark.parametrize("imported_first", [False, True], ids=["fresh child", "warm child"])
def test_cpp_extension_builds_are_refused_whether_imported_before_or_after(imported_first):
    before = "import torch.utils.cpp_extension" if imported_first else ""
    lines = run_program(_PROGRAM.replace("{before}", before))
    assert lines[0] == f"imported before use: {imported_first}"
    assert lines[1:3] == ["refused", "refused"], lines
