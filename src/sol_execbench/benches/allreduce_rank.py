"""One rank of the all-reduce sweep (a process of its own, started by ``allreduce.run_ranks``).

Every rank runs the same plan in the same order, so the collectives match. For each buffer kind,
size and placement: one checked call (each rank's input is ``rank + 1 + (i % 7)``, the exact sum
is known), then ``warmup`` calls and ``iterations`` timed calls: between two CUDA events on the
current stream on a GPU, by the host clock on the CPU (``_measure``). The slowest rank's time and the largest error are reduced across ranks
(MAX) and rank 0 appends one JSON line per measurement to the result file."""

from __future__ import annotations

import contextlib
import datetime
import json
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Iterator

SUM = "sum"


@dataclass(frozen=True)
class RankPlan:
    ranks: int
    backend: str  # nccl | gloo
    on_gpu: bool
    port: int
    sizes: tuple[int, ...]
    buffer_kinds: tuple[str, ...]
    warmup: int
    iterations: int
    result_path: str
    timeout_s: float


class Unavailable(Exception):
    """This buffer kind cannot run here; the message says why."""


def _record(plan: RankPlan, rank: int, record: dict[str, Any]) -> None:
    if rank == 0:
        with open(plan.result_path, "a", encoding="utf-8") as out:
            out.write(json.dumps(record) + "\n")


class Ops:
    """The collectives one buffer kind times: ``in_place(x)`` and ``out_of_place(x) -> y``, and
    ``alloc(count)`` for its buffers (None where a placement does not exist for the kind)."""

    def __init__(self, alloc: Callable[[int], Any], in_place: Callable[[Any], Any] | None,
                 out_of_place: Callable[[Any], Any] | None, per_size: Callable[[int], Any] | None = None,
                 after_size: Callable[[], Any] | None = None):
        self.alloc, self.in_place, self.out_of_place = alloc, in_place, out_of_place
        self.per_size = per_size or (lambda _count: contextlib.nullcontext())
        self.after_size = after_size or (lambda: None)


def _regular(torch: Any, dist: Any, device: Any) -> Ops:
    import torch.distributed._functional_collectives as fc

    group = dist.group.WORLD

    def out_of_place(x: Any) -> Any:
        return fc.wait_tensor(fc.all_reduce(x, SUM, group))

    return Ops(lambda count: torch.empty(count, dtype=torch.float32, device=device),
               lambda x: dist.all_reduce(x), out_of_place)


def _nccl_mem_pool(torch: Any, dist: Any, device: Any, on_gpu: bool) -> Ops:
    if not on_gpu:
        raise Unavailable("NCCL memory pool registration needs GPUs (this sweep runs gloo on the CPU)")
    if not (hasattr(torch.cuda, "MemPool") and hasattr(torch.cuda, "use_mem_pool")):
        raise Unavailable(f"torch {torch.__version__} has no torch.cuda.MemPool/use_mem_pool")
    backend = dist.group.WORLD._get_backend(device)
    if not (hasattr(backend, "mem_allocator") and hasattr(backend, "register_mem_pool")):
        raise Unavailable(f"torch {torch.__version__}: the NCCL process group has no mem_allocator/register_mem_pool")
    pool = torch.cuda.MemPool(backend.mem_allocator)
    regular = _regular(torch, dist, device)

    @contextlib.contextmanager
    def per_size(_count: int) -> Iterator[None]:
        # Buffers and the functional collective's outputs come from the pool, registered with NCCL
        # once the first call has allocated them; deregistered before the next size.
        with torch.cuda.use_mem_pool(pool):
            yield

    def alloc(count: int) -> Any:  # inside per_size's use_mem_pool: a nested one is refused ("already recording")
        x = torch.empty(count, dtype=torch.float32, device=device)
        regular.out_of_place(x)  # allocates the output block the timed calls reuse
        backend.register_mem_pool(pool)
        return x

    return Ops(alloc, regular.in_place, regular.out_of_place, per_size, lambda: backend.deregister_mem_pool(pool))


def _symm_mem(torch: Any, dist: Any, device: Any, on_gpu: bool, shot: str) -> Ops:
    if not on_gpu:
        raise Unavailable("symmetric memory needs GPUs (this sweep runs gloo on the CPU)")
    try:
        import torch.distributed._symmetric_memory as symm_mem

        op = torch.ops.symm_mem.one_shot_all_reduce if shot == "one" else torch.ops.symm_mem.two_shot_all_reduce_
    except (ImportError, AttributeError, RuntimeError) as exc:
        raise Unavailable(f"torch {torch.__version__} has no symmetric-memory {shot}-shot all-reduce ({exc})") from None
    group_name = dist.group.WORLD.group_name
    enable = getattr(symm_mem, "enable_symm_mem_for_group", None)
    if enable is not None:  # needed before rendezvous up to torch 2.6; a no-op later
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            enable(group_name)

    def alloc(count: int) -> Any:
        x = symm_mem.empty(count, dtype=torch.float32, device=device)
        symm_mem.rendezvous(x, group_name)
        return x

    if shot == "one":  # one-shot reads every peer's buffer and writes a fresh output
        return Ops(alloc, None, lambda x: op(x, SUM, group_name))
    return Ops(alloc, lambda x: op(x, SUM, group_name), None)


def _cupy_nccl(torch: Any, dist: Any, device: Any, on_gpu: bool, rank: int, ranks: int) -> Ops:
    if not on_gpu or torch.version.hip is not None:
        raise Unavailable("the CuPy NCCL reference needs NVIDIA GPUs")
    try:
        from cupy.cuda import nccl
    except ImportError as exc:
        raise Unavailable(f"CuPy is not installed ({exc}); pip install cupy-cuda12x for the direct-launch reference") \
            from None
    holder = [nccl.get_unique_id() if rank == 0 else None]
    dist.broadcast_object_list(holder, src=0)
    comm = nccl.NcclCommunicator(ranks, holder[0], rank)

    def launch(x: Any, y: Any) -> Any:
        comm.allReduce(x.data_ptr(), y.data_ptr(), x.numel(), nccl.NCCL_FLOAT32, nccl.NCCL_SUM,
                       torch.cuda.current_stream().cuda_stream)
        return y

    def out_of_place(x: Any) -> Any:
        return launch(x, torch.empty_like(x))

    return Ops(lambda count: torch.empty(count, dtype=torch.float32, device=device), lambda x: launch(x, x),
               out_of_place)


def _ops_for(kind: str, torch: Any, dist: Any, device: Any, plan: RankPlan, rank: int) -> Ops:
    if kind == "regular":
        return _regular(torch, dist, device)
    if kind == "nccl_mem_pool":
        return _nccl_mem_pool(torch, dist, device, plan.on_gpu)
    if kind in ("symm_mem_one_shot", "symm_mem_two_shot"):
        return _symm_mem(torch, dist, device, plan.on_gpu, "one" if kind.endswith("one_shot") else "two")
    if kind == "cupy_nccl":
        return _cupy_nccl(torch, dist, device, plan.on_gpu, rank, plan.ranks)
    raise ValueError(f"unknown buffer kind {kind}")


def _fill(torch: Any, x: Any, rank: int) -> None:
    pattern = torch.arange(x.numel(), device=x.device, dtype=torch.int64).remainder_(7).to(torch.float32)
    x.copy_(pattern + (rank + 1))


def _expected(torch: Any, count: int, ranks: int, device: Any) -> Any:
    pattern = torch.arange(count, device=device, dtype=torch.int64).remainder_(7).to(torch.float32)
    return pattern * ranks + ranks * (ranks + 1) / 2


def _measure(torch: Any, plan: RankPlan, call: Callable[[Any], Any], x: Any, rank: int) -> tuple[float, float]:
    """(seconds per call, max abs error of the checked call) on this rank.

    On a GPU the timed calls lie between two CUDA events on the current stream, so the time is the
    device's from the first call's start to the last call's end, whatever the host did meanwhile.
    Every buffer kind's call enqueues on the current stream or makes it wait for its own:
    ``dist.all_reduce`` (``async_op=False``) makes the current stream wait on NCCL's stream, the
    functional collective's ``wait_tensor`` does the same, the symmetric-memory ops launch on the
    current stream and the CuPy launch is given ``torch.cuda.current_stream()``. So the end event
    completes only after the last call has. On the CPU (gloo, which blocks until done) the host clock
    between the first call and the return of the last is the time."""
    sync = torch.cuda.synchronize if plan.on_gpu else (lambda: None)
    _fill(torch, x, rank)
    out = call(x)
    result = x if out is None else out
    sync()
    error = float((result - _expected(torch, x.numel(), plan.ranks, x.device)).abs().max().item())
    x.zero_()  # repeated in-place sums of the pattern would overflow; the values do not change the time
    for _ in range(plan.warmup):
        call(x)
    sync()
    if plan.on_gpu:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()  # on the current stream
        for _ in range(plan.iterations):
            call(x)
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3 / plan.iterations, error  # elapsed_time is in ms
    began = time.perf_counter()
    for _ in range(plan.iterations):
        call(x)
    return (time.perf_counter() - began) / plan.iterations, error


def _sweep_kind(torch: Any, dist: Any, device: Any, plan: RankPlan, rank: int, kind: str) -> None:
    try:
        ops = _ops_for(kind, torch, dist, device, plan, rank)
    except Unavailable as exc:
        _record(plan, rank, {"skipped": True, "ranks": plan.ranks, "buffer_kind": kind, "reason": str(exc)})
        return
    placements = [(name, fn) for name, fn in (("in_place", ops.in_place), ("out_of_place", ops.out_of_place))
                  if fn is not None]
    for size in plan.sizes:
        count = size // 4
        with ops.per_size(count):
            x = ops.alloc(count)
            for placement, call in placements:
                seconds, error = _measure(torch, plan, call, x, rank)
                reduced = torch.tensor([seconds, error], dtype=torch.float64, device=device)
                dist.all_reduce(reduced, op=dist.ReduceOp.MAX)
                seconds, error = (float(v) for v in reduced.tolist())
                _record(plan, rank, {"ranks": plan.ranks, "buffer_kind": kind, "placement": placement, "bytes": size,
                                     "count": count, "seconds": seconds, "max_abs_error": error})
            del x
        ops.after_size()


def run_rank(rank: int, plan: RankPlan) -> None:
    """The entry of one rank process (``torch.multiprocessing`` passes the rank first)."""
    import torch
    import torch.distributed as dist

    device = torch.device("cuda", rank) if plan.on_gpu else torch.device("cpu")
    if plan.on_gpu:
        torch.cuda.set_device(device)
    options: dict[str, Any] = {}
    if plan.on_gpu:
        options["device_id"] = device  # binds the NCCL communicator to the rank's GPU eagerly
    dist.init_process_group(plan.backend, init_method=f"tcp://127.0.0.1:{plan.port}", rank=rank,
                            world_size=plan.ranks, timeout=datetime.timedelta(seconds=plan.timeout_s), **options)
    try:
        for kind in plan.buffer_kinds:
            try:
                _sweep_kind(torch, dist, device, plan, rank, kind)
            except Exception as exc:  # noqa: BLE001 - a kind that breaks here is reported, the next one runs
                # The same code on every rank fails alike; a rank failing alone leaves the others
                # waiting in a collective until the group's timeout ends them all.
                text = str(exc).strip().splitlines()
                _record(plan, rank, {"skipped": True, "ranks": plan.ranks, "buffer_kind": kind,
                                     "reason": f"failed: {type(exc).__name__}: {text[0][:300] if text else ''}"})
            dist.barrier()
    finally:
        dist.destroy_process_group()
