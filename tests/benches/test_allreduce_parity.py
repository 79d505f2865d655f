"""benchmarks/allreduce_parity.py on the CPU: two gloo ranks beside a small CPU sweep, end to end, and a
missing or garbled --sweep file ending with exit 2 and one line naming it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

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
