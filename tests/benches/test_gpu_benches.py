"""The benches on a GPU (skipped without one): all-reduce with one GPU through NCCL/RCCL and a graph
sweep on two, a GEMM point of each variant through the evaluator, one compiled baseline."""

from __future__ import annotations

import pytest

from sol_execbench.benches.allreduce import datasheet_link
from sol_execbench.schema.benches import AllreduceSweep, BaselineFile, GemmSweep

from .test_allreduce import SRC, cli

ROOT = SRC.parent

pytestmark = pytest.mark.gpu


def test_allreduce_on_one_gpu(tmp_path):
    result = cli("bench", "allreduce", "--ranks", "1", "--max-bytes", str(1 << 20), "--factor", "16",
                 "--iterations", "5", "--warmup", "2", "-o", str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    sweep = AllreduceSweep.model_validate_json((tmp_path / "allreduce.json").read_text())
    assert sweep.backend == "nccl" and "CUDA event" in sweep.time_rule  # the device's time, not the host loop's
    assert (sweep.link_datasheet_gbps, sweep.link_source) == datasheet_link(sweep.platform, sweep.device_name)
    for launch in ("eager", "graph"):  # both launches by default
        regular = [m for m in sweep.measurements if m.buffer_kind == "regular" and m.launch == launch]
        assert len(regular) == 2 * 5 and all(m.checked and m.busbw_gbps == 0.0 for m in regular), launch
    kinds = {m.buffer_kind for m in sweep.measurements} | {s.buffer_kind for s in sweep.skipped}
    assert kinds == {"regular", "nccl_mem_pool", "symm_mem_one_shot", "symm_mem_two_shot", "cupy_nccl"}


def test_allreduce_graph_launch_on_two_gpus(tmp_path):
    import torch

    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    result = cli("bench", "allreduce", "--ranks", "2", "--max-bytes", str(1 << 16), "--factor", "64", "--iterations",
                 "4", "--warmup", "2", "--repeats", "3", "--buffer-kind", "regular", "--timeout", "240",
                 "-o", str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    sweep = AllreduceSweep.model_validate_json((tmp_path / "allreduce.json").read_text())
    assert sweep.skipped == [], sweep.skipped
    for launch in ("eager", "graph"):
        got = [m for m in sweep.measurements if m.launch == launch]
        assert {(m.placement, m.bytes) for m in got} == {(p, s) for p in ("in_place", "out_of_place")
                                                         for s in (8, 512, 1 << 15)}
        assert all(m.checked and m.windows == 3 and m.time_us_min <= m.time_us and m.host_time_us > 0 for m in got)
    assert {(f.placement, f.launch) for f in sweep.fits} == {(p, la) for p in ("in_place", "out_of_place")
                                                            for la in ("eager", "graph")}


def test_gemm_variants_pass_on_the_gpu(tmp_path):
    result = cli("bench", "gemm", "--shape", "1024x1024x1024", "--dtype", "bf16", "--iterations", "5",
                 "-o", str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    sweep = GemmSweep.model_validate_json((tmp_path / "gemm_sweep.json").read_text())
    assert [(p.variant, p.status) for p in sweep.points] == [("torch", "PASSED"), ("triton", "PASSED")]
    assert all(p.tflops > 0 and p.timing_method in ("device", "events") for p in sweep.points)


def test_a_compiled_baseline_passes_on_the_gpu(tmp_path):
    # inductor's pool of compile workers, left to start, runs in child processes while the calls are
    # timed and the evaluator rightly calls that REWARD_HACK: the generated solution compiles in process
    results = tmp_path / "results"
    result = cli("bench", "baselines", "examples", "--modes", "inductor-default", "--num-trials", "5",
                 "--max-problems", "1", "--results", str(results), cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    written = next(results.glob("*/baseline_time_torch_compile_inductor_default.json"))
    entries = [e for level in BaselineFile.model_validate_json(written.read_text()).root.values()
               for e in level.values()]
    assert entries and all(e.status == "PASSED" for e in entries), [e.error for e in entries]
