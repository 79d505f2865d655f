"""Random inputs follow upstream's name heuristics, so that references see values in the range the
name implies (norm weights ones, biases zeros, masks, positive variances, ...)."""

from __future__ import annotations

import math

import pytest
import torch

from sol_execbench.evaluate.child.inputs import heuristic_tensor, make_inputs
from sol_execbench.schema import Definition, Workload

CPU = torch.device("cpu")


def made(name: str, shape=(4, 8), dtype=torch.float32, description: str | None = None) -> torch.Tensor | None:
    torch.manual_seed(0)
    return heuristic_tensor(name, shape, dtype, CPU, description)


@pytest.mark.parametrize("name", ["norm_weight", "input_layernorm_weight", "post_attention_layernorm_weight",
                                  "q_norm_weight", "norm2_weight", "layernorm_weight"])
def test_norm_weights_are_ones(name: str):
    value = made(name, (64,), torch.bfloat16)
    assert value.dtype == torch.bfloat16 and torch.equal(value, torch.ones(64, dtype=torch.bfloat16))


@pytest.mark.parametrize("name", ["norm_bias", "input_layernorm_bias", "k_norm1_bias"])
def test_norm_biases_are_zeros(name: str):
    assert torch.equal(made(name, (64,)), torch.zeros(64))


@pytest.mark.parametrize("name,description", [("attention_mask", None), ("causal_mask", None),
                                              ("bias", "additive attention mask, causal")])
def test_square_attention_masks_are_causal(name: str, description: str | None):
    mask = made(name, (2, 5, 5), torch.float16, description)
    lowest = torch.finfo(torch.float16).min
    upper = torch.triu(torch.ones(5, 5, dtype=torch.bool), diagonal=1)
    assert (mask[..., upper] == lowest).all() and (mask[..., ~upper] == 0).all()


@pytest.mark.parametrize("name,description", [("attention_mask", None), ("x_mask", None), ("drop_mask", None),
                                              ("token_mask", "binary keep mask"), ("pad_mask", "1.0 for valid tokens")])
def test_binary_masks_hold_zeros_and_ones(name: str, description: str | None):
    mask = made(name, (16, 32), torch.float32, description)  # not square: not the causal mask
    assert set(mask.unique().tolist()) == {0.0, 1.0}


def test_a_mask_name_alone_does_not_make_a_binary_mask():
    assert made("token_mask", (16, 32)) is None


@pytest.mark.parametrize("name", ["variance", "var", "rstd", "std", "running_var", "x_rstd", "ln_std", "var2",
                                  "layer_variance"])
def test_variances_are_positive(name: str):
    value = made(name, (256,))
    assert (value >= 0.1).all()


@pytest.mark.parametrize("name", ["cos", "sin", "rope_cos", "sin_cached"])
def test_rotary_tables_are_cosines_and_sines(name: str):
    value = made(name, (32, 16))
    assert (value.abs() <= 1).all() and value.abs().max() > 0.1


@pytest.mark.parametrize("name,low,high", [("A", -1.0, -0.001), ("A_log", -5.0, -1.0), ("g", -5.0, 0.0)])
def test_decay_parameters_stay_in_their_ranges(name: str, low: float, high: float):
    value = made(name, (128,))
    assert (value >= low).all() and (value <= high).all()


def test_a_cumsum_is_a_non_increasing_cumulative_sum():
    value = made("A_cumsum", (4, 64))
    assert (value <= 0).all() and (value.diff(dim=-1) <= 0).all()


@pytest.mark.parametrize("name,description", [("routing_weights", None), ("attn_weights", None),
                                              ("p", "softmax output of the router")])
def test_softmax_weights_sum_to_one(name: str, description: str | None):
    value = made(name, (8, 16), description=description)
    assert (value >= 0).all() and torch.allclose(value.sum(dim=-1), torch.ones(8))


@pytest.mark.parametrize("name", ["weight", "weight1", "q_proj", "gate_proj_weight", "w_weights"])
def test_weight_matrices_are_scaled_by_fan_in(name: str):
    value = made(name, (256, 1024))
    assert abs(value.std().item() - 1 / math.sqrt(1024)) < 0.005


@pytest.mark.parametrize("name,shape,dtype", [
    ("x", (4, 8), torch.float32),  # an ordinary name
    ("weight", (64,), torch.float32),  # a 1-d weight is not a matrix (nor a norm weight by name)
    ("norm_weight", (64,), torch.int32),  # integers keep their own ranges
    ("norm_weight", (64,), torch.float8_e4m3fn),  # as do low-precision floats
    ("variance", (64,), torch.int64),
])
def test_other_inputs_are_left_to_plain_random(name: str, shape, dtype):
    assert made(name, shape, dtype) is None


def test_make_inputs_applies_the_heuristics_in_definition_order():
    definition = Definition.model_validate({
        "name": "layernorm", "axes": {"T": {"type": "var"}, "H": {"type": "const", "value": 16}},
        "inputs": {"x": {"shape": ["T", "H"], "dtype": "float32"}, "norm_weight": {"shape": ["H"], "dtype": "float32"},
                   "norm_bias": {"shape": ["H"], "dtype": "float32"}, "variance": {"shape": ["T"], "dtype": "float32"},
                   "eps": {"shape": None, "dtype": "float32"}},
        "outputs": {"y": {"shape": ["T", "H"], "dtype": "float32"}},
        "reference": "def run(x, norm_weight, norm_bias, variance, eps):\n    return x\n"})
    workload = Workload.model_validate({"uuid": "w", "axes": {"T": 3}, "inputs": {"eps": {"type": "scalar", "value": 1e-5}}})
    torch.manual_seed(0)
    x, weight, bias, variance, eps = make_inputs(definition, workload, CPU, {}, None)
    assert x.shape == (3, 16) and torch.equal(weight, torch.ones(16)) and torch.equal(bias, torch.zeros(16))
    assert (variance > 0).all() and eps == 1e-5


def test_sampling_probabilities_are_normalised():
    definition = Definition.model_validate({
        "name": "sampling", "op_type": "sampling", "axes": {"B": {"type": "var"}, "V": {"type": "var"}},
        "inputs": {"probs": {"shape": ["B", "V"], "dtype": "float32"}},
        "outputs": {"ids": {"shape": ["B"], "dtype": "int64"}},
        "reference": "def run(probs):\n    return probs.argmax(-1)\n"})
    workload = Workload.model_validate({"uuid": "w", "axes": {"B": 4, "V": 32}})
    (probs,) = make_inputs(definition, workload, CPU, {}, None)
    assert (probs >= 0).all() and torch.allclose(probs.sum(dim=-1), torch.ones(4))
