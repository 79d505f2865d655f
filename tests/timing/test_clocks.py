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


def test_nvidia_smi_compute_apps_is_parsed():
    assert clocks.parse_nvidia_smi_compute_apps("12345, 1024\n678, [N/A]\n") == ([678, 12345], [])
    assert clocks.parse_nvidia_smi_compute_apps("") == ([], [])
    assert clocks.parse_nvidia_smi_compute_apps("No running processes found\n") == ([], [])
    pids, problems = clocks.parse_nvidia_smi_compute_apps("[N/A], [N/A]\n99, 10\n")
    assert pids == [99] and "without a pid" in problems[0]


def fake_tools(monkeypatch, answers):
    """run_tool answered from ``answers`` (argv fragment -> stdout or None); the calls are kept."""
    calls = []

    def run_tool(argv, timeout_s=clocks.TOOL_TIMEOUT_S):
        calls.append(argv)
        return next((out for key, out in answers.items() if key in " ".join(argv)), None)

    monkeypatch.setattr(clocks, "run_tool", run_tool)
    return calls


def test_nvidia_smi_fallback_reads_the_process_list(monkeypatch):
    calls = fake_tools(monkeypatch, {"--query-gpu": "1980, 2619, 0x0000000000000000, 61, 312.45, P0\n",
                                     "--query-compute-apps": "4242, 1024\n"})
    r = clocks.read_nvidia_smi(0, "6a8d3c6e-2f4b")
    assert r.processes == [4242] and r.sm_mhz == 1980
    assert all(argv[1:3] == ["-i", "GPU-6a8d3c6e-2f4b"] for argv in calls) and len(calls) == 2
    assert r.problems == ["power/thermal capped time: not measured (needs NVML's violation counters)"]
    fake_tools(monkeypatch, {"--query-gpu": "1980, 2619, 0x0, 61, 312.45, P0\n"})
    r = clocks.read_nvidia_smi(3, None)
    assert r.processes is None and any("other-processes check did not run" in p for p in r.problems)
    assert clocks.nvidia_smi_target(3, None) == "3" and clocks.nvidia_smi_target(3, "MIG-ab") == "3"


# amd-smi process --json, in the shape amd-smi 6.x prints (reconstructed from its documentation).
AMD_SMI_PROCESS = ('[{"gpu": 0, "process_list": [{"process_info": {"name": "python3", "pid": 41235, '
                   '"memory_usage": {"gtt_mem": {"value": 2, "unit": "MiB"}, "vram_mem": {"value": 1024, "unit": "MiB"}}, '
                   '"usage": {"gfx": {"value": 0, "unit": "ns"}}}}]}]')
AMD_SMI_NO_PROCESS = '[{"gpu": 0, "process_list": [{"process_info": "No running processes detected"}]}]'


def test_amd_process_lists(monkeypatch):
    assert clocks.parse_amd_smi_process(AMD_SMI_PROCESS) == ([41235], [])
    assert clocks.parse_amd_smi_process(AMD_SMI_NO_PROCESS) == ([], [])
    for broken in (None, "", "not json"):
        pids, problems = clocks.parse_amd_smi_process(broken)
        assert pids is None and "other-processes check did not run" in problems[0]
    fake_tools(monkeypatch, {"amd-smi metric": (DATA / "amd_smi_metric.json").read_text(), "amd-smi process": AMD_SMI_PROCESS})
    r = clocks.read_amd(0)
    assert r.processes == [41235] and r.problems == [clocks.AMD_NO_CAPPED_TIME]
    fake_tools(monkeypatch, {"rocm-smi": (DATA / "rocm_smi.json").read_text()})
    r = clocks.read_amd(0)
    assert r.source == "rocm-smi" and r.processes is None
    assert any("other-processes check did not run" in p for p in r.problems) and clocks.AMD_NO_CAPPED_TIME in r.problems


def test_nvml_reason_bits():
    assert clocks.decode_nvml_reasons(0x1 | 0x40) == ["gpu_idle", "hw_thermal_slowdown"]
    assert clocks.decode_nvml_reasons(0) == []


class FakeNvml:
    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0
    NVML_PERF_POLICY_POWER, NVML_PERF_POLICY_THERMAL = 0, 1

    def __init__(self, fail_power=False, violation_ns=None, fail_policy=None):
        self.fail_power = fail_power
        self.violation_ns = violation_ns or {0: 5_000_000, 1: 0}
        self.fail_policy = fail_policy

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

    def nvmlDeviceGetViolationStatus(self, handle, policy):
        if policy == self.fail_policy:
            raise RuntimeError("Not Supported")
        return type("ViolationTime", (), {"referenceTime": 1_700_000_000_000_000, "violationTime": self.violation_ns[policy]})()


def test_nvml_reading_with_partial_failures():
    r = clocks.read_nvml(0, "abcd-1234", nvml=FakeNvml(fail_power=True))
    assert (r.source, r.sm_mhz, r.mem_mhz, r.power_state, r.temperature_c) == ("nvml", 1410, 1593, "P0", 58.0)
    assert r.throttle_reasons == ["sw_power_cap"] and r.processes == [77, 4242]
    assert r.power_w is None and r.problems == ["power: Not Supported"]
    assert r.capped_ns == {"power": 5_000_000, "thermal": 0}


def test_nvml_violation_counter_failure_is_a_problem():
    r = clocks.read_nvml(0, "abcd-1234", nvml=FakeNvml(fail_policy=1))
    assert r.capped_ns == {"power": 5_000_000, "thermal": None}
    assert r.problems == ["thermal violation time: Not Supported"] and r.sm_mhz == 1410


def test_nvml_process_failure_says_the_check_did_not_run():
    class NoProcesses(FakeNvml):
        def nvmlDeviceGetComputeRunningProcesses(self, handle):
            raise RuntimeError("Insufficient Permissions")

    r = clocks.read_nvml(0, "abcd-1234", nvml=NoProcesses())
    assert r.processes is None and "other-processes check did not run" in r.problems[0]


def test_capped_time_between_two_readings():
    before = ClockReading("nvml", capped_ns={"power": 1_000_000, "thermal": 7})
    after = ClockReading("nvml", capped_ns={"power": 4_500_000, "thermal": None})
    assert clocks.capped_between(before, after) == ({"power": 3.5, "thermal": None}, [])
    reset = ClockReading("nvml", capped_ns={"power": 10, "thermal": 7})
    capped, problems = clocks.capped_between(before, reset)
    assert capped == {"power": None, "thermal": 0.0} and "went backwards" in problems[0]
    assert clocks.capped_between(ClockReading("nvidia-smi"), after) == ({"power": None, "thermal": None}, [])


def test_nvml_missing_is_a_problem_not_an_error():
    class Broken:
        def nvmlInit(self):
            raise OSError("libnvidia-ml.so.1 not found")

    r = clocks.read_nvml(0, None, nvml=Broken())
    assert r.sm_mhz is None and "NVML unavailable" in r.problems[0]


@pytest.mark.parametrize("name, sm, mem", [
    ("NVIDIA H100 80GB HBM3", 1410, 2619),  # SXM: HBM3
    ("NVIDIA H100 PCIe", 1410, 1593),  # HBM2e
    ("NVIDIA H100 NVL", 1410, None),
    ("NVIDIA H100 80GB HBM3 MIG 1g.10gb", 1410, 2619),
    ("NVIDIA H200", 1980, 3201),
    ("NVIDIA H200 NVL", None, None),  # not the SXM part's clocks
    ("NVIDIA GH200 480GB", None, None),
    ("NVIDIA B200", 1500, 3996),
    ("NVIDIA A100-SXM4-40GB", 1065, 1215),
    ("NVIDIA A100-SXM4-80GB", 1065, 1593),
    ("NVIDIA A100 80GB PCIe", 1065, 1512),
    ("AMD Instinct MI300X", None, None),
])
def test_presets_tell_form_factors_apart(name, sm, mem):
    assert clocks.expected_locked_clocks(name, {})[:2] == (sm, mem)


def test_expected_clocks_from_env_then_preset():
    assert clocks.expected_locked_clocks("NVIDIA H100 80GB HBM3", {}) == (
        1410, 2619, "the H100 SXM (HBM3) preset for 'NVIDIA H100 80GB HBM3'")
    env = {clocks.GPU_CLK_ENV: "1755", clocks.DRAM_CLK_ENV: "2619"}
    assert clocks.expected_locked_clocks("NVIDIA H100", env) == (
        1755, 2619, f"SM: {clocks.GPU_CLK_ENV}; memory: {clocks.DRAM_CLK_ENV}")
    sm_only = {clocks.GPU_CLK_ENV: "1755"}
    assert clocks.expected_locked_clocks("NVIDIA H100 PCIe", sm_only) == (
        1755, 1593, f"SM: {clocks.GPU_CLK_ENV}; memory: the H100 PCIe (HBM2e) preset for 'NVIDIA H100 PCIe'")
    assert clocks.expected_locked_clocks("AMD Instinct MI300X", sm_only) == (1755, None, clocks.GPU_CLK_ENV)
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
    from sol_execbench.evaluate.child.clock_watch import ClockWatch

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
    assert record.other_processes == [1234, 5678] and "other processes use this GPU" in warnings
    alone = ClockWatch(H100, reader=FakeReader([ClockReading("nvml", processes=[])]))
    alone.sample("w1", "before_timing")
    assert alone.record_for("w1").other_processes is None


def test_lock_verification_messages(monkeypatch):
    from sol_execbench.evaluate.child.clock_watch import ClockWatch

    monkeypatch.delenv(clocks.GPU_CLK_ENV, raising=False)
    monkeypatch.delenv(clocks.DRAM_CLK_ENV, raising=False)
    unknown = DeviceInfo(**{**H100.to_dict(), "name": "Mystery GPU"})
    assert "no locked clock is known for 'Mystery GPU'" in ClockWatch(unknown, reader=FakeReader([ClockReading("nvml")])).verify_lock()
    watch = ClockWatch(H100, reader=FakeReader([ClockReading("nvml")]))
    monkeypatch.setattr(watch, "_under_load", lambda: [ClockReading("nvml", sm_mhz=1980, mem_mhz=1593)])
    message = watch.verify_lock()
    assert "not locked" in message and "1980" in message and "never changes clocks" in message
    assert watch.record_for("w").lock_verified is False and watch.record_for("w").expected_sm_mhz == 1410
    monkeypatch.setattr(watch, "_under_load", lambda: [ClockReading("nvml", sm_mhz=1405, mem_mhz=2600)])
    assert watch.verify_lock() is None and watch.record_for("w").lock_verified is True
    assert not any("memory clock was not" in w for w in watch.warnings_for("w"))


def test_lock_with_only_an_sm_clock_says_the_memory_clock_was_not_verified(monkeypatch):
    from sol_execbench.evaluate.child.clock_watch import ClockWatch

    monkeypatch.setenv(clocks.GPU_CLK_ENV, "2100")
    monkeypatch.delenv(clocks.DRAM_CLK_ENV, raising=False)
    mi300 = DeviceInfo(**{**H100.to_dict(), "vendor": "rocm", "name": "AMD Instinct MI300X", "arch": "gfx942"})
    watch = ClockWatch(mi300, reader=FakeReader([ClockReading("amd-smi")]))
    monkeypatch.setattr(watch, "_under_load", lambda: [ClockReading("amd-smi", sm_mhz=2090, mem_mhz=1300)])
    assert watch.verify_lock() is None
    record = watch.record_for("w")
    assert record.lock_verified is True and record.expected_mem_mhz is None
    assert any("memory clock was not" in p and clocks.DRAM_CLK_ENV in p for p in record.partial_reasons)
    assert any("memory clock was not" in w for w in watch.warnings_for("w"))
    monkeypatch.setattr(watch, "_under_load", lambda: [ClockReading("amd-smi", sm_mhz=1500)])
    assert "rocm-smi --setperfdeterminism" in watch.verify_lock()


def test_capped_time_around_the_timed_calls_is_recorded_and_warned():
    from sol_execbench.evaluate.child.clock_watch import ClockWatch

    def at(ms, power_ns, thermal_ns):
        return ClockReading("nvml", sm_mhz=1980, capped_ns={"power": power_ns, "thermal": thermal_ns},
                            taken_ns=int(ms * 1e6))

    readings = [at(0, 0, 0), at(1000, 2_000_000, 500_000), at(1250, 42_000_000, 700_000)]
    watch = ClockWatch(H100, reader=FakeReader(readings))
    watch.sample("w1", "before_timing")
    watch.sample("w1", "after_timing")
    record = watch.record_for("w1")
    assert record.capped_ms == {"power": 40.0, "thermal": 0.2} and record.capped_region_ms == 250.0
    assert record.model_dump()["capped_ms"]["power"] == 40.0  # reaches the trace's JSON
    warnings = [w for w in watch.warnings_for("w1") if "capped" in w]
    assert len(warnings) == 1 and "power-capped for 40.0 ms of the 250.0 ms" in warnings[0]  # thermal: under 1 ms
    unread = ClockWatch(H100, reader=FakeReader([ClockReading("nvidia-smi", sm_mhz=1980)]))
    unread.sample("w1", "before_timing")
    unread.sample("w1", "after_timing")
    assert getattr(unread.record_for("w1"), "capped_ms", None) is None
    assert not [w for w in unread.warnings_for("w1") if "capped" in w]


def test_short_caps_in_a_long_region_are_not_warned():
    from sol_execbench.evaluate.child.clock_watch import ClockWatch

    long_region = [ClockReading("nvml", capped_ns={"power": 0, "thermal": 0}, taken_ns=0),
                   ClockReading("nvml", capped_ns={"power": 5_000_000, "thermal": 0}, taken_ns=int(10e9))]
    watch = ClockWatch(H100, reader=FakeReader([ClockReading("nvml")] + long_region))
    watch.sample("w1", "before_timing")
    watch.sample("w1", "after_timing")
    assert watch.record_for("w1").capped_ms == {"power": 5.0, "thermal": 0.0}  # 0.05% of 10 s
    assert not [w for w in watch.warnings_for("w1") if "capped" in w]


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
    from sol_execbench.evaluate.child.clock_watch import ClockWatch
    from sol_execbench.platform import current

    watch = ClockWatch(current())
    watch.sample("w", "after_timing")
    record = watch.record_for("w")
    assert record.source in ("nvml", "nvidia-smi", "amd-smi", "rocm-smi")
    assert record.samples[-1].sm_mhz, record.partial_reasons
