"""Preflight: each SOL_EXECBENCH_* override replaces the fact it names, and the host and the
dependencies are classified under them."""

from __future__ import annotations

import json

import pytest

from sol_execbench.containers.preflight import OVERRIDES, PreflightRequest, build_preflight
from sol_execbench.containers.targets import TARGET_ENV, TargetRequest, load_manifests, select_target
from sol_execbench.envprobe.snapshot import cached_snapshot

from .conftest import HOST_READY, REPO, clean_environ

ROCM_DEFAULT = "rocm-7.1.1-ubuntu-24.04-container"
CUDA_DEFAULT = "cuda-12.8-ubuntu-24.04-container"


def preflight(target_id: str, env: dict[str, str], dry_run: bool = True, allow_mixed: bool = False):
    selected = select_target(load_manifests(REPO), TargetRequest.from_environ(target_id, False, env))
    return build_preflight(PreflightRequest(selected.selection, selected.target, cached_snapshot(), env, dry_run, allow_mixed))


def _value_for(name: str) -> tuple[str, object]:
    """A value for the override and the fact it must become."""
    parser = OVERRIDES[name][2].__name__
    if parser == "_flag":
        return "0", False
    if parser == "_count":
        return "3", 3
    return f"override-of-{name.lower()}", f"override-of-{name.lower()}"


@pytest.mark.parametrize("name", sorted(OVERRIDES))
def test_each_override_replaces_its_fact(name):
    text, expected = _value_for(name)
    document = preflight(ROCM_DEFAULT, clean_environ(**{name: text})).model_dump(mode="json")
    section, path, _ = OVERRIDES[name]
    value = document[section]
    for part in path.split("."):
        value = value[part]
    assert value == expected
    assert document["overrides"] == {name: text}


def test_a_ready_amd_host(docker_cli):
    code, out, _ = docker_cli(["preflight", "--dry-run"], clean_environ(**HOST_READY))
    verdict = json.loads(out)["classification"]
    assert code == 0 and verdict["host_status"] == "ready" and verdict["benchmark_allowed"] is True
    assert verdict["host_kind"] == "amd" and verdict["dependency_scope"] == "host"


@pytest.mark.parametrize("changed, status", [
    ({"SOL_EXECBENCH_DEV_KFD_PRESENT": "0"}, "runtime_unavailable"),
    ({"SOL_EXECBENCH_DEV_DRI_PRESENT": "0"}, "runtime_unavailable"),
    ({"SOL_EXECBENCH_DEV_KFD_ACCESSIBLE": "0"}, "device_permission_denied"),
    ({"SOL_EXECBENCH_DEV_DRI_ACCESSIBLE": "0"}, "device_permission_denied"),
    ({"SOL_EXECBENCH_GPU_ACCESSIBLE": "0"}, "gpu_unavailable"),
])
def test_amd_host_problems(changed, status):
    verdict = preflight(ROCM_DEFAULT, clean_environ(**{**HOST_READY, **changed})).classification
    assert (verdict.host_status, verdict.benchmark_allowed) == (status, False)
    assert verdict.reasons


def test_nvidia_host_needs_the_container_runtime():
    nvidia = {**HOST_READY, "SOL_EXECBENCH_DEV_KFD_PRESENT": "0", "SOL_EXECBENCH_DEV_DRI_PRESENT": "0"}
    ready = preflight(CUDA_DEFAULT, clean_environ(**nvidia)).classification
    assert (ready.host_kind, ready.host_status, ready.benchmark_allowed) == ("nvidia", "ready", True)
    missing = preflight(CUDA_DEFAULT, clean_environ(**{**nvidia, "SOL_EXECBENCH_NVIDIA_CONTAINER_RUNTIME": "0"}))
    assert missing.classification.host_status == "runtime_unavailable"
    assert "NVIDIA Container Toolkit" in missing.classification.reasons[0]


def test_without_docker_a_real_preflight_says_so(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no docker CLI on it
    env = clean_environ(**{k: v for k, v in HOST_READY.items() if k != "SOL_EXECBENCH_DOCKER_CONTEXT"})
    report = preflight(ROCM_DEFAULT, env, dry_run=False)
    assert report.classification.host_status == "docker_unavailable"
    assert any("docker CLI is not on PATH" in r for r in report.partial_reasons)


def _stack(target_id: str, **changed: str) -> dict[str, str]:
    """Dependency overrides describing exactly the target's wheel stack, then ``changed``."""
    wheels = {t["target_id"]: t for t in json.loads((REPO / "docker/rocm-targets.json").read_text())["targets"]}[target_id]
    policy = wheels["pytorch_dependency_policy"]
    stack = {
        "SOL_EXECBENCH_DEPENDENCY_TORCH_DISTRIBUTION_VERSION": policy["torch_version"],
        "SOL_EXECBENCH_DEPENDENCY_TORCHVISION_DISTRIBUTION_VERSION": policy["torchvision_version"],
        "SOL_EXECBENCH_DEPENDENCY_TRITON_ROCM_DISTRIBUTION_VERSION": policy["triton_version"],
        "SOL_EXECBENCH_DEPENDENCY_CONTAINER_ROCM_USER_SPACE_VERSION": wheels["requested_rocm_user_space_version"],
    }
    return {**HOST_READY, **stack, **changed}


def test_dependency_classification():
    match = preflight(ROCM_DEFAULT, clean_environ(**_stack(ROCM_DEFAULT))).classification
    assert (match.dependency_status, match.dependency_scope, match.benchmark_allowed) == ("match", "container", True)

    mixed_env = clean_environ(**_stack(ROCM_DEFAULT, SOL_EXECBENCH_DEPENDENCY_TORCH_DISTRIBUTION_VERSION="2.11.0+rocm7.2"))
    mixed = preflight(ROCM_DEFAULT, mixed_env).classification
    assert (mixed.dependency_status, mixed.benchmark_allowed) == ("mixed_version", False)
    assert any("2.11.0+rocm7.2" in r and "--allow-mixed-version-dependencies" in r for r in mixed.reasons)
    allowed = preflight(ROCM_DEFAULT, mixed_env, allow_mixed=True).classification
    assert (allowed.dependency_status, allowed.benchmark_allowed) == ("mixed_version", True)

    broken_env = clean_environ(**_stack(ROCM_DEFAULT, SOL_EXECBENCH_DEPENDENCY_TORCH_IMPORT_ERROR="libamdhip64.so: not found"))
    broken = preflight(ROCM_DEFAULT, broken_env, allow_mixed=True).classification
    assert (broken.dependency_status, broken.benchmark_allowed) == ("import_error", False)

    user_space = clean_environ(**_stack(ROCM_DEFAULT, SOL_EXECBENCH_DEPENDENCY_CONTAINER_ROCM_USER_SPACE_VERSION="7.0.2"))
    assert preflight(ROCM_DEFAULT, user_space).classification.dependency_status == "mixed_version"


def test_a_docker_without_daemon_is_unavailable(monkeypatch, tmp_path):
    """A docker CLI whose 'info' fails, as where the engine is not running."""
    (tmp_path / "docker").write_text('#!/bin/sh\n[ "$1" = info ] && { echo "Cannot connect to the Docker daemon" >&2; exit 1; }\n'
                                     'echo default\n')
    (tmp_path / "docker").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    report = preflight(CUDA_DEFAULT, clean_environ(**HOST_READY), dry_run=False)
    assert report.host.docker_daemon_reachable is False and report.classification.host_status == "docker_unavailable"
    assert "does not answer" in report.classification.reasons[0]


def test_inside_the_target_container_its_own_stack_gates_the_run():
    """No dependency override: the scope is the container only where the image names this target."""
    outside = preflight(ROCM_DEFAULT, clean_environ(**HOST_READY)).classification
    inside = preflight(ROCM_DEFAULT, clean_environ(**HOST_READY, **{TARGET_ENV: ROCM_DEFAULT})).classification
    other = preflight(ROCM_DEFAULT, clean_environ(**HOST_READY, **{TARGET_ENV: "rocm-7.2.0-ubuntu-24.04-container"}))
    assert (outside.dependency_scope, inside.dependency_scope, other.classification.dependency_scope) == (
        "host", "container", "host")
    assert outside.benchmark_allowed is True
    assert inside.benchmark_allowed is (inside.dependency_status == "match")
    # in the image, docker itself is absent: not a host problem there, and not probed
    host_only = {k: v for k, v in HOST_READY.items() if k != "SOL_EXECBENCH_DOCKER_CONTEXT"}
    real = preflight(ROCM_DEFAULT, clean_environ(**host_only, **{TARGET_ENV: ROCM_DEFAULT}), dry_run=False)
    assert real.classification.host_status == "ready" and real.host.docker_context is None


@pytest.mark.parametrize("name, text", [("SOL_EXECBENCH_DEV_KFD_PRESENT", "maybe"),
                                        ("SOL_EXECBENCH_RUNTIME_DEVICE_COUNT", "two")])
def test_an_unreadable_override_is_one_error_line(docker_cli, name, text):
    code, out, err = docker_cli(["preflight", "--dry-run"], clean_environ(**{name: text}))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and name in err


def test_preflight_prints_exactly_one_json_document(docker_cli):
    code, out, _ = docker_cli(["run", "--preflight-only", "--dry-run", "--target", CUDA_DEFAULT], clean_environ())
    document = json.loads(out)  # raises on anything but one document
    assert document["schema_version"] == "sol_execbench.docker_preflight.v1" and document["dry_run"] is True
    assert code == (0 if document["classification"]["benchmark_allowed"] else 1)
