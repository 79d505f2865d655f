"""Clocks around the timed region, and ``lock_clocks`` verification under load (child side).

Readings come from ``platform.clocks`` (NVML / amd-smi ...); this module decides when to read
(start of the run, before and after each workload's timed calls, under a synthetic load for
lock verification) and turns readings into the trace's ``ClockRecord`` and warnings.
"""

from __future__ import annotations

import os
import time

import torch

from sol_execbench.platform import DeviceInfo
from sol_execbench.platform.clocks import (BENIGN_REASONS, ClockReader, ClockReading, expected_locked_clocks,
                                           lock_problems, other_processes)
from sol_execbench.schema import ClockRecord, ClockSample

from .gpu_quiet import idle_pids


def _others(processes) -> list[int]:
    """Other processes on the GPU, less idle warm-pool children (a context, no work: see gpu_quiet)."""
    found = other_processes(processes, os.getpid())
    if not found:
        return found
    idle = idle_pids()
    return [pid for pid in found if pid not in idle]

LOAD_BATCHES = 6
LOAD_MATMULS_PER_BATCH = 16
LOAD_SIZE = 4096


def device_uuid(device: DeviceInfo) -> str | None:
    if not device.is_gpu:
        return None
    try:
        return str(torch.cuda.get_device_properties(device.index or 0).uuid)
    except Exception:  # noqa: BLE001
        return None


class ClockWatch:
    def __init__(self, device: DeviceInfo, reader: ClockReader | None = None):
        self.device = device
        self.reader = reader or ClockReader(device.vendor, device.index, device_uuid(device))
        start = self.reader.read()
        self.source = start.source
        self._base = ClockRecord(source=start.source, samples=[self._sample(start, "start")],
                                 partial_reasons=list(start.problems))
        self._others_at_start = _others(start.processes)
        self._per_workload: dict[str, list[tuple[str, ClockReading]]] = {}

    @staticmethod
    def _sample(reading: ClockReading, when: str) -> ClockSample:
        return ClockSample(when=when, **reading.sample_fields())

    # -- lock_clocks -------------------------------------------------------------------------

    def verify_lock(self) -> str | None:
        """None when clocks sit at the locked values under load, else why not (for RUNTIME_ERROR)."""
        sm, mem, source = expected_locked_clocks(self.device.name)
        self._base.expected_sm_mhz, self._base.expected_mem_mhz = sm, mem
        if sm is None:
            return (f"lock_clocks is set but no locked clock is known for '{self.device.name}': set "
                    "SOL_EXECBENCH_GPU_CLK_MHZ (and SOL_EXECBENCH_DRAM_CLK_MHZ) to the locked values")
        readings = self._under_load()
        self._base.samples.extend(self._sample(r, "under_load") for r in readings)
        problems = lock_problems(readings, sm, mem)
        self._base.lock_verified = not problems
        if problems:
            return (f"lock_clocks is set but the clocks are not locked at the expected values (from {source}): "
                    f"{'; '.join(problems)}. This run never changes clocks: lock them before evaluating "
                    "(e.g. nvidia-smi -lgc/-lmc) or unset lock_clocks")
        return None

    def _under_load(self) -> list[ClockReading]:
        """Readings taken while the device runs a matmul loop (at most two batches in flight)."""
        dev = self.device.torch_device
        a = torch.randn(LOAD_SIZE, LOAD_SIZE, device=dev)
        c = torch.empty_like(a)
        readings, previous = [], None
        for _ in range(LOAD_BATCHES):
            for _ in range(LOAD_MATMULS_PER_BATCH):
                torch.mm(a, a, out=c)
            done = torch.cuda.Event()
            done.record()
            if previous is not None:
                previous.synchronize()
            readings.append(self.reader.read())
            previous = done
        torch.cuda.synchronize(dev)
        return readings

    # -- around each workload's timed calls ---------------------------------------------------

    def sample(self, uuid: str, when: str) -> None:
        self._per_workload.setdefault(uuid, []).append((when, self.reader.read()))

    def record_for(self, uuid: str) -> ClockRecord:
        record = self._base.model_copy(deep=True)
        readings = self._per_workload.get(uuid, [])
        record.samples.extend(self._sample(r, when) for when, r in readings)
        others = set(self._others_at_start)
        for _, reading in readings:
            others.update(_others(reading.processes))
            record.partial_reasons.extend(p for p in reading.problems if p not in record.partial_reasons)
        record.other_processes = sorted(others) if others else None
        return record

    def shared(self, uuid: str) -> bool:
        """Whether other processes used this GPU at the start or around this workload so far."""
        readings = self._per_workload.get(uuid, [])
        return bool(self._others_at_start) or any(_others(r.processes) for _, r in readings)

    def warnings_for(self, uuid: str) -> list[str]:
        warnings = []
        readings = self._per_workload.get(uuid, [])
        others = sorted(set(self._others_at_start).union(*(_others(r.processes) for _, r in readings)))
        if others:
            warnings.append(f"other processes use this GPU during the run (pids {others}): timings may be disturbed")
        throttled = sorted({reason for _, r in readings for reason in (r.throttle_reasons or [])} - BENIGN_REASONS)
        if throttled:
            warnings.append(f"clocks were throttled around the timed calls: {', '.join(throttled)}")
        return warnings
