"""An evaluation child started by the command line before its job exists (see
``parent/early_child.py``).

It imports torch, makes the device torch's current one and imports what the job needs, then takes
the job from the command line's socket (``handoff``) and runs it as an evaluation child
(``driver.main``). ``run_job`` makes the device current itself: a device that could not be set up
here is reported on the job's channel.
"""

from __future__ import annotations

import os
import sys

from .. import phases

EARLY_SOCKET_ENV = "SOL_EXECBENCH_EARLY_SOCKET"  # named by parent/early_child.py, which may not import this side


def _start_up(device_spec: str | None) -> None:
    try:
        from sol_execbench.platform import use_device

        from .handoff import import_for_job

        device = use_device(device_spec)
        if not device.is_gpu:
            os.environ["TRITON_INTERPRET"] = "1"  # Triton reads it at import; run_job sets it too
        import_for_job(device.is_gpu)
    except BaseException:  # noqa: BLE001  (run_job takes the same steps with the job's channel open, and reports)
        pass


def main(argv: list[str]) -> None:
    socket_path = os.environ.pop(EARLY_SOCKET_ENV)
    device_spec = argv[1] if len(argv) > 1 and argv[1] else None
    from sol_execbench.platform.device import start_device_context
    from sol_execbench.platform.host import listening_socket

    start_device_context(device_spec)  # the GPU context, beside the imports that follow
    from .handoff import adopt_job, receive_job

    # Before the start-up: the command line may hand the job over while it runs.
    listener = listening_socket(socket_path)
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
