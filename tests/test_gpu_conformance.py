"""On a GPU: every PyTorch and Triton solution of the upstream corpus PASSES on every workload,
with the default config (10 correctness rounds, 10 warm-up and 50 timed calls per side, split over
the device and the host pass)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sol_execbench import evaluate
from sol_execbench.evaluate.child.timing import rounds_per_pass
from sol_execbench.schema import BenchmarkConfig

from .conftest import CONFORMANCE

EXAMPLES = Path(__file__).parent.parent / "examples"


def _python_family_solutions() -> list[Path]:
    found = []
    for sol in sorted(CONFORMANCE.rglob("solution*.json")):
        if sol.parent.name == "gqa_paged_decode":  # its blobs are not shipped
            continue
        text = sol.read_text()
        if '"pytorch"' in text or '"triton"' in text or '"python"' in text:
            found.append(sol)
    return found


@pytest.mark.gpu
@pytest.mark.parametrize("solution", _python_family_solutions(), ids=lambda p: str(p.relative_to(CONFORMANCE)))
def test_conformance_solution_passes_on_gpu(solution: Path):
    root = solution.parent
    traces = evaluate(root / "definition.json", root / "workload.jsonl", solution)
    for t in traces:
        ev = t.evaluation
        assert ev.status.value == "PASSED", f"{t.workload.uuid}: {ev.log}"
        assert ev.device.vendor in ("cuda", "rocm")
        # at least a pass's rounds: more where the host pass set it or device passes were added
        assert ev.performance.latency_ms > 0
        assert ev.performance.solution_timing.count >= rounds_per_pass(BenchmarkConfig().iterations, gpu=True)


@pytest.mark.gpu
@pytest.mark.parametrize("solution", sorted(EXAMPLES.glob("*/solution*.json")), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_bundled_examples_pass_on_gpu(solution: Path):
    root = solution.parent
    traces = evaluate(root / "definition.json", root / "workload.jsonl", solution)
    for t in traces:
        if t.evaluation.status.value == "COMPILE_ERROR" and "not buildable here" in t.evaluation.log:
            continue  # e.g. the HIP example on an NVIDIA machine
        assert t.evaluation.status.value == "PASSED", f"{t.workload.uuid}: {t.evaluation.log}"


@pytest.mark.gpu
def test_gqa_paged_decode_without_blobs_names_them(monkeypatch):
    monkeypatch.delenv("FLASHINFER_TRACE_DIR", raising=False)
    root = CONFORMANCE / "samples/gqa_paged_decode"
    for t in evaluate(root / "definition.json", root / "workload.jsonl", root / "solution.json"):
        assert t.evaluation.status.value == "RUNTIME_ERROR" and ".safetensors" in t.evaluation.log


@pytest.mark.gpu
@pytest.mark.parametrize("solution", ["triton/rmsnorm/solution_triton.json", "cuda_cpp/rmsnorm/solution_cuda.json"])
def test_a_solution_evaluated_on_the_second_gpu_runs_there(solution: str):
    """A CUDA C++ kernel launched on the current stream, or a Triton kernel, runs on torch's current
    device: an evaluation on cuda:1 must make that device current, or its kernels (and the timing's
    events) go to GPU 0 while the tensors live on GPU 1."""
    import torch

    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    path = CONFORMANCE / "examples" / solution
    root = path.parent
    traces = evaluate(root / "definition.json", root / "workload.jsonl", path, device="cuda:1")
    for t in traces:
        assert t.evaluation.status.value == "PASSED", f"{t.workload.uuid}: {t.evaluation.log}"
        assert t.evaluation.device.index == 1
