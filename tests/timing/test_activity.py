"""Grouping device activity records per timed call (synthetic records, no GPU needed)."""

from __future__ import annotations

from types import SimpleNamespace

from torch._C._autograd import DeviceType  # what the events' device_type() returns

from sol_execbench.evaluate.child.timing.activity import (Activity, CallActivity, attribute, foreign_description,
                                                            from_kineto, probe_durations, sm_clocks_mhz,
                                                            work_set_warnings)
from sol_execbench.evaluate.child.timing.calls import CALL_RANGE, PROBE_RANGE, SETUP_RANGE


def _range(name, start, end, corr):
    return Activity("user_annotation", name, start, end, correlation=corr)


def _kernel(name, start, end, corr=0, linked=0, stream=7):
    return Activity("kernel", name, start, end, correlation=corr, linked=linked, stream=stream)


def _launch(start, corr):
    return Activity("cuda_runtime", "cudaLaunchKernel", start, start + 2, correlation=corr)


def _timeline():
    """setup (flush) | call#0: 2 kernels on 2 streams | setup | call#1: 1 kernel launched from another thread."""
    return [
        _range(SETUP_RANGE, 0, 10, corr=1), _launch(5, corr=100), _kernel("flush_zero", 20, 60, corr=100, linked=1),
        _range(f"{CALL_RANGE}#0", 100, 200, corr=2),
        Activity("cpu_op", "aten::mm", 110, 150, correlation=3),
        _launch(120, corr=101), _kernel("gemm", 300, 400, corr=101, linked=3, stream=7),
        _launch(160, corr=102), _kernel("side", 320, 450, corr=102, linked=2, stream=9),
        _range(SETUP_RANGE, 500, 510, corr=4), _launch(505, corr=103), _kernel("flush_zero", 520, 560, corr=103, linked=4),
        _range(f"{CALL_RANGE}#1", 600, 700, corr=5),
        _launch(650, corr=104), _kernel("gemm", 800, 900, corr=104, linked=0),  # another thread: no CPU op linked
    ]


def test_kernels_are_grouped_by_the_call_that_launched_them():
    found = attribute(_timeline(), 2, CALL_RANGE, SETUP_RANGE)
    assert [a.name for a in found.calls[0].device] == ["gemm", "side"]
    assert [a.name for a in found.calls[1].device] == ["gemm"]
    assert found.setup_count == 2 and not found.foreign and not found.unmatched


def test_span_covers_every_stream_from_first_start_to_last_end():
    found = attribute(_timeline(), 2, CALL_RANGE, SETUP_RANGE)
    assert found.calls[0].span_ns == 450 - 300  # side stream ends last
    assert found.calls[1].span_ns == 100


def test_flush_and_copies_in_setup_ranges_are_left_out():
    found = attribute(_timeline(), 2, CALL_RANGE, SETUP_RANGE)
    assert all(a.name != "flush_zero" for c in found.calls for a in c.device)


def test_work_launched_outside_every_range_is_foreign():
    records = _timeline() + [_launch(550, corr=200), _kernel("late_work", 950, 990, corr=200)]
    found = attribute(records, 2, CALL_RANGE, SETUP_RANGE)
    assert [a.name for a in found.foreign] == ["late_work"]
    assert "late_work" in foreign_description(found.foreign)


def test_records_without_a_launch_record_are_unmatched_not_counted():
    records = _timeline() + [_kernel("orphan", 950, 990, corr=999)]
    found = attribute(records, 2, CALL_RANGE, SETUP_RANGE)
    assert [a.name for a in found.unmatched] == ["orphan"]


def test_memcpy_counts_in_the_span():
    records = _timeline() + [_launch(690, corr=300), Activity("gpu_memcpy", "Memcpy HtoD", 905, 950, correlation=300)]
    found = attribute(records, 2, CALL_RANGE, SETUP_RANGE)
    assert found.calls[1].span_ns == 950 - 800


def test_host_functions_enqueued_inside_calls_are_found():
    host_fn = Activity("cuda_driver", "cuLaunchHostFunc", 170, 175, correlation=400)
    harness_fn = Activity("cuda_runtime", "cudaLaunchHostFunc", 502, 504, correlation=401)  # in a setup range
    found = attribute(_timeline() + [host_fn, harness_fn], 2, CALL_RANGE, SETUP_RANGE)
    assert found.host_functions == ["cuLaunchHostFunc"]
    assert attribute(_timeline(), 2, CALL_RANGE, SETUP_RANGE).host_functions == []


def test_same_kernel_sets_give_no_warning():
    calls = [CallActivity(i, [_kernel("gemm", 0, 1)]) for i in range(3)]
    assert work_set_warnings(calls) == []


def test_different_kernel_sets_are_listed():
    calls = [CallActivity(0, [_kernel("gemm", 0, 1), _kernel("hash", 1, 2)]), CallActivity(1, [_kernel("hash", 0, 1)]),
             CallActivity(2, [_kernel("hash", 0, 1)])]
    (warning,) = work_set_warnings(calls)
    assert "different kernel sets (2 kinds)" in warning and "2 call(s): {hash}" in warning and "{gemm, hash}" in warning


def test_calls_without_a_kernel_are_reported():
    calls = [CallActivity(0, [_kernel("gemm", 0, 1)]),
             CallActivity(1, [Activity("gpu_memcpy", "Memcpy HtoD", 0, 1)]), CallActivity(2, [])]
    warnings = work_set_warnings(calls)
    assert any("2 of 3 timed call(s) launched no kernel" in w for w in warnings)


def _kineto_event(kind, name, start, end, corr=0, linked=0, stream=0):
    """Duck-typed ``_KinetoEvent``: each accessor is a method, as in torch."""
    values = {"activity_type": kind, "name": name, "start_ns": start, "end_ns": end, "correlation_id": corr,
              "linked_correlation_id": linked, "device_resource_id": stream, "device_type": DeviceType.CPU}
    return SimpleNamespace(**{key: (lambda v=value: v) for key, value in values.items()})


def test_kineto_events_become_records_and_other_kinds_are_dropped():
    events = [_kineto_event("user_annotation", f"{CALL_RANGE}#0", 0, 10, 1),
              _kineto_event("kernel", "k", 20, 30, 5, 1, stream=3),
              _kineto_event("python_function", "f", 0, 1), _kineto_event("gpu_user_annotation", "g", 0, 1)]
    records = from_kineto(events)
    assert [(r.kind, r.name, r.stream) for r in records] == [("user_annotation", f"{CALL_RANGE}#0", None), ("kernel", "k", 3)]


def test_a_real_cpu_profile_parses_and_finds_the_call_ranges():
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    x = torch.randn(64)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for i in range(2):
            with record_function(SETUP_RANGE):
                y = x.clone()
            with record_function(f"{CALL_RANGE}#{i}"):
                y.add_(1)
    records = from_kineto(prof.profiler.kineto_results.events())
    names = [r.name for r in records if r.kind == "user_annotation"]
    assert names.count(SETUP_RANGE) == 2 and f"{CALL_RANGE}#1" in names
    found = attribute(records, 2, CALL_RANGE, SETUP_RANGE)
    assert [c.span_ns for c in found.calls] == [None, None]  # CPU only: no device records


def test_a_launch_from_another_thread_during_setup_is_foreign():
    """The setup ranges' launches come from the harness's thread; one from another thread that
    lands while a setup range is open is not the harness's work."""
    def launch(start, corr, thread):
        return Activity("cuda_runtime", "cudaLaunchKernel", start, start + 2, correlation=corr, thread=thread)

    records = [_range(SETUP_RANGE, 0, 10, corr=1), launch(2, 100, 11), _kernel("flush_zero", 20, 60, corr=100),
               launch(5, 101, 11), _kernel("copy", 60, 70, corr=101),
               launch(7, 102, 99), _kernel("late_work", 80, 90, corr=102),
               _range(f"{CALL_RANGE}#0", 100, 200, corr=2), launch(150, 103, 99), _kernel("gemm", 300, 400, corr=103)]
    found = attribute(records, 1, CALL_RANGE, SETUP_RANGE)
    assert found.setup_count == 2 and [a.name for a in found.foreign] == ["late_work"]
    assert [a.name for a in found.calls[0].device] == ["gemm"]  # any thread's launch inside a call is the call's


def _old_kineto_event(name, device, start=0, end=1, corr=0, linked=0, resource=0):
    """A ``_KinetoEvent`` of torch 2.11: no ``activity_type()`` accessor."""
    values = {"name": name, "start_ns": start, "end_ns": end, "correlation_id": corr, "linked_correlation_id": linked,
              "device_resource_id": resource, "device_type": getattr(DeviceType, device)}
    return SimpleNamespace(**{key: (lambda v=value: v) for key, value in values.items()})


def test_record_kinds_are_inferred_where_torch_has_no_activity_type():
    events = [_old_kineto_event(SETUP_RANGE, "CPU", 0, 10, corr=1),
              _old_kineto_event("aten::fill_", "CPU", 1, 9, corr=2),
              _old_kineto_event("cudaLaunchKernel", "CPU", 2, 4, corr=100, resource=77),
              _old_kineto_event("cudaMemcpyAsync", "CPU", 5, 6, corr=101, resource=77),
              _old_kineto_event("cuLaunchKernelEx", "CPU", 6, 7, corr=102, resource=77),
              _old_kineto_event("void at::native::vectorized_elementwise_kernel<4>", "CUDA", 20, 30, corr=100, linked=2,
                                resource=7),
              _old_kineto_event("Memcpy DtoD (Device -> Device)", "CUDA", 30, 40, corr=101, resource=7),
              _old_kineto_event("Memset (Device)", "CUDA", 40, 41, corr=103, resource=7),
              _old_kineto_event(f"{CALL_RANGE}#0", "CUDA", 20, 40, resource=7),  # the range projected on the GPU
              _old_kineto_event("add_kernel", "CUDA", 50, 60, corr=102, resource=7)]
    records = from_kineto(events)
    assert [r.kind for r in records] == ["user_annotation", "cpu_op", "cuda_runtime", "cuda_runtime", "cuda_runtime",
                                         "kernel", "gpu_memcpy", "gpu_memset", "kernel"]
    assert records[2].thread == 77 and records[5].stream == 7


def test_a_setup_range_opened_inside_a_call_is_forged_and_hides_nothing():
    """A solution that wraps its work in record_function('sol_execbench::setup') does not get it
    left out as the harness's own: the range is not the harness's, and it is reported."""
    records = [_range(SETUP_RANGE, 0, 10, corr=1), _launch(5, corr=100), _kernel("flush_zero", 20, 60, corr=100),
               _range(f"{CALL_RANGE}#0", 100, 200, corr=2), _range(SETUP_RANGE, 110, 150, corr=3),
               _launch(120, corr=101), _kernel("gemm", 300, 400, corr=101, linked=3)]
    found = attribute(records, 1, CALL_RANGE, SETUP_RANGE)
    assert [a.name for a in found.calls[0].device] == ["gemm"] and found.setup_count == 1
    assert found.forged_ranges == [SETUP_RANGE]


def test_ranges_from_another_thread_are_not_the_harnesss():
    def on(thread, name, start, end, corr):
        return Activity("user_annotation", name, start, end, correlation=corr, thread=thread)

    records = [on(1, SETUP_RANGE, 0, 10, 1), on(1, f"{CALL_RANGE}#0", 100, 200, 2), on(1, f"{CALL_RANGE}#1", 300, 400, 3),
               on(2, SETUP_RANGE, 210, 290, 4), _launch(250, corr=101), _kernel("late", 500, 600, corr=101)]
    found = attribute(records, 2, CALL_RANGE, SETUP_RANGE)
    assert found.forged_ranges == [SETUP_RANGE] and [a.name for a in found.foreign] == ["late"]


def _with_probes():
    """The timeline with the clock probe: two zero-cycle probes before the calls, one 20,000-cycle
    probe after each call (1 us floor; 11 us and 12 us: 2.0 and about 1.82 GHz)."""
    return _timeline() + [
        _range(f"{PROBE_RANGE}#0", 60, 62, corr=6), _launch(61, corr=110), _kernel("spin_kernel", 62, 1062, corr=110),
        _range(f"{PROBE_RANGE}#0", 70, 72, corr=7), _launch(71, corr=111), _kernel("spin_kernel", 72, 1072, corr=111),
        _range(f"{PROBE_RANGE}#20000", 210, 212, corr=8), _launch(211, corr=112),
        _kernel("spin_kernel", 460, 11460, corr=112),
        _range(f"{PROBE_RANGE}#20000", 710, 712, corr=9), _launch(711, corr=113),
        _kernel("spin_kernel", 910, 12910, corr=113),
    ]


def test_the_clock_probe_is_the_harnesss_own_work_not_a_calls():
    found = attribute(_with_probes(), 2, CALL_RANGE, SETUP_RANGE)
    assert [a.name for a in found.calls[0].device] == ["gemm", "side"]
    assert [a.name for a in found.calls[1].device] == ["gemm"]
    assert found.setup_count == 6 and not found.foreign and not found.forged_ranges


def test_probe_durations_give_the_sm_clock_of_each_call():
    probes = probe_durations(_with_probes(), PROBE_RANGE)
    assert probes == [(0, 1000), (0, 1000), (20000, 11000), (20000, 12000)]
    clocks = sm_clocks_mhz(probes)
    assert [round(c) for c in clocks] == [2000, 1818]
    assert sm_clocks_mhz([(20000, 11000)]) == []  # nothing to calibrate the launch's floor against


def test_a_gap_ranges_probe_is_its_first_kernel_not_the_hold_or_the_flush_after_it():
    """The gap range after a call opens with the probe; the next call's arguments, hold and flush
    follow in it. All link to the same range, so the probe is told by running first."""
    records = [
        _range(f"{PROBE_RANGE}#0", 60, 62, corr=6), _launch(61, corr=110), _kernel("spin_kernel", 62, 1062, corr=110),
        _range(f"{PROBE_RANGE}#20000", 210, 290, corr=8),
        _launch(230, corr=113), _kernel("copy", 11_500, 11_600, corr=113, linked=8),
        _launch(250, corr=114), _kernel("spin_kernel", 11_600, 200_000, corr=114, linked=8),  # the hold
        _launch(211, corr=112), _kernel("spin_kernel", 460, 11_460, corr=112, linked=8),  # the probe
        _launch(270, corr=115), _kernel("flush_zero", 200_000, 240_000, corr=115),  # found by its launch
    ]
    assert probe_durations(records, PROBE_RANGE) == [(0, 1000), (20000, 11_000)]
    assert [round(c) for c in sm_clocks_mhz(probe_durations(records, PROBE_RANGE))] == [2000]


def test_a_probe_range_opened_inside_a_call_is_forged():
    records = _timeline() + [_range(f"{PROBE_RANGE}#5", 110, 150, corr=6)]
    found = attribute(records, 2, CALL_RANGE, SETUP_RANGE)
    assert found.forged_ranges == [f"{PROBE_RANGE}#5"]
