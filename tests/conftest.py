"""Shared test set-up: the `gpu` marker skips without a GPU; helpers for light evaluations."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from .problems import LIGHT_CONFIG

DATA = Path(__file__).parent / "data"

# Evaluation children run in their staging folder: a relative PYTHONPATH (PYTHONPATH=src) would have
# them import whichever sol_execbench is installed instead of the checkout under test.
if os.environ.get("PYTHONPATH"):
    os.environ["PYTHONPATH"] = os.pathsep.join(str(Path(p).resolve()) for p in os.environ["PYTHONPATH"].split(os.pathsep) if p)
CONFORMANCE = DATA / "conformance"


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
def light_config(tmp_path) -> Path:
    path = tmp_path / "light_config.json"
    path.write_text(json.dumps(LIGHT_CONFIG))
    return path


def _warm_pool(monkeypatch, device: str | None):
    """A warm pool of the test's own (one spare) for ``device``, in a short runtime directory (Unix
    socket paths are limited to 107 bytes) that also marks its processes' environment; yields the
    server process."""
    from sol_execbench.evaluate.parent.warm_pool import pool_status, start_pool, stop_pool

    runtime = tempfile.mkdtemp(prefix="sxw", dir="/tmp")
    monkeypatch.setenv("XDG_RUNTIME_DIR", runtime)
    monkeypatch.setenv("SOL_EXECBENCH_PHASE_LOG", "1")
    proc = start_pool(device, spares=1, idle_timeout_s=120)
    deadline = time.monotonic() + 90
    while not ((status := pool_status(device)) and status["warm"] >= 1):
        if time.monotonic() > deadline or proc.poll() is not None:
            pytest.fail("the warm pool did not get ready")
        time.sleep(0.1)
    yield proc
    stop_pool(device)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:  # a pool that does not stop is killed: the next test needs none
        proc.kill()
        proc.wait()
    shutil.rmtree(runtime, ignore_errors=True)


@pytest.fixture
def warm_pool(monkeypatch):
    """A pool for evaluations that name no device (the Python API's default)."""
    yield from _warm_pool(monkeypatch, None)


@pytest.fixture
def warm_cpu_pool(monkeypatch):
    """A pool for ``--device cpu`` (a pool serves the device it was started for)."""
    yield from _warm_pool(monkeypatch, "cpu")
