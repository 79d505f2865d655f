"""A warm child: start up (torch, device, common kernels), then wait for one job from the pool.

Started by the pool server with ``SOL_EXECBENCH_WARM_SOCKET`` naming the Unix socket to listen
on; the socket appears when the child is warm. The evaluation that takes it connects and passes
the job file, its environment, and the trace-channel and log descriptors (stdout's, then stderr's
when it is kept apart); the child then runs as an ordinary evaluation child (``child.main``).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys

from sol_execbench.sandbox.peer import refusal

from . import gpu_quiet
from .. import phases
from ..channel import FD_ENV


def _warm_up(device_spec: str | None) -> None:
    """Set up what every evaluation process needs once before its first workload: the device
    context, the RNG, BLAS, reductions, the profiler and Triton."""
    from sol_execbench.platform import current

    info = current(device_spec)
    if not info.is_gpu:
        os.environ["TRITON_INTERPRET"] = "1"  # Triton reads it at import; the child sets it too
    _import_ahead(info)
    # Device work waits until no evaluation is measuring on this GPU (see gpu_quiet), and an
    # evaluation starting meanwhile waits for it: only device work goes inside.
    with gpu_quiet.exclusive(info.index) if info.is_gpu else contextlib.nullcontext():
        _warm_device(info)
    if info.is_gpu:
        _warm_clock_reader(info)
        gpu_quiet.mark_idle()  # holds a context from now on, but launches nothing until handed a job


def _import_ahead(info) -> None:
    """The modules an evaluation imports, and those the device warm-up would import inside the
    exclusive hold (the profiler's torch._dynamo, Triton's code generator): seconds of CPU that
    need no device."""
    import sol_execbench.build  # noqa: F401  (what run_job imports for a job)

    from . import activity_watch, timing, workload_eval  # noqa: F401
    if info.is_gpu:
        import torch._dynamo  # noqa: F401  (the profiler's first session imports it)
        import torch.profiler  # noqa: F401
    try:
        import triton  # noqa: F401

        if info.is_gpu:
            from . import _triton_warm  # noqa: F401  (defines the warm-up kernel: Triton's front end)
    except Exception:  # noqa: BLE001  (no Triton, or it does not import here: the solution will say so)
        pass


def _warm_clock_reader(info) -> None:
    """One clock reading, as the evaluation takes at its start, so that the clock library's own
    start-up (``nvmlInit``, once per process) is over before a job arrives. It launches no device
    work."""
    from sol_execbench.platform.clocks import ClockReader

    from .clock_watch import device_uuid

    ClockReader(info.vendor, info.index, device_uuid(info)).read()  # never raises (a probe)


def _warm_device(info) -> None:
    import torch

    from sol_execbench.platform import make_current

    make_current(info)  # the evaluation's device, as run_job makes it; here, under the exclusive hold
    dev = torch.device(info.torch_device)
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        a = torch.randn(64, 64, device=dev, dtype=dtype)
        b = (a @ a).float()
        torch.linalg.vector_norm(b)
        torch.isfinite(b).all()
        (b - b).abs().max().item()
    torch.randint(0, 10, (16,), device=dev)
    if info.is_gpu:
        torch.cuda.Event(enable_timing=True).record()
        torch.cuda.synchronize(dev)
        _warm_device_timing(info)
        _warm_triton(info)


def _warm_triton(info) -> None:
    try:
        from ._triton_warm import launch_once

        launch_once(info.torch_device)
    except Exception:  # noqa: BLE001  (no Triton, or it cannot compile here: the solution will say so)
        pass


def _warm_device_timing(info) -> None:
    """Time a tiny kernel as an evaluation does, so that the process's first profiler session
    (CUPTI start-up, its priming session, the torch._dynamo import the profiler makes) is over
    before a job arrives."""
    import torch

    from .timing import FreshArgs, L2Flusher, SideCalls, TimingPlan, measure

    values = [torch.ones(1024, device=info.torch_device)]
    try:
        sides = [SideCalls(name, lambda x: x + 1, FreshArgs([values], slots=8)) for name in ("solution", "reference")]
        measure(sides[0], sides[1], TimingPlan(warmup=1, rounds=2, device=info, flusher=L2Flusher(info), method="device"))
    except Exception:  # noqa: BLE001  (a warm-up that fails leaves its cost to the first workload)
        pass


def listen_on(path: str) -> socket.socket:
    """The socket an evaluation hands this child its job on (only this user may connect)."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    os.chmod(path, 0o600)
    listener.listen(1)
    return listener


def receive_job(listener: socket.socket, path: str) -> tuple[str, dict[str, str], list[int]]:
    """The evaluation that takes this child: (the job file, its environment, the channel and log
    descriptors). Shared with the early child (``early_child``)."""
    with listener:
        conn, _ = listener.accept()
        while refusal(conn):  # a sandboxed process found the socket: not the evaluation that took us
            conn.close()
            conn, _ = listener.accept()
        with conn:
            message, fds, _flags, _addr = socket.recv_fds(conn, 1 << 20, 4)
            with contextlib.suppress(OSError):  # an evaluation that does not wait for the answer has gone
                conn.sendall(b"ok")
    os.unlink(path)
    request = json.loads(message)
    return request["job"], request["env"], fds


def adopt_job(job_path: str, env: dict[str, str], fds: list[int]) -> None:
    """Become the job's child: its log descriptors on stdout and stderr, the invoking evaluation's
    environment, the job's folder as the working directory."""
    # The channel, then stdout's log, then (when the evaluation keeps them apart) stderr's log.
    channel_fd, stdout_fd = fds[0], fds[1]
    stderr_fd = fds[2] if len(fds) > 2 else stdout_fd
    os.dup2(stdout_fd, 1)
    os.dup2(stderr_fd, 2)
    for fd in {stdout_fd, stderr_fd} - {1, 2}:
        os.close(fd)
    os.environ.clear()
    os.environ.update(env)  # the invoking evaluation's environment, channel key included
    os.environ[FD_ENV] = str(channel_fd)
    os.chdir(os.path.dirname(job_path))


def main(argv: list[str]) -> None:
    socket_path = os.environ.pop("SOL_EXECBENCH_WARM_SOCKET")
    pool_pipe = os.environ.pop("SOL_EXECBENCH_POOL_PIPE", None)
    if pool_pipe is not None:  # the pool's end closes when it dies, however: this child goes too
        from sol_execbench.platform.lifetime import exit_when_pipe_closes

        exit_when_pipe_closes(int(pool_pipe))
    device_spec = argv[1] if len(argv) > 1 else None
    _warm_up(device_spec)
    job_path, env, fds = receive_job(listen_on(socket_path), socket_path)  # the socket appearing: warm
    gpu_quiet.unmark_idle()
    adopt_job(job_path, env, fds)
    from . import driver as child

    phases.restart_clock()
    phases.phase("took the job from the warm pool")
    child.main([sys.argv[0], job_path])


if __name__ == "__main__":
    main(sys.argv)
