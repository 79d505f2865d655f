"""An evaluation child started before its job exists (see ``parent/early_child.py``).

It makes the start-up a fresh child makes before it reads its job (torch imported, the device made
torch's current one) and imports what the job will need, then waits on the command line's socket
for the job, the environment and the channel and log descriptors, as a warm child does. From there
it is an ordinary evaluation child (``driver.main``), which repeats the device step: a start-up
that failed here (a device that is not there) is reported on the job's channel, as a fresh child
reports it.
"""

from __future__ import annotations

import os
import sys

from .. import phases

EARLY_SOCKET_ENV = "SOL_EXECBENCH_EARLY_SOCKET"


def _start_up(device_spec: str | None) -> None:
    try:
        from sol_execbench.platform import use_device

        device = use_device(device_spec)
        if not device.is_gpu:
            os.environ["TRITON_INTERPRET"] = "1"  # before anything imports Triton, as run_job sets it
        import sol_execbench.build  # noqa: F401  (what run_job imports for a job)
        import sol_execbench.schema  # noqa: F401

        from . import activity_watch, confinement, timing, workload_eval  # noqa: F401
        if device.is_gpu:
            import torch.profiler  # noqa: F401  (the device pass's first session imports it, and torch._dynamo)
    except BaseException:  # noqa: BLE001  (run_job takes the same steps with the job's channel open, and reports)
        pass


def main(argv: list[str]) -> None:
    socket_path = os.environ.pop(EARLY_SOCKET_ENV)
    device_spec = argv[1] if len(argv) > 1 and argv[1] else None
    from sol_execbench.platform.device import start_device_context

    start_device_context(device_spec)  # beside the imports below and torch's
    from .warm_child import adopt_job, listen_on, receive_job

    listener = listen_on(socket_path)  # at once: the command line may hand the job over before start-up ends
    phases.phase("early child started")
    _start_up(device_spec)
    phases.phase("early child waiting for its job")
    job_path, env, fds = receive_job(listener, socket_path)
    adopt_job(job_path, env, fds)
    phases.phase("early child took its job")
    from . import driver

    driver.main([sys.argv[0], job_path])


if __name__ == "__main__":
    main(sys.argv)
