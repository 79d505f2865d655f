"""bench gemm: the definitions and the arithmetic, a tiny sweep through the evaluator on the CPU, and
re-rendering a committed result without a GPU."""

from __future__ import annotations

import json

import pytest

from sol_execbench.benches.gemm import SHAPES, bytes_moved, gemm_definition, gemm_workload, parse_shape, variant_solution
from sol_execbench.schema.benches import GemmSweep

from .test_allreduce import DATA, cli

FIGURES = ("gemm_tflops.png", "gemm_fraction_of_peak.png", "gemm_roofline.png")


def test_definitions_and_intensity():
    shape = parse_shape("128x256x64")
    assert (shape.m, shape.n, shape.k, shape.family) == (128, 256, 64, "custom")
    assert parse_shape("llama3_8b_down") == next(s for s in SHAPES if s.name == "llama3_8b_down")
    # bf16: A 128x64, B 64x256, C 128x256, two bytes each
    assert bytes_moved(shape, "bf16") == 2 * (128 * 64 + 64 * 256 + 128 * 256)
    # fp8: one byte per input element, C in bf16
    assert bytes_moved(shape, "fp8") == 128 * 64 + 64 * 256 + 2 * 128 * 256
    fp8 = gemm_definition("fp8")
    assert fp8.inputs["B"].shape == ["N", "K"] and fp8.outputs["C"].dtype == "bfloat16"
    assert "_scaled_mm" in fp8.reference
    assert gemm_workload(shape).tolerance.max_atol == pytest.approx(0.02 * 8)
    triton = variant_solution("triton", gemm_definition("bf16"))
    assert triton.spec.languages[0].value == "triton" and "tl.dot" in triton.sources[0].content


def test_cpu_sweep_through_the_evaluator(tmp_path):
    out = tmp_path / "gemm"
    result = cli("bench", "gemm", "--shape", "32x48x64", "--dtype", "fp16", "--dtype", "fp8", "--iterations", "2",
                 "--warmup-runs", "1", "--device", "cpu", "-o", str(out))
    assert result.returncode == 0, result.stderr
    sweep = GemmSweep.model_validate_json((out / "gemm_sweep.json").read_text())
    assert [(p.variant, p.status) for p in sweep.points] == [("torch", "PASSED"), ("triton", "PASSED")]
    for p in sweep.points:
        # TFLOP/s is 2MNK over the evaluator's latency
        assert p.tflops == pytest.approx(2 * 32 * 48 * 64 / (p.latency_ms * 1e-3) / 1e12)
        assert p.fraction_of_datasheet is None  # a CPU has no datasheet peak
    assert sweep.skipped and sweep.skipped[0].startswith("fp8")
    assert sweep.calibrated_tflops is None and "calibration" in sweep.calibrated_note
    for name in FIGURES:
        assert (out / name).stat().st_size > 0


def test_reuse_renders_a_committed_result(tmp_path):
    (tmp_path / "gemm_sweep.json").write_bytes((DATA / "gemm_sweep.json").read_bytes())
    result = cli("bench", "gemm", "--reuse", "-o", str(tmp_path))
    assert result.returncode == 0, result.stderr
    for name in FIGURES:
        assert (tmp_path / name).stat().st_size > 0
    assert json.loads((tmp_path / "gemm_sweep.json").read_text())["points"] == \
        json.loads((DATA / "gemm_sweep.json").read_text())["points"]


@pytest.mark.parametrize("args, words", [
    (("--dtype", "fp64"), ["--dtype fp64", "bf16"]),
    (("--variant", "cutlass"), ["--variant cutlass", "--solution"]),
    (("--shape", "12x"), ["--shape 12x", "MxNxK"]),
    (("--solution", "/nonexistent/solution.json"), ["--solution /nonexistent/solution.json"]),
    (("--reuse",), ["--reuse", "gemm_sweep.json"]),
])
def test_bad_flags_exit_2_with_one_line(tmp_path, args, words):
    result = cli("bench", "gemm", "--device", "cpu", "-o", str(tmp_path / "none"), *args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and all(w in lines[0] for w in words), result.stderr


def test_a_calibration_file_prices_the_calibrated_fraction(tmp_path):
    from sol_execbench.benches.errors import BenchUsageError
    from sol_execbench.benches.gemm import _calibration
    from sol_execbench.platform import current
    from sol_execbench.schema.calibration import Calibration

    key = {"device_id": "cpu:test", "device_name": "test", "driver": "kernel x", "torch": "2"}
    ceilings = [{"name": f"gemm {d}", "rate": f"matrix {d}", "shape": [8, 8, 8], "work": 1024, "latency_ms": 1.0,
                 "relative_iqr": 0.0, "method": "cpu", "achieved_per_s": rate}
                for d, rate in (("bf16", 4e12), ("fp16", 5e12))]
    ceilings.append({"name": "copy", "rate": "memory", "shape": [64], "work": 128, "latency_ms": 1.0,
                     "relative_iqr": 0.0, "method": "cpu", "achieved_per_s": 1e9})
    calibration = Calibration(key=key, measured_at="2026-11-25T00:00:00Z", tool_version="x", timing={},
                              ceilings=ceilings)
    path = tmp_path / "calibration.json"
    path.write_text(calibration.model_dump_json())
    values, note = _calibration(path, current("cpu"))
    assert values == {"bf16": 4.0, "fp16": 5.0} and str(path) in note
    path.write_text("{}")
    with pytest.raises(BenchUsageError, match="not a calibration"):
        _calibration(path, current("cpu"))
