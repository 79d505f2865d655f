"""Input tensors for a workload: random (with name heuristics), scalar, safetensors, custom.

The name heuristics follow upstream's so that the same definitions get inputs in the same value
ranges (norm weights are ones, variances positive, masks binary, ...); a reference that divides
by a variance must not see zeros.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Callable

import torch

from sol_execbench.schema import Definition, SafetensorsInput, ScalarInput, CustomInput, Workload, torch_dtype

_LOW_PRECISION = (torch.float8_e4m3fn, torch.float8_e5m2)
_FP4 = getattr(torch, "float4_e2m1fn_x2", None)
_INT_RANGES = {torch.int8: (-128, 128), torch.uint8: (0, 256), torch.int16: (-1024, 1024),
               torch.int32: (-1024, 1024), torch.int64: (-1024, 1024)}
# FP4 E2M1 magnitudes and the code of each; values are rounded to the nearest one.
_FP4_LEVELS = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


class InputError(RuntimeError):
    """An input could not be made (missing blob, wrong shape...). Reported as RUNTIME_ERROR."""


def seed_all(seed: int) -> None:
    """What ``torch.manual_seed`` does for the CPU and GPU generators (custom input generators
    draw from them), without its wrapper: on torch 2.11 each call went through a dynamo-disabling
    decorator at 0.8 ms a call, and an evaluation seeds ~70 times per workload."""
    torch.default_generator.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)  # ROCm builds too; queued until CUDA starts, as torch does


def pack_fp4(values: torch.Tensor) -> torch.Tensor:
    """Round float values to FP4 E2M1 and pack two per byte along the last dimension."""
    levels = torch.tensor(_FP4_LEVELS, device=values.device)
    magnitude = values.abs().clamp(max=6.0)
    codes = (magnitude.unsqueeze(-1) - levels).abs().argmin(dim=-1).to(torch.uint8)
    codes = codes | ((values < 0).to(torch.uint8) << 3)
    packed = codes[..., ::2] | (codes[..., 1::2] << 4)
    return packed.view(_FP4)


def random_tensor(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    if dtype in (torch.float64, torch.float32, torch.float16, torch.bfloat16):
        return torch.randn(shape, dtype=dtype, device=device)
    if dtype in _LOW_PRECISION:
        return torch.randn(shape, device=device).clamp_(-2.0, 2.0).to(dtype)
    if _FP4 is not None and dtype == _FP4:
        return pack_fp4(torch.randn(shape, device=device))
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, device=device, dtype=torch.bool)
    if dtype in _INT_RANGES:
        low, high = _INT_RANGES[dtype]
        return torch.randint(low, high, shape, device=device, dtype=dtype)
    raise InputError(f"no random generator for dtype {dtype}")


# -- name heuristics ---------------------------------------------------------------------------

_WEIGHT_SUFFIXES = ("_weight", "_weights", "_proj", "_projs", "_proj_weight", "_proj_weights", "_weight_matrix")
_NORM_PREFIX_ENDS = ("_norm", "_layernorm", "layernorm", "norm")


def _strip_digits(name: str) -> str:
    return name.rstrip("0123456789")


def _is_norm_param(name: str, suffix: str) -> bool:
    if name == f"norm{suffix}":
        return True
    if not name.endswith(suffix):
        return False
    prefix = name[: -len(suffix)]
    return prefix.endswith(_NORM_PREFIX_ENDS) or _strip_digits(prefix).endswith(_NORM_PREFIX_ENDS)


def _is_weight_matrix(name: str, shape: tuple[int, ...]) -> bool:
    if len(shape) < 2:
        return False
    base = _strip_digits(name)
    return name == "weight" or base == "weight" or name.endswith(_WEIGHT_SUFFIXES) or base.endswith(_WEIGHT_SUFFIXES)


def _describes(description: str | None, *words: str) -> bool:
    text = (description or "").lower()
    return all(w in text for w in words)


def _is_binary_mask(name: str, description: str | None) -> bool:
    if name in ("x_mask", "text_mask", "aspect_ratio_mask", "drop_mask", "attention_mask"):
        return True
    text = (description or "").lower()
    markers = ("binary", "{0, 1}", "0 or 1", "1.0 for valid", "0.0 for masked")
    return name.endswith("_mask") and any(m in text for m in markers)


def _is_positive(name: str) -> bool:
    names = ("rstd", "std", "variance", "var")
    base = _strip_digits(name)
    return name in names or base in names or name.endswith(("_rstd", "_std", "_variance", "_var")) or base.endswith(("_rstd", "_std", "_var"))


def heuristic_tensor(name: str, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device,
                     description: str | None) -> torch.Tensor | None:
    """A tensor in the value range the input's name implies, or None for plain random."""
    if not dtype.is_floating_point or dtype in _LOW_PRECISION or (_FP4 is not None and dtype == _FP4):
        return None
    if _is_norm_param(name, "_weight"):
        return torch.ones(shape, dtype=dtype, device=device)
    if _is_norm_param(name, "_bias"):
        return torch.zeros(shape, dtype=dtype, device=device)
    square = len(shape) >= 2 and shape[-1] == shape[-2]
    if square and (name in ("attention_mask", "causal_mask") or _describes(description, "attention mask", "causal")):
        upper = torch.triu(torch.ones(shape[-1], shape[-1], device=device, dtype=torch.bool), diagonal=1)
        mask = torch.zeros(shape, dtype=dtype, device=device)
        mask[..., upper] = torch.finfo(dtype).min
        return mask
    if _is_binary_mask(name, description):
        return torch.randint(0, 2, shape, device=device).to(dtype)
    if name in ("cos", "sin", "cos_cached", "sin_cached", "rope_cos", "rope_sin"):
        angles = torch.randn(shape, device=device).clamp_(-math.pi, math.pi)
        return (torch.cos(angles) if "cos" in name else torch.sin(angles)).to(dtype)
    if _is_positive(name):
        return torch.randn(shape, dtype=dtype, device=device).abs() + 0.1
    if name in ("A", "A_log", "A_cumsum", "g"):
        low, high = {"A": (-1.0, -0.001), "A_log": (-5.0, -1.0), "A_cumsum": (-0.1, 0.0), "g": (-5.0, 0.0)}[name]
        values = torch.empty(shape, dtype=dtype, device=device).uniform_(low, high)
        return values.cumsum(dim=-1) if name == "A_cumsum" else values
    if name in ("attn_weights", "attention_weights", "routing_weights") or _describes(description, "softmax", "output"):
        return torch.softmax(torch.randn(shape, device=device), dim=-1).to(dtype)
    if _is_weight_matrix(name, shape):
        return torch.randn(shape, dtype=dtype, device=device) / math.sqrt(shape[-1])
    return None


# -- safetensors -------------------------------------------------------------------------------

def blob_roots(staging_dir: Path) -> list[Path]:
    roots = [staging_dir]
    extra = os.environ.get("FLASHINFER_TRACE_DIR")
    if extra:
        roots.append(Path(extra))
    return roots


def resolve_blob(path: str, roots: list[Path]) -> Path | None:
    """First existing ``root / path``, also after dropping leading components of ``path``."""
    rel = Path(path)
    if rel.is_absolute():
        return rel if rel.exists() else None
    parts = rel.parts
    for root in roots:
        for start in range(len(parts)):
            candidate = root.joinpath(*parts[start:])
            if candidate.is_file():
                return candidate
    return None


def load_blobs(definition: Definition, workload: Workload, roots: list[Path]) -> dict[str, torch.Tensor]:
    """Safetensors inputs of a workload, checked against the definition's shape and dtype."""
    from safetensors.torch import load_file

    axes = definition.resolve_axes(workload.axes)
    files: dict[Path, dict[str, torch.Tensor]] = {}
    found: dict[str, torch.Tensor] = {}
    for name, spec in workload.inputs.items():
        if not isinstance(spec, SafetensorsInput):
            continue
        resolved = resolve_blob(spec.path, roots)
        if resolved is None:
            searched = ", ".join(str(r) for r in roots)
            raise InputError(f"safetensors blob for input '{name}' not found: '{spec.path}' (searched {searched}; "
                             "set FLASHINFER_TRACE_DIR to the dataset root)")
        if resolved not in files:
            files[resolved] = load_file(str(resolved))
        tensors = files[resolved]
        if spec.tensor_key not in tensors:
            raise InputError(f"blob {resolved} has no tensor '{spec.tensor_key}' for input '{name}'")
        tensor = tensors[spec.tensor_key]
        want_shape = definition.shape_of(definition.inputs[name], axes)
        if want_shape is not None and tuple(tensor.shape) != want_shape:
            raise InputError(f"input '{name}' from {resolved} has shape {tuple(tensor.shape)}, expected {want_shape}")
        want_dtype = torch_dtype(definition.inputs[name].dtype)
        if tensor.dtype != want_dtype:
            raise InputError(f"input '{name}' from {resolved} has dtype {tensor.dtype}, expected {want_dtype}")
        found[name] = tensor.contiguous()
    return found


# -- one set of inputs -------------------------------------------------------------------------

def make_inputs(definition: Definition, workload: Workload, device: torch.device,
                blobs: dict[str, torch.Tensor], custom: Callable[..., dict[str, Any]] | None) -> list[Any]:
    """Inputs in definition order. Draws from the global torch RNG (the caller seeds it)."""
    axes = definition.resolve_axes(workload.axes)
    made_by_custom: dict[str, Any] = {}
    if any(isinstance(s, CustomInput) for s in workload.inputs.values()):
        if custom is None:
            raise InputError("workload has custom inputs but the definition names no custom_inputs_entrypoint")
        made_by_custom = custom({**axes, **workload.scalar_values()}, device)
        if not isinstance(made_by_custom, dict):
            raise InputError(f"custom_inputs_entrypoint returned {type(made_by_custom).__name__}, expected a dict")
    values: list[Any] = []
    for name in definition.inputs:
        given = workload.inputs.get(name)
        if isinstance(given, ScalarInput):
            values.append(given.value)
        elif isinstance(given, SafetensorsInput):
            values.append(blobs[name].to(device))
        elif isinstance(given, CustomInput):
            if name not in made_by_custom:
                raise InputError(f"custom_inputs_entrypoint did not return input '{name}'")
            value = made_by_custom[name]
            values.append(value.to(device) if isinstance(value, torch.Tensor) else value)
        else:
            values.append(_random_input(definition, name, axes, device))
    return values


def _random_input(definition: Definition, name: str, axes: dict[str, int], device: torch.device) -> Any:
    spec = definition.inputs[name]
    dtype = torch_dtype(spec.dtype)
    shape = definition.shape_of(spec, axes)
    if shape is None:  # a Python scalar
        return random_tensor((), dtype, device).item()
    value = heuristic_tensor(name, shape, dtype, device, spec.description)
    if value is None:
        value = random_tensor(shape, dtype, device)
    if definition.op_type == "sampling" and name == "probs":
        value = torch.softmax(value, dim=-1)
    return value


def allocate_outputs(definition: Definition, axes: dict[str, int], device: torch.device, poison: bool) -> list[torch.Tensor]:
    """Destination tensors. Poisoned (NaN / extreme value) so an unwritten element cannot pass."""
    outs = []
    for spec in definition.outputs.values():
        shape = definition.shape_of(spec, axes) or ()
        dtype = torch_dtype(spec.dtype)
        tensor = torch.empty(shape, dtype=dtype, device=device)
        if not poison:
            tensor.zero_()
        elif dtype.is_floating_point and dtype.itemsize > 1:
            tensor.fill_(float("nan"))
        elif dtype == torch.bool or dtype.is_floating_point:
            tensor.view(torch.uint8).fill_(0x7F if dtype.is_floating_point else 1)
        else:
            tensor.fill_(torch.iinfo(dtype).max)
        outs.append(tensor)
    return outs
