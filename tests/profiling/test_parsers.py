"""The profilers' and tools' output readers: ncu CSV, rocprofv3 CSVs, cuobjdump, AMDGPU metadata notes."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from sol_execbench.profiling import ncu, rocprof
from sol_execbench.profiling.profile_run import split_marked_calls
from sol_execbench.profiling.static_evidence import (amdgpu_code_objects, amd_resources, cuda_resources, find_cuobjdump,
                                                     find_llvm_readelf, parse_amdgpu_notes, parse_cuobjdump_resource_usage,
                                                     triton_resources)
from sol_execbench.schema.profiling import KernelLaunch, summarize_kernels

DATA = Path(__file__).resolve().parents[1] / "data" / "profiling"
HEAD = '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"\n'


def _ncu_rows(launch_id: int, name: str, metrics: dict[str, tuple[str, str]], block="(256, 1, 1)", grid="(1024, 1, 1)") -> str:
    return "".join(f'"{launch_id}","77","python3","h","{name}","1","7","{block}","{grid}","0","9.0","Command line profiler metrics",'
                   f'"{metric}","{unit}","{value}"\n' for metric, (unit, value) in metrics.items())


def _ncu_text() -> str:
    """ncu --csv --print-units base output in its documented shape: a marker, a kernel, a marker, per call."""
    marker = {ncu.TIME: ("nsecond", "1,216")}
    kernel = {ncu.TIME: ("nsecond", "40,480"), ncu.DRAM_READ: ("byte", "33,554,432"), ncu.DRAM_WRITE: ("byte", "16,777,216"),
              "sm__sass_thread_inst_executed_op_ffma_pred_on.sum": ("inst", "4,194,304"),
              "sm__sass_thread_inst_executed_op_fadd_pred_on.sum": ("inst", "1,048,576"),
              "sm__sass_thread_inst_executed_op_fmul_pred_on.sum": ("inst", "0"),
              ncu.REGISTERS: ("register/thread", "32"), ncu.GRID: ("block", "1,024"), ncu.BLOCK: ("thread", "256")}
    text, k = "==PROF== Connected to process 77\n" + HEAD, 0
    for _ in range(2):
        for name, metrics in (("spin_kernel(long)", marker), ("rmsnorm_kernel", kernel), ("spin_kernel(long)", marker)):
            text += _ncu_rows(k, name, metrics)
            k += 1
    return text


def test_ncu_csv_rows_become_launches_with_geometry_bytes_and_flops():
    launches = ncu.parse_ncu_launches(_ncu_text())
    assert [k.name for k in launches] == ["spin_kernel(long)", "rmsnorm_kernel", "spin_kernel(long)"] * 2
    kernel = launches[1].as_launch()
    assert kernel.duration_ns == pytest.approx(40480)
    assert kernel.grid == (1024, 1, 1) and kernel.block == (256, 1, 1) and kernel.registers == 32
    assert kernel.dram_bytes_read == 33554432 and kernel.dram_bytes_write == 16777216
    assert kernel.flops == 2 * 4194304 + 1048576
    per_workload, problem = split_marked_calls([k.as_launch() for k in launches], [("w0", 2)])
    assert problem is None
    [row] = summarize_kernels(per_workload["w0"], calls=2)
    assert row.name == "rmsnorm_kernel" and row.calls == 2 and row.per_call_us == pytest.approx(40.48)
    assert row.achieved_bandwidth_gbps == pytest.approx(2 * 50331648 / (2 * 40480e-9) / 1e9)
    assert row.achieved_tflops == pytest.approx(2 * 9437184 / (2 * 40480e-9) / 1e12)


def test_ncu_parser_keeps_the_fidelity_bench_readings():
    text = (Path(__file__).resolve().parents[1] / "timing" / "data" / "ncu_gpu_time.csv").read_text()
    assert ncu.parse_ncu_csv(text, calls=2) == pytest.approx((2144 + 1856) / 2 * 1e-6)
    assert ncu.parse_ncu_csv("==ERROR== ERR_NVGPUCTRPERM", calls=2) is None
    assert ncu.parse_ncu_launches("==PROF== Disconnected\n") == []


def test_ncu_command_has_the_fixed_settings(tmp_path):
    command = ncu.ncu_command("/x/ncu", tmp_path / "n.csv", "sol_execbench_profile")
    joined = " ".join(command)
    for part in ("--clock-control none", "--cache-control all", "--target-processes all", "--csv", "--print-units base",
                 "--nvtx-include sol_execbench_profile/", f"--log-file {tmp_path / 'n.csv'}"):
        assert part in joined
    metrics = command[command.index("--metrics") + 1].split(",")
    assert {"gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum", "launch__grid_size",
            "launch__block_size", "launch__registers_per_thread"} <= set(metrics)
    assert {f"sm__sass_thread_inst_executed_op_{op}_pred_on.sum" for op in
            ("fadd", "fmul", "ffma", "dadd", "dmul", "dfma", "hadd", "hmul", "hfma")} <= set(metrics)


@pytest.mark.parametrize("page", ["details", "raw"])
def test_real_h100_ncu_csv(page):
    """Recorded on an H100 under --profile ncu's options and metrics: an add, a bf16 matmul and a
    Triton kernel, three calls each, after two random-input kernels."""
    launches = ncu.parse_ncu_launches((DATA / f"ncu_h100_{page}.csv").read_text(errors="replace"))
    assert len(launches) == 11
    rows = {r.name: r for r in summarize_kernels([k.as_launch() for k in launches[2:]], calls=3)}
    triton = rows["scale_kernel"]
    assert triton.calls == 3 and triton.registers_per_thread == 18 and triton.grid == [1024, 1, 1]
    assert triton.block == [128, 1, 1] and 4 < triton.median_us < 6 and triton.flops == 3 * 1048576
    assert triton.dram_bytes_read == pytest.approx(3 * 4197376, rel=0.01) and 500 < triton.achieved_bandwidth_gbps < 3350
    gemm = next(r for name, r in rows.items() if name.startswith("nvjet_sm90"))
    # Tensor-core instructions are not among the SASS FADD/FMUL/FFMA counters: the GEMM counts none.
    assert gemm.grid == [2, 64, 1] and gemm.registers_per_thread == 168 and gemm.flops == 0


def test_rocprofv3_kernel_trace_and_stats():
    launches = rocprof.parse_kernel_trace((DATA / "rocprofv3_kernel_trace.csv").read_text())
    assert len(launches) == 8 and launches[2].name.startswith("rmsnorm_kernel")
    assert launches[2].duration_ns == 20000 and launches[2].grid == (131072, 1, 1) and launches[2].block == (256, 1, 1)
    assert launches[2].registers == 32
    per_workload, problem = split_marked_calls(launches, [("w0", 1), ("w1", 1)])
    assert problem is None
    # The fill before the first marker and the reduction between calls (the L2 flush) are left out.
    assert [k.name for k in per_workload["w0"]] == ["rmsnorm_kernel(float*, float const*, int)"]
    assert [k.duration_ns for k in per_workload["w1"]] == [22000]
    stats = rocprof.parse_kernel_stats((DATA / "rocprofv3_kernel_stats.csv").read_text())
    rms = next(s for s in stats if s.name.startswith("rmsnorm_kernel"))
    assert rms.calls == 2 and rms.total_us == 42 and rms.median_us == 21


def test_too_few_markers_is_reported_not_guessed():
    launches = [KernelLaunch("spin_kernel(long)", 1), KernelLaunch("k", 5), KernelLaunch("spin_kernel(long)", 1)]
    found, problem = split_marked_calls(launches, [("w0", 2)])
    assert problem is not None and "fewer than the two per call" in problem and "w0" not in found


def test_cuobjdump_recorded_output():
    kernels = parse_cuobjdump_resource_usage((DATA / "cuobjdump_resource_usage.txt").read_text())
    by_name = {k.name: k for k in kernels}
    tile = by_name["_Z15tile_sum_kernelPfPKfi"]
    assert (tile.registers, tile.shared_bytes, tile.stack_bytes, tile.local_bytes, tile.arch) == (24, 2048, 248, 0, "sm_90")
    assert tile.details["CONSTANT[0]"] == 548
    assert by_name["_Z12scale_kernelPfPKffi"].registers == 10


@pytest.mark.skipif(shutil.which("nvcc") is None or find_cuobjdump() is None, reason="needs nvcc and cuobjdump")
def test_cuobjdump_on_a_real_cuda_build(tmp_path):
    library = tmp_path / "libk.so"
    subprocess.run(["nvcc", "-shared", "-Xcompiler", "-fPIC", "-maxrregcount=24", "-gencode", "arch=compute_90,code=sm_90",
                    "-o", str(library), str(DATA / "resource_kernels.cu")], check=True, capture_output=True, timeout=300)
    kernels, errors = cuda_resources(library)
    assert not errors
    tile = next(k for k in kernels if "tile_sum_kernel" in k.name)
    assert tile.source == "cuobjdump" and tile.shared_bytes == 2048 and tile.registers <= 24 and tile.stack_bytes > 0


def test_amdgpu_recorded_notes():
    kernels = {k.name: k for k in parse_amdgpu_notes((DATA / "amdgpu_readelf_notes.txt").read_text())}
    assert set(kernels) == {"scale_kernel", "tile_kernel"}
    tile = kernels["tile_kernel"]
    assert (tile.arch, tile.shared_bytes, tile.local_bytes, tile.spills) == ("gfx90a", 1024, 260, 0)
    assert tile.registers is not None and tile.scalar_registers is not None and tile.details["wavefront_size"] == 64


@pytest.mark.skipif(shutil.which("llc") is None or find_llvm_readelf() is None, reason="needs LLVM (llc, llvm-readelf)")
def test_amdgpu_code_object_made_with_llvm_also_inside_a_library(tmp_path):
    code_object = tmp_path / "k.o"
    subprocess.run(["llc", "-mtriple=amdgcn-amd-amdhsa", "-mcpu=gfx90a", "-filetype=obj", "-o", str(code_object),
                    str(DATA / "amdgpu_kernels.ll")], check=True, capture_output=True, timeout=120)
    kernels, errors = amd_resources(code_object)
    assert not errors and {k.name for k in kernels} == {"scale_kernel", "tile_kernel"}
    # Inside a larger file (as in a HIP library's offload bundle) it is found by its ELF header.
    wrapped = tmp_path / "libhost.so"
    wrapped.write_bytes(b"\x7fELF-host-part" + b"\0" * 100 + code_object.read_bytes() + b"trailer")
    objects, _ = amdgpu_code_objects(wrapped.read_bytes())
    assert objects == [code_object.read_bytes()]
    kernels, errors = amd_resources(wrapped)
    assert not errors and next(k for k in kernels if k.name == "tile_kernel").shared_bytes == 1024


def test_no_amdgpu_code_object_and_compressed_bundles_say_why(tmp_path):
    plain = tmp_path / "lib.so"
    plain.write_bytes(b"nothing here")
    assert amdgpu_code_objects(plain.read_bytes()) == ([], [])
    objects, notes = amdgpu_code_objects(b"__CLANG_OFFLOAD_BUNDLE__CCOB\x01\x00")
    assert objects == [] and "compressed" in notes[0]


def test_triton_metadata_entries():
    [k] = triton_resources([{"name": "rms_kernel", "n_regs": 40, "n_spills": 2, "shared": 4096, "num_warps": 4,
                             "num_stages": 3, "target": "GPUTarget(backend='cuda', arch=90, warp_size=32)"}])
    assert (k.source, k.registers, k.spills, k.shared_bytes, k.details["num_warps"]) == ("triton", 40, 2, 4096, 4)


def test_rocprofv3_output_folder_becomes_workload_rows(tmp_path):
    """The rocprofv3 files as its -d/-o options lay them out (below a host/pid folder here), read into
    per-workload rows and the process-wide stats."""
    from sol_execbench.profiling.profile_run import ChildOutcome, workload_profiles
    from sol_execbench.schema import Workload

    folder = tmp_path / "rocprofv3" / "host" / "4242"
    folder.mkdir(parents=True)
    for suffix in ("kernel_trace", "kernel_stats"):
        (folder / f"profile_{suffix}.csv").write_text((DATA / f"rocprofv3_{suffix}.csv").read_text())
    workloads = [Workload(uuid=u, axes={}, inputs={}) for u in ("w0", "w1")]
    outcome = ChildOutcome({"w0": {"uuid": "w0", "calls": 1}, "w1": {"uuid": "w1", "calls": 1}}, [], tmp_path)
    rows, stats, error, every = workload_profiles("rocprofv3", outcome, workloads)
    assert error is None and [r.kernel_us_per_call for r in rows] == [20.0, 22.0]
    assert rows[0].kernels[0].registers_per_thread == 32 and len(every) == 2
    assert len(stats) == 4 and next(s for s in stats if s.name.startswith("rmsnorm_kernel")).calls == 2
