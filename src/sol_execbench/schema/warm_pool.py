"""What ``sol-execbench worker status`` prints: the state of a warm pool, or that none runs."""

from __future__ import annotations

from typing import Optional

from .base import NonNegativeInt, SchemaModel


class WorkerStatus(SchemaModel):
    """A warm pool's answer to a status request, or ``{"running": false}`` when none answered."""

    running: bool = True
    """False when no pool answered for the device (every other field is then absent)."""
    ok: Optional[bool] = None
    pid: Optional[int] = None
    """The pool server's process."""
    device: Optional[str] = None
    """The device the pool was started for; null for the default (the first GPU, else the CPU)."""
    spares: Optional[NonNegativeInt] = None
    """Warm evaluation processes the pool keeps ready."""
    warm: Optional[NonNegativeInt] = None
    """Of them, those ready now (the others are still starting)."""
    handed_out: Optional[NonNegativeInt] = None
    """Processes handed to evaluations whose end the pool has not yet seen."""
    forking: Optional[bool] = None
    """Replacement processes are forked from the pool's fork server, their imports made once (see
    ``evaluate/child/warm_fork.py``); false while it starts, once it failed, or where
    ``SOL_EXECBENCH_WARM_FORK=0``: each process then imports afresh."""
    turned_away: Optional[NonNegativeInt] = None
    """Processes that exited before they were warm, since the pool started, because their launch
    level (how fast their queued kernels run) was slower than the device's lowest (docs/timing.md);
    the pool started another for each. Always 0 off NVIDIA GPUs and with ``SOL_EXECBENCH_LAUNCH_LEVEL=0``."""
    takes: Optional[NonNegativeInt] = None
    """Evaluations handed a warm process since the pool started."""
    take_wait_s: Optional[float] = None
    """Seconds evaluations waited in all, since the pool started, for a warm process to be ready (one
    still warming up, or replacing one turned away for its launch level), those that got none included."""
    take_wait_max_s: Optional[float] = None
    """The longest such wait."""
    ending_wait_s: Optional[float] = None
    """Seconds evaluations waited in all, before that, for the last evaluation's process to be gone."""
    front: Optional[bool] = None
    """A command-line process waits on ``front.sock`` (the default pool only: ``cli/warm_front.py``)."""
    fingerprint: Optional[str] = None
    """Of the start-up environment (interpreter, package and its sources, device, start-up variables):
    a pool hands a process only to an evaluation with the same one."""
    idle_timeout_s: Optional[float] = None
    """Seconds without a request after which the pool exits."""
