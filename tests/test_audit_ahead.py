"""Passes added after the planned ones (more host rounds, added device passes) carry an audited
call of their own: a solution that stops computing once the planned passes are over is caught there.
Built in this process, on the CPU, as the child builds it; the calls are made as a pass makes them."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from sol_execbench.evaluate.child.audit import audit_ahead, check_audit, plan_audits
from sol_execbench.evaluate.child.calls import Verdict
from sol_execbench.evaluate.child.correctness import RoundTally
from sol_execbench.evaluate.child.inputs import make_inputs
from sol_execbench.evaluate.child.timing import FreshArgs, SideCalls
from sol_execbench.schema import EvaluationStatus as S

from .test_failure_dump import _context, _workload

PLANNED_CALLS = 1 + 3  # one warm-up call, then the CPU's one pass of 3 rounds (_context's config)
STOPS_AFTER_PLANNED = (f"_calls = [0]\n\ndef run(a, b):\n    _calls[0] += 1\n"
                       f"    return a + b if _calls[0] <= {PLANNED_CALLS} else a * 0\n")


def _planned(tmp_path: Path, code: str):
    ctx = _context(tmp_path, code)
    workload = _workload()
    axes = ctx.definition.resolve_axes(workload.axes)
    first = make_inputs(ctx.definition, workload, ctx.torch_device, {}, None)
    fresh = FreshArgs([first], slots=16)
    warnings: list[str] = []
    audits = plan_audits(ctx, workload, {}, axes, fresh, first, warnings)
    side = SideCalls("solution", ctx.solution_fn, fresh, [a.keeper for a in audits],
                     audit_ahead=audit_ahead(ctx, workload, {}, axes, fresh, first, audits, warnings))
    return ctx, workload, axes, first, side, audits, warnings


def _calls(side: SideCalls, count: int) -> None:
    for _ in range(count):
        args = side.arguments()
        side.observe(args, side.call(args))


def _check_all(ctx, workload, axes, first, audits, warnings) -> None:
    for audit in audits:
        check_audit(ctx, workload, axes, {}, audit, RoundTally(), first, warnings)


def test_a_solution_that_stops_computing_after_the_planned_passes_is_caught_in_an_added_pass(tmp_path: Path):
    ctx, workload, axes, first, side, audits, warnings = _planned(tmp_path, STOPS_AFTER_PLANNED)
    planned = len(audits)
    _calls(side, PLANNED_CALLS)
    _check_all(ctx, workload, axes, first, audits, warnings)  # every planned audit saw it compute
    side.before_unforeseen_calls(5)
    assert len(audits) == planned + 1 and len(side.keepers) == planned + 1
    assert PLANNED_CALLS <= audits[-1].keeper.call_index < PLANNED_CALLS + 5
    _calls(side, 5)
    with pytest.raises(Verdict) as found:
        _check_all(ctx, workload, axes, first, audits, warnings)
    assert found.value.status is S.REWARD_HACK
    assert "of 5 of a pass added after the host pass" in found.value.message


def test_an_honest_solution_passes_the_audits_of_added_passes(tmp_path: Path):
    ctx, workload, axes, first, side, audits, warnings = _planned(tmp_path, "def run(a, b):\n    return a + b\n")
    _calls(side, PLANNED_CALLS)
    for count in (4, 4, 2):
        side.before_unforeseen_calls(count)
        _calls(side, count)
    assert len(audits) == len(side.keepers) and all(a.keeper.kept is not None for a in audits)
    _check_all(ctx, workload, axes, first, audits, warnings)
    assert warnings == []


def test_an_added_pass_whose_audit_inputs_cannot_be_made_runs_unaudited_with_a_warning(tmp_path: Path, monkeypatch):
    from sol_execbench.evaluate.child import audit

    ctx, workload, axes, first, side, audits, warnings = _planned(tmp_path, "def run(a, b):\n    return a + b\n")
    planned = len(audits)

    def no_memory(*_args, **_kwargs):
        raise torch.OutOfMemoryError("no room for another input set")

    monkeypatch.setattr(audit, "make_inputs", no_memory)
    side.before_unforeseen_calls(4)
    assert len(audits) == planned and len(side.keepers) == planned
    assert len(warnings) == 1 and "ran without an audited call" in warnings[0] and "OutOfMemoryError" in warnings[0]
