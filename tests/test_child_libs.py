"""The trace's library versions, in a fresh interpreter: the child reads Triton's version without
importing Triton where nothing else has (a PyTorch problem's child never needs it)."""

from __future__ import annotations

import pytest

from .fresh_interpreter import run_program

_PROGRAM = """
import sys
{before}
from sol_execbench.evaluate.child import driver
libs = driver._libs()
print("triton imported:", "triton" in sys.modules)
print("triton version:", libs.get("triton"))
"""


@pytest.mark.parametrize("imported_first", [False, True], ids=["fresh child", "a solution imported triton"])
def test_the_triton_version_is_read_without_importing_triton(imported_first):
    pytest.importorskip("triton")
    before = "import triton" if imported_first else ""
    lines = run_program(_PROGRAM.replace("{before}", before))
    import triton

    assert lines[0] == f"triton imported: {imported_first}"
    assert lines[1] == f"triton version: {triton.__version__}"
