"""GPU clocks, clock-event (throttle) reasons, temperature, power state and GPU processes.

Read only: nothing here changes a clock. NVIDIA through NVML (``pynvml`` from nvidia-ml-py,
optional, imported lazily), else ``nvidia-smi``; AMD through ``amd-smi``, else ``rocm-smi``.
Every reading is best-effort: what could not be read is named in ``ClockReading.problems``.
Command-line tools are time-boxed. Parsers take the tools' recorded output, so they are tested
without a GPU.

Throttling inside a timed region is seen through NVML's cumulative violation counters
(``nvmlDeviceGetViolationStatus``: nanoseconds the device was held below its clocks by the power
or the thermal policy since the driver loaded); the difference between two readings is the capped
time between them. ``nvidia-smi``, ``amd-smi`` and ``rocm-smi`` readings carry no such counter (the
reading says so in its problems).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any, Callable

GPU_CLK_ENV = "SOL_EXECBENCH_GPU_CLK_MHZ"
DRAM_CLK_ENV = "SOL_EXECBENCH_DRAM_CLK_MHZ"
LOCK_TOLERANCE_MHZ = 50
TOOL_TIMEOUT_S = 5.0



@dataclass(frozen=True)
class LockPreset:
    """The clocks ``lock_clocks`` expects on devices whose name starts with ``name_pattern`` (a regex,
    case-insensitive). None: no value is known (SM: the env var is required; memory: unverified)."""

    label: str
    name_pattern: str
    sm_mhz: int | None
    mem_mhz: int | None


# First match wins, so form factors come before their family. SM values are upstream's clock-lock
# values; memory values are the part's (only) HBM clock, which differs by form factor and memory
# generation, so a family-wide value would fail one variant's check. AMD Instinct parts have no
# preset: their memory clock cannot be locked, and SOL_EXECBENCH_GPU_CLK_MHZ gives the SM clock.
LOCK_PRESETS: tuple[LockPreset, ...] = (
    LockPreset("B200", r"NVIDIA B200", 1500, 3996),
    LockPreset("H100 SXM (HBM3)", r"NVIDIA H100 \d+GB HBM3\b", 1410, 2619),
    LockPreset("H100 PCIe (HBM2e)", r"NVIDIA H100 PCIe", 1410, 1593),
    # H100 NVL (94 GB HBM3): its memory clock is not one we could confirm, so it is left unverified.
    LockPreset("H100 NVL", r"NVIDIA H100 NVL", 1410, None),
    LockPreset("H100 (other form factor)", r"NVIDIA H100\b", 1410, None),
    # H200 NVL has a lower SM clock ceiling than the SXM part; no value is known to us.
    LockPreset("H200 NVL", r"NVIDIA H200 NVL", None, None),
    # H200 SXM (HBM3e): not in upstream's table nor the configuration reference. 1980 MHz is the
    # part's maximum SM clock and 3201 MHz its HBM3e clock as nvidia-smi reports them; neither was
    # confirmed on a device here. Set SOL_EXECBENCH_GPU_CLK_MHZ / _DRAM_CLK_MHZ to override.
    LockPreset("H200 SXM (HBM3e)", r"NVIDIA H200\b", 1980, 3201),
    LockPreset("A100 SXM 80GB (HBM2e)", r"NVIDIA A100-SXM4-80GB", 1065, 1593),
    LockPreset("A100 PCIe 80GB (HBM2e)", r"NVIDIA A100 80GB PCIe", 1065, 1512),
    LockPreset("A100 40GB (HBM2)", r"NVIDIA A100-(SXM4|PCIE)-40GB", 1065, 1215),
    LockPreset("A100 (other form factor)", r"NVIDIA A100\b", 1065, None),
)

# NVML perf policies whose violation counters say the clocks were capped (nvmlPerfPolicyType_t;
# the numbers are nvml.h's, used when pynvml lacks the constant).
VIOLATION_POLICIES: dict[str, tuple[str, int]] = {
    "power": ("NVML_PERF_POLICY_POWER", 0),
    "thermal": ("NVML_PERF_POLICY_THERMAL", 1),
}
# Why other-process warnings can be missing: appended to a process-list problem.
NO_PROCESS_CHECK = "the other-processes check did not run"

# nvmlClocksEventReasons bits (nvml.h; formerly nvmlClocksThrottleReasons).
NVML_REASON_BITS: dict[int, str] = {
    0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
    0x10: "sync_boost", 0x20: "sw_thermal_slowdown", 0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
# Reasons that say nothing bad about a measurement (idle between readings, a user-set clock).
BENIGN_REASONS = frozenset({"gpu_idle", "applications_clocks_setting", "display_clock_setting", "sync_boost"})


@dataclass
class ClockReading:
    source: str
    sm_mhz: int | None = None
    mem_mhz: int | None = None
    throttle_reasons: list[str] | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    power_state: str | None = None
    processes: list[int] | None = None
    capped_ns: dict[str, int | None] | None = None
    """Cumulative ns capped by each VIOLATION_POLICIES policy (NVML counters); None: not read at all."""
    taken_ns: int = field(default_factory=time.monotonic_ns)
    """Host monotonic time of the reading (elapsed time between readings, independent of NVML)."""
    problems: list[str] = field(default_factory=list)

    def sample_fields(self) -> dict[str, Any]:
        """The fields a trace's ClockSample holds."""
        return {"sm_mhz": self.sm_mhz, "mem_mhz": self.mem_mhz, "throttle_reasons": self.throttle_reasons,
                "temperature_c": self.temperature_c, "power_w": self.power_w, "power_state": self.power_state}


def decode_nvml_reasons(mask: int) -> list[str]:
    return [name for bit, name in NVML_REASON_BITS.items() if mask & bit]


def run_tool(argv: list[str], timeout_s: float = TOOL_TIMEOUT_S) -> str | None:
    """A tool's stdout, or None when it is missing, fails or takes too long."""
    if shutil.which(argv[0]) is None:
        return None
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


# -- expected locked clocks ----------------------------------------------------------------------

def find_lock_preset(device_name: str) -> LockPreset | None:
    name = device_name.strip()
    return next((p for p in LOCK_PRESETS if re.match(p.name_pattern, name, re.IGNORECASE)), None)


def expected_locked_clocks(device_name: str, environ: dict[str, str] | None = None) -> tuple[int | None, int | None, str]:
    """(SM MHz, memory MHz, where they came from): each env override, else the device's preset."""
    env = os.environ if environ is None else environ
    preset = find_lock_preset(device_name)
    gpu_text, dram_text = env.get(GPU_CLK_ENV, "").strip(), env.get(DRAM_CLK_ENV, "").strip()
    from_preset = f"the {preset.label} preset for '{device_name}'" if preset else None
    sm = int(gpu_text) if gpu_text.isdigit() else (preset.sm_mhz if preset else None)
    mem = int(dram_text) if dram_text.isdigit() else (preset.mem_mhz if preset else None)
    sm_from = GPU_CLK_ENV if gpu_text.isdigit() else (from_preset if sm is not None else None)
    mem_from = DRAM_CLK_ENV if dram_text.isdigit() else (from_preset if mem is not None else None)
    if sm_from is None and mem_from is None:
        return sm, mem, "nothing"
    if sm_from == mem_from or mem_from is None:
        return sm, mem, str(sm_from)
    return sm, mem, f"SM: {sm_from or 'nothing'}; memory: {mem_from}"


def lock_problems(readings: list[ClockReading], expected_sm: int, expected_mem: int | None,
                  tolerance_mhz: int = LOCK_TOLERANCE_MHZ) -> list[str]:
    """Why these readings (taken under load) do not show clocks locked at the expected values."""
    sms = [r.sm_mhz for r in readings if r.sm_mhz is not None]
    if not sms:
        why = "; ".join(sorted({p for r in readings for p in r.problems})) or "no reading"
        return [f"the SM clock could not be read ({why})"]
    problems = []
    off = [v for v in sms if abs(v - expected_sm) > tolerance_mhz]
    if off:
        problems.append(f"SM clock under load {sorted(set(sms))} MHz, expected {expected_sm} +/- {tolerance_mhz} MHz")
    mems = [r.mem_mhz for r in readings if r.mem_mhz is not None]
    if expected_mem is not None:
        if not mems:
            problems.append("the memory clock could not be read")
        elif any(abs(v - expected_mem) > tolerance_mhz for v in mems):
            problems.append(f"memory clock under load {sorted(set(mems))} MHz, expected {expected_mem} +/- "
                            f"{tolerance_mhz} MHz")
    return problems


def other_processes(pids: list[int] | None, own_pid: int) -> list[int]:
    """Processes other than this one using the GPU. Inside a container the driver reports host
    pids: when ours is not among them, one process is taken to be us."""
    if not pids:
        return []
    if own_pid in pids:
        return sorted(p for p in pids if p != own_pid)
    return sorted(pids) if len(pids) > 1 else []


def capped_between(before: ClockReading, after: ClockReading) -> tuple[dict[str, float | None], list[str]]:
    """Milliseconds each policy capped the clocks between two readings (None where a counter is
    missing from either: the readings' problems say why), and what was odd about the counters."""
    capped: dict[str, float | None] = {}
    problems = []
    for policy in VIOLATION_POLICIES:
        first, last = (before.capped_ns or {}).get(policy), (after.capped_ns or {}).get(policy)
        if first is None or last is None:
            capped[policy] = None
        elif last < first:  # a driver reload resets the counters
            capped[policy] = None
            problems.append(f"{policy} violation counter went backwards ({first} -> {last} ns)")
        else:
            capped[policy] = (last - first) / 1e6
    return capped, problems


# -- NVIDIA ------------------------------------------------------------------------------------

def _nvml_field(reading: ClockReading, label: str, read: Callable[[], Any]) -> Any:
    try:
        return read()
    except Exception as exc:  # noqa: BLE001  (NVML raises NVMLError_NotSupported etc.)
        reading.problems.append(f"{label}: {exc}")
        return None


def _nvml_handle(nvml: Any, index: int | None, uuid: str | None) -> Any:
    if uuid:
        ident = uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"
        try:
            return nvml.nvmlDeviceGetHandleByUUID(ident)
        except Exception:  # noqa: BLE001
            pass
    if any(os.environ.get(v) for v in ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")) and not uuid:
        raise RuntimeError("device visibility is remapped and no UUID was given: NVML's index may be another GPU")
    return nvml.nvmlDeviceGetHandleByIndex(index or 0)


def read_nvml(index: int | None, uuid: str | None, nvml: Any = None) -> ClockReading:
    reading = ClockReading("nvml")
    try:
        if nvml is None:
            import pynvml as nvml  # noqa: PLC0415  (optional: nvidia-ml-py)
        nvml.nvmlInit()
        handle = _nvml_handle(nvml, index, uuid)
    except Exception as exc:  # noqa: BLE001
        reading.problems.append(f"NVML unavailable: {exc}")
        return reading
    reading.sm_mhz = _nvml_field(reading, "sm clock", lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM))
    reading.mem_mhz = _nvml_field(reading, "memory clock", lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM))
    reasons = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or nvml.nvmlDeviceGetCurrentClocksThrottleReasons
    mask = _nvml_field(reading, "clock event reasons", lambda: reasons(handle))
    reading.throttle_reasons = decode_nvml_reasons(int(mask)) if mask is not None else None
    reading.temperature_c = _nvml_field(reading, "temperature", lambda: float(nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)))
    milliwatts = _nvml_field(reading, "power", lambda: nvml.nvmlDeviceGetPowerUsage(handle))
    reading.power_w = milliwatts / 1000.0 if milliwatts is not None else None
    pstate = _nvml_field(reading, "performance state", lambda: nvml.nvmlDeviceGetPerformanceState(handle))
    reading.power_state = f"P{pstate}" if pstate is not None else None
    procs = _nvml_field(reading, f"processes ({NO_PROCESS_CHECK})",
                        lambda: nvml.nvmlDeviceGetComputeRunningProcesses(handle))
    reading.processes = sorted({int(p.pid) for p in procs}) if procs is not None else None
    reading.capped_ns = _nvml_violation_counters(nvml, handle, reading)
    return reading


def _nvml_violation_counters(nvml: Any, handle: Any, reading: ClockReading) -> dict[str, int | None]:
    counters: dict[str, int | None] = {}
    for policy, (constant, fallback) in VIOLATION_POLICIES.items():
        kind = getattr(nvml, constant, fallback)
        status = _nvml_field(reading, f"{policy} violation time",
                             lambda kind=kind: nvml.nvmlDeviceGetViolationStatus(handle, kind))
        # violationTime is in ns (nvml.h); referenceTime is a CPU timestamp in us and is not needed.
        counters[policy] = int(status.violationTime) if status is not None else None
    return counters


def parse_nvidia_smi_csv(text: str) -> ClockReading:
    """``nvidia-smi --query-gpu=clocks.sm,clocks.mem,clocks_event_reasons.active,temperature.gpu,power.draw,pstate
    --format=csv,noheader,nounits`` for one GPU."""
    reading = ClockReading("nvidia-smi")
    parts = [p.strip() for p in text.strip().splitlines()[0].split(",")] if text.strip() else []
    if len(parts) < 6:
        reading.problems.append(f"unexpected nvidia-smi output: {text[:80]!r}")
        return reading
    number = lambda s: float(s) if re.fullmatch(r"-?\d+(\.\d+)?", s) else None  # noqa: E731
    sm, mem, mask, temp, power, pstate = parts[:6]
    reading.sm_mhz = int(number(sm)) if number(sm) is not None else None
    reading.mem_mhz = int(number(mem)) if number(mem) is not None else None
    reading.throttle_reasons = decode_nvml_reasons(int(mask, 16)) if mask.lower().startswith("0x") else None
    reading.temperature_c, reading.power_w = number(temp), number(power)
    reading.power_state = pstate if pstate.startswith("P") else None
    return reading


def parse_nvidia_smi_compute_apps(text: str) -> tuple[list[int], list[str]]:
    """``nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits``: the pids,
    and lines that name no pid. No process is empty output or a "No running processes found" line;
    ``[N/A]`` memory (MIG, some containers) is fine, since only the pid is used."""
    pids, problems = set(), []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.lower().startswith("no running processes"):
            continue
        pid = line.split(",")[0].strip()
        if pid.isdigit():
            pids.add(int(pid))
        else:
            problems.append(f"processes: nvidia-smi listed a process without a pid: {line[:60]!r}")
    return sorted(pids), problems


def nvidia_smi_target(index: int | None, uuid: str | None) -> str:
    """What ``nvidia-smi -i`` takes: the GPU's UUID where known (the index is the host's numbering,
    which differs from torch's under CUDA_VISIBLE_DEVICES), else the index."""
    if uuid and not uuid.startswith("MIG-"):
        return uuid if uuid.startswith("GPU-") else f"GPU-{uuid}"
    return str(index or 0)


def read_nvidia_smi(index: int | None, uuid: str | None = None) -> ClockReading:
    target = nvidia_smi_target(index, uuid)
    fields = "clocks.sm,clocks.mem,clocks_event_reasons.active,temperature.gpu,power.draw,pstate"
    text = run_tool(["nvidia-smi", "-i", target, f"--query-gpu={fields}", "--format=csv,noheader,nounits"])
    if text is None:
        return ClockReading("nvidia-smi", problems=["nvidia-smi unavailable or failed",
                                                    f"processes: not read ({NO_PROCESS_CHECK})"])
    reading = parse_nvidia_smi_csv(text)
    apps = run_tool(["nvidia-smi", "-i", target, "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"])
    if apps is None:
        reading.problems.append(f"processes: nvidia-smi --query-compute-apps failed ({NO_PROCESS_CHECK})")
    else:
        reading.processes, problems = parse_nvidia_smi_compute_apps(apps)
        reading.problems.extend(problems)
    reading.problems.append("power/thermal capped time: not measured (needs NVML's violation counters)")
    return reading


# -- AMD ---------------------------------------------------------------------------------------

def _value(node: Any) -> float | None:
    """amd-smi numbers are {"value": N, "unit": ...} or bare; "N/A" is None."""
    if isinstance(node, dict):
        node = node.get("value")
    try:
        return float(node)
    except (TypeError, ValueError):
        return None


def _amd_gpu_entry(data: Any, index: int) -> dict | None:
    entries = data.get("gpu_data", data) if isinstance(data, dict) else data
    if isinstance(entries, dict):
        entries = list(entries.values())
    if not isinstance(entries, list):
        return None
    return next((e for e in entries if isinstance(e, dict) and e.get("gpu") == index), None) or (
        entries[0] if len(entries) == 1 and isinstance(entries[0], dict) else None)


def parse_amd_smi_metric(text: str, index: int) -> ClockReading:
    """``amd-smi metric -g N --json`` (both the ``{"gpu_data": [...]}`` and the bare-list shapes)."""
    reading = ClockReading("amd-smi")
    try:
        entry = _amd_gpu_entry(json.loads(text), index)
    except ValueError:
        entry = None
    if entry is None:
        reading.problems.append(f"unexpected amd-smi output: {text[:80]!r}")
        return reading
    clock, power, temp = entry.get("clock") or {}, entry.get("power") or {}, entry.get("temperature") or {}
    sm, mem = _value((clock.get("gfx_0") or {}).get("clk")), _value((clock.get("mem_0") or {}).get("clk"))
    reading.sm_mhz, reading.mem_mhz = (int(sm) if sm is not None else None), (int(mem) if mem is not None else None)
    status = power.get("throttle_status")
    reading.throttle_reasons = (["throttled"] if status == "THROTTLED" else []) if isinstance(status, str) else None
    reading.temperature_c = _value(temp.get("hotspot")) if _value(temp.get("hotspot")) is not None else _value(temp.get("edge"))
    reading.power_w = _value(power.get("socket_power"))
    level = entry.get("perf_level")
    reading.power_state = str(level).replace("AMDSMI_DEV_PERF_LEVEL_", "").lower() if level else None
    return reading


def parse_rocm_smi(text: str) -> ClockReading:
    """``rocm-smi -d N --showclocks --showtemp --showpower --showperflevel --json``."""
    reading = ClockReading("rocm-smi")
    try:
        cards = json.loads(text)
        card = next(iter(v for k, v in cards.items() if k.startswith("card")))
    except (ValueError, StopIteration, AttributeError):
        reading.problems.append(f"unexpected rocm-smi output: {text[:80]!r}")
        return reading
    mhz = lambda s: int(m.group(1)) if (m := re.search(r"(\d+)\s*Mhz", str(s), re.IGNORECASE)) else None  # noqa: E731
    for key, value in card.items():
        low = key.lower()
        if low.startswith("sclk clock speed"):
            reading.sm_mhz = mhz(value)
        elif low.startswith("mclk clock speed"):
            reading.mem_mhz = mhz(value)
        elif low.startswith("temperature") and ("junction" in low or ("edge" in low and reading.temperature_c is None)):
            reading.temperature_c = _value(value)
        elif "power (w)" in low and reading.power_w is None:
            reading.power_w = _value(value)
        elif low.startswith("performance level"):
            reading.power_state = str(value).lower()
    return reading


def _pids_in(node: Any) -> set[int]:
    if isinstance(node, dict):
        found = {int(v) for k, v in node.items() if k == "pid" and str(v).isdigit()}
        return found.union(*(_pids_in(v) for v in node.values())) if node else found
    if isinstance(node, list):
        return set().union(*(_pids_in(v) for v in node)) if node else set()
    return set()


def parse_amd_smi_process(text: str | None) -> tuple[list[int] | None, list[str]]:
    """``amd-smi process -g N --json``: every ``pid`` in it (an idle GPU lists a "No running
    processes detected" string instead of process entries)."""
    if not text or not text.strip():
        return None, [f"processes: amd-smi process failed or printed nothing ({NO_PROCESS_CHECK})"]
    try:
        return sorted(_pids_in(json.loads(text))), []
    except ValueError:
        return None, [f"processes: amd-smi process output unreadable ({NO_PROCESS_CHECK})"]


# amd-smi's throttle/violation metrics differ between ROCm releases in names and units, so they are
# not parsed: on AMD the capped time inside a timed region is not measured, and the trace says so.
AMD_NO_CAPPED_TIME = "power/thermal capped time: not measured on AMD (amd-smi's violation counters are not parsed)"


def read_amd(index: int | None) -> ClockReading:
    gpu = str(index or 0)
    text = run_tool(["amd-smi", "metric", "-g", gpu, "--json"])
    if text is not None:
        reading = parse_amd_smi_metric(text, index or 0)
        reading.processes, problems = parse_amd_smi_process(run_tool(["amd-smi", "process", "-g", gpu, "--json"]))
        reading.problems.extend(problems + [AMD_NO_CAPPED_TIME])
        return reading
    text = run_tool(["rocm-smi", "-d", gpu, "--showclocks", "--showtemp", "--showpower", "--showperflevel", "--json"])
    if text is not None:
        reading = parse_rocm_smi(text)
        # rocm-smi --showpids lists every GPU's processes without saying which GPU: not usable here.
        reading.problems.extend([f"processes: not read through rocm-smi ({NO_PROCESS_CHECK})", AMD_NO_CAPPED_TIME])
        return reading
    return ClockReading("none", problems=["neither amd-smi nor rocm-smi answered", f"processes: not read ({NO_PROCESS_CHECK})"])


class ClockReader:
    """Reads one GPU's clocks; the first source that works is kept for later readings."""

    def __init__(self, vendor: str, index: int | None, uuid: str | None = None):
        self.vendor, self.index, self.uuid = vendor, index, uuid
        self._use_smi = False

    def read(self) -> ClockReading:
        try:
            if self.vendor == "rocm":
                return read_amd(self.index)
            if self.vendor != "cuda":
                return ClockReading("none", problems=["no GPU"])
            if not self._use_smi:
                reading = read_nvml(self.index, self.uuid)
                if reading.sm_mhz is not None:
                    return reading
                self._use_smi = True
                fallback = read_nvidia_smi(self.index, self.uuid)
                fallback.problems = reading.problems + fallback.problems
                return fallback
            return read_nvidia_smi(self.index, self.uuid)
        except Exception as exc:  # noqa: BLE001  (a probe never ends an evaluation)
            return ClockReading("none", problems=[f"clock reading failed: {exc!r}", f"processes: not read ({NO_PROCESS_CHECK})"])
