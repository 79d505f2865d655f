"""The upstream corpus on the CPU: Python-family solutions PASS; Triton through the interpreter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sol_execbench import evaluate
from sol_execbench.schema import load_workloads

from .conftest import CONFORMANCE, LIGHT_CONFIG

# gemma3_swiglu (~150 GFLOP of bf16 per call) is left to the gpu tests.
PYTHON_PROBLEMS = [
    ("examples/pytorch/linear_backward", "solution_python.json"),
    ("samples/linear_backward", "solution_python.json"),
    ("samples/custom_inputs_matmul", "solution_python.json"),
    ("samples/triton_ref_vecadd", "solution_python.json"),
]


@pytest.mark.parametrize("problem,solution", PYTHON_PROBLEMS, ids=[p for p, _ in PYTHON_PROBLEMS])
def test_python_solutions_pass_on_every_workload(problem: str, solution: str):
    root = CONFORMANCE / problem
    traces = evaluate(root / "definition.json", root / "workload.jsonl", root / solution, LIGHT_CONFIG)
    assert len(traces) == len(load_workloads(root / "workload.jsonl"))
    for t in traces:
        assert t.evaluation.status.value == "PASSED", t.evaluation.log
        perf = t.evaluation.performance
        assert perf.latency_ms > 0 and perf.solution_timing.method == "cpu" and perf.solution_timing.count == 3
        assert perf.reference_latency_ms > 0 and perf.speedup_factor > 0
        assert t.evaluation.device.vendor == "cpu"
        assert perf.speedup_interval is not None and perf.speedup_interval.rounds == 3


def test_gqa_paged_decode_names_the_missing_blob(monkeypatch):
    monkeypatch.delenv("FLASHINFER_TRACE_DIR", raising=False)
    root = CONFORMANCE / "samples/gqa_paged_decode"
    traces = evaluate(root / "definition.json", root / "workload.jsonl", root / "solution.json", LIGHT_CONFIG)
    for t in traces:
        assert t.evaluation.status.value == "RUNTIME_ERROR"
        assert "not found" in t.evaluation.log and ".safetensors" in t.evaluation.log


def _small_triton_workloads(tmp_path: Path, root: Path) -> Path:
    """One tiny workload per problem: the interpreter takes ~1.4 ms per RMSNorm row here."""
    first = json.loads((root / "workload.jsonl").read_text().splitlines()[0])
    axes = dict(first["axes"])
    for name in axes:
        axes[name] = 1 if name == "batch_size" else min(axes[name], 2)
    first["axes"], first["uuid"] = axes, "tiny"
    path = tmp_path / "workload.jsonl"
    path.write_text(json.dumps(first) + "\n")
    return path


TRITON_PROBLEMS = ["examples/triton/rmsnorm", "examples/triton/nemotron_rms_norm", "examples/triton/olmo3_post_norm",
                   "samples/rmsnorm"]


@pytest.mark.parametrize("problem", TRITON_PROBLEMS)
def test_triton_solutions_pass_through_the_interpreter(tmp_path: Path, problem: str):
    root = CONFORMANCE / problem
    workloads = _small_triton_workloads(tmp_path, root)
    traces = evaluate(root / "definition.json", workloads, root / "solution_triton.json", LIGHT_CONFIG)
    (t,) = traces
    assert t.evaluation.status.value == "PASSED", t.evaluation.log
    assert t.evaluation.build.jit_time_s is not None and t.evaluation.build.jit_time_s > 0
