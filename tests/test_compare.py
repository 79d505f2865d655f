"""The element-wise comparison of a solution's output with the reference's (upstream's rule:
|out - ref| <= atol + rtol * |ref| per element, a required matched ratio, an optional error cap)."""

from __future__ import annotations

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
