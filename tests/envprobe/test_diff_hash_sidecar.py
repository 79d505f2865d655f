"""env diff semantics, the environment hash, and the snapshot sidecar."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from sol_execbench.envprobe import hashing, sidecar, snapshot
from sol_execbench.envprobe.diff import TIMING_ORDER, diff_snapshots
from sol_execbench.envprobe.nvml_parse import parse_reading


@pytest.fixture
def h100_pair(snapshot_copy, recorded):
    """Two snapshots of one H100 host minutes apart: same configuration, different clocks and times."""
    a = snapshot_copy
    a["nvidia"].update(parse_reading(json.loads(recorded("nvml_h100_reading.json"))), present=True)
    a["nvidia"]["libraries"]["cublaslt"].update(version="12.4.5", path="/site/nvidia/cublas/lib/libcublasLt.so.12", sha256="ab" * 32)
    b = json.loads(json.dumps(a))
    b["timestamp"] = "2030-01-01T00:05:00+00:00"
    b["probe_wall_s"] = a["probe_wall_s"] + 0.4
    dev = b["nvidia"]["devices"][0]
    dev["clocks"]["current"]["sm_mhz"] = 1980
    dev["throttle_reasons"] = []
    dev["temperature_c"] += 9
    dev["power"]["draw_w"] = 455.5
    dev["performance_state"] = "P2"
    return a, b


def test_same_host_minutes_apart_differs_only_in_volatile_fields(h100_pair):
    a, b = h100_pair
    result = diff_snapshots(a, b)
    assert result.entries and {e.kind for e in result.entries} == {"volatile"}
    assert result.exit_code == 0 and not result.differs
    assert hashing.snapshot_hash(a) == hashing.snapshot_hash(b)


def test_a_library_version_change_is_a_difference(h100_pair):
    a, b = h100_pair
    b["nvidia"]["libraries"]["cublaslt"].update(version="12.6.4", sha256="cd" * 32)
    result = diff_snapshots(a, b)
    assert result.exit_code == 1
    changed = [e for e in result.entries if e.kind == "config"]
    assert {e.path for e in changed} == {"nvidia.libraries.cublaslt.version", "nvidia.libraries.cublaslt.sha256"}
    assert changed[0].a == "12.4.5" and changed[0].b == "12.6.4"
    assert hashing.snapshot_hash(a) != hashing.snapshot_hash(b)


def test_identity_fields_do_not_count(h100_pair):
    a, b = h100_pair
    b["host"]["hostname"] = "another-node"
    b["nvidia"]["devices"][0]["uuid"] = "GPU-00000000-0000-0000-0000-000000000000"
    result = diff_snapshots(a, b)
    assert result.exit_code == 0 and "identity" in result.counts()
    assert hashing.snapshot_hash(a) == hashing.snapshot_hash(b)


def test_groups_follow_timing_relevance(h100_pair):
    a, b = h100_pair
    b["host"]["glibc_version"] = "9.99"
    b["env_vars"]["CUDA_VISIBLE_DEVICES"] = "1"
    b["accelerator"]["device_count"] = 7
    blocks = [name for name, _ in diff_snapshots(a, b).by_block()]
    assert blocks == sorted(blocks, key=lambda n: [*TIMING_ORDER, "snapshot"].index(n))
    assert blocks[0] == "accelerator" and blocks[-1] == "snapshot"


def test_keys_present_on_one_side_only(h100_pair):
    a, b = h100_pair
    b["env_vars"]["SOL_EXECBENCH_NEW_KNOB"] = "1"
    (entry,) = [e for e in diff_snapshots(a, b).entries if e.kind == "config"]
    assert entry.presence == "b_only" and entry.a is None and entry.b == "1"


def test_extended_fields_compare_only_when_both_probed_them(h100_pair):
    a, b = h100_pair
    b["extended"] = True
    b["pytorch_build"]["bundled_symbols"]["counts"]["cutlass"] = 1234
    assert diff_snapshots(a, b).exit_code == 0
    a["extended"] = True
    assert diff_snapshots(a, b).exit_code == 1


def test_hash_of_two_real_probes_is_stable(host_snapshot):
    again = snapshot.collect()
    assert diff_snapshots(host_snapshot, again).exit_code == 0
    assert hashing.snapshot_hash(host_snapshot) == hashing.snapshot_hash(again)
    assert len(hashing.snapshot_hash(again)) == hashing.HASH_LENGTH


def test_hash_is_the_same_in_another_process(host_snapshot, tmp_path):
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(host_snapshot))
    code = "import json,sys; from sol_execbench.envprobe.hashing import snapshot_hash; print(snapshot_hash(json.load(open(sys.argv[1]))))"
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True).stdout.strip()
    assert out == hashing.snapshot_hash(host_snapshot)


def test_environment_hash_probes_once_per_process(monkeypatch):
    calls = []
    monkeypatch.setattr(hashing, "cached_snapshot", lambda: calls.append(1) or snapshot.empty_snapshot())
    hashing.environment_hash.cache_clear()
    try:
        first = hashing.environment_hash()
        assert hashing.environment_hash() == first and len(calls) == 1
    finally:
        hashing.environment_hash.cache_clear()


@pytest.fixture
def fake_snapshot(monkeypatch):
    monkeypatch.setattr(sidecar, "cached_snapshot", lambda: {"schema_version": "1.0", "fake": True})
    monkeypatch.delenv(sidecar.SNAPSHOT_FLAG, raising=False)
    monkeypatch.delenv(sidecar.SNAPSHOT_PATH, raising=False)


def test_sidecar_off_by_default(fake_snapshot, tmp_path):
    assert sidecar.write_snapshot_sidecar(tmp_path / "traces.jsonl", None) is None
    assert list(tmp_path.iterdir()) == []


def test_sidecar_next_to_output(fake_snapshot, monkeypatch, tmp_path):
    monkeypatch.setenv("SOLEXECBENCH_ENV_SNAPSHOT", "1")
    written = sidecar.write_snapshot_sidecar(tmp_path / "out" / "traces.jsonl", None)
    assert written == tmp_path / "out" / "traces.env.json"
    assert json.loads(written.read_text())["fake"] is True
    assert sidecar.write_snapshot_sidecar(None, None) is None  # nothing to sit beside


def test_sidecar_explicit_path_wins(fake_snapshot, monkeypatch, tmp_path):
    monkeypatch.setenv("SOLEXECBENCH_ENV_SNAPSHOT", "1")
    monkeypatch.setenv("SOLEXECBENCH_ENV_SNAPSHOT_PATH", str(tmp_path / "from-env.json"))
    assert sidecar.write_snapshot_sidecar(tmp_path / "t.jsonl", None) == tmp_path / "from-env.json"
    assert sidecar.write_snapshot_sidecar(tmp_path / "t.jsonl", tmp_path / "arg.json") == tmp_path / "arg.json"


def test_sidecar_write_failure_is_not_fatal(fake_snapshot, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert sidecar.write_snapshot_sidecar(None, blocker / "sub" / "env.json") is None


def test_a_hash_read_from_the_host_cache_imports_no_probe_module(tmp_path):
    """An evaluation stamps its traces from the host cache; the probe's modules (20 to 35 ms to
    import) load only when the cache is stale and a probe runs."""
    from sol_execbench.platform.host import CACHE_DIR_ENV

    code = ("import sys\n"
            "from sol_execbench.envprobe.hashing import host_cached_environment_hash\n"
            "print(host_cached_environment_hash(), 'sol_execbench.envprobe.snapshot' in sys.modules)\n")
    env = {**os.environ, CACHE_DIR_ENV: str(tmp_path)}
    runs = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True,
                           timeout=300).stdout.split() for _ in range(2)]
    assert runs[0][1] == "True" and runs[1][1] == "False"  # probed, then read from the cache
    assert runs[0][0] == runs[1][0] != "None"
