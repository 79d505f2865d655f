"""Shared test set-up: the `gpu` marker skips without a GPU; helpers for light evaluations."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
CONFORMANCE = DATA / "conformance"
LIGHT_CONFIG = {"warmup_runs": 1, "iterations": 3, "correctness_rounds": 2}


def _gpu_available() -> bool:
    if shutil.which("nvidia-smi") is None and not os.path.exists("/dev/kfd"):
        return False
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    if _gpu_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA or ROCm GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def cpu_timing(monkeypatch):
    """Let the evaluator time on the CPU, as CI must."""
    monkeypatch.setenv("SOL_EXECBENCH_ALLOW_CPU_TIMING", "1")


@pytest.fixture
def light_config(tmp_path) -> Path:
    path = tmp_path / "light_config.json"
    path.write_text(json.dumps(LIGHT_CONFIG))
    return path
