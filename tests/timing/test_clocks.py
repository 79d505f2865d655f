"""Clock readings (recorded tool output, a fake NVML), lock verification and what reaches the trace."""

from __future__ import annotations

from pathlib import Path

import pytest

from sol_execbench.platform import DeviceInfo
from sol_execbench.platform import clocks
from sol_execbench.platform.clocks import ClockReading

DATA = Path(__file__).parent / "data"
H100 = DeviceInfo(vendor="cuda", torch_device="cuda:0", index=0, name="NVIDIA H100 80GB HBM3", arch="sm_90a",
                  compute_units=132, l2_bytes=50 * 2**20, memory_bytes=80 * 2**30, runtime_version="12.8")


def test_amd_smi_metric_is_parsed():
    r = clocks.parse_amd_smi_metric((DATA / "amd_smi_metric.json").read_text(), 0)
    assert (r.sm_mhz, r.mem_mhz, r.temperature_c, r.power_w) == (2090, 1300, 61.0, 612.0)
    assert r.throttle_reasons == ["throttled"] and r.power_state == "auto" and r.problems == []


def test_amd_smi_bare_list_shape_and_garbage():
    r = clocks.parse_amd_smi_metric('[{"gpu": 3, "clock": {"gfx_0": {"clk": 1500}}}]', 3)
    assert r.sm_mhz == 1500 and r.mem_mhz is None
    assert clocks.parse_amd_smi_metric("not json", 0).problems


def test_rocm_smi_is_parsed():
    r = clocks.parse_rocm_smi((DATA / "rocm_smi.json").read_text())
    assert (r.sm_mhz, r.mem_mhz, r.temperature_c, r.power_w, r.power_state) == (1700, 1600, 55.0, 301.0, "auto")


def test_nvidia_smi_csv_is_parsed():
    r = clocks.parse_nvidia_smi_csv("1980, 2619, 0x0000000000000004, 61, 312.45, P0\n")
    assert (r.sm_mhz, r.mem_mhz, r.temperature_c, r.power_w, r.power_state) == (1980, 2619, 61.0, 312.45, "P0")
    assert r.throttle_reasons == ["sw_power_cap"]
    assert clocks.parse_nvidia_smi_csv("[N/A]").problems


def test_nvml_reason_bits():
    assert clocks.decode_nvml_reasons(0x1 | 0x40) == ["gpu_idle", "hw_thermal_slowdown"]
    assert clocks.decode_nvml_reasons(0) == []


class FakeNvml:
    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0

    def __init__(self, fail_power=False):
        self.fail_power = fail_power

    def nvmlInit(self):
        pass

    def nvmlDeviceGetHandleByUUID(self, uuid):
        assert uuid.startswith("GPU-")
        return "handle"

    def nvmlDeviceGetHandleByIndex(self, index):
        return "handle"

    def nvmlDeviceGetClockInfo(self, handle, which):
        return {1: 1410, 2: 1593}[which]

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        return 0x4

    def nvmlDeviceGetTemperature(self, handle, sensor):
        return 58

    def nvmlDeviceGetPowerUsage(self, handle):
        if self.fail_power:
            raise RuntimeError("Not Supported")
        return 350_500

    def nvmlDeviceGetPerformanceState(self, handle):
        return 0

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        return [type("P", (), {"pid": 4242})(), type("P", (), {"pid": 77})()]


def test_nvml_reading_with_partial_failures():
    r = clocks.read_nvml(0, "abcd-1234", nvml=FakeNvml(fail_power=True))
    assert (r.source, r.sm_mhz, r.mem_mhz, r.power_state, r.temperature_c) == ("nvml", 1410, 1593, "P0", 58.0)
    assert r.throttle_reasons == ["sw_power_cap"] and r.processes == [77, 4242]
    assert r.power_w is None and r.problems == ["power: Not Supported"]


def test_nvml_missing_is_a_problem_not_an_error():
    class Broken:
        def nvmlInit(self):
            raise OSError("libnvidia-ml.so.1 not found")

    r = clocks.read_nvml(0, None, nvml=Broken())
    assert r.sm_mhz is None and "NVML unavailable" in r.problems[0]


def test_expected_clocks_from_env_then_preset():
    assert clocks.expected_locked_clocks("NVIDIA H100 80GB HBM3", {}) == (1410, 1593, "the 'NVIDIA H100 80GB HBM3' preset")
    env = {clocks.GPU_CLK_ENV: "1755", clocks.DRAM_CLK_ENV: "2619"}
    assert clocks.expected_locked_clocks("NVIDIA H100", env) == (1755, 2619, clocks.GPU_CLK_ENV)
    assert clocks.expected_locked_clocks("AMD Instinct MI300X", {}) == (None, None, "nothing")


def test_lock_problems():
    at = [ClockReading("nvml", sm_mhz=1400, mem_mhz=1593), ClockReading("nvml", sm_mhz=1455, mem_mhz=1600)]
    assert clocks.lock_problems(at, 1410, 1593) == []
    off = [ClockReading("nvml", sm_mhz=1980, mem_mhz=2619)]
    problems = clocks.lock_problems(off, 1410, 1593)
    assert "SM clock under load [1980] MHz, expected 1410 +/- 50 MHz" in problems[0] and "memory clock" in problems[1]
    assert clocks.lock_problems([ClockReading("nvml", sm_mhz=1410)], 1410, None) == []
    assert "could not be read" in clocks.lock_problems([ClockReading("none", problems=["no NVML"])], 1410, None)[0]


def test_other_processes_inside_and_outside_a_pid_namespace():
    assert clocks.other_processes([10, 20], own_pid=10) == [20]
    assert clocks.other_processes([99999], own_pid=10) == []  # only us, seen under a host pid
    assert clocks.other_processes([5, 6], own_pid=10) == [5, 6]
    assert clocks.other_processes(None, own_pid=10) == []


class FakeReader:
    def __init__(self, readings):
        self.readings = list(readings)

    def read(self):
        return self.readings.pop(0) if len(self.readings) > 1 else self.readings[0]


def test_clock_record_and_warnings_for_a_workload():
    from sol_execbench.evaluate.clock_watch import ClockWatch

    start = ClockReading("nvml", sm_mhz=345, mem_mhz=1593, temperature_c=40.0, power_state="P8", processes=[1234])
    hot = ClockReading("nvml", sm_mhz=1700, mem_mhz=1593, throttle_reasons=["gpu_idle", "sw_thermal_slowdown"],
                       processes=[1234, 5678], problems=["power: Not Supported"])
    watch = ClockWatch(H100, reader=FakeReader([start, hot]))
    watch.sample("w1", "before_timing")
    watch.sample("w1", "after_timing")
    record = watch.record_for("w1")
    assert [s.when for s in record.samples] == ["start", "before_timing", "after_timing"]
    assert record.samples[0].power_state == "P8" and record.samples[0].temperature_c == 40.0
    assert record.source == "nvml" and record.partial_reasons == ["power: Not Supported"]
    warnings = " | ".join(watch.warnings_for("w1"))
    assert "sw_thermal_slowdown" in warnings and "gpu_idle" not in warnings
    assert watch.record_for("other").samples[-1].when == "start"
    assert watch.shared("w1") is True  # the timing then decides host-bound on the call's own host time
    alone = ClockWatch(H100, reader=FakeReader([ClockReading("nvml", processes=[])]))
    alone.sample("w1", "before_timing")
    assert alone.shared("w1") is False


def test_lock_verification_messages(monkeypatch):
    from sol_execbench.evaluate.clock_watch import ClockWatch

    monkeypatch.delenv(clocks.GPU_CLK_ENV, raising=False)
    monkeypatch.delenv(clocks.DRAM_CLK_ENV, raising=False)
    unknown = DeviceInfo(**{**H100.to_dict(), "name": "Mystery GPU"})
    assert "no locked clock is known for 'Mystery GPU'" in ClockWatch(unknown, reader=FakeReader([ClockReading("nvml")])).verify_lock()
    watch = ClockWatch(H100, reader=FakeReader([ClockReading("nvml")]))
    monkeypatch.setattr(watch, "_under_load", lambda: [ClockReading("nvml", sm_mhz=1980, mem_mhz=1593)])
    message = watch.verify_lock()
    assert "not locked" in message and "1980" in message and "never changes clocks" in message
    assert watch.record_for("w").lock_verified is False and watch.record_for("w").expected_sm_mhz == 1410
    monkeypatch.setattr(watch, "_under_load", lambda: [ClockReading("nvml", sm_mhz=1405, mem_mhz=1600)])
    assert watch.verify_lock() is None and watch.record_for("w").lock_verified is True


def test_lock_clocks_without_the_env_var_fails_every_workload_before_any_child(monkeypatch):
    from exploit_problems import PROBLEMS, WORKLOADS, solution

    from sol_execbench.evaluate.api import evaluate

    monkeypatch.delenv("SOL_EXECBENCH_CLOCKS_LOCKED", raising=False)
    traces = evaluate(PROBLEMS["vadd"], WORKLOADS["vadd"], solution("s", "vadd", "def run(x, y):\n    return x + y\n"),
                      {"lock_clocks": True}, device="cpu")
    ev = traces[0].evaluation
    assert ev.status.value == "RUNTIME_ERROR" and "SOL_EXECBENCH_CLOCKS_LOCKED" in ev.log and "under load" in ev.log


@pytest.mark.gpu
def test_real_clock_reading_on_this_gpu():
    from sol_execbench.evaluate.clock_watch import ClockWatch
    from sol_execbench.platform import current

    watch = ClockWatch(current())
    watch.sample("w", "after_timing")
    record = watch.record_for("w")
    assert record.source in ("nvml", "nvidia-smi", "amd-smi", "rocm-smi")
    assert record.samples[-1].sm_mhz, record.partial_reasons
