"""The unprofiled re-check of a host-bound verdict (evaluate/host_recheck.py), on the CPU: the
rule with stand-in calls, and the real call builders of measure.py with a small in-process context."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

from sol_execbench.evaluate import host_recheck
from sol_execbench.evaluate.timing import Measurement


def _host_bound(device_us: float = 20.0, host_us: float = 300.0, calls: int = 10) -> Measurement:
    return Measurement(times_ms=[host_us / 1e3] * calls, method="device", note="host-bound: ...",
                       device_ms=[device_us / 1e3] * calls, host_ms=[host_us / 1e3] * calls, host_bound=True)


def _calls(wall_ms: float, problem_at: int | None = None, cpu_ms: float | None = None):
    made = []

    def once(k):
        made.append(k)
        spans = host_recheck.CallSpans(wall_ms, wall_ms if cpu_ms is None else cpu_ms)
        return spans, ("call's outputs were wrong" if k == problem_at else None)
    return once, made


def test_a_verdict_the_profiler_made_is_taken_back(cpu_device):
    m = _host_bound()
    once, made = _calls(0.03)  # 30 us without the profiler: launch overhead, not host work
    host_recheck.recheck(m, once, cpu_device)
    assert made == list(range(host_recheck.RECHECK_CALLS))
    assert m.host_bound is False and m.times_ms == m.device_ms
    assert "not host-bound after all" in m.note and "outputs checked" in m.note
    assert m.stats().median_ms == pytest.approx(0.02)


def test_real_host_work_is_confirmed(cpu_device, monkeypatch):
    monkeypatch.setattr(host_recheck, "RECHECK_PAUSE_S", 0.0)
    m = _host_bound()
    once, made = _calls(0.5)
    host_recheck.recheck(m, once, cpu_device)
    assert m.host_bound is True and m.times_ms == m.host_ms and "confirmed by" in m.note
    assert made == list(range(2 * host_recheck.RECHECK_CALLS)) and "second of two rounds" in m.note


def test_a_host_slow_for_a_moment_gets_a_second_round(cpu_device, monkeypatch):
    """Seen on the H100 machine: an honest 17 us GEMM, 116 us unprofiled spans in one run of ten."""
    monkeypatch.setattr(host_recheck, "RECHECK_PAUSE_S", 0.0)
    made = []

    def once(k):
        made.append(k)
        wall = 0.116 if k < host_recheck.RECHECK_CALLS else 0.03
        return host_recheck.CallSpans(wall, wall), None

    m = _host_bound(device_us=17.0)
    host_recheck.recheck(m, once, cpu_device)
    assert m.host_bound is False and m.times_ms == m.device_ms and "second of two rounds" in m.note
    assert made == list(range(2 * host_recheck.RECHECK_CALLS))


def test_on_a_contended_machine_the_call_must_also_spend_cpu_time(cpu_device):
    # Seen on the H100 beside three other evaluations: 0.66 ms unprofiled spans around a 12 us
    # matmul whose calling thread spent some 20 us of CPU time in the call.
    m = _host_bound(device_us=12.0)
    host_recheck.recheck(m, _calls(0.66, cpu_ms=0.02)[0], cpu_device, contended=True)
    assert m.host_bound is False and m.times_ms == m.device_ms
    assert "contended machine" in m.note and "contended machine" in m.warnings[-1]

    # The same spans on a quiet machine: the wall clock is believed.
    m = _host_bound(device_us=12.0)
    host_recheck.recheck(m, _calls(0.66, cpu_ms=0.02)[0], cpu_device, contended=False)
    assert m.host_bound is True and "confirmed by" in m.note

    # Host work shows in the CPU time: confirmed even on a contended machine.
    m = _host_bound(device_us=12.0)
    host_recheck.recheck(m, _calls(0.66, cpu_ms=0.6)[0], cpu_device, contended=True)
    assert m.host_bound is True and "of CPU time in the call" in m.note

    # Host functions run on a driver thread, not the caller's: the wall clock alone decides.
    m = _host_bound(device_us=12.0)
    m.host_functions = 2
    host_recheck.recheck(m, _calls(0.66, cpu_ms=0.02)[0], cpu_device, contended=True)
    assert m.host_bound is True


def test_a_wrong_output_or_a_failure_keeps_the_verdict(cpu_device):
    m = _host_bound()
    once, made = _calls(0.01, problem_at=2)
    host_recheck.recheck(m, once, cpu_device)
    assert m.host_bound is True and made == [0, 1, 2] and "outputs were wrong" in m.warnings[-1]

    def broken(k):
        raise RuntimeError("no")

    m = _host_bound()
    host_recheck.recheck(m, broken, cpu_device)
    assert m.host_bound is True and "re-check without the profiler failed" in m.warnings[-1]


def test_only_host_bound_device_measurements_are_rechecked(cpu_device):
    once, made = _calls(0.01)
    for m in (Measurement(times_ms=[1.0], method="device", host_bound=False, device_ms=[1.0], host_ms=[1.0]),
              Measurement(times_ms=[1.0], method="cpu", host_bound=True),
              Measurement(times_ms=[0.3, 0.3], method="device", host_bound=True, device_ms=[0.02], host_ms=[0.3, 0.3])):
        host_recheck.recheck(m, once, cpu_device)
    assert made == []  # the last one had a call without device work: nothing to fall back to


def _context(tmp_path: Path, code: str, dps: bool = False):
    from sol_execbench.evaluate import guards
    from sol_execbench.evaluate.calls import Context
    from sol_execbench.evaluate.timing import L2Flusher
    from sol_execbench.platform import current
    from sol_execbench.schema import BenchmarkConfig, BuildRecord, Definition, Environment, Workload

    from tests.problems import add_definition, workloads

    namespace: dict = {}
    exec(compile(code, "kernel.py", "exec"), namespace)
    reference: dict = {}
    definition = Definition.model_validate(add_definition())
    exec(compile(definition.reference, "reference.py", "exec"), reference)
    device = current("cpu")
    ctx = Context(definition=definition, solution_name="s", solution_fn=namespace["run"], dps=dps,
                  reference_fn=reference["run"], custom_inputs_fn=None, config=BenchmarkConfig(), device=device,
                  staging_dir=tmp_path, environment=Environment(hardware="cpu"), build=BuildRecord(language="pytorch"),
                  integrity=guards.IntegritySnapshot(), flusher=L2Flusher(device))
    return ctx, Workload.model_validate(workloads(64)[0])


@pytest.mark.parametrize("dps", [False, True])
def test_the_solution_calls_are_checked_against_the_reference(tmp_path, dps):
    from sol_execbench.evaluate import measure

    honest = "def run(a, b, c=None):\n    if c is None:\n        return a + b\n    c.copy_(a + b)\n"
    ctx, workload = _context(tmp_path, honest, dps)
    once = measure._solution_once(ctx, workload, {"N": 64}, {})
    spans, problem = once(0)
    assert problem is None and spans.wall_ms > 0 and spans.cpu_ms > 0

    lazy = ("import torch\ndef run(a, b, c=None):\n    out = torch.zeros_like(a)\n"
            "    if c is None:\n        return out\n    c.copy_(out)\n")
    ctx, workload = _context(tmp_path, lazy, dps)
    _, problem = measure._solution_once(ctx, workload, {"N": 64}, {})(3)
    assert problem and problem.startswith("call 3's outputs were wrong")


def test_fresh_inputs_every_call_defeat_a_cache(tmp_path):
    """A solution that answers from a cache after its first call fails the re-check."""
    from sol_execbench.evaluate import measure

    caching = "_last = None\ndef run(a, b):\n    global _last\n    if _last is None:\n        _last = a + b\n    return _last\n"
    ctx, workload = _context(tmp_path, caching)
    once = measure._solution_once(ctx, workload, {"N": 64}, {})
    assert once(0)[1] is None
    assert once(1)[1] is not None


def test_the_reference_calls_take_bank_sets_in_turn(tmp_path):
    from sol_execbench.evaluate import measure

    seen = []
    ctx, _ = _context(tmp_path, "def run(a, b):\n    return a + b\n")
    ctx.reference_fn = lambda a, b: (seen.append(float(a[0])), time.sleep(0.001))
    bank = [[torch.full((4,), float(i)), torch.zeros(4)] for i in range(3)]
    once = measure._reference_once(ctx, bank)
    walls = [once(k)[0].wall_ms for k in range(4)]
    assert seen == [0.0, 1.0, 2.0, 0.0] and min(walls) >= 1.0
