"""Checks against solutions that tamper with the measurement (see docs/security.md).

- integrity: every function, method and constant of the harness's own modules, and the timer,
  profiler, stream/event/graph and tensor entry points it relies on, recorded before solution
  code is imported; a replaced one is REWARD_HACK.
- outputs: plain ``torch.Tensor`` only (no subclasses, no lazy proxies), sharing no memory with
  an input (not the input, not a view of it).
- inputs: an exact-change checksum before and after each solution call (inputs are read-only).
- destination outputs: guard bands with random canaries before and after each output, checked
  after each call (an out-of-bounds write is REWARD_HACK).
"""

from __future__ import annotations

import importlib
import inspect
import secrets
import sys
from typing import Any

import torch

# Classes whose attributes (resolved through the MRO, so a shadowing assignment is seen) are
# watched, and modules whose callables are watched.
_WATCHED_CLASSES = [("torch.cuda", "Event"), ("torch.cuda", "Stream"), ("torch.cuda", "CUDAGraph"),
                    ("torch.cuda", "graph"), ("torch.profiler", "profile"), ("torch.autograd.profiler", "record_function"),
                    ("threading", "Thread"), ("pydantic", "BaseModel")]
_WATCHED_MODULES = ["time", "json", "hmac", "torch.cuda", "torch.profiler", "torch.autograd.profiler"]
_WATCHED_ATTRIBUTES = [("threading", "_start_new_thread"), ("threading", "_start_joinable_thread"),
                       ("_thread", "start_new_thread"), ("os", "write"), ("torch", "equal"), ("torch", "isfinite"),
                       ("torch", "empty"), ("torch", "arange")]
_TENSOR_METHODS = ["copy_", "clone", "zero_", "fill_", "as_strided", "narrow", "view", "reshape", "contiguous", "to",
                   "sum", "abs", "untyped_storage", "data_ptr", "element_size", "numel", "__getitem__", "__setitem__",
                   "__ne__", "__eq__"]
_KEPT_DUNDERS = {"__call__", "__init__", "__enter__", "__exit__"}
_HARNESS_PREFIXES = ("sol_execbench.evaluate", "sol_execbench.schema", "sol_execbench.platform", "sol_execbench.build")
GUARD_BYTES = 4096  # each side of a destination output; a multiple of 512 keeps outputs aligned
_MISSING = object()

Held = tuple[str, Any, str, Any]  # (label, live namespace mapping, name, the object found there or _MISSING)


def _resolution(cls: type, name: str) -> list[tuple[type, Any, Any]]:
    """Where ``cls.name`` resolves along the MRO, as (class, its namespace, the object found there
    or _MISSING): each class up to the definer must keep not defining it (a shadowing assignment)
    and the definer must keep its object."""
    held = []
    for klass in cls.__mro__:
        namespace = vars(klass)
        value = namespace.get(name, _MISSING)
        held.append((klass, namespace, value))
        if value is not _MISSING:
            break
    return held


def _behaviour(cls: type, name: str) -> bool:
    """Whether ``cls.name`` is code (a function, method, property or other descriptor) rather than
    plain data. A library's own state on its classes changes as it runs: ``torch.cuda.graph``
    keeps a lazily made ``default_capture_stream``, set by the first capture (the harness's)."""
    try:
        value = inspect.getattr_static(cls, name)
    except AttributeError:
        return False
    return callable(value) or hasattr(type(value), "__get__")


def _public_names(cls: type) -> list[str]:
    return [n for n in dir(cls) if not (n.startswith("__") and n not in _KEPT_DUNDERS)]


def _harness_modules() -> list[str]:
    return sorted(name for name in list(sys.modules) if name.startswith(_HARNESS_PREFIXES))


class IntegritySnapshot:
    """Identities of everything watched, taken at construction (before solution code runs).

    Checking is a dictionary lookup and an identity comparison per entry, so it runs after every
    call. ``check`` is a bound method taken at construction, and the builtins it uses are bound as
    its defaults, so replacing the class's method or a builtin later does not change what the
    harness calls.
    """

    def __init__(self) -> None:
        self._held: list[Held] = []
        # (id of the class or module dict, name) already held: the members every schema model
        # inherits from pydantic's BaseModel resolve to BaseModel's own namespace, once per model
        # (7,089 entries, 4,076 of them distinct, in an evaluation child).
        self._keys: set[tuple[int, str]] = set()
        # The named classes and attributes first, so that a shared entry carries their label.
        for modname, clsname in _WATCHED_CLASSES:
            cls = getattr(importlib.import_module(modname), clsname, None)
            if isinstance(cls, type):
                for name in _public_names(cls):
                    if _behaviour(cls, name):
                        self._hold_resolution(f"{modname}.{clsname}.{name}", cls, name)
        for modname, name in _WATCHED_ATTRIBUTES:
            module = importlib.import_module(modname)
            if hasattr(module, name):
                self._hold(f"{modname}.{name}", vars(module), vars(module), name, vars(module)[name])
        for name in _TENSOR_METHODS:
            self._hold_resolution(f"torch.Tensor.{name}", torch.Tensor, name)
        for modname in _harness_modules():
            self._watch_module(modname, callables_only=False, own_classes=True)
        for modname in _WATCHED_MODULES:
            self._watch_module(modname, callables_only=True, own_classes=False)
        self.check = self._tampered

    def _hold(self, label: str, owner: Any, namespace: Any, name: str, value: Any) -> None:
        key = (id(owner), name)
        if key not in self._keys:
            self._keys.add(key)
            self._held.append((label, namespace, name, value))

    def _hold_resolution(self, label: str, cls: type, name: str) -> None:
        for klass, namespace, value in _resolution(cls, name):
            self._hold(label, klass, namespace, name, value)

    def _watch_module(self, modname: str, callables_only: bool, own_classes: bool) -> None:
        module = sys.modules.get(modname) or importlib.import_module(modname)
        namespace = vars(module)
        for name, value in list(namespace.items()):
            if name.startswith("__") or inspect.ismodule(value) or (callables_only and not callable(value)):
                continue
            self._hold(f"{modname}.{name}", namespace, namespace, name, value)
            if own_classes and isinstance(value, type) and getattr(value, "__module__", None) == modname:
                for member in _public_names(value):  # inherited too: Trace.model_dump = ... shadows BaseModel's
                    self._hold_resolution(f"{modname}.{name}.{member}", value, member)

    def _tampered(self, _sorted: Any = sorted, _set: Any = set) -> list[str]:
        changed = [label for label, namespace, name, obj in self._held if namespace.get(name, _MISSING) is not obj]
        return _sorted(_set(changed))

    def tampered(self) -> list[str]:
        return self.check()


# -- outputs -------------------------------------------------------------------------------------

def foreign_output_types(outputs: list[Any]) -> list[str]:
    """Type names of outputs that are not exactly ``torch.Tensor``."""
    return [type(t).__name__ for t in outputs if type(t) is not torch.Tensor]


def _extent(t: torch.Tensor) -> tuple[str, int, int] | None:
    storage = t.untyped_storage()
    if storage.nbytes() == 0:
        return None
    return str(t.device), storage.data_ptr(), storage.data_ptr() + storage.nbytes()


def shared_memory(outputs: list[Any], output_names: list[str], inputs: list[Any], input_names: list[str]) -> list[str]:
    """'output y shares memory with input x' for every output whose storage overlaps an input's."""
    found = []
    input_extents = [(n, _extent(v)) for n, v in zip(input_names, inputs) if isinstance(v, torch.Tensor)]
    for out_name, out in zip(output_names, outputs):
        if not isinstance(out, torch.Tensor) or (extent := _extent(out)) is None:
            continue
        for in_name, other in input_extents:
            if other is not None and other[0] == extent[0] and other[1] < extent[2] and extent[1] < other[2]:
                found.append(f"output '{out_name}' shares memory with input '{in_name}'")
    return found


# -- inputs --------------------------------------------------------------------------------------

_CHUNK_WORDS = 1 << 22
_MASK64 = (1 << 64) - 1
_positions: dict[torch.device, torch.Tensor] = {}  # 1..._CHUNK_WORDS as int64, per device


def tensor_bytes(t: torch.Tensor) -> torch.Tensor:
    """The tensor's values as raw bytes, 1-D (any dtype, packed fp4 and 0-d included)."""
    return t.detach().contiguous().reshape(-1).view(torch.uint8)


def _words(t: torch.Tensor) -> torch.Tensor:
    """The tensor's bytes as 32-bit words where they divide evenly, else as bytes."""
    flat = tensor_bytes(t)
    if flat.numel() % 4 == 0:
        try:
            return flat.view(torch.int32)
        except RuntimeError:  # a storage offset that is not a multiple of 4 bytes
            pass
    return flat


def _checksum_total(t: torch.Tensor) -> torch.Tensor:
    """The position-weighted sum of ``tensor_checksum`` as a 0-d int64 tensor on the tensor's device.

    Words are multiplied by int64 positions as they are read (type promotion, no int64 copy of the
    tensor first), chunk by chunk, and the chunks' sums are combined once at the end: three kernels
    a chunk rather than seven. The inputs of the larger RMSNorm workloads (70 to 120 MB, 5 to 8 chunks
    of 4M words) are checksummed three times per correctness round, and the kernels' launches, not
    their bandwidth, were what that cost."""
    words = _words(t)
    positions = _positions.get(words.device)
    if positions is None:
        positions = _positions[words.device] = torch.arange(1, _CHUNK_WORDS + 1, dtype=torch.int64,
                                                            device=words.device)
    if words.numel() <= _CHUNK_WORDS:
        return (words * positions[:words.numel()]).sum()
    weighted, plain = [], []
    for start in range(0, words.numel(), _CHUNK_WORDS):
        part = words[start:start + _CHUNK_WORDS]
        weighted.append((part * positions[:part.numel()]).sum())
        plain.append(part.sum(dtype=torch.int64))
    # On the device: a list copied there would wait for the chunks' kernels (a pageable copy).
    offsets = torch.arange(0, words.numel(), _CHUNK_WORDS, dtype=torch.int64, device=words.device)
    return torch.stack(weighted).sum() + (offsets * torch.stack(plain)).sum()  # int64 wraps: modulo 2**64


def tensor_checksum(t: torch.Tensor) -> int:
    """Position-weighted sum of the tensor's words: any single change alters it (not cryptographic).

    Word i (from 1) weighs i, so a change by d at i moves the sum by d * i modulo 2**64. Computed
    on the tensor's device with one synchronisation (per-chunk host reads and byte-wise weights
    cost 1 s of a 24 s evaluation)."""
    return checksums([t])[0] or 0


def checksums(values: list[Any]) -> list[int | None]:
    """``tensor_checksum`` of every tensor in ``values`` (None for the rest), read back from each
    device with one synchronisation for all of them rather than one per tensor."""
    found: list[int | None] = [None] * len(values)
    pending: dict[torch.device, list[tuple[int, torch.Tensor]]] = {}
    for i, v in enumerate(values):
        if isinstance(v, torch.Tensor):
            if v.numel() == 0:
                found[i] = 0
            else:
                pending.setdefault(v.device, []).append((i, _checksum_total(v)))
    for totals in pending.values():
        for (i, _), value in zip(totals, torch.stack([t for _, t in totals]).tolist()):
            found[i] = value & _MASK64
    return found


def changed(names: list[str], before: list[int | None], after: list[int | None]) -> list[str]:
    return [n for n, b, a in zip(names, before, after) if b is not None and b != a]


# -- destination outputs with guard bands ---------------------------------------------------------

class GuardedOutputs:
    """Destination outputs, each inside a buffer with random canary bands before and after it."""

    def __init__(self, outputs: list[torch.Tensor], names: list[str]):
        self.names = names
        self.tensors: list[torch.Tensor] = []
        self._buffers: list[tuple[torch.Tensor, int]] = []
        device = outputs[0].device if outputs else torch.device("cpu")
        generator = torch.Generator().manual_seed(secrets.randbits(63))
        self._canary = torch.randint(0, 256, (GUARD_BYTES,), dtype=torch.uint8, generator=generator).to(device)
        for out in outputs:
            nbytes = out.numel() * out.element_size()
            buffer = torch.empty(2 * GUARD_BYTES + nbytes, dtype=torch.uint8, device=out.device)
            buffer[:GUARD_BYTES].copy_(self._canary)
            buffer[GUARD_BYTES + nbytes:].copy_(self._canary)
            view = buffer[GUARD_BYTES:GUARD_BYTES + nbytes].view(out.dtype).reshape(out.shape)
            view.copy_(out)  # the poison the caller filled in
            self.tensors.append(view)
            self._buffers.append((buffer, nbytes))

    def violations(self) -> list[str]:
        found = []
        for name, (buffer, nbytes) in zip(self.names, self._buffers):
            before = int((buffer[:GUARD_BYTES] != self._canary).sum())
            after = int((buffer[GUARD_BYTES + nbytes:] != self._canary).sum())
            if before or after:
                found.append(f"output '{name}': {before} byte(s) of the {GUARD_BYTES}-byte guard band before it and "
                             f"{after} after it were overwritten")
        return found
