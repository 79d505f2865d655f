"""The paired measurement on a real GPU: device and events passes, host pass (marked ``gpu``)."""

from __future__ import annotations

import threading
import time

import pytest

pytestmark = pytest.mark.gpu
ALLOWANCE_MS = 0.1


@pytest.fixture
def gpu():
    from sol_execbench.platform import current

    return current()


def _time(fn, values, gpu, method="device", iterations=20, warmup=3, keeper=None, reference=None):
    """The solution side (and the reference, if given) measured as an evaluation does."""
    from sol_execbench.evaluate.child.timing import FreshArgs, L2Flusher, SideCalls, TimingPlan, measure

    slots = warmup + 2 * iterations + 2
    solution = SideCalls("solution", fn, FreshArgs([values], slots=slots), [keeper] if keeper else [])
    ref = SideCalls("reference", reference, FreshArgs([values], slots=slots)) if reference is not None else None
    return measure(solution, ref, TimingPlan(warmup=warmup, rounds=iterations, device=gpu, flusher=L2Flusher(gpu),
                                             method=method, allowance_ms=ALLOWANCE_MS))


def _vectors(n=1 << 12):
    import torch

    return [torch.randn(n, device="cuda"), torch.randn(n, device="cuda")]


def test_device_time_of_a_tiny_kernel_excludes_the_flush_and_launch(gpu):
    m = _time(lambda x, y: x + y, _vectors(), gpu)
    assert m.solution.instrument == "device" and not m.solution.host_bound, m.notes
    assert 0 < m.solution.latency_ms < 0.015  # a 4096-element add: a few us; the flush alone takes far longer
    assert m.warnings == () and m.suspicious == ()


def test_the_clock_probe_reads_the_sm_clock_nvml_reports(gpu):
    """The probe's clock after each call of a tiny kernel (no power cap) against NVML's reading
    right after the loop: the same clock within 5% (H100: 1981 MHz probe slope, 1980 NVML)."""
    import torch

    from sol_execbench.evaluate.child.clock_watch import device_uuid
    from sol_execbench.platform.clocks import ClockReader

    if torch.version.cuda is None:
        pytest.skip("the clock probe runs on NVIDIA only")
    m = _time(lambda x, y: x + y, _vectors(), gpu)
    nvml = ClockReader(gpu.vendor, gpu.index, device_uuid(gpu)).read()
    clocks = m.solution.sm_clock_mhz
    assert len(clocks) == len(m.solution.device_ms) >= 20  # one per device-pass call (a second pass: more)
    if nvml.sm_mhz is None:
        pytest.skip(f"NVML gave no SM clock: {nvml.problems}")
    median = sorted(clocks)[len(clocks) // 2]
    assert abs(median - nvml.sm_mhz) <= 0.05 * nvml.sm_mhz, (clocks, nvml.sm_mhz)


def test_side_stream_work_is_inside_the_span(gpu):
    import torch

    side = torch.cuda.Stream()
    a = torch.randn(2048, 2048, device="cuda")

    def one_stream(x):
        return x @ x

    def two_streams(x):
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            y = x @ x
        torch.cuda.current_stream().wait_stream(side)
        return y

    m = _time(two_streams, [a], gpu, reference=one_stream)
    assert m.solution.latency_ms >= 0.8 * m.reference.latency_ms, (m.solution.device_ms, m.reference.device_ms)


def test_a_call_that_launches_nothing_is_reported_and_timed_by_the_host(gpu):
    import torch

    ready = torch.zeros(4096, device="cuda")
    m = _time(lambda x, y: ready, _vectors(), gpu)
    assert m.solution.instrument == "device", m.notes
    assert any("launched no kernel" in w for w in m.warnings), m.warnings
    assert m.solution.device_ms == (None,) * 20 and m.solution.latency_ms == m.solution.host_time_ms


def test_host_work_makes_the_call_host_bound(gpu):
    def slow_host(x, y):
        time.sleep(0.001)
        return x + y

    m = _time(slow_host, _vectors(), gpu, reference=lambda x, y: x + y)
    assert m.solution.instrument == "device", m.notes
    assert m.solution.host_bound and m.solution.latency_ms >= 1.0 - ALLOWANCE_MS
    assert m.speedup.verdict == "slower" and not m.reference.host_bound


def test_a_profiler_already_running_falls_back_to_events_and_is_suspicious(gpu):
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]):
        m = _time(lambda x, y: x + y, _vectors(), gpu)
    assert m.solution.instrument == "events" and "profiler unavailable" in m.notes[-1] and m.suspicious


def test_device_work_launched_by_another_thread_outside_the_calls_is_suspicious(gpu):
    """A thread woken by the call launches once the call has returned, while the harness waits
    for the device (the call leaves a long matmul running, so that wait is long)."""
    import torch

    a = torch.randn(1024, 1024, device="cuda")
    big = torch.randn(4096, 4096, device="cuda")
    wake = threading.Event()

    def late_launcher():
        while True:
            wake.wait()
            wake.clear()
            time.sleep(0.0002)  # the call has returned by now; the device is still busy with it
            a @ a

    threading.Thread(target=late_launcher, daemon=True).start()

    def fn(x, y):
        big @ big  # a few ms of device work left running when the call returns
        wake.set()
        return x + y

    m = _time(fn, _vectors(), gpu, warmup=1, iterations=10)
    assert m.solution.instrument == "device", m.notes
    assert any("outside the timed calls" in s or "no launch record" in s for s in m.suspicious), m.suspicious


def test_audited_call_keeps_its_output_under_every_method(gpu):
    import torch

    from sol_execbench.evaluate.child.timing import CallKeeper, FreshArgs, L2Flusher, SideCalls, TimingPlan, measure

    for method in ("device", "events"):
        for call_index in (5, 15):  # one in the device pass, one in the host pass
            fresh = FreshArgs([_vectors()], slots=30)
            special = [torch.full((4096,), 2.0, device="cuda"), torch.full((4096,), 3.0, device="cuda")]
            fresh.substitute(call_index, special)
            keeper = CallKeeper(call_index)
            measure(SideCalls("solution", lambda x, y: x + y, fresh, [keeper]), None,
                    TimingPlan(warmup=3, rounds=10, device=gpu, flusher=L2Flusher(gpu), method=method))
            assert torch.equal(keeper.kept, torch.full((4096,), 5.0, device="cuda")), (method, call_index)


def test_host_work_in_a_stream_ordered_host_function_is_host_bound(gpu):
    """The call enqueues a host function (cuLaunchHostFunc) that does 1 ms of host work after
    the call has returned; the device only copies. The call's own host time is small."""
    import ctypes

    import torch

    libcuda = ctypes.CDLL("libcuda.so.1")
    host_fn_type = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
    host_fn = host_fn_type(lambda _: time.sleep(0.001))
    staging = torch.zeros(4096, pin_memory=True)

    def deferred(x, y):
        stream = torch.cuda.current_stream()
        rc = libcuda.cuLaunchHostFunc(ctypes.c_void_p(stream.cuda_stream), host_fn, None)
        assert rc == 0, rc
        return staging.to(x.device, non_blocking=True)

    m = _time(deferred, _vectors(), gpu)
    assert m.solution.instrument == "device", m.notes
    assert m.solution.host_bound and m.solution.latency_ms >= 0.8 - ALLOWANCE_MS


def test_identical_code_reads_one_side_by_side(gpu):
    """A/A: the same function as reference and solution, one kernel (device time) or an eager RMSNorm of
    a dozen operators (host time: noisier, as the host's time per call moves from round to round)."""
    import torch

    def eager(x, w):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        h = torch.clamp(h.to(x.dtype).float() * (1.0 + w.float()), -65504.0, 65504.0)
        return (h * 1.0 + 0.0).to(x.dtype)

    rows = [torch.randn(7, 4096, device="cuda", dtype=torch.bfloat16), torch.randn(4096, device="cuda",
                                                                                    dtype=torch.bfloat16)]
    for fn, values, band in ((lambda x, y: x + y, _vectors(), 0.05), (eager, rows, 0.15)):
        m = _time(fn, values, gpu, reference=fn, iterations=50)
        assert abs(m.speedup.point - 1.0) <= band, (m.speedup, m.solution.latency_ms, m.reference.latency_ms)
