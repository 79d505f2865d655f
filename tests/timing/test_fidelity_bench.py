"""benchmarks/fidelity.py: the parts that need no GPU (ncu output, the targets)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def fidelity():
    spec = importlib.util.spec_from_file_location("fidelity_bench", ROOT / "benchmarks" / "fidelity.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


def test_ncu_csv_gives_the_mean_kernel_sum_per_call(fidelity):
    text = (Path(__file__).parent / "data" / "ncu_gpu_time.csv").read_text()
    assert fidelity.parse_ncu_csv(text, calls=2) == pytest.approx((2144 + 1856) / 2 * 1e-6)
    assert fidelity.parse_ncu_csv("==ERROR== ERR_NVGPUCTRPERM", calls=2) is None


@pytest.mark.parametrize("truth_ms,measured_ms,ok", [
    (0.100, 0.104, True), (0.100, 0.106, False),  # >= 20 us: within 5%
    (0.004, 0.0046, True), (0.004, 0.0048, True),  # < 20 us: within 15% ... or within 1 us
    (0.004, 0.0052, False),
])
def test_accuracy_targets(fidelity, truth_ms, measured_ms, ok):
    result = fidelity.CaseResult("c", "", truth_ms, "ncu", {"device": {"median_ms": measured_ms}}, [measured_ms])
    fidelity.check_targets(result)
    assert result.accuracy_ok is ok


def test_spread_target_applies_from_50us(fidelity):
    big = fidelity.CaseResult("c", "", 0.2, "ncu", {"device": {"median_ms": 0.2}}, [0.200, 0.202, 0.203])
    fidelity.check_targets(big)
    assert big.spread == pytest.approx(0.003 / 0.202) and big.spread_ok is True
    small = fidelity.CaseResult("c", "", 0.01, "ncu", {"device": {"median_ms": 0.01}}, [0.010, 0.012])
    fidelity.check_targets(small)
    assert small.spread_ok is None


def test_every_case_is_described_and_sizes_span_2us_to_2ms(fidelity):
    assert {"add_4k", "rmsnorm_4096x4096", "softmax_64x8192", "two_kernel_gemm_relu", "second_stream_softmax",
            "gemm_8192x8192x8192"} <= set(fidelity.CASES)
