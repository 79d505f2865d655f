"""The audited calls' input sets (evaluate/child/input_bank.py): content comparison and scaled-down copies,
for every dtype the formats allow, strided layouts included."""

from __future__ import annotations

import pytest
import torch

from sol_execbench.evaluate.child.input_bank import same_contents, scaled_down


def test_contents_compare_byte_for_byte():
    x = torch.tensor([float("nan"), 1.0, -0.0])
    assert same_contents([x, 3], [x.clone(), 3])  # NaN where NaN was: the same contents
    assert not same_contents([x], [torch.tensor([float("nan"), 1.0, 0.0])])  # -0.0 is another input
    assert not same_contents([x, 3], [x.clone(), 4])
    assert same_contents([torch.tensor(1.5)], [torch.tensor(1.5)]) and not same_contents([torch.tensor(1.5)],
                                                                                          [torch.tensor(2.5)])
    assert not same_contents([x], [x.double()])


def test_packed_fp4_compares_and_is_left_unscaled():
    dtype = getattr(torch, "float4_e2m1fn_x2", None)
    if dtype is None:
        pytest.skip("this torch has no packed fp4")
    a = torch.tensor([0x12, 0x34], dtype=torch.uint8).view(dtype)
    assert same_contents([a], [a.clone()])
    assert not same_contents([a], [torch.tensor([0x12, 0x35], dtype=torch.uint8).view(dtype)])
    assert scaled_down(a, 1) == (a, False)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16] +
                         ([torch.float8_e4m3fn] if hasattr(torch, "float8_e4m3fn") else []))
def test_scaled_down_keeps_shape_strides_and_dtype(dtype):
    base = torch.linspace(-2.0, 2.0, 48).reshape(6, 8).to(dtype)
    strided = base.t()[:, ::2]  # non-contiguous
    scaled, changed = scaled_down(strided, 2)
    assert changed and scaled.dtype == dtype and scaled.shape == strided.shape
    assert scaled.stride() == strided.stride()
    assert torch.equal(scaled.float(), (strided.float() / 4).to(dtype).float())
    assert strided.float().abs().max() == 2.0  # the original is untouched


def test_nothing_to_scale():
    assert scaled_down(torch.zeros(4), 1)[1] is False
    assert scaled_down(torch.arange(4), 1)[1] is False
    assert scaled_down(torch.tensor([float("inf"), 0.0]), 1)[1] is False
    assert scaled_down(7.0, 1) == (7.0, False)
