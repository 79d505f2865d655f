"""benchmarks/process_levels.py: the parts that need no GPU (the spread across processes, the call
it times) and its refusal without one. Its instruments are fidelity.py's."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "process_levels.py"


@pytest.fixture(scope="module")
def levels():
    spec = importlib.util.spec_from_file_location("process_levels_bench", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_each_reading_is_summarized_across_processes(levels):
    processes = [{"4x1024": {"span": 26.0, "kernel_sum": 17.6, "events": 27.0}},
                 {"4x1024": {"span": 28.0, "kernel_sum": 17.7, "events": 28.5}},
                 {"4x1024": {"span": 27.0, "kernel_sum": 17.8, "events": 27.5}}]
    table = levels.summarize(processes)
    assert table["4x1024 span"]["us"] == [26.0, 28.0, 27.0]
    assert table["4x1024 span"]["spread"] == pytest.approx(2.0 / 27.0)
    assert table["4x1024 kernel_sum"]["spread"] == pytest.approx(0.2 / 17.7)
    assert "4x1024 span_no_flush" not in table  # a reading no process gave is left out


def test_readings_are_correlated_with_the_launch_level_where_every_process_has_one(levels):
    processes = [{levels.LEVEL: {"probe": level}, "4x1024": {"span": span, "kernel_sum": 17.7}}
                 for level, span in ((1.95, 25.0), (2.15, 26.6), (1.97, 25.2), (2.10, 26.3))]
    table = levels.summarize(processes)
    assert table[f"{levels.LEVEL} probe"]["us"] == [1.95, 2.15, 1.97, 2.10]
    assert table["4x1024 span"]["correlation_with_level"] > 0.95
    assert "correlation_with_level" not in table[f"{levels.LEVEL} probe"]
    processes[1].pop(levels.LEVEL)
    assert "correlation_with_level" not in levels.summarize(processes)["4x1024 span"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is for machines without an NVIDIA GPU")
def test_without_a_gpu_it_exits_2_with_one_line():
    proc = subprocess.run([sys.executable, str(SCRIPT), "--processes", "1"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "needs an NVIDIA GPU" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_call_is_the_bundled_examples_reference(levels):
    run = levels.example_reference()
    x, weight = torch.randn(4, 1024), torch.randn(1024)
    expected = x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-6) * weight
    torch.testing.assert_close(run(x, weight, 1e-6), expected)
