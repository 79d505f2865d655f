"""The element-wise comparison of a solution's output with the reference's (upstream's rule:
|out - ref| <= atol + rtol * |ref| per element, a required matched ratio, an optional error cap)."""

from __future__ import annotations

import pytest
import torch

from sol_execbench.evaluate.child.correctness import compare
from sol_execbench.schema import ToleranceSpec

TOL = ToleranceSpec(max_atol=1e-2, max_rtol=1e-2, required_matched_ratio=0.99)


def test_close_outputs_match_and_report_the_worst_element():
    ref = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    out = ref.clone()
    out[2, 1] += 0.005
    c = compare(out, ref, TOL)
    assert not c.failed and c.matched_ratio == 1.0 and c.worst_index == [2, 1]
    assert abs(c.correctness.max_absolute_error - 0.005) < 1e-6


def test_too_few_matching_elements_fail_with_the_ratio():
    ref = torch.zeros(100)
    out = ref.clone()
    out[:2] = 1.0
    c = compare(out, ref, TOL)
    assert c.failed and abs(c.matched_ratio - 0.98) < 1e-9 and "matched ratio 0.9800" in c.reason


def test_the_error_cap_fails_a_single_large_error():
    ref = torch.zeros(1000)
    out = ref.clone()
    out[7] = 5.0
    capped = ToleranceSpec(max_atol=1e-2, max_rtol=1e-2, required_matched_ratio=0.99, max_error_cap=1.0)
    assert not compare(out, ref, TOL).failed
    c = compare(out, ref, capped)
    assert c.failed and "max_error_cap" in c.reason and c.worst_index == [7]


def test_all_zero_output_and_non_finite_values():
    ref = torch.ones(8)
    c = compare(torch.zeros(8), ref, TOL)
    assert c.failed and "all zeros" in c.reason
    out = ref.clone()
    out[3] = float("nan")
    c = compare(out, ref, TOL)
    assert c.failed and c.correctness.has_nan and c.worst_index == [3]


def test_empty_outputs_match():
    c = compare(torch.zeros(0), torch.zeros(0), TOL)
    assert not c.failed


def test_an_error_too_large_for_float32_is_not_taken_for_a_non_finite_value():
    """x - y overflows to inf where both are finite: the search for NaN and Inf that a non-finite
    largest error starts finds none, and the comparison goes on (the element exceeds the bound)."""
    ref = torch.zeros(100)
    ref[5] = -3e38
    out = ref.clone()
    out[5] = 3e38
    c = compare(out, ref, TOL)
    assert not c.correctness.has_inf and not c.correctness.has_nan
    assert c.correctness.max_absolute_error == float("inf") and c.worst_index == [5]
    assert not c.failed and c.matched_ratio == 0.99


def test_inf_in_the_reference_is_named_as_the_reference_s():
    ref = torch.ones(4, 4)
    ref[1, 2] = float("inf")
    c = compare(ref.clone(), ref, TOL)
    assert c.failed and c.correctness.has_inf and c.worst_index == [1, 2]
    assert c.reason == "Inf in the reference output; Inf in the solution's output"


def _cases() -> dict[str, tuple[torch.Tensor, torch.Tensor, ToleranceSpec]]:
    ref = torch.linspace(-3, 3, 4096).reshape(64, 64)
    close = ref + 1e-3
    close[17, 3] += 4e-3  # the largest error, once
    nan_out, inf_ref = ref.clone(), ref.clone()
    nan_out[40, 9] = float("nan")
    inf_ref[2, 60] = float("inf")
    huge_ref, huge_out = ref.clone(), ref.clone()
    huge_ref[5, 5], huge_out[5, 5] = -3e38, 3e38  # x - y overflows where both are finite
    tie = ref.clone()
    tie[7, 1] += 0.5
    tie[30, 30] += 0.5  # two equal largest errors: the first is named
    minus_inf = ref.clone()
    minus_inf[0, :8] = float("-inf")
    lone = minus_inf.clone()
    lone[0, 3] = 0.0
    allow = ToleranceSpec(max_atol=1e-2, max_rtol=1e-2, allow_negative_inf=True)
    return {"close": (close, ref, TOL), "nan": (nan_out, ref, TOL), "inf in reference": (inf_ref.clone(), inf_ref, TOL),
            "overflow": (huge_out, huge_ref, TOL), "tie": (tie, ref, TOL), "-inf pairs": (minus_inf.clone(), minus_inf, allow),
            "lone -inf": (lone, minus_inf, allow), "bf16": (close.bfloat16(), ref.bfloat16(), TOL)}


def _facts(c) -> tuple[tuple, list[float]]:
    """What must agree exactly, and the statistics (reductions sum in another order on a GPU)."""
    k = c.correctness
    return ((c.failed, c.worst_index, c.reason, k.has_nan, k.has_inf),
            [c.matched_ratio, k.max_absolute_error, k.max_relative_error])


@pytest.mark.gpu
@pytest.mark.parametrize("case", list(_cases()))
def test_the_gpu_compares_as_the_cpu_does(case: str):
    """NaN propagating through the device's largest-error reduction, its first index on a tie, the
    overflow and the -inf pairs: the same verdict and statistics on the GPU as on the CPU."""
    out, ref, tol = _cases()[case]
    (exact, stats), (exact_cpu, stats_cpu) = _facts(compare(out.cuda(), ref.cuda(), tol)), _facts(compare(out, ref, tol))
    assert exact == exact_cpu
    assert stats == pytest.approx(stats_cpu, rel=1e-5)


def test_the_cases_compared_on_the_gpu_cover_each_branch():
    """On the CPU: the cases above reach what the GPU test compares (so it cannot pass vacuously)."""
    facts = {name: _facts(compare(out, ref, tol))[0] for name, (out, ref, tol) in _cases().items()}
    assert facts["close"] == (False, [17, 3], None, False, False)
    assert facts["nan"][0] and facts["nan"][1] == [40, 9] and facts["nan"][3]
    assert facts["inf in reference"][1] == [2, 60] and facts["inf in reference"][4]
    assert facts["overflow"][:2] == (False, [5, 5]) and not facts["overflow"][4]
    assert facts["tie"][1] == [7, 1]
    assert facts["-inf pairs"][0] is False
    assert facts["lone -inf"][0] and facts["lone -inf"][1] == [0, 3]
    assert facts["bf16"][0] is False
