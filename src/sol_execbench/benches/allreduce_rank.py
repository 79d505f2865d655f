"""One rank of the all-reduce sweep (a process of its own, started by ``allreduce.run_ranks``).

Every rank runs the same plan in the same order, so the collectives match. First the eager pass:
for each buffer kind, size and placement, one checked call (each rank's input is
``rank + 1 + (i % 7)``, the exact sum is known), then ``warmup`` calls and ``repeats`` windows of
``iterations`` timed calls: between two CUDA events on the current stream on a GPU, by the host
clock on the CPU (``_measure``). Then, on a GPU, the graph pass over the same kinds and sizes
(``_measure_graph``): the calls captured into one CUDA graph and its replays timed alike; it comes
second so that a capture which hangs loses only graph rows. Each statistic (median window, fastest
window, median host time) and the largest error are reduced across ranks (MAX: the slowest rank's)
and rank 0 appends one JSON line per measurement to the result file."""

from __future__ import annotations

import contextlib
import datetime
import json
import statistics
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
    repeats: int = 5
    """Timed windows of ``iterations`` calls each; the median window is the measurement."""
    launches: tuple[str, ...] = ("eager",)
    """eager: the calls one by one; graph: ``iterations`` calls captured into one CUDA graph (GPU only)."""


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


@dataclass(frozen=True)
class Windows:
    """Seconds per call of each timed window: the device's (CUDA events; the host clock on the CPU)
    and the host clock's around the same window, with the checked call's largest error."""

    device: tuple[float, ...]
    host: tuple[float, ...]
    error: float

    def statistics(self) -> list[float]:
        """[median window, fastest window, median host window, error]: what the ranks reduce by MAX."""
        return [statistics.median(self.device), min(self.device), statistics.median(self.host), self.error]


def _timed_windows(torch: Any, plan: RankPlan, run_window: Callable[[], None]) -> tuple[list, list]:
    """``plan.repeats`` runs of ``run_window`` (``plan.iterations`` calls each): (device, host) seconds per call.

    On a GPU each window lies between two CUDA events on the current stream, so its device time runs
    from the first call's start to the last call's end, whatever the host did meanwhile; the host
    clock runs from just before the start event to the end event's completion. On the CPU (gloo,
    which blocks until each call is done) the host clock is both."""
    device, host = [], []
    for _ in range(plan.repeats):
        if plan.on_gpu:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            began = time.perf_counter()
            start.record()  # on the current stream
            run_window()
            end.record()
            end.synchronize()
            host.append((time.perf_counter() - began) / plan.iterations)
            device.append(start.elapsed_time(end) / 1e3 / plan.iterations)  # elapsed_time is in ms
        else:
            began = time.perf_counter()
            run_window()
            host.append((time.perf_counter() - began) / plan.iterations)
            device.append(host[-1])
    return device, host


def _check_call(torch: Any, plan: RankPlan, run: Callable[[], Any], x: Any, rank: int) -> float:
    """The largest error of one call (``run`` returns its output, None for in place) on the pattern."""
    _fill(torch, x, rank)
    out = run()
    result = x if out is None else out
    if plan.on_gpu:
        torch.cuda.synchronize()
    return float((result - _expected(torch, x.numel(), plan.ranks, x.device)).abs().max().item())


def _measure(torch: Any, plan: RankPlan, call: Callable[[Any], Any], x: Any, rank: int) -> Windows:
    """The eager calls on this rank: one checked call, ``plan.warmup`` calls, then the timed windows.

    Every buffer kind's call enqueues on the current stream or makes it wait for its own:
    ``dist.all_reduce`` (``async_op=False``) makes the current stream wait on NCCL's stream, the
    functional collective's ``wait_tensor`` does the same, the symmetric-memory ops launch on the
    current stream and the CuPy launch is given ``torch.cuda.current_stream()``. So a window's end
    event completes only after its last call has."""
    sync = torch.cuda.synchronize if plan.on_gpu else (lambda: None)
    error = _check_call(torch, plan, lambda: call(x), x, rank)
    x.zero_()  # repeated in-place sums of the pattern would overflow; the values do not change the time
    for _ in range(plan.warmup):
        call(x)
    sync()

    def window() -> None:
        for _ in range(plan.iterations):
            call(x)

    device, host = _timed_windows(torch, plan, window)
    return Windows(tuple(device), tuple(host), error)


def _capture(torch: Any, run: Callable[[], Any]) -> tuple[Any, Any]:
    """(graph, what ``run`` returned while captured). Captured on a side stream (``torch.cuda.graph``
    makes one) with thread-local capture errors, so NCCL's watchdog thread may keep querying events."""
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        out = run()
    return graph, out


def _measure_graph(torch: Any, plan: RankPlan, call: Callable[[Any], Any], x: Any, rank: int) -> Windows:
    """The graph launch on this rank (a GPU, after the eager pass made the communicators): one call
    captured alone and replayed is checked against the exact sum; then ``plan.iterations`` calls are
    captured into one graph, replayed once to warm, and ``plan.repeats`` replays are timed, each
    between CUDA events: the device's time for back-to-back calls without the host's launch gaps
    (nccl-tests' graph mode). Every rank captures the same calls, so the collectives match."""
    torch.cuda.synchronize()
    single, out = _capture(torch, lambda: call(x))

    def replay_single() -> Any:  # _check_call fills x first: captured work reads x only at replay
        single.replay()
        return out

    error = _check_call(torch, plan, replay_single, x, rank)
    x.zero_()

    def calls() -> None:
        for _ in range(plan.iterations):
            call(x)

    graph, _ = _capture(torch, calls)
    graph.replay()  # warm
    torch.cuda.synchronize()
    device, host = _timed_windows(torch, plan, graph.replay)
    del graph
    return Windows(tuple(device), tuple(host), error)


def _sweep_kind(torch: Any, dist: Any, device: Any, plan: RankPlan, rank: int, kind: str, ops: Ops,
                launch: str) -> None:
    measure = _measure if launch == "eager" else _measure_graph
    placements = [(name, fn) for name, fn in (("in_place", ops.in_place), ("out_of_place", ops.out_of_place))
                  if fn is not None]
    for size in plan.sizes:
        count = size // 4
        with ops.per_size(count):
            x = ops.alloc(count)
            for placement, call in placements:
                windows = measure(torch, plan, call, x, rank)
                reduced = torch.tensor(windows.statistics(), dtype=torch.float64, device=device)
                dist.all_reduce(reduced, op=dist.ReduceOp.MAX)
                median, fastest, host, error = (float(v) for v in reduced.tolist())
                _record(plan, rank, {"ranks": plan.ranks, "buffer_kind": kind, "placement": placement, "bytes": size,
                                     "count": count, "launch": launch, "seconds": median, "fastest_seconds": fastest,
                                     "host_seconds": host, "windows": plan.repeats, "max_abs_error": error})
            del x
        ops.after_size()


def _skip(plan: RankPlan, rank: int, kind: str, reason: str, launch: str | None) -> None:
    """A skipped configuration; ``launch`` None: the kind under every launch."""
    _record(plan, rank, {"skipped": True, "ranks": plan.ranks, "buffer_kind": kind, "launch": launch,
                         "reason": reason})


def _failure(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return f"failed: {type(exc).__name__}: {text[0][:300] if text else ''}"


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
    # A kind that breaks is reported and the next one runs. The same code on every rank fails alike;
    # a rank failing alone leaves the others waiting in a collective until the group's timeout ends them.
    try:
        made: dict[str, Ops] = {}
        for kind in plan.buffer_kinds:
            try:
                made[kind] = _ops_for(kind, torch, dist, device, plan, rank)
            except Unavailable as exc:
                _skip(plan, rank, kind, str(exc), None)
            except Exception as exc:  # noqa: BLE001 - reported as a skipped configuration
                _skip(plan, rank, kind, _failure(exc), None)
            if kind in made and "eager" in plan.launches:
                try:
                    _sweep_kind(torch, dist, device, plan, rank, kind, made[kind], "eager")
                except Exception as exc:  # noqa: BLE001 - reported as a skipped configuration
                    _skip(plan, rank, kind, _failure(exc), "eager")
            dist.barrier()
        if "graph" not in plan.launches:
            return
        for kind, ops in made.items():  # second, so that a capture that hangs loses only graph rows
            if not plan.on_gpu:
                _skip(plan, rank, kind, "CUDA graphs need GPUs (this sweep runs gloo on the CPU)", "graph")
                continue
            try:
                _sweep_kind(torch, dist, device, plan, rank, kind, ops, "graph")
            except Exception as exc:  # noqa: BLE001 - reported as a skipped configuration
                _skip(plan, rank, kind, _failure(exc), "graph")
            dist.barrier()
    finally:
        dist.destroy_process_group()
