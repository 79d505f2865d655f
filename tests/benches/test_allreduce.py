"""bench allreduce: nccl-tests' bandwidths by hand, the alpha-beta fit, the topology parser, the sweep
with two gloo processes on the CPU, re-rendering a committed result, bad flags."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sol_execbench.benches.allreduce import HOST_TIME_RULE, datasheet_link
from sol_execbench.benches.allreduce_metrics import (algbw_gbps, busbw_gbps, fit_alpha_beta, fits_by_configuration,
                                                     largest_size_link_lines, message_sizes)
from sol_execbench.benches.allreduce_rank import RankPlan, _measure
from sol_execbench.benches.topology import parse_matrix
from sol_execbench.schema.benches import AllreduceMeasurement, AllreduceSweep

DATA = Path(__file__).parent / "data"
SRC = Path(__file__).resolve().parents[2] / "src"


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    # this checkout first, then whatever the environment already adds (wheels carried to a GPU machine)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-c", "from sol_execbench.cli.main import main; main()", *args],
                          capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


def test_bandwidths_as_nccl_tests_define_them():
    # 1e9 bytes in 10 ms: algbw 100 GB/s; busbw = algbw * 2(n-1)/n
    assert algbw_gbps(10**9, 0.01) == pytest.approx(100.0)
    assert busbw_gbps(10**9, 0.01, 1) == 0.0
    assert busbw_gbps(10**9, 0.01, 2) == pytest.approx(100.0)
    assert busbw_gbps(10**9, 0.01, 4) == pytest.approx(150.0)
    assert busbw_gbps(10**9, 0.01, 8) == pytest.approx(175.0)


def test_message_sizes_are_whole_float32_counts():
    assert message_sizes(8, 1 << 10, 4) == [8, 32, 128, 512]
    assert message_sizes(1, 16, 2) == [4, 8, 16]  # 1 and 2 bytes round up to one element
    with pytest.raises(ValueError):
        message_sizes(16, 8, 2)


def _point(size: int, time_us: float) -> AllreduceMeasurement:
    return AllreduceMeasurement(ranks=2, buffer_kind="regular", placement="in_place", bytes=size, count=size // 4,
                                time_us=time_us, algbw_gbps=0, busbw_gbps=0, checked=True, max_abs_error=0)


def test_alpha_beta_fit_recovers_a_known_line():
    # t = 5 us + S / (2 GB/s): 2 GB/s is 2000 bytes per us
    sizes = [2**k for k in range(3, 28, 3)]
    fit = fit_alpha_beta([_point(s, 5.0 + s / 2000.0) for s in sizes])
    assert fit.alpha_us == pytest.approx(5.0, rel=1e-6)
    assert fit.beta_gbps == pytest.approx(2.0, rel=1e-6)
    assert fit.max_relative_error < 1e-9
    # a point 10% off the line shows up in its own error
    off = fit_alpha_beta([_point(s, (5.0 + s / 2000.0) * (1.1 if s == sizes[4] else 1.0)) for s in sizes])
    worst = max(off.points, key=lambda p: abs(p.relative_error))
    assert worst.bytes == sizes[4] and worst.relative_error < 0


NVIDIA_SMI_TOPO = """\
\tGPU0\tGPU1\tGPU2\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID
GPU0\t X \tNV18\tSYS\tSYS\t0-47\t0\t\tN/A
GPU1\tNV18\t X \tPXB\tSYS\t0-47\t0\t\tN/A
GPU2\tSYS\tPXB\t X \tNODE\t48-95\t1\t\tN/A
NIC0\tSYS\tSYS\tNODE\t X

Legend:
  X    = Self
"""

ROCM_SMI_TOPO = """\
============================ ROCm System Management Interface ============================
================================ Link Type between two GPUs ================================
       GPU0         GPU1
GPU0   0            XGMI
GPU1   XGMI         0
================================== End of ROCm SMI Log ===================================
"""


def test_topology_tables_parse():
    devices, links = parse_matrix(NVIDIA_SMI_TOPO)
    assert devices == ["GPU0", "GPU1", "GPU2"]
    assert links == [["X", "NV18", "SYS"], ["NV18", "X", "PXB"], ["SYS", "PXB", "X"]]
    devices, links = parse_matrix(ROCM_SMI_TOPO)
    assert devices == ["GPU0", "GPU1"] and links == [["0", "XGMI"], ["XGMI", "0"]]
    assert parse_matrix("no table here") == ([], [])


def test_gloo_sweep_with_two_processes(tmp_path):
    out = tmp_path / "ar"
    result = cli("bench", "allreduce", "--cpu", "--ranks", "2", "--min-bytes", "8", "--max-bytes", "4096",
                 "--factor", "8", "--warmup", "1", "--iterations", "3", "--repeats", "2", "--buffer-kind", "regular",
                 "--buffer-kind", "symm_mem_one_shot", "-o", str(out))
    assert result.returncode == 0, result.stderr
    sweep = AllreduceSweep.model_validate_json((out / "allreduce.json").read_text())
    assert sweep.backend == "gloo" and sweep.environment["NCCL_NVLS_ENABLE"] == "0"
    assert sweep.time_rule == HOST_TIME_RULE and "host-clock" in sweep.time_rule  # no CUDA events on the CPU
    assert sweep.link_datasheet_gbps is None and "CPU" in sweep.link_source
    assert "no datasheet link bandwidth to compare busbw with" in result.stdout
    sizes = [8, 64, 512, 4096]
    for placement in ("in_place", "out_of_place"):
        got = [m for m in sweep.measurements if m.placement == placement]
        assert [m.bytes for m in got] == sizes
        for m in got:
            assert m.checked and m.max_abs_error == 0.0 and m.ranks == 2 and m.count == m.bytes // 4
            assert m.launch == "eager" and m.windows == sweep.repeats == 2
            assert m.time_us_min <= m.time_us and m.host_time_us == m.time_us  # the CPU's one clock is the host's
            # by hand: S / t in GB/s, and with two ranks 2(n-1)/n = 1
            assert m.algbw_gbps == pytest.approx(m.bytes / (m.time_us * 1e-6) / 1e9)
            assert m.busbw_gbps == pytest.approx(m.algbw_gbps)
    # the kind no CPU has under every launch; the CPU's kind without its graph launch, with why
    assert [(s.buffer_kind, s.launch, "GPUs" in s.reason) for s in sweep.skipped] == [
        ("symm_mem_one_shot", None, True), ("regular", "graph", True)]
    assert {(f.placement, f.launch, len(f.points)) for f in sweep.fits} == {("in_place", "eager", 4),
                                                                          ("out_of_place", "eager", 4)}
    assert "skipped regular (graph launch) with 2 rank(s): CUDA graphs need GPUs" in result.stdout
    rows = list(csv.DictReader((out / "summary.csv").open()))
    assert len(rows) == 8 and {r["checked"] for r in rows} == {"True"} and {r["launch"] for r in rows} == {"eager"}
    for name in ("topology.png", "latency_2ranks.png", "buffer_kinds.png", "buffer_kinds.csv", "model_fit.png"):
        assert (out / name).stat().st_size > 0, name


def test_reuse_renders_a_committed_result(tmp_path):
    out = tmp_path / "ar"
    out.mkdir()
    (out / "allreduce.json").write_bytes((DATA / "allreduce.json").read_bytes())
    result = cli("bench", "allreduce", "--reuse", "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert "no datasheet link bandwidth to compare busbw with: none recorded" in result.stdout  # a file without one
    for name in ("topology.png", "latency_2ranks.png", "buffer_kinds.png", "model_fit.png", "summary.csv"):
        assert (out / name).stat().st_size > 0, name
    # the JSON is written back with every field it had unchanged (and the newer fields' defaults)
    written = json.loads((out / "allreduce.json").read_text())["measurements"]
    original = json.loads((DATA / "allreduce.json").read_text())["measurements"]
    assert len(written) == len(original)
    assert all(w == {**w, **o} and w["launch"] == "eager" and w["windows"] == 1 for w, o in zip(written, original))


@pytest.mark.parametrize("args, words", [
    (("--buffer-kind", "shiny"), ["--buffer-kind shiny", "regular"]),
    (("--repeats", "0"), ["--repeats 0", "1 or more"]),
    (("--launch", "lazy"), ["--launch lazy", "eager or graph"]),
    (("--min-bytes", "64", "--max-bytes", "8"), ["--min-bytes 64", "--max-bytes 8"]),
    (("--reuse",), ["--reuse", "allreduce.json"]),
])
def test_bad_flags_exit_2_with_one_line(tmp_path, args, words):
    result = cli("bench", "allreduce", "--cpu", "-o", str(tmp_path / "none"), *args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and all(w in lines[0] for w in words), result.stderr


def test_reuse_of_a_malformed_file_names_the_field(tmp_path):
    (tmp_path / "allreduce.json").write_text(json.dumps({"backend": "nccl"}))
    result = cli("bench", "allreduce", "--reuse", "-o", str(tmp_path))
    assert result.returncode == 2
    assert "allreduce.json" in result.stderr and "field" in result.stderr and len(result.stderr.splitlines()) == 1


def test_fits_keep_launches_apart():
    sizes = [2**k for k in range(3, 20, 4)]
    eager = [_point(s, 40.0 + s / 2000.0) for s in sizes]
    graph = [_point(s, 10.0 + s / 2000.0).model_copy(update={"launch": "graph"}) for s in sizes]
    fits = fits_by_configuration(graph + eager)
    assert [(f.launch, len(f.points)) for f in fits] == [("eager", len(sizes)), ("graph", len(sizes))]
    assert [round(f.alpha_us) for f in fits] == [40, 10]


def test_committed_sweeps_still_load():
    # every committed sweep loads; those written before windows and launches read as one eager window each
    paths = [DATA / "allreduce.json", *sorted((SRC.parent / "docs" / "benches").glob("*/allreduce.json"))]
    old = 0
    for path in paths:
        sweep = AllreduceSweep.model_validate_json(path.read_text())
        assert all(m.windows == sweep.repeats for m in sweep.measurements), path
        if sweep.repeats == 1 and all(m.time_us_min is None for m in sweep.measurements):
            old += 1
            assert all(m.launch == "eager" for m in sweep.measurements), path
            assert all(f.launch == "eager" for f in sweep.fits) and all(s.launch is None for s in sweep.skipped)
    assert old >= 1  # the test data predates windows


def test_alpha_beta_fit_never_goes_negative():
    # times that fall with size (noise at tiny sizes): no negative bandwidth, the latency alone
    fit = fit_alpha_beta([_point(8, 30.0), _point(64, 20.0), _point(512, 10.0)])
    assert fit.alpha_us > 0 and fit.beta_gbps is None
    assert {p.model_us for p in fit.points} == {fit.alpha_us}


def test_cpu_measure_times_the_calls_by_the_host_clock():
    # one rank: the all-reduce of a single rank's input is the input, so a call that leaves x as it is
    # is that collective; the host clock sees the calls' own time, at least the sleep each makes
    import time

    import torch

    plan = RankPlan(ranks=1, backend="gloo", on_gpu=False, port=0, sizes=(64,), buffer_kinds=("regular",), warmup=1,
                    iterations=3, result_path="", timeout_s=10, repeats=2)
    calls = []

    def call(x):
        calls.append(x.clone())
        time.sleep(0.002)

    windows = _measure(torch, plan, call, torch.empty(16), rank=0)
    assert windows.error == 0.0 and len(calls) == 1 + 1 + 2 * 3  # checked, warm-up, two windows of three
    assert len(windows.device) == 2 and windows.device == windows.host  # the host clock is the CPU's only clock
    median, fastest, host, error = windows.statistics()
    assert fastest >= 0.002 and median >= fastest and host == median and error == 0.0


def test_datasheet_link_of_the_sweep():
    assert datasheet_link("cuda", "NVIDIA H100 80GB HBM3")[0] == pytest.approx(450.0)
    assert "halved" in datasheet_link("cuda", "NVIDIA H100 80GB HBM3")[1]
    gbps, why = datasheet_link("cuda", "Radeon 7900")
    assert gbps is None and "Radeon 7900" in why and "peaks.py" in why
    assert datasheet_link("rocm", "AMD Instinct MI355X")[0] is None
    assert datasheet_link("cpu", "CPU (gloo)")[0] is None


def test_largest_sizes_against_the_link():
    def point(ranks, kind, size, busbw):
        return AllreduceMeasurement(ranks=ranks, buffer_kind=kind, placement="in_place", bytes=size, count=size // 4,
                                    time_us=1.0, algbw_gbps=busbw, busbw_gbps=busbw, checked=True, max_abs_error=0)

    sweep = AllreduceSweep(created_at="now", backend="nccl", platform="cuda", device_name="NVIDIA H100 80GB HBM3",
                           torch_version="2", dtype="float32", warmup=1, iterations=1, environment={}, time_rule="r",
                           measurements=[point(2, "regular", 1 << 20, 100.0), point(2, "regular", 1 << 30, 330.0),
                                         point(1, "regular", 1 << 30, 900.0), point(2, "cupy_nccl", 1 << 29, 225.0),
                                         point(2, "regular", 1 << 29, 360.0).model_copy(update={"launch": "graph"})],
                           link_datasheet_gbps=450.0, link_source="H100, datasheet")
    assert largest_size_link_lines(sweep) == [
        "busbw at 512 MiB (2 ranks, cupy_nccl in_place, eager): 225 GB/s = 50% of the 450 GB/s datasheet link "
        "(per direction)",
        "busbw at 1 GiB (2 ranks, regular in_place, eager): 330 GB/s = 73% of the 450 GB/s datasheet link "
        "(per direction)",
        "busbw at 512 MiB (2 ranks, regular in_place, graph): 360 GB/s = 80% of the 450 GB/s datasheet link "
        "(per direction)"]
