"""The arguments of timed calls: a new address for every call, contents rotated over a bank of
input sets, and a cold last-level cache before each call (neither copy nor flush is timed)."""

from __future__ import annotations

from typing import Any

import torch

from sol_execbench.platform import DeviceInfo

_POOL_STEP_BYTES = 256  # shift of each call's data pointer; keeps the alignment kernels expect
# Each pool starts on this boundary, so call i of the reference and call i of the solution see the
# same address modulo 2 MiB: a kernel whose speed depends on its inputs' alignment (a 1.5 us add read
# 4% apart, a GEMM 15 to 19 us, between two identical sides whose pools started at different offsets)
# meets the same alignments on both sides, round by round.
_POOL_BASE_ALIGN_BYTES = 2 << 20


def flat_view(src: torch.Tensor) -> tuple[torch.Tensor, int]:
    """The tensor's whole memory extent as a 1-D view, and that extent in elements."""
    if src.numel() == 0:
        return src.reshape(0), 0
    span = 1 + sum((n - 1) * s for n, s in zip(src.shape, src.stride()) if n > 1)
    return src.as_strided((span,), (1,)), span


def private_copy(args: list[Any]) -> list[Any]:
    """The arguments' tensors copied to memory of their own, shapes and strides kept."""
    return [torch.empty_strided(a.size(), a.stride(), dtype=a.dtype, device=a.device).copy_(a)
            if isinstance(a, torch.Tensor) else a for a in args]


class FreshArgs:
    """Arguments at a new address for every call, contents rotated over a bank of input sets.

    ``bank[0]`` fixes the layout; every set must match its shapes, strides and dtypes. Each
    tensor argument gets a pool ``span + (slots - 1) * step`` elements long; call ``i`` copies
    set ``i % len(bank)`` into offset ``(i % slots) * step`` and gets a view with the original
    shape and strides. Chosen calls can be given a set of their own (``substitute``: the audited
    calls), some of its tensors passed as they are (guarded destination outputs).

    ``share_pools_of``: the other side's arguments. Where an argument has the same layout there,
    its pool is that side's pool, so call ``i`` of both sides reads its inputs at the same
    addresses, not only the same alignments: a memory-bound kernel's time depends on where its
    data lies in the device's memory (identical RMSNorm kernels read 1.7 to 2.7% apart, steadily
    within a process, from pools of their own). Every call writes its contents before it runs, and
    the sides' calls never overlap, so neither side sees what the other left there.
    """

    def __init__(self, bank: list[list[Any]], slots: int, share_pools_of: FreshArgs | None = None):
        first = [v.contiguous() if isinstance(v, torch.Tensor) and any(s < 0 for s in v.stride()) else v
                 for v in bank[0]]
        self._bank = [first] + [s for s in bank[1:] if self._same_layout(first, s)]
        self._slots, self.calls_made = max(1, slots), 0
        self._substitutes: dict[int, tuple[list[Any], frozenset[int]]] = {}
        self._pools: list[tuple[torch.Tensor, int, int] | None] = []
        # Harness-side views, made once (a torch view costs microseconds of host time per call):
        # each source set's tensors as flat extents, each pool slot's destination. The views the
        # solution receives are made new on every call, so nothing it does to one reaches another.
        self._flat_sources: dict[int, tuple[list[Any], list[torch.Tensor | None]]] = {}
        self._destinations: dict[tuple[int, int], torch.Tensor] = {}
        shared = share_pools_of if share_pools_of is not None and share_pools_of._slots == self._slots else None
        for position, v in enumerate(first):
            if not isinstance(v, torch.Tensor):
                self._pools.append(None)
                continue
            if shared is not None and position < len(shared._pools) and shared._pools[position] is not None \
                    and self._same_layout([v], [shared._bank[0][position]]):
                self._pools.append(shared._pools[position])
                continue
            _, span = flat_view(v)
            step = max(1, _POOL_STEP_BYTES // v.element_size())
            pool = torch.empty(span + (self._slots - 1) * step + _POOL_BASE_ALIGN_BYTES // v.element_size(),
                               dtype=v.dtype, device=v.device)
            base = (-pool.data_ptr() % _POOL_BASE_ALIGN_BYTES) // v.element_size()
            self._pools.append((pool.narrow(0, base, pool.numel() - base), span, step))

    @staticmethod
    def _same_layout(first: list[Any], other: list[Any]) -> bool:
        if len(first) != len(other):
            return False
        for a, b in zip(first, other):
            if isinstance(a, torch.Tensor) != isinstance(b, torch.Tensor):
                return False
            if isinstance(a, torch.Tensor) and (a.shape, a.stride(), a.dtype, a.device) != (b.shape, b.stride(), b.dtype, b.device):
                return False
        return True

    @property
    def input_sets(self) -> int:
        return len(self._bank)

    @property
    def substituted_calls(self) -> list[int]:
        return sorted(self._substitutes)

    def substitute(self, call_index: int, values: list[Any], as_is: frozenset[int] = frozenset()) -> bool:
        """Give call ``call_index`` these values instead (same layout); the tensors at positions
        ``as_is`` are passed themselves, not copied into the pool. False if they do not fit."""
        if not self._same_layout(self._bank[0], values):
            return False
        self._substitutes[call_index] = (values, as_is)
        return True

    def _source(self, call_index: int) -> tuple[list[Any], frozenset[int]]:
        if call_index in self._substitutes:
            return self._substitutes[call_index]
        return self._bank[call_index % len(self._bank)], frozenset()

    def _flats(self, values: list[Any]) -> list[torch.Tensor | None]:
        cached = self._flat_sources.get(id(values))
        if cached is None or cached[0] is not values:  # kept with the list, so an id is never reused
            cached = (values, [flat_view(v)[0] if isinstance(v, torch.Tensor) else None for v in values])
            self._flat_sources[id(values)] = cached
        return cached[1]

    def _destination(self, position: int, slot: int) -> torch.Tensor:
        key = (position, slot)
        if key not in self._destinations:
            buffer, span, step = self._pools[position]
            self._destinations[key] = buffer.narrow(0, slot * step, span)
        return self._destinations[key]

    def __call__(self) -> list[Any]:
        i, self.calls_made = self.calls_made, self.calls_made + 1
        values, as_is = self._source(i)
        flats = self._flats(values)
        slot = i % self._slots
        out: list[Any] = []
        for position, (value, pool) in enumerate(zip(values, self._pools)):
            if pool is None or position in as_is:
                out.append(value)
                continue
            buffer, _, step = pool
            self._destination(position, slot).copy_(flats[position])
            out.append(buffer.as_strided(value.shape, value.stride(), buffer.storage_offset() + slot * step))
        return out


class L2Flusher:
    """Reads a buffer twice the size of the device's last-level cache before each timed call.

    Reading, not writing: a written buffer leaves the cache full of dirty lines that the timed
    kernel then has to write back to memory as it evicts them, a fixed 5 to 7 us added to every
    kernel of 20 us and more on an H100 (measured against Nsight Compute, whose cache control
    leaves the cache clean). A read evicts everything earlier calls left (written back here,
    outside the timed span) and leaves only clean lines behind.
    """

    def __init__(self, device: DeviceInfo):
        size = 2 * (device.l2_bytes or 64 * 1024 * 1024) if device.is_gpu else 0
        size = (size + 7) // 8 * 8
        self._buffer = torch.empty(size // 4, dtype=torch.int32, device=device.torch_device) if size else None

    def flush(self) -> None:
        if self._buffer is not None:
            # A maximum, not a sum: both read every byte, but torch's int32 sum (an int64 result)
            # ran at a quarter of the bandwidth (209 against 54 us for 100 MB on an H100).
            self._buffer.amax()
