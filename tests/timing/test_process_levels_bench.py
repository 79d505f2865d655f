"""benchmarks/process_levels.py: the parts that need no GPU (grouping kernel records into calls, the
spread across processes) and its refusal without one."""

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


def test_a_calls_kernels_lie_between_its_hold_and_its_marker(levels):
    records = [
        ("reduce_kernel (the flush)", 0, 40_000),
        ("spin_kernel", 40_500, 240_000),
        ("elementwise a", 241_000, 244_000),
        ("reduce b", 245_400, 248_000),  # a 1.4 us gap before it
        ("elementwise c", 249_000, 251_000),
        ("vectorized_elementwise_kernel<FillFunctor<float>>", 252_000, 253_000),
        ("reduce_kernel (the flush)", 300_000, 340_000),
        ("spin_kernel", 341_000, 500_000),
        ("elementwise a", 501_000, 503_500),
        ("vectorized_elementwise_kernel<FillFunctor<float>>", 504_000, 505_000),
        ("vectorized_elementwise_kernel<FillFunctor<float>>", 600_000, 601_000),  # a marker with no call before it
    ]
    calls = levels.call_spans(reversed(records))  # any order: records are sorted by start
    assert calls == [pytest.approx((10.0, 7.6)), pytest.approx((2.5, 2.5))]


def test_each_reading_is_summarized_across_processes(levels):
    processes = [{"4x1024": {"span": 26.0, "kernel_sum": 17.6, "events": 27.0}},
                 {"4x1024": {"span": 28.0, "kernel_sum": 17.7, "events": 28.5}},
                 {"4x1024": {"span": 27.0, "kernel_sum": 17.8, "events": 27.5}}]
    table = levels.summarize(processes)
    assert table["4x1024 span"]["us"] == [26.0, 28.0, 27.0]
    assert table["4x1024 span"]["spread"] == pytest.approx(2.0 / 27.0)
    assert table["4x1024 kernel_sum"]["spread"] == pytest.approx(0.2 / 17.7)
    assert "4x1024 span_no_flush" not in table  # a reading no process gave is left out


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
