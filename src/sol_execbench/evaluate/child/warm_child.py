"""A warm child: start up (torch, device, common kernels), then wait for one job from the pool.

Started by the pool server with ``SOL_EXECBENCH_WARM_SOCKET`` naming the Unix socket to listen
on; the socket appears when the child is warm. The evaluation that takes it hands over the job
(``handoff``), and the child runs it as an evaluation child (``driver.main``).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any

from sol_execbench.platform.host import listening_socket

from . import gpu_quiet
from .. import launch_level, phases
from ..triton_launchers import MAX_PER_RUN, WantedWatch, store_dir
from .handoff import adopt_job, import_for_job, receive_job


# Both named by the parent side as well (parent/child_env.py, parent/warm_pool.py), which this side may not import.
POOL_PIPE_ENV = "SOL_EXECBENCH_POOL_PIPE"
WARM_SOCKET_ENV = "SOL_EXECBENCH_WARM_SOCKET"


def _warm_up(device_spec: str | None) -> Any:
    """Set up what every evaluation process needs once before its first workload: the imports,
    the device context, the RNG, BLAS, reductions, the profiler and Triton; the device's description."""
    from sol_execbench.platform import current

    info = current(device_spec)
    if not info.is_gpu:
        os.environ["TRITON_INTERPRET"] = "1"  # Triton reads it at import; the child sets it too
    import_ahead(info.is_gpu)
    _warm_device(info)
    return info


def _warm_device(info) -> None:
    """The device part of the warm-up (``_device_steps``), once the imports are made."""
    if not info.is_gpu:
        for step in _device_steps(info):
            step()
        return
    # The device work runs in steps under gpu_quiet's exclusive lock, so it never overlaps an
    # evaluation's timed passes, and an evaluation reaching them waits for one step, not the whole
    # warm-up. Holding the lock, the child is marked idle: it launches nothing after this warm-up,
    # and nothing while an evaluation measures. ``exclusive`` waits a bounded time; without the lock
    # a step may overlap timed passes, and the child is marked idle only once the warm-up is over.
    with gpu_quiet.exclusive(info.index) as turn:
        for index, step in enumerate(_device_steps(info)):
            if index:  # between steps only: after the last, the child is warm and the lock released
                turn.between_steps()
            if turn.alone:
                gpu_quiet.mark_idle()
            else:
                gpu_quiet.unmark_idle()
            step()
    _warm_clock_reader(info)
    gpu_quiet.mark_idle()


def import_ahead(is_gpu: bool) -> None:
    """Import what an evaluation imports and what the device warm-up imports (the profiler's
    torch._dynamo, Triton's code generator), and compute Triton's cache key (a hash of its sources
    and libtriton, 0.4 s), before the exclusive lock is taken: seconds of CPU that need no device."""
    import_for_job(is_gpu)
    if is_gpu:
        import torch._dynamo  # noqa: F401  (the profiler imports it when it first starts)
    try:
        import triton  # noqa: F401

        if is_gpu:
            from triton.runtime.cache import triton_key

            from . import _triton_warm  # noqa: F401  (defines the warm-up kernel: Triton's front end)

            triton_key()  # cached for the process: the warm-up kernel's compile, and the job's, reuse it
            _build_launchers(limit=MAX_PER_RUN)
    except Exception:  # noqa: BLE001  (no Triton, or it does not import here: the solution will say so)
        pass


_launchers: WantedWatch | None = None


def _build_launchers(limit: int = 1) -> None:
    """Build the Triton launchers earlier runs wanted (``evaluate/triton_launchers.py``), on the CPU,
    while no job is here: at the start, and whenever the wanted list changes while the child waits
    (one a look then, so that an evaluation taking the child waits for one build at most)."""
    global _launchers
    try:
        if _launchers is None:
            _launchers = WantedWatch(store_dir())
        built = _launchers.build_new(limit)
    except Exception:  # noqa: BLE001  (the job builds what is missing itself, as without the store)
        return
    if built:
        phases.phase(f"built {built} Triton launcher(s) earlier runs wanted")


def _warm_clock_reader(info) -> None:
    """One clock reading, as the evaluation takes at its start, so that the clock library's own
    start-up (``nvmlInit``, once per process) is over before a job arrives. It launches no device
    work."""
    from sol_execbench.platform.clocks import ClockReader

    from .clock_watch import device_uuid

    ClockReader(info.vendor, info.index, device_uuid(info)).read()  # never raises (a probe)


def _device_steps(info) -> list[Callable[[], None]]:
    """The device warm-up, in steps of at most a few tenths of a second (an evaluation that waits
    for the device waits for one): the device made current (its context created), on an NVIDIA GPU
    the process's launch level judged, each dtype's kernels, a first timed measurement, a Triton launch."""
    steps: list[Callable[[], None]] = [functools.partial(_use_device, info)]
    if info.vendor == "cuda" and launch_level.selection_enabled():
        steps.append(functools.partial(_keep_launch_level, info))
    steps += [functools.partial(_warm_dtype, info, name) for name in ("float32", "bfloat16", "float16")]
    if info.is_gpu:
        steps += [functools.partial(_warm_device_timing, info), functools.partial(_warm_triton, info)]
    return steps


def _use_device(info) -> None:
    import torch

    from sol_execbench.platform import make_current

    make_current(info)  # the evaluation's device, as run_job makes it; here, under the exclusive hold
    torch.randint(0, 10, (16,), device=info.torch_device)
    if info.is_gpu:
        torch.cuda.Event(enable_timing=True).record()
        torch.cuda.synchronize(info.torch_device)


def _keep_launch_level(info) -> None:
    """Measure this process's launch level (``evaluate/launch_level.py``) and exit before the rest
    of the warm-up when it is slower than the device's lowest: the pool starts another child."""
    from .clock_watch import device_uuid

    uuid = device_uuid(info)
    if uuid is None:
        return
    try:
        probe = launch_level.probe_us(info.torch_device)
        launch_level.note(probe)  # the job's traces say it
        verdict = launch_level.decide(launch_level.history_path(uuid), probe)
    except Exception:  # noqa: BLE001  (a probe that fails keeps the child, as without the selection)
        return
    phases.phase(f"launch level {verdict.probe_us:.3f} us a queued kernel (floor {verdict.floor_us}): "
                 f"{'kept' if verdict.kept else 'turned away'}, {verdict.why}")
    if not verdict.kept:
        gpu_quiet.unmark_idle()
        os._exit(launch_level.EXIT_SLOW_LAUNCH)


def _warm_dtype(info, dtype_name: str) -> None:
    """A matrix product, a norm, a finiteness check and a largest difference in one dtype."""
    import torch

    a = torch.randn(64, 64, device=info.torch_device, dtype=getattr(torch, dtype_name))
    b = (a @ a).float()
    torch.linalg.vector_norm(b)
    torch.isfinite(b).all()
    (b - b).abs().max().item()


def _warm_triton(info) -> None:
    try:
        from ._triton_warm import launch_once

        launch_once(info.torch_device)
    except Exception:  # noqa: BLE001  (no Triton, or it cannot compile here: the solution will say so)
        pass


def _warm_device_timing(info) -> None:
    """Time a tiny kernel as an evaluation does, so that the profiler's one-off costs in a process
    (CUPTI start-up, the priming recording, the torch._dynamo import the profiler makes) are paid
    before a job arrives."""
    import torch

    from .timing import FreshArgs, L2Flusher, SideCalls, TimingPlan, measure

    values = [torch.ones(1024, device=info.torch_device)]
    try:
        sides = [SideCalls(name, lambda x: x + 1, FreshArgs([values], slots=8)) for name in ("solution", "reference")]
        measure(sides[0], sides[1], TimingPlan(warmup=1, rounds=2, device=info, flusher=L2Flusher(info), method="device"))
    except Exception:  # noqa: BLE001  (a warm-up that fails leaves its cost to the first workload)
        pass


def main(argv: list[str]) -> None:
    socket_path = os.environ.pop(WARM_SOCKET_ENV)
    pool_pipe = os.environ.pop(POOL_PIPE_ENV, None)
    _die_with_pool(pool_pipe)
    info = _warm_up(argv[1] if len(argv) > 1 else None)
    _serve_one_job(info, socket_path)


def main_forked(device_spec: str | None, socket_path: str, pool_pipe: int, expected_gpu: bool) -> None:
    """A warm child forked by the fork server (``warm_fork``), its imports made there: the device's
    context and kernels, then one job. A device that is not what the server expected (``expected_gpu``,
    on which it imported Triton) ends the child before it is warm, with ``EXIT_NOT_EXPECTED``."""
    from sol_execbench.platform import current

    _die_with_pool(pool_pipe)
    info = current(device_spec)
    if info.is_gpu != expected_gpu:
        sys.stderr.write(f"sol-execbench warm child: the device is {'a GPU' if info.is_gpu else 'the CPU'}, "
                         "not what its fork server expected; the pool starts its children afresh\n")
        os._exit(EXIT_NOT_EXPECTED)
    _warm_device(info)
    _serve_one_job(info, socket_path)


EXIT_NOT_EXPECTED = 75  # a forked child whose device the fork server guessed wrong


def _die_with_pool(pool_pipe: int | str | None) -> None:
    if pool_pipe is not None:  # the pool's end closes when it dies, however: this child goes too
        from sol_execbench.platform.lifetime import exit_when_pipe_closes

        exit_when_pipe_closes(int(pool_pipe))


def _serve_one_job(info, socket_path: str) -> None:
    job_path, env, fds = receive_job(listening_socket(socket_path), socket_path,  # the socket appearing: warm
                                     idle=_build_launchers if info.is_gpu else None)
    gpu_quiet.unmark_idle()
    adopt_job(job_path, env, fds)
    from . import driver as child

    phases.restart_clock()
    phases.phase("took the job from the warm pool")
    child.main([sys.argv[0], job_path])


if __name__ == "__main__":
    main(sys.argv)
