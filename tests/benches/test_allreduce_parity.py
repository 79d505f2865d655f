"""benchmarks/allreduce_parity.py on the CPU: two gloo ranks beside a small CPU sweep, end to end, and a
missing or garbled --sweep file ending with exit 2 and one line naming it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from sol_execbench.benches.allreduce_metrics import busbw_gbps
from sol_execbench.schema.benches import AllreduceMeasurement, AllreduceSweep

from .test_allreduce import SRC, cli

SCRIPT = SRC.parent / "benchmarks" / "allreduce_parity.py"


def parity(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=300)


def test_host_loop_beside_a_cpu_sweep(tmp_path):
    sweep_dir = tmp_path / "allreduce"
    made = cli("bench", "allreduce", "--cpu", "--max-bytes", "4096", "--factor", "8", "-o", str(sweep_dir))
    assert made.returncode == 0, made.stderr
    out = tmp_path / "parity.json"
    result = parity("--cpu", "--sweep", str(sweep_dir / "allreduce.json"), "--ranks", "2", "--warmup", "1",
                    "--iterations", "3", "--repeats", "2", "--out", str(out))
    assert result.returncode == 0, result.stderr
    document = json.loads(out.read_text())
    assert document["repeats"] == 2 and "median window" in document["host_loop_rule"]
    assert document["backend"] == "gloo" and document["ranks"] == 2 and document["environment"]["NCCL_NVLS_ENABLE"] == "0"
    assert document["columns"] == ["regular in_place", "regular out_of_place"]  # the kinds gloo runs
    assert [row["bytes"] for row in document["rows"]] == [8, 64, 512, 4096]  # the sweep's own sizes
    for row in document["rows"]:
        assert row["host_loop_time_us"] > 0
        # busbw as nccl-tests: S / t, times 2(n-1)/n = 1 for two ranks
        assert row["host_loop_busbw_gbps"] == pytest.approx(row["bytes"] / (row["host_loop_time_us"] * 1e-6) / 1e9)
        assert set(row["sweep_busbw_gbps"]) == set(document["columns"])
        expected = 100 * (row["sweep_busbw_gbps"]["regular in_place"] / row["host_loop_busbw_gbps"] - 1)
        # no graph launch on the CPU: the eager rows are the sweep's device figure
        assert row["device_launch"] == "eager" and row["eager_vs_host_loop_pct"] == pytest.approx(expected)
        assert row["sweep_vs_host_loop_pct"] == pytest.approx(expected)
        assert row["sweep_slower_than_host_loop"] == (expected < -2.0)
        assert row["cupy_nccl_vs_regular_pct"] is None  # below 64 MiB, and no CuPy kind on the CPU
        # the sweep's own host clock for its eager regular in-place calls; no graph launch on the CPU
        assert row["sweep_host_time_us"] > 0 and row["graph_busbw_gbps"] is None
    assert document["slower_sizes"] == [r["bytes"] for r in document["rows"] if r["sweep_slower_than_host_loop"]]
    largest = document["largest_vs_link"]
    assert largest["bytes"] == 4096 and largest["link_datasheet_gbps"] is None and "CPU" in largest["link_source"]
    assert "sweep slower than host loop" in result.stdout


@pytest.mark.parametrize("content", [None, "{not json", json.dumps({"backend": "nccl"})])
def test_a_missing_or_garbled_sweep_exits_2_naming_it(tmp_path, content):
    sweep = tmp_path / "allreduce.json"
    if content is not None:
        sweep.write_text(content)
    result = parity("--cpu", "--sweep", str(sweep), "--out", str(tmp_path / "parity.json"))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and str(sweep) in lines[0], result.stderr
    assert not (tmp_path / "parity.json").exists()


def _measurement(launch: str, size: int, seconds: float, kind: str = "regular") -> AllreduceMeasurement:
    return AllreduceMeasurement(ranks=2, buffer_kind=kind, placement="in_place", bytes=size, count=size // 4,
                                launch=launch, time_us=seconds * 1e6, host_time_us=seconds * 1e6,
                                algbw_gbps=busbw_gbps(size, seconds, 1), busbw_gbps=busbw_gbps(size, seconds, 2),
                                checked=True, max_abs_error=0.0)


def test_the_flag_judges_the_graph_launch_where_the_sweep_has_it():
    """Host-paced eager calls slower than the host loop are not flagged when the graph launch (the
    device's own time per call) is at least as fast; a graph row slower than the host loop is."""
    module = _parity_module()
    measurements = [_measurement("eager", 8, 50e-6), _measurement("graph", 8, 9e-6),  # graph far faster
                    _measurement("eager", 1 << 20, 40e-6), _measurement("graph", 1 << 20, 60e-6),  # graph slower
                    _measurement("eager", 1 << 26, 200e-6)]  # no graph row: eager is the device figure
    sweep = AllreduceSweep(created_at="2026-11-27T00:00:00+00:00", backend="nccl", platform="cuda",
                           device_name="test", torch_version="2.11", dtype="float32 (4 bytes)", warmup=1,
                           iterations=2, repeats=2, environment={}, time_rule="test", measurements=measurements)
    host = {8: 36e-6, 1 << 20: 45e-6, 1 << 26: 190e-6}
    rows = {row["bytes"]: row for row in module.compare(sweep, 2, host)["rows"]}
    assert rows[8]["device_launch"] == "graph" and not rows[8]["sweep_slower_than_host_loop"]
    assert rows[8]["eager_vs_host_loop_pct"] == pytest.approx(100 * (36 / 50 - 1))
    assert rows[1 << 20]["device_launch"] == "graph" and rows[1 << 20]["sweep_slower_than_host_loop"]
    assert rows[1 << 26]["device_launch"] == "eager" and rows[1 << 26]["sweep_slower_than_host_loop"]
    assert module.compare(sweep, 2, host)["slower_sizes"] == [1 << 20, 1 << 26]


def _parity_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("allreduce_parity", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
