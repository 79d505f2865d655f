"""FLOPs of a reference, counted by running it on meta tensors (shapes and dtypes, no data).

Matmul, convolution and attention FLOPs come from PyTorch's FLOP counter formulas
(``torch.utils.flop_counter.flop_registry``, the table ``FlopCounterMode`` uses), attributed to
the dtype of the op's first tensor input. Every other op is vector work: a pointwise op costs one
FLOP per output element, a reduction one per input element, softmax five per input element (max,
subtract, exp, sum, divide); dtype conversions, copies and views are free.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry

aten = torch.ops.aten

_FREE = {aten._to_copy, aten.copy_, aten.clone, aten.copy, aten.lift_fresh, aten.fill_, aten.fill, aten.zero_,
         aten.zeros_like, aten.ones_like, aten.empty_like, aten.full_like, aten.masked_fill, aten.masked_fill_,
         aten.where}
_REDUCTIONS = {aten.sum, aten.mean, aten.amax, aten.amin, aten.max, aten.min, aten.prod, aten.var, aten.std,
               aten.var_mean, aten.std_mean, aten.norm, aten.linalg_vector_norm, aten.logsumexp, aten.cumsum,
               aten.cumprod, aten.argmax, aten.argmin, aten.any, aten.all}
_SOFTMAX_FLOPS_PER_ELEMENT = 5
_SOFTMAX = {aten._softmax, aten._log_softmax, aten.softmax, aten.log_softmax}


@dataclass(frozen=True)
class FlopCounts:
    matrix: dict[torch.dtype, int]  # dtype of the operands -> FLOPs
    vector: dict[torch.dtype, int]  # dtype of the result -> FLOPs


def _first_tensor(values: Any) -> torch.Tensor | None:
    for value in values:
        if isinstance(value, torch.Tensor):
            return value
        if isinstance(value, (list, tuple)):
            found = _first_tensor(value)
            if found is not None:
                return found
    return None


class _OpCounter(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.matrix: Counter[torch.dtype] = Counter()
        self.vector: Counter[torch.dtype] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001 - torch's protocol
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        packet = func.overloadpacket
        first_in = _first_tensor(args)
        first_out = _first_tensor([out])
        if packet in flop_registry and first_in is not None:
            self.matrix[first_in.dtype] += int(flop_registry[packet](*args, **kwargs, out_val=out))
        elif packet in _FREE or first_out is None:
            pass
        elif packet in _SOFTMAX and first_in is not None:
            self.vector[first_out.dtype] += _SOFTMAX_FLOPS_PER_ELEMENT * first_in.numel()
        elif packet in _REDUCTIONS and first_in is not None:
            self.vector[first_out.dtype] += first_in.numel()
        elif torch.Tag.pointwise in func.tags:
            self.vector[first_out.dtype] += first_out.numel()
        return out


def count_flops(run: Callable[..., Any], args: list[Any]) -> FlopCounts:
    """Run ``run(*args)`` (meta tensors and Python scalars) and count its FLOPs.

    Factory calls inside the reference (``torch.arange``, ``torch.zeros``) land on the meta device
    too. Raises whatever the reference raises (``.item()`` and data-dependent shapes cannot run
    without data)."""
    counter = _OpCounter()
    with torch.device("meta"), torch.no_grad(), counter:
        run(*args)
    return FlopCounts(dict(counter.matrix), dict(counter.vector))
