"""The peak table entry that prices a bound, as the bound and score formats record it (no torch)."""

from __future__ import annotations

from sol_execbench.platform.peaks import PartPeaks
from sol_execbench.schema.bound import HardwarePeaks


def hardware_model(peaks: PartPeaks, resolved_from: str) -> HardwarePeaks:
    return HardwarePeaks(name=peaks.name, label=peaks.label, memory_bandwidth_bytes_per_s=peaks.memory_bandwidth,
                         matrix_flops_per_s=dict(peaks.matrix), vector_flops_per_s=dict(peaks.vector),
                         source=peaks.source, resolved_from=resolved_from, measured=list(peaks.measured))
