"""On a GPU machine: native solutions built and run for real.

- NVIDIA: every cuda_cpp solution of the upstream corpus PASSES on every workload (default config
  and the default 120 s compile timeout, cold cache); the cudnn and cutlass examples PASS, or fail
  with a COMPILE_ERROR that names what is missing (headers or libraries not on the machine).
- The bundled vector_add_native example: the solution for this vendor PASSES, a second evaluation
  is served by the build cache, the other vendor's solution is "not buildable here".
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sol_execbench import evaluate
from sol_execbench.platform import vendor_hint

from ..conftest import CONFORMANCE
from .helpers import EXAMPLE

pytestmark = pytest.mark.gpu

_LIBRARY_EXAMPLES = {"examples/cudnn/softmax": "cudnn", "examples/cutlass/gemm": "cutlass"}


def _solutions_of(language: str) -> list[Path]:
    found = []
    for sol in sorted(CONFORMANCE.rglob("solution*.json")):
        if json.loads(sol.read_text())["spec"]["languages"] == [language]:
            found.append(sol)
    return found


def _relative(path: Path) -> str:
    return str(path.parent.relative_to(CONFORMANCE))


@pytest.fixture
def gpu_cache(shared_cache, monkeypatch) -> Path:
    monkeypatch.setenv("SOL_EXECBENCH_CACHE_DIR", str(shared_cache / "gpu"))
    return shared_cache / "gpu"


def _evaluate(solution: Path, **options):
    root = solution.parent
    return evaluate(root / "definition.json", root / "workload.jsonl", solution, **options)


@pytest.mark.skipif(vendor_hint() != "cuda", reason="CUDA C++ needs an NVIDIA GPU")
@pytest.mark.parametrize("solution", _solutions_of("cuda_cpp"), ids=_relative)
def test_conformance_cuda_cpp_solution_passes(solution: Path, gpu_cache):
    traces = _evaluate(solution)
    assert traces
    for t in traces:
        ev = t.evaluation
        assert ev.status.value == "PASSED", f"{t.workload.uuid}: {ev.log}"
        assert ev.device.vendor == "cuda" and ev.build.language == "cuda_cpp"
        assert ev.build.build_time_s is not None and ev.performance.latency_ms > 0


@pytest.mark.skipif(vendor_hint() != "cuda", reason="cuDNN and CUTLASS need an NVIDIA GPU")
@pytest.mark.parametrize("problem", sorted(_LIBRARY_EXAMPLES))
def test_library_examples_pass_or_name_what_is_missing(problem: str, gpu_cache):
    library = _LIBRARY_EXAMPLES[problem]
    solution = next((CONFORMANCE / problem).glob("solution*.json"))
    for t in _evaluate(solution):
        ev = t.evaluation
        if ev.status.value == "PASSED":
            continue
        assert ev.status.value == "COMPILE_ERROR", f"{t.workload.uuid}: {ev.status.value}: {ev.log}"
        log = ev.log.lower()
        assert library in log and any(s in log for s in ("not found", "no such file", "cannot find")), ev.log


def _native_example_for_this_vendor() -> tuple[str, str]:
    return ("solution_cuda.json", "solution_hip.json") if vendor_hint() == "cuda" else ("solution_hip.json",
                                                                                        "solution_cuda.json")


def test_native_example_passes_then_hits_the_cache(gpu_cache):
    mine, _ = _native_example_for_this_vendor()
    first = _evaluate(EXAMPLE / mine)
    assert {t.evaluation.status.value for t in first} == {"PASSED"}, [t.evaluation.log for t in first]
    second = _evaluate(EXAMPLE / mine)
    assert {t.evaluation.status.value for t in second} == {"PASSED"}
    assert all(t.evaluation.build.cached is True for t in second)
    assert max(t.evaluation.build.build_time_s for t in second) < 2.0


def test_other_vendors_example_is_not_buildable_here(gpu_cache):
    _, other = _native_example_for_this_vendor()
    for t in _evaluate(EXAMPLE / other):
        assert t.evaluation.status.value == "COMPILE_ERROR" and "not buildable here" in t.evaluation.log
