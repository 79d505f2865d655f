"""The snapshot contract on this real host (no GPU, no ROCm): fully shaped, never raises, honest reasons."""

from __future__ import annotations

import json
import re
from datetime import datetime

import pytest

from sol_execbench.envprobe import accelerator, env_vars, host, nvidia, packages, python_env, pytorch_build, rocm, snapshot
from sol_execbench.envprobe._common import Context, run_command


def _missing_keys(template, value, path=""):
    """Keys of ``template`` (recursively) absent from ``value``."""
    if not isinstance(template, dict):
        return []
    assert isinstance(value, dict), f"{path} should be an object"
    missing = []
    for key, sub in template.items():
        where = f"{path}.{key}" if path else key
        missing += [where] if key not in value else _missing_keys(sub, value[key], where)
    return missing


def test_snapshot_has_every_key_of_the_empty_shape(host_snapshot):
    assert _missing_keys(snapshot.empty_snapshot(), host_snapshot) == []
    assert list(host_snapshot)[: len(snapshot.META_KEYS)] == list(snapshot.META_KEYS)


def test_snapshot_meta_fields(host_snapshot):
    assert host_snapshot["schema_version"] == snapshot.SCHEMA_VERSION
    assert datetime.fromisoformat(host_snapshot["timestamp"]).tzinfo is not None
    assert host_snapshot["partial"] is bool(host_snapshot["partial_reasons"])
    assert host_snapshot["probe_wall_s"] > 0
    json.dumps(host_snapshot)  # plain JSON all the way down


def test_every_reason_names_block_and_field(host_snapshot):
    for reason in host_snapshot["partial_reasons"]:
        assert re.match(r"^[a-z_]+(\.[\w\[\]\.]+)?: .+", reason), reason


def test_cpu_host_vendor_blocks_are_absent_without_reasons(host_snapshot):
    if host_snapshot["accelerator"]["device_count"]:
        pytest.skip("a GPU host")
    assert host_snapshot["accelerator"]["devices"] == []
    for block in ("nvidia", "rocm"):
        if not host_snapshot[block]["present"]:
            assert not [r for r in host_snapshot["partial_reasons"] if r.startswith(block + ".")]


def test_wheel_install_reason_carries_source_url(host_snapshot):
    build = host_snapshot["pytorch_build"]
    if build["source_tree"] is not None:
        pytest.skip("torch from a source tree")
    commit = build["git_commit"]
    assert re.fullmatch(r"[0-9a-f]{40}", commit)
    lines = [r for r in host_snapshot["partial_reasons"] if r.startswith("pytorch_build.submodule_commits")]
    assert lines and f"https://github.com/pytorch/pytorch/tree/{commit}/third_party" in lines[0]


def test_a_block_that_raises_becomes_a_reason(monkeypatch):
    def broken():
        raise RuntimeError("boom")

    monkeypatch.setitem(snapshot._INDEPENDENT, "host", broken)
    snap = snapshot.collect()
    assert snap["host"] == host.empty()
    assert "host: probe failed: RuntimeError: boom" in snap["partial_reasons"]
    assert snap["partial"] is True


def test_collect_survives_a_broken_assembly(monkeypatch):
    monkeypatch.setattr(snapshot, "_collect", lambda extended, use_cache: 1 / 0)
    snap = snapshot.collect()
    assert snap["partial_reasons"] == ["snapshot: probe failed: ZeroDivisionError: division by zero"]
    assert _missing_keys(snapshot.empty_snapshot(), snap) == []


def test_blocks_without_torch_are_shaped_and_say_why():
    ctx = Context(facts=None, torch_error="torch cannot be imported: ImportError: nope")
    for module in (pytorch_build, accelerator):
        block, reasons = module.probe(ctx)
        assert _missing_keys(module.empty(), block) == []
        assert reasons and "ImportError: nope" in reasons[0]
    for module in (nvidia, rocm):  # no torch, no driver, no ROCm here: nothing to report
        block, _ = module.probe(ctx)
        assert _missing_keys(module.empty(), block) == []


def test_conform_fills_missing_keys_and_keeps_extra():
    template = {"a": None, "b": {"c": None, "d": 1}}
    assert snapshot.conform(template, {"b": {"c": 2}, "x": 3}) == {"a": None, "b": {"c": 2, "d": 1}, "x": 3}


@pytest.mark.parametrize("module", [host, python_env, packages, env_vars])
def test_independent_blocks_are_shaped(module):
    block, reasons = module.probe()
    assert _missing_keys(module.empty(), block) == []
    assert all(isinstance(r, str) for r in reasons)


def test_env_vars_unset_are_null_and_own_prefix_is_captured(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "0,1")
    monkeypatch.setenv("SOL_EXECBENCH_SOMETHING_NEW", "x")
    block, _ = env_vars.probe()
    assert block["CUDA_VISIBLE_DEVICES"] is None
    assert block["HIP_VISIBLE_DEVICES"] == "0,1"
    assert block["SOL_EXECBENCH_SOMETHING_NEW"] == "x"
    for name in ("SOLEXECBENCH_ENV_SNAPSHOT", "SOLEXECBENCH_ENV_SNAPSHOT_PATH", "SOL_EXECBENCH_CLOCKS_LOCKED",
                 "TORCH_BLAS_PREFER_HIPBLASLT", "CUBLAS_WORKSPACE_CONFIG", "NVIDIA_TF32_OVERRIDE", "PYTORCH_ALLOC_CONF"):
        assert name in env_vars.CANONICAL_ENV_VARS
    assert len(set(env_vars.CANONICAL_ENV_VARS)) == len(env_vars.CANONICAL_ENV_VARS)


def test_commands_are_time_boxed_and_never_raise():
    slow = run_command(["sleep", "5"], timeout=0.2)
    assert not slow.ok and "did not finish within 0.2 s" in slow.error
    missing = run_command(["/nonexistent/tool-xyz"])
    assert not missing.ok and "could not be started" in missing.error
    failing = run_command(["sh", "-c", "echo oops >&2; exit 3"])
    assert failing.returncode == 3 and "exited 3: oops" in failing.error


def test_python_block_reports_this_interpreter():
    import sys

    block, reasons = python_env.probe()
    assert block["executable"] == sys.executable and reasons == []
    assert block["venv_kind"] in ("uv", "virtualenv", "venv", "conda", "system")


def test_a_prefetch_that_raises_becomes_a_reason_of_its_block(monkeypatch):
    def broken():
        raise OSError("nvml exploded")

    monkeypatch.setitem(snapshot._PREFETCH, "nvidia", broken)
    snap = snapshot.collect()
    assert snap["nvidia"] == nvidia.empty()
    assert "nvidia: probe failed: OSError: nvml exploded" in snap["partial_reasons"]
