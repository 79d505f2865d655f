"""Clocks around the timed region, and ``lock_clocks`` verification under load (child side).

Readings come from ``platform.clocks`` (NVML / amd-smi ...); this module decides when to read
(start of the run, before and after each workload's timed calls, under a synthetic load for
lock verification) and turns readings into the trace's ``ClockRecord`` and warnings.

The time the clocks were power- or thermally-capped between a workload's ``before_timing`` and
``after_timing`` readings (NVML violation counters; warm-up included) goes into the record as
``capped_ms`` (per policy) and ``capped_region_ms`` (the host time those readings span), and into a
warning when it is long enough to move a median.
"""

from __future__ import annotations

import os

import torch

from sol_execbench.platform import DeviceInfo
from sol_execbench.platform.clocks import (BENIGN_REASONS, DRAM_CLK_ENV, ClockReader, ClockReading, capped_between,
                                           expected_locked_clocks, lock_problems, other_processes)
from sol_execbench.schema import ClockRecord, ClockSample

from .gpu_quiet import idle_pids, marked_idle


def _others(processes, idle: set[int]) -> list[int]:
    """Other processes on the GPU, less idle warm-pool children (a context, no work: see gpu_quiet)."""
    return [pid for pid in other_processes(processes, os.getpid()) if pid not in idle]

# Capped time worth a warning: at least this long and this share of the region. NVML updates its
# counters in coarse steps, and a cap shorter than a few calls cannot move a median of 50.
CAPPED_WARN_MS = 1.0
CAPPED_WARN_FRACTION = 0.01

# How an operator locks clocks, for the error message (this harness never does it itself).
LOCK_HINT = {"cuda": "nvidia-smi -lgc/-lmc", "rocm": "rocm-smi --setperfdeterminism"}

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
        # Taken before the sandbox: later readings run inside it, where no outside process can be
        # checked for life. Marks left by processes gone now are never trusted; a mark made later
        # (a warm child the pool started since) is a live warm child's.
        marks = marked_idle()
        idle_now = idle_pids(marks)
        self._stale_marks = marks - idle_now
        self._others_at_start = _others(start.processes, idle_now)
        self._per_workload: dict[str, list[tuple[str, ClockReading]]] = {}
        self._others_seen: dict[str, set[int]] = {}
        self._lock_note: str | None = None

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
        if mem is None and not problems:
            # Only the SM clock was checked: say so rather than let lock_verified read as the whole lock.
            self._lock_note = (f"lock_clocks: the SM clock was verified under load but the memory clock was not "
                               f"(no expected value for '{self.device.name}'; set {DRAM_CLK_ENV} to check it)")
            if self._lock_note not in self._base.partial_reasons:
                self._base.partial_reasons.append(self._lock_note)
        if problems:
            return (f"lock_clocks is set but the clocks are not locked at the expected values (from {source}): "
                    f"{'; '.join(problems)}. This run never changes clocks: lock them before evaluating "
                    f"(e.g. {LOCK_HINT.get(self.device.vendor, LOCK_HINT['cuda'])}) or unset lock_clocks")
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
        reading = self.reader.read()
        self._per_workload.setdefault(uuid, []).append((when, reading))
        idle = marked_idle() - self._stale_marks  # a spare that took a job since is no longer marked
        self._others_seen.setdefault(uuid, set()).update(_others(reading.processes, idle))

    def _others_for(self, uuid: str) -> list[int]:
        return sorted(set(self._others_at_start) | self._others_seen.get(uuid, set()))

    def capped(self, uuid: str) -> tuple[dict[str, float | None] | None, float | None, list[str]]:
        """(ms capped per policy, ms of host time the readings span, odd counters) over this
        workload's before/after pairs; (None, None, []) without a pair or without any counter."""
        capped: dict[str, float | None] = {}
        region_ms, problems, before = 0.0, [], None
        for when, reading in self._per_workload.get(uuid, []):
            if when == "before_timing":
                before = reading
            elif when == "after_timing" and before is not None:
                pair, odd = capped_between(before, reading)
                problems.extend(odd)
                for policy, ms in pair.items():  # a policy unreadable in any pair is unknown overall
                    known = capped.get(policy, 0.0)
                    capped[policy] = known + ms if known is not None and ms is not None else None
                region_ms += (reading.taken_ns - before.taken_ns) / 1e6
                before = None
        if not capped or all(ms is None for ms in capped.values()):
            return None, None, problems
        return capped, region_ms, problems

    def record_for(self, uuid: str) -> ClockRecord:
        record = self._base.model_copy(deep=True)
        readings = self._per_workload.get(uuid, [])
        record.samples.extend(self._sample(r, when) for when, r in readings)
        for _, reading in readings:
            record.partial_reasons.extend(p for p in reading.problems if p not in record.partial_reasons)
        record.other_processes = self._others_for(uuid) or None
        capped, region_ms, problems = self.capped(uuid)
        record.partial_reasons.extend(p for p in problems if p not in record.partial_reasons)
        if capped is not None:
            record.capped_ms = {policy: None if ms is None else round(ms, 3) for policy, ms in capped.items()}
            record.capped_region_ms = round(region_ms, 3)
        return record

    def warnings_for(self, uuid: str) -> list[str]:
        warnings = []
        readings = self._per_workload.get(uuid, [])
        others = self._others_for(uuid)
        if others:
            warnings.append(f"other processes use this GPU during the run (pids {others}): timings may be disturbed")
        throttled = sorted({reason for _, r in readings for reason in (r.throttle_reasons or [])} - BENIGN_REASONS)
        if throttled:
            warnings.append(f"clocks were throttled around the timed calls: {', '.join(throttled)}")
        capped, region_ms, _ = self.capped(uuid)
        for policy, ms in (capped or {}).items():
            if ms is not None and ms >= CAPPED_WARN_MS and ms >= CAPPED_WARN_FRACTION * (region_ms or 0.0):
                warnings.append(f"the GPU was {policy}-capped for {ms:.1f} ms of the {region_ms:.1f} ms around the "
                                "timed calls (NVML violation counters): timings may be low-clocked")
        if self._lock_note:
            warnings.append(self._lock_note)
        return warnings
