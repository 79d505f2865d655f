"""``--dump-failures`` for every failing verdict with evidence, the dump's warnings, the worst
position with ``allow_negative_inf``, and a reference whose output contradicts the definition."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from sol_execbench import evaluate
from sol_execbench.schema import ToleranceSpec

from .conftest import LIGHT_CONFIG
from .problems import add_definition, solution, workloads

ADD = "def run(a, b):\n    return a + b\n"
DUMP_WARNING = "--dump-failures"
# A fresh child: a warm pool started earlier would serve children that imported the code before this change.
FRESH = {"use_warm_pool": False}


def _context(tmp_path: Path, code: str, definition: dict | None = None, dump_dir: Path | None = None,
             rounds: int = 1):
    """A Context built in this process (no child), as the child builds it."""
    from sol_execbench.evaluate.child import guards
    from sol_execbench.evaluate.child.calls import Context
    from sol_execbench.platform import current
    from sol_execbench.schema import BenchmarkConfig, BuildRecord, Definition, Environment

    namespace: dict = {}
    exec(compile(code, "kernel.py", "exec"), namespace)
    d = Definition.model_validate(definition or add_definition())
    reference: dict = {}
    exec(compile(d.reference, "reference.py", "exec"), reference)
    return Context(definition=d, solution_name="s", solution_fn=namespace["run"], dps=False,
                   reference_fn=reference["run"], custom_inputs_fn=None,
                   config=BenchmarkConfig(correctness_rounds=rounds, warmup_runs=1, iterations=3),
                   device=current("cpu"), staging_dir=tmp_path, environment=Environment(hardware="cpu"),
                   build=BuildRecord(language="pytorch"), integrity=guards.IntegritySnapshot(), dump_dir=dump_dir)


def _workload(uuid: str = "w0", n: int = 16, axes: dict | None = None, tolerance: dict | None = None):
    from sol_execbench.schema import Workload

    w = workloads(n)[0]
    w["uuid"] = uuid
    if axes is not None:
        w["axes"] = axes
    if tolerance is not None:
        w["tolerance"] = tolerance
    return Workload.model_validate(w)


def _dump_warnings(trace) -> list[str]:
    return [w for w in trace.evaluation.warnings if DUMP_WARNING in w]


# -- 1. failures outside the numerical comparison of the correctness rounds are dumped -------------

def test_solution_raising_in_a_correctness_round_dumps_inputs_and_reference(tmp_path: Path):
    dump = tmp_path / "dumps"
    (trace,) = evaluate(add_definition(), workloads(64), solution("def run(a, b):\n    raise ValueError('boom')\n"),
                        LIGHT_CONFIG, dump_failures=dump, **FRESH)
    assert trace.evaluation.status.value == "RUNTIME_ERROR"
    folder = dump / "vector_add" / "w0-64"
    note = json.loads((folder / "failure.json").read_text())
    tensors = load_file(str(folder / "tensors.safetensors"))
    assert note["status"] == "RUNTIME_ERROR" and "boom" in note["reason"]
    assert isinstance(note["seed"], int) and note["round"] == 0
    assert not any(name.startswith("solution.") for name in tensors)  # it produced nothing
    assert torch.equal(tensors["reference.c"], tensors["input.a"] + tensors["input.b"])


def test_a_solution_that_stops_computing_once_timed_is_dumped_from_its_audited_call(tmp_path: Path):
    dump = tmp_path / "dumps"
    stale = ("_calls = [0]\n_last = [None]\n\ndef run(a, b):\n    _calls[0] += 1\n    if _calls[0] <= 2:\n"
             "        _last[0] = a + b\n    return _last[0].clone()\n")
    (trace,) = evaluate(add_definition(), workloads(64), solution(stale), LIGHT_CONFIG, dump_failures=dump, **FRESH)
    assert trace.evaluation.status.value == "REWARD_HACK", trace.evaluation.log
    note = json.loads((dump / "vector_add" / "w0-64" / "failure.json").read_text())
    tensors = load_file(str(dump / "vector_add" / "w0-64" / "tensors.safetensors"))
    assert note["status"] == "REWARD_HACK" and "audited timed call" in note["where"] and note["seed"] is None
    assert torch.equal(tensors["reference.c"], tensors["input.a"] + tensors["input.b"])
    assert not torch.equal(tensors["solution.c"], tensors["reference.c"])


def test_a_verdict_carrying_evidence_from_timing_is_dumped(tmp_path: Path, monkeypatch):
    """measure.py raises such verdicts for the audited timed call, whose inputs came from a secret seed."""
    from sol_execbench.evaluate.child import workload_eval
    from sol_execbench.evaluate.child.calls import FailureEvidence, Verdict
    from sol_execbench.schema import Correctness, EvaluationStatus as S

    a, b = torch.randn(16), torch.randn(16)
    wrong = a + b
    wrong[5] += 3.0

    def failing_measure(*_args, **_kwargs):
        evidence = FailureEvidence(inputs=[a, b], solution_outputs=[wrong], reference_outputs=[a + b], seed=None,
                                   where="audited timed call 2 of 3", worst_output="c", worst_index=[5])
        raise Verdict(S.INCORRECT_NUMERICAL, "audited timed call: output 'c' is wrong",
                      Correctness(max_absolute_error=3.0), evidence)

    monkeypatch.setattr(workload_eval, "measure_workload", failing_measure)
    dump = tmp_path / "dumps"
    ctx = _context(tmp_path, ADD, dump_dir=dump)
    trace = workload_eval.evaluate_workload(ctx, _workload())
    assert trace.evaluation.status.value == "INCORRECT_NUMERICAL"
    note = json.loads((dump / "vector_add" / "w0" / "failure.json").read_text())
    tensors = load_file(str(dump / "vector_add" / "w0" / "tensors.safetensors"))
    assert note["seed"] is None and "secret" in note["seed_note"]
    assert note["where"] == "audited timed call 2 of 3" and note["round"] is None
    assert note["worst"]["index"] == [5]
    assert note["worst"]["solution_value"] - note["worst"]["reference_value"] == pytest.approx(3.0)
    assert torch.equal(tensors["input.a"], a) and torch.equal(tensors["solution.c"], wrong)


def test_evidence_from_check_names_the_worst_element(tmp_path: Path):
    from sol_execbench.evaluate.child.calls import FailureEvidence, compare_outputs

    ctx = _context(tmp_path, ADD)
    ref = torch.zeros(4, 5)
    sol = ref.clone()
    sol[3, 1] = 1.0
    check = compare_outputs(ctx, ToleranceSpec(), [sol], [ref])
    evidence = FailureEvidence.from_check(check, [ref, ref], [sol], [ref], seed=7, where="re-run")
    assert (evidence.worst_output, evidence.worst_index, evidence.seed) == ("c", [3, 1], 7)


# -- 2. a dump that cannot be written: one warning, on its own workload's trace ------------------

def test_unwritable_dump_dir_warns_once_on_the_failing_workloads_only(tmp_path: Path):
    not_a_dir = tmp_path / "dumps"
    not_a_dir.write_text("a file, not a directory")
    code = "def run(a, b):\n    return a + b + (1.0 if a.numel() == 16 else 0.0)\n"
    traces = evaluate(add_definition(), workloads(16, 32, 16), solution(code), LIGHT_CONFIG,
                      dump_failures=not_a_dir, **FRESH)
    assert [t.evaluation.status.value for t in traces] == ["INCORRECT_NUMERICAL", "PASSED", "INCORRECT_NUMERICAL"]
    assert len(_dump_warnings(traces[0])) == 1 and len(_dump_warnings(traces[2])) == 1
    assert _dump_warnings(traces[1]) == []
    assert str(not_a_dir) in _dump_warnings(traces[0])[0]
    assert not_a_dir.read_text() == "a file, not a directory"


# -- 3. allow_negative_inf keeps positions in the output's own coordinates -----------------------

def test_allow_negative_inf_reports_the_worst_index_in_the_tensors_shape():
    from sol_execbench.evaluate.child.correctness import compare

    ref = torch.zeros(3, 4)
    ref[0, 0] = ref[1, 2] = float("-inf")
    out = ref.clone()
    out[2, 3] = 1.0
    comp = compare(out, ref, ToleranceSpec(allow_negative_inf=True))
    assert comp.failed and comp.worst_index == [2, 3]
    assert comp.matched_ratio == pytest.approx(1 - 1 / 10)  # both -inf positions are left out of the ratio
    assert comp.correctness.max_absolute_error == pytest.approx(1.0)


def test_allow_negative_inf_everywhere_passes_and_lone_minus_inf_fails():
    from sol_execbench.evaluate.child.correctness import compare

    ref = torch.full((2, 2), float("-inf"))
    assert not compare(ref.clone(), ref, ToleranceSpec(allow_negative_inf=True)).failed
    out = ref.clone()
    out[1, 0] = 0.0
    assert compare(out, ref, ToleranceSpec(allow_negative_inf=True)).failed


def test_dump_worst_block_with_allow_negative_inf(tmp_path: Path):
    from sol_execbench.evaluate.child import workload_eval

    d = add_definition()
    d["axes"] = {"M": {"type": "var"}, "N": {"type": "var"}}
    for spec in (*d["inputs"].values(), *d["outputs"].values()):
        spec["shape"] = ["M", "N"]
    d["reference"] = "def run(a, b):\n    c = a + b\n    c[0, 0] = float('-inf')\n    return c\n"
    code = "def run(a, b):\n    c = a + b\n    c[0, 0] = float('-inf')\n    c[2, 3] += 5.0\n    return c\n"
    dump = tmp_path / "dumps"
    ctx = _context(tmp_path, code, d, dump_dir=dump)
    trace = workload_eval.evaluate_workload(ctx, _workload(axes={"M": 3, "N": 4},
                                                           tolerance={"allow_negative_inf": True}))
    assert trace.evaluation.status.value == "INCORRECT_NUMERICAL"
    assert trace.evaluation.correctness.extra["worst_index"] == [2, 3]
    note = json.loads((dump / "vector_add" / "w0" / "failure.json").read_text())
    assert note["worst"]["index"] == [2, 3]
    assert note["worst"]["solution_value"] - note["worst"]["reference_value"] == pytest.approx(5.0)


# -- 4. a reference that contradicts the definition is INVALID_REFERENCE -------------------------

@pytest.mark.parametrize("body,words", [
    ("return (a + b)[:-1]", "shape"),
    ("return (a + b).double()", "dtype"),
    ("return (a + b).numpy()", "not a tensor"),
])
def test_reference_output_contradicting_the_definition_is_invalid_reference(tmp_path: Path, body: str, words: str):
    from sol_execbench.evaluate.child import workload_eval

    d = add_definition()
    d["reference"] = f"def run(a, b):\n    {body}\n"
    ctx = _context(tmp_path, ADD, d)
    trace = workload_eval.evaluate_workload(ctx, _workload())
    assert trace.evaluation.status.value == "INVALID_REFERENCE", trace.evaluation.log
    assert "reference" in trace.evaluation.log and "does not match the definition" in trace.evaluation.log
    assert words in trace.evaluation.log


def test_reference_with_the_wrong_shape_through_the_child():
    d = add_definition()
    d["reference"] = "def run(a, b):\n    return (a + b)[:-1]\n"
    (trace,) = evaluate(d, workloads(16), solution(ADD), LIGHT_CONFIG, **FRESH)
    assert trace.evaluation.status.value == "INVALID_REFERENCE"
    assert "does not match the definition" in trace.evaluation.log


def test_nan_in_the_reference_is_named_as_the_reference_output():
    from sol_execbench.evaluate.child.correctness import compare

    ref = torch.ones(8)
    ref[3] = float("nan")
    for out in (torch.ones(8), ref.clone()):  # a correct solution, and one that copies the NaN
        comp = compare(out, ref, ToleranceSpec())
        assert comp.failed and comp.correctness.has_nan
        assert "NaN in the reference output" in comp.reason
    out = torch.ones(8)
    out[1] = float("inf")
    reason = compare(out, torch.ones(8), ToleranceSpec()).reason
    assert "Inf in the solution's output" in reason and "reference" not in reason


def test_the_clock_record_goes_into_the_traces_environment(tmp_path: Path):
    from sol_execbench.evaluate.child.workload_eval import make_trace
    from sol_execbench.schema import ClockRecord, EvaluationStatus

    class Clocks:
        def record_for(self, uuid: str) -> ClockRecord:
            return ClockRecord(source="nvml", other_processes=[7] if uuid == "w0" else None)

    ctx = _context(tmp_path, ADD)
    ctx.clocks = Clocks()
    trace = make_trace(ctx, _workload(), EvaluationStatus.RUNTIME_ERROR, "stopped")
    env = trace.evaluation.environment
    assert env.hardware == "cpu" and env.clocks.source == "nvml" and env.clocks.other_processes == [7]
    assert ctx.environment.clocks is None  # one record per workload, the shared environment untouched
    assert "clocks" not in trace.evaluation.model_dump()
