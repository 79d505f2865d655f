"""Fixtures for the timing tests (the root conftest skips ``gpu`` tests without a GPU)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "exploits"))  # exploit_problems: small problem definitions


@pytest.fixture
def cpu_device():
    from sol_execbench.platform import current

    return current("cpu")
