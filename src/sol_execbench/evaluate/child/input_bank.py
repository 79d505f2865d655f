"""The input bank of the timed calls: several distinct input sets (deterministic seeds, as many as
memory and a time budget allow), so a cache keyed by content misses; FreshArgs also gives every
call a new address, so a cache keyed by pointer misses."""

from __future__ import annotations

import time
from typing import Any

import torch

from sol_execbench.schema import CustomInput, RandomInput, Workload

from . import guards
from .calls import Context, round_seed
from .inputs import make_inputs, seed_all
from .timing import flat_view

BANK_MAX_SETS = 64
BANK_TIME_BUDGET_S = 1.0
BANK_MEMORY_FRACTION = 0.2  # of free device memory (GPU), or of BANK_CPU_BYTES on the CPU
BANK_CPU_BYTES = 512 * 2**20
_BANK_SEED_OFFSET = 1_000_000  # bank seeds never coincide with correctness-round seeds


def tensor_bytes(values: list[Any]) -> int:
    return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))


def _varies(ctx: Context, workload: Workload) -> bool:
    """Whether a new seed gives new input contents (random or custom inputs, not only blobs/scalars)."""
    return any(isinstance(workload.inputs.get(n), (RandomInput, CustomInput)) or n not in workload.inputs
               for n in ctx.definition.inputs)


def input_bank(ctx: Context, workload: Workload, blobs: dict[str, torch.Tensor], first: list[Any]) -> list[list[Any]]:
    """Distinct input sets for the timed calls, none of them seen in the correctness rounds (a
    content-keyed cache must miss); ``first`` alone when new seeds give no new contents."""
    cfg = ctx.config
    if not _varies(ctx, workload):
        return [first]
    want = min(BANK_MAX_SETS, cfg.warmup_runs + cfg.iterations)
    if ctx.device.is_gpu:
        free, _ = torch.cuda.mem_get_info(ctx.device.torch_device)
        budget = int(free * BANK_MEMORY_FRACTION)
    else:
        budget = BANK_CPU_BYTES
    want = max(1, min(want, budget // max(1, tensor_bytes(first))))
    bank: list[list[Any]] = []
    began = time.perf_counter()
    for k in range(want):
        if bank and time.perf_counter() - began > BANK_TIME_BUDGET_S:
            break
        seed_all(round_seed(cfg.seed, workload.uuid, _BANK_SEED_OFFSET + k))
        bank.append(make_inputs(ctx.definition, workload, ctx.torch_device, blobs, ctx.custom_inputs_fn))
    return bank


def same_contents(a: list[Any], b: list[Any]) -> bool:
    """Whether two input sets hold the same values: tensors byte for byte (so NaN payloads match and
    dtypes without arithmetic, such as packed fp4, compare too), scalars equal."""
    for x, y in zip(a, b):
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            if x.shape != y.shape or x.dtype != y.dtype or not torch.equal(guards.tensor_bytes(x), guards.tensor_bytes(y)):
                return False
        elif x != y:
            return False
    return len(a) == len(b)


def distinct_contents(bank: list[list[Any]]) -> int:
    """How many distinct input sets the bank holds: all of them, or one where a second seed gave
    the same contents as the first (a custom generator that ignores the seed)."""
    return 1 if len(bank) > 1 and same_contents(bank[0], bank[1]) else len(bank)


def scaled_down(value: Any, exponent: int) -> tuple[Any, bool]:
    """A floating-point tensor times 2**-exponent, same shape and strides, and whether any value
    changed. Scaling by a power of two is exact (subnormals aside) and moves toward zero: zeros,
    signs, infinities, NaN and the order of the values stay, and a float that holds an index or a
    length stays in range. Dtypes without arithmetic here (packed fp4) are left as they are."""
    if not isinstance(value, torch.Tensor) or not value.is_floating_point() or value.numel() == 0:
        return value, False
    flat, span = flat_view(value)  # the whole memory extent: the result keeps the layout
    try:
        wide = flat.float()
        if not bool(((wide != 0) & torch.isfinite(wide)).any()):
            return value, False
        scaled = (wide * 2.0 ** -exponent).to(value.dtype)
    except (RuntimeError, TypeError, NotImplementedError):
        return value, False
    return scaled.as_strided(value.shape, value.stride()), True


