"""Which ceilings price a bound: the datasheet's, or this device's calibrated ones.

``sol-execbench calibrate`` (the measuring lives in ``scoring.calibration``: it needs the
evaluator's timing, which sits above this layer) stores a device's measured ceilings here, one
JSON file per device and environment under ``<cache root>/calibration/``. The key is the device's
UUID, its driver and the torch build: a driver or torch upgrade finds no file and measures again.
``ceilings_for`` is the one entry for every consumer (``bound``, the scores): the datasheet entry
of a part, or that entry with the measured rates put in.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path

from pydantic import ValidationError

from sol_execbench.files import replace_json
from sol_execbench.schema.calibration import CALIBRATION_FORMAT_VERSION, Calibration, CalibrationKey

from .device import DeviceInfo
from .host import cache_root, cpu_model
from .peaks import PartPeaks, UnknownPartError, peaks_for

CALIBRATION_DIR = "calibration"
CEILINGS = ("datasheet", "measured")
_NVIDIA_VERSION_FILE = Path("/proc/driver/nvidia/version")
_AMDGPU_VERSION_FILE = Path("/sys/module/amdgpu/version")


class CeilingsError(Exception):
    """No ceilings can be had as asked; the message names what is missing and the fix (one line)."""


@dataclass(frozen=True)
class PricingPart:
    """The ceilings that price a bound and the name they were resolved from."""

    peaks: PartPeaks
    resolved_from: str


def driver_version(vendor: str) -> str:
    """The kernel driver's version: NVIDIA's or amdgpu's module, else the CUDA driver API version
    torch reports, else the kernel release (a CPU, or amdgpu built into the kernel)."""
    if vendor == "cuda":
        try:
            match = re.search(r"Kernel Module\s+(?:for\s+\S+\s+)?([0-9][0-9.]*)", _NVIDIA_VERSION_FILE.read_text())
            if match:
                return f"nvidia {match.group(1)}"
        except OSError:
            pass
        try:
            import torch

            return f"cuda driver api {torch._C._cuda_getDriverVersion()}"
        except Exception:  # noqa: BLE001  (older torch without the binding)
            pass
    if vendor == "rocm":
        try:
            return f"amdgpu {_AMDGPU_VERSION_FILE.read_text().strip()}"
        except OSError:
            pass
    return f"kernel {os.uname().release}"


def device_id(device: DeviceInfo) -> str:
    """The GPU's UUID as torch reports it; ``cpu:<model>`` on the CPU."""
    if not device.is_gpu:
        return f"cpu:{cpu_model()}"
    import torch

    try:
        return str(torch.cuda.get_device_properties(device.index or 0).uuid)
    except Exception:  # noqa: BLE001  (a torch without the UUID: the name and index stand in)
        return f"{device.name}#{device.index}"


def calibration_key(device: DeviceInfo) -> CalibrationKey:
    import torch

    build = f" ({'HIP' if device.vendor == 'rocm' else 'CUDA'} {device.runtime_version})" if device.runtime_version else ""
    return CalibrationKey(device_id=device_id(device), device_name=device.name, driver=driver_version(device.vendor),
                          torch=f"{torch.__version__}{build}")


def calibration_dir() -> Path:
    return cache_root() / CALIBRATION_DIR


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:80] or "device"


def calibration_path(key: CalibrationKey) -> Path:
    """``<device>-<hash of driver and torch>.json``: each environment keeps its own file, so going
    back to an earlier driver or torch finds its calibration again."""
    environment = hashlib.sha256(f"{key.driver}\n{key.torch}".encode()).hexdigest()[:12]
    return calibration_dir() / f"{_slug(key.device_id)}-{environment}.json"


def other_environments(key: CalibrationKey) -> list[Path]:
    """Calibrations of the same device made under another driver or torch."""
    own = calibration_path(key)
    return sorted(p for p in calibration_dir().glob(f"{_slug(key.device_id)}-*.json") if p != own)


def load_calibration(key: CalibrationKey) -> Calibration | None:
    """This key's cached calibration, or None when there is none.

    Raises CeilingsError for a file that is unreadable, of another format version or of another key."""
    path = calibration_path(key)
    if not path.is_file():
        return None
    fix = "run 'sol-execbench calibrate --refresh' to measure again"
    try:
        calibration = Calibration.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, ValidationError) as exc:
        first = (str(exc).splitlines() or [""])[0][:200]
        raise CeilingsError(f"{path}: not a readable calibration ({first}); {fix}") from None
    if calibration.format_version != CALIBRATION_FORMAT_VERSION:
        raise CeilingsError(f"{path}: format_version {calibration.format_version}, this tool reads "
                            f"{CALIBRATION_FORMAT_VERSION}; {fix}")
    if calibration.key != key:
        raise CeilingsError(f"{path}: key is {calibration.key.model_dump()}, expected {key.model_dump()}; {fix}")
    return calibration.model_copy(update={"cache_file": str(path)})


def store_calibration(calibration: Calibration) -> Path:
    """Write the calibration under its key (atomically: a reader sees the old file or the new one)."""
    path = calibration_path(calibration.key)
    replace_json(path, calibration, exclude={"cache_file", "from_cache"})
    return path


def datasheet_part(device_name: str) -> PartPeaks | None:
    try:
        return peaks_for(device_name)
    except UnknownPartError:
        return None


def gemm_rate(datasheet: PartPeaks | None, dtype: str) -> str:
    """The table rate a GEMM of ``dtype`` (``fp32``, ``bf16``, ...) measures on this part: its
    matrix rate, except an fp32 GEMM on a part whose table has no fp32 matrix rate (NVIDIA's), which
    runs on the vector units."""
    if dtype == "fp32" and datasheet is not None and "fp32" not in datasheet.matrix:
        return "vector fp32"
    return f"matrix {dtype}"


def datasheet_rate(datasheet: PartPeaks | None, rate: str) -> float | None:
    """The table's value of ``rate`` (``matrix bf16``, ``vector fp32``, ``memory``); None where absent."""
    if datasheet is None:
        return None
    if rate == "memory":
        return datasheet.memory_bandwidth
    unit, dtype = rate.split()
    return (datasheet.matrix if unit == "matrix" else datasheet.vector).get(dtype)


def measured_peaks(calibration: Calibration, datasheet: PartPeaks | None) -> PartPeaks:
    """The datasheet entry with every measured rate put in; rates not measured stay the datasheet's.

    A device the table lacks (a CPU, an unlisted GPU) is priced on its measurements alone: its vector
    rates are taken from its fp32 and fp64 GEMMs (a GEMM is the best case of its FMA throughput)."""
    matrix = dict(datasheet.matrix) if datasheet is not None else {}
    vector = dict(datasheet.vector) if datasheet is not None else {}
    bandwidth = datasheet.memory_bandwidth if datasheet is not None else None
    for ceiling in calibration.ceilings:
        if ceiling.rate == "memory":
            bandwidth = ceiling.achieved_per_s
            continue
        unit, dtype = ceiling.rate.split()
        (matrix if unit == "matrix" else vector)[dtype] = ceiling.achieved_per_s
        if datasheet is None and dtype in ("fp32", "fp64"):
            vector[dtype] = ceiling.achieved_per_s
    measured = tuple(c.rate for c in calibration.ceilings)
    missing = [m for m, ok in (("memory", bandwidth is not None), ("vector fp32", "fp32" in vector),
                               ("vector fp64", "fp64" in vector), ("matrix fp16", "fp16" in matrix)) if not ok]
    if missing:
        raise CeilingsError(f"{calibration.cache_file}: the calibration of {calibration.key.device_name} has no "
                            f"{', '.join(missing)} and no datasheet entry fills them; "
                            "run 'sol-execbench calibrate --refresh'")
    source = (f"calibration of {calibration.key.device_name} measured {calibration.measured_at} "
              f"({calibration.cache_file}): {', '.join(measured)}; other rates: "
              + (datasheet.source if datasheet is not None else "none (no datasheet entry)"))
    if datasheet is None:
        return PartPeaks(calibration.key.device_name, calibration.key.device_name, "cpu", bandwidth, matrix, vector,
                         source, ceilings="measured", measured=measured)
    return replace(datasheet, memory_bandwidth=bandwidth, matrix=matrix, vector=vector, source=source,
                   ceilings="measured", measured=measured)


def _calibration_hint(key: CalibrationKey) -> str:
    others = other_environments(key)
    elsewhere = (f" ({len(others)} calibration(s) of this device under another driver or torch: "
                 f"{', '.join(p.name for p in others)})") if others else ""
    command = "sol-execbench calibrate" + (" --device cpu" if key.device_id.startswith("cpu:") else "")
    return (f"no calibration of {key.device_name} ({key.device_id}) under driver '{key.driver}' and torch "
            f"'{key.torch}' in {calibration_dir()}{elsewhere}; run '{command}' first, or use --ceilings datasheet")


def ceilings_for(ceilings: str, hardware: str | None, device: DeviceInfo | None) -> PricingPart:
    """The ceilings that price a bound.

    ``datasheet``: the table entry ``hardware`` names, else the one of ``device``. ``measured``: the
    calibration of ``device`` (this machine's; ``hardware``, when given, must name the same part),
    its unmeasured rates from the datasheet. Raises CeilingsError with a one-line fix."""
    if ceilings not in CEILINGS:
        raise CeilingsError(f"--ceilings '{ceilings}': choose one of {', '.join(CEILINGS)}")
    if ceilings == "datasheet":
        name = hardware or (device.name if device is not None and device.is_gpu else None)
        if name is None:
            raise CeilingsError("no GPU found here to price the bound on; pass --hardware NAME")
        try:
            return PricingPart(peaks_for(name), name)
        except UnknownPartError as exc:
            raise CeilingsError(f"--hardware: {exc}" if hardware else f"the GPU here: {exc}; pass --hardware NAME") \
                from None
    if device is None:
        raise CeilingsError("--ceilings measured prices on the device here, and none was given")
    datasheet = datasheet_part(device.name)
    if hardware is not None:
        wanted = datasheet_part(hardware)
        if wanted is None or datasheet is None or wanted.name != datasheet.name:
            raise CeilingsError(f"--hardware {hardware}: --ceilings measured prices on the device here "
                                f"({device.name}); drop --hardware or use --ceilings datasheet")
    key = calibration_key(device)
    calibration = load_calibration(key)
    if calibration is None:
        raise CeilingsError(_calibration_hint(key))
    return PricingPart(measured_peaks(calibration, datasheet), device.name)
