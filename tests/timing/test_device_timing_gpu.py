"""The device, events and graph methods on a real GPU (marked ``gpu``; skipped without one)."""

from __future__ import annotations

import threading
import time

import pytest

pytestmark = pytest.mark.gpu


@pytest.fixture
def gpu():
    from sol_execbench.platform import current

    return current()


@pytest.fixture(autouse=True)
def cuda_state_left_clean():
    """Each test leaves the default stream current and the CUDA generator usable (a failed graph
    capture once left it in capture mode, and every later test's torch.randn failed)."""
    import torch

    yield
    from sol_execbench.evaluate.timing_methods.graph import reset_after_failed_capture

    stream_ok = torch.cuda.current_stream() == torch.cuda.default_stream()
    try:
        torch.randn(1, device="cuda")
        rng_ok = True
    except RuntimeError:
        rng_ok = False
    if not (stream_ok and rng_ok):
        torch.cuda.set_stream(torch.cuda.default_stream())
        reset_after_failed_capture()  # so the next test starts clean, then fail this one
        pytest.fail(f"the test left CUDA state behind: default stream current {stream_ok}, CUDA RNG usable {rng_ok}")


def _time(fn, values, gpu, method="device", iterations=20, warmup=3, keeper=None):
    from sol_execbench.evaluate.timing import FreshArgs, L2Flusher, time_calls

    fresh = FreshArgs([values], slots=warmup + iterations + 1)
    return time_calls(fn, fresh, warmup=warmup, iterations=iterations, device=gpu, flusher=L2Flusher(gpu),
                      method=method, keepers=[keeper] if keeper else None)


def _vectors(n=1 << 12):
    import torch

    return [torch.randn(n, device="cuda"), torch.randn(n, device="cuda")]


def test_device_time_of_a_tiny_kernel_excludes_the_flush_and_launch(gpu):
    m = _time(lambda x, y: x + y, _vectors(), gpu)
    # On a slow host the raw host span passes 100 us; the note then says the bracket explains it.
    assert m.method == "device" and m.host_bound is False and (m.note is None or "not host-bound" in m.note), m.note
    assert 0 < m.stats().median_ms < 0.015  # a 4096-element add: a few us; the flush alone takes far longer
    assert m.warnings == [] and m.suspicious == []


def test_the_clock_probe_reads_the_sm_clock_nvml_reports(gpu):
    """The probe's clock after each call of a tiny kernel (no power cap) against NVML's reading
    right after the loop: the same clock within 5% (H100: 1981 MHz probe slope, 1980 NVML)."""
    import torch

    from sol_execbench.evaluate.clock_watch import device_uuid
    from sol_execbench.platform.clocks import ClockReader

    if torch.version.cuda is None:
        pytest.skip("the clock probe runs on NVIDIA only")
    m = _time(lambda x, y: x + y, _vectors(), gpu)
    nvml = ClockReader(gpu.vendor, gpu.index, device_uuid(gpu)).read()
    assert m.sm_clock_mhz is not None and len(m.sm_clock_mhz) == 20
    if nvml.sm_mhz is None:
        pytest.skip(f"NVML gave no SM clock: {nvml.problems}")
    assert abs(m.stats().sm_clock_median_mhz - nvml.sm_mhz) <= 0.05 * nvml.sm_mhz, (m.sm_clock_mhz, nvml.sm_mhz)


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

    plain = _time(one_stream, [a], gpu).stats().median_ms
    split = _time(two_streams, [a], gpu).stats().median_ms
    assert split >= 0.8 * plain


def test_a_call_that_launches_nothing_is_reported_and_timed_by_the_host(gpu):
    import torch

    ready = torch.zeros(4096, device="cuda")
    m = _time(lambda x, y: ready, _vectors(), gpu)
    assert m.method == "device", m.note
    assert any("launched no kernel" in w for w in m.warnings), m.warnings
    assert m.host_bound is True and m.stats().median_ms == m.stats().host_median_ms


def test_host_work_makes_the_call_host_bound(gpu):
    def slow_host(x, y):
        time.sleep(0.001)
        return x + y

    m = _time(slow_host, _vectors(), gpu)
    assert m.method == "device", m.note
    assert m.host_bound is True and m.stats().median_ms >= 1.0


def test_a_profiler_already_running_falls_back_to_events_and_is_suspicious(gpu):
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]):
        m = _time(lambda x, y: x + y, _vectors(), gpu)
    assert m.method == "events" and "device unavailable" in m.note and m.suspicious


def test_graph_method_and_its_fallback(gpu):
    import torch

    m = _time(lambda x, y: x + y, _vectors(), gpu, method="graph")
    assert m.method == "graph" and "graph(s), one per input set" in m.note, m.note
    m = _time(lambda x, y: x + torch.rand_like(y), _vectors(), gpu, method="graph")  # random draws are capturable
    assert m.method == "graph", m.note
    m = _time(lambda x, y: (x + y) * float((x > 0).sum().item() > 0), _vectors(), gpu, method="graph")
    assert m.method in ("device", "events") and "graph capture failed" in m.note, m.note
    assert "not restored" not in m.note and any("was not used" in w for w in m.warnings)


@pytest.mark.xfail(reason="known defect (H100, torch 2.11): after graphs were captured and replayed, a failed "
                          "capture leaves the profiler with no CUDA records, so the fallback lands on events; "
                          "a failed capture in a process without earlier graphs falls back to device (next test)",
                   strict=False)
def test_a_failed_capture_after_successful_ones_falls_back_to_device(gpu):
    _time(lambda x, y: x + y, _vectors(), gpu, method="graph")
    m = _time(lambda x, y: (x + y) * float((x > 0).sum().item() > 0), _vectors(), gpu, method="graph")
    assert m.method == "device", m.note


def test_a_failed_capture_leaves_the_process_as_it_was(gpu):
    import torch

    torch.manual_seed(7)
    expected = torch.randn(8, device="cuda")
    torch.manual_seed(7)
    m = _time(lambda x, y: x * float(y.sum().item()), _vectors(), gpu, method="graph")
    assert m.method == "device" and "graph capture failed" in m.note, m.note
    assert torch.cuda.current_stream() == torch.cuda.default_stream()
    torch.manual_seed(7)
    assert torch.equal(torch.randn(8, device="cuda"), expected)  # the generator draws, and as before


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
    assert m.method == "device", m.note
    assert any("outside the timed calls" in s or "no launch record" in s for s in m.suspicious), m.suspicious


def test_audited_call_keeps_its_output_under_every_method(gpu):
    import torch

    from sol_execbench.evaluate.timing import CallKeeper, FreshArgs, L2Flusher, time_calls

    for method in ("device", "events", "graph"):
        fresh = FreshArgs([_vectors()], slots=30)
        special = [torch.full((4096,), 2.0, device="cuda"), torch.full((4096,), 3.0, device="cuda")]
        fresh.substitute(5, special)
        keeper = CallKeeper(5)
        time_calls(lambda x, y: x + y, fresh, warmup=3, iterations=10, device=gpu, flusher=L2Flusher(gpu),
                   method=method, keepers=[keeper])
        assert torch.equal(keeper.kept, torch.full((4096,), 5.0, device="cuda")), method


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
    assert m.method == "device", m.note
    assert m.host_bound is True and m.stats().median_ms >= 1.0, m.note
