"""Grouping device activity records per timed call (synthetic records, no GPU needed)."""

from __future__ import annotations

from types import SimpleNamespace

from sol_execbench.evaluate.timing_methods.activity import (Activity, CallActivity, attribute, foreign_description,
                                                            from_kineto, work_set_warnings)
from sol_execbench.evaluate.timing_methods.base import CALL_RANGE, SETUP_RANGE


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
              "linked_correlation_id": linked, "device_resource_id": stream, "device_type": "DeviceType.CPU"}
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
