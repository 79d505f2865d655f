"""A process's launch level: how fast the device runs kernels already queued one after another.

On an H100 the gaps a device leaves between queued kernels sit at a level of each process, steady
within it: tiny kernels queued behind a hold took 1.93 to 2.19 us each over eight processes, and an
eight-kernel RMSNorm's device span moved with them by 6 to 7% (correlation 0.99), while the kernels'
own durations agreed within 1%. Both sides of an evaluation share their process's level, so the
speedup holds; the absolute latency of a call of several small kernels does not, from one
evaluation to the next.

So a warm child on an NVIDIA GPU measures its level right after creating its device context (the
probe: 32 one-element additions queued behind a spin kernel, CUDA events, the lower quartile of 40)
and keeps it only near the lowest level this device has shown: at most ``TOLERANCE`` above the
second-lowest of the last ``HISTORY`` probes (the lowest of them while there are fewer than
``ROBUST_FROM``). The device's first ``FIRST_TURNED_AWAY`` children only record their probes, so
that a floor exists before any child is kept (kept at once, they were as likely slow as not). A
slower child exits with ``EXIT_SLOW_LAUNCH`` before it is warm and the pool starts another, unless
the last ``MAX_REJECTED`` children were all turned away: then it stays, so that a device whose level
rose for good still gets warm children. The probes are kept per device, driver and torch version in
the tool's cache, written only by warm children before any job (a solution cannot reach the tool's
cache). ``SOL_EXECBENCH_LAUNCH_LEVEL=0`` keeps every child.

A process started for one evaluation alone (no pool) runs at whatever level it got. Either way
the evaluation's traces give the level (``evaluation.environment.launch_level_us``).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from sol_execbench.files import replace_file

EXIT_SLOW_LAUNCH = 76  # a warm child turned away for its launch level (the pool starts another)
LEVEL_ENV = "SOL_EXECBENCH_LAUNCH_LEVEL"  # "0": keep every warm child whatever its level

HISTORY = 32  # probes kept per device
ROBUST_FROM = 4  # from this many probes the floor is the second-lowest, so that one outlier does not set it
FIRST_TURNED_AWAY = 3  # a device's first children record a floor, once per device, driver and torch version
TOLERANCE = 0.03  # a child within this fraction of the floor is kept (the two levels lie 8 to 10% apart)
# After this many children turned away in a row, the next is kept whatever its level. In real pools
# on an H100 55 to 62% were turned away: after six, one kept child in about twenty would be slow.
MAX_REJECTED = 8
PROBE_KERNELS, PROBE_ROUNDS, PROBE_HOLD_CYCLES = 32, 40, 1_000_000


@dataclass(frozen=True)
class Verdict:
    kept: bool
    probe_us: float
    floor_us: float | None  # None: no floor yet (fewer than FIRST_TURNED_AWAY probes, or no record)
    why: str  # "recording a floor" | "near floor" | "slower" | "after rejections" | "not recorded"


_noted: list[float] = []  # this process's level, once measured


def note(probe: float) -> None:
    _noted[:] = [probe]


def this_process_us(torch_device) -> float | None:
    """This process's level: the warm-up's probe, else one taken now; None where it cannot be."""
    if not _noted:
        try:
            note(probe_us(torch_device))
        except Exception:  # noqa: BLE001  (no CUDA events, no spin kernel: the trace leaves it out)
            return None
    return _noted[0]


def selection_enabled() -> bool:
    return os.environ.get(LEVEL_ENV, "1") != "0"


def history_path(device_uuid: str) -> Path:
    """Where the probes of this device are kept: one record per device, driver and torch version
    (a driver or torch update may move the levels, and an unreachable floor would turn children
    away until the record forgets it)."""
    import torch

    from sol_execbench.platform.ceilings import driver_version
    from sol_execbench.platform.host import cache_root

    key = hashlib.sha1(f"{device_uuid}#{driver_version('cuda')}#{torch.__version__}".encode()).hexdigest()[:16]
    return cache_root() / "launch-levels" / f"{key}.json"


def judge(probes: list[dict], probe_us: float) -> Verdict:
    """Keep ``probe_us``, or not, given the device's earlier probes (oldest first, each
    ``{"us": float, "kept": bool}``)."""
    values = sorted(p["us"] for p in probes)
    if len(values) < FIRST_TURNED_AWAY:
        return Verdict(False, probe_us, None, "recording a floor")
    floor = values[1] if len(values) >= ROBUST_FROM else values[0]
    if probe_us <= floor * (1 + TOLERANCE):
        return Verdict(True, probe_us, floor, "near floor")
    recent = probes[-MAX_REJECTED:]
    if len(recent) == MAX_REJECTED and not any(p["kept"] for p in recent):
        return Verdict(True, probe_us, floor, "after rejections")
    return Verdict(False, probe_us, floor, "slower")


def decide(path: Path, probe_us: float) -> Verdict:
    """Judge ``probe_us`` against the probes recorded at ``path`` and record it, under an exclusive
    lock (the pool warms several children at once). A file that cannot be read counts as empty. Where
    the probe cannot be recorded the child is kept: the selection counts its rejections in the record,
    and without it would turn children away for good (a floor never recorded, or none reached)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            probes = [p for p in json.loads(path.read_text())["probes"]
                      if isinstance(p.get("us"), (int, float)) and p["us"] > 0 and isinstance(p.get("kept"), bool)]
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            probes = []
        verdict = judge(probes, probe_us)
        probes = (probes + [{"us": round(probe_us, 4), "kept": verdict.kept, "at": round(time.time())}])[-HISTORY:]
        try:
            replace_file(path, json.dumps({"probes": probes}))
        except OSError:
            return Verdict(True, probe_us, verdict.floor_us, "not recorded")
        return verdict
    finally:
        os.close(fd)


def probe_us(torch_device) -> float:
    """Microseconds per one-element addition queued behind a spin kernel (the launch level)."""
    import torch

    with torch.cuda.device(torch_device):
        x = torch.zeros(1, device=torch_device)
        times = []
        for round_index in range(PROBE_ROUNDS + 3):  # the first three warm the path up
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(PROBE_HOLD_CYCLES)  # the host queues every addition before the device reaches them
            start.record()
            for _ in range(PROBE_KERNELS):
                x.add_(1)
            end.record()
            end.synchronize()
            if round_index >= 3:
                times.append(start.elapsed_time(end) * 1e3 / PROBE_KERNELS)
    # The lower quartile: an evaluation's correctness rounds may run beside a warm-up, and the
    # device's time slices between the two processes lengthen some rounds, not the level of the rest.
    return sorted(times)[len(times) // 4]
