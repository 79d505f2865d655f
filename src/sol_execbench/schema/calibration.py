"""A device's measured ceilings (``sol-execbench calibrate --json``, and its cache file).

One file per device and environment under ``<cache root>/calibration/``: the GPU's UUID, its
driver and the torch build are the key, so a driver or torch upgrade measures again.
"""

from __future__ import annotations

from typing import Literal, Optional

from .base import NonEmptyString, NonNegativeInt, SchemaModel

CALIBRATION_FORMAT_VERSION = 1


class CalibrationKey(SchemaModel):
    """What a calibration is valid for: the same device under the same driver and torch."""

    device_id: NonEmptyString
    """The GPU's UUID as torch reports it; ``cpu:<model>`` for a CPU."""
    device_name: NonEmptyString
    driver: NonEmptyString
    """The kernel driver's version (NVIDIA or amdgpu module), else the CUDA driver API version, else
    ``kernel <release>`` (a CPU, or an in-kernel amdgpu)."""
    torch: NonEmptyString
    """torch's version and the CUDA or HIP version it was built with."""


class CeilingMeasurement(SchemaModel):
    """One measured ceiling: a large GEMM of one dtype, or a large device-to-device copy."""

    name: NonEmptyString
    """``gemm <dtype>`` or ``copy``."""
    rate: NonEmptyString
    """The peak-table rate it measures: ``matrix bf16``, ``vector fp32`` (an fp32 GEMM on a part
    whose table has no fp32 matrix rate runs on the vector units), ``memory``."""
    shape: list[int]
    """GEMM: [M, N, K]; copy: [bytes copied]."""
    work: NonNegativeInt
    """FLOPs per call (2·M·N·K), or bytes moved per call (each byte read once and written once)."""
    latency_ms: float
    """The call's latency under the evaluator's timing rule (median of the timed rounds)."""
    relative_iqr: float
    """Spread of the timed rounds that set the latency: IQR / median."""
    method: Literal["device", "events", "cpu"]
    """The timing instrument that measured it (``docs/timing.md``)."""
    achieved_per_s: float
    """work / latency: FLOP/s or B/s."""
    datasheet_per_s: Optional[float] = None
    """The peak table's rate for ``rate`` on this part; null where the part or the rate is not in it."""
    fraction_of_datasheet: Optional[float] = None
    sm_clock_median_mhz: Optional[float] = None
    """The SM clock read after each timed call (NVIDIA)."""
    notes: list[str] = []
    """What the timing said about the measurement (a fallback instrument, a warning)."""


class SkippedCeiling(SchemaModel):
    """A ceiling this device or torch build cannot measure, and why."""

    name: NonEmptyString
    reason: NonEmptyString


class Calibration(SchemaModel):
    """This device's achievable ceilings, measured through the evaluator's timing."""

    format_version: int = CALIBRATION_FORMAT_VERSION
    key: CalibrationKey
    part: Optional[str] = None
    """The peak-table entry this device resolves to (``H100``); null for a part the table lacks."""
    measured_at: NonEmptyString
    """UTC time of the measurement, ISO 8601."""
    tool_version: NonEmptyString
    timing: dict[str, float]
    """The timing plan: ``warmup``, ``rounds``, ``cooldown``, ``launch_allowance_us``."""
    ceilings: list[CeilingMeasurement]
    skipped: list[SkippedCeiling] = []
    cache_file: Optional[str] = None
    """Where this calibration is cached (filled in when read or written, not stored)."""
    from_cache: bool = False
    """True when ``calibrate`` answered from the cache rather than measuring."""
