"""Dry runs: every docker command of every target is printed (also when preflight or the smoke rule
refuses), none is run, and the exit status says whether a real run would go ahead."""

from __future__ import annotations

import os
import shlex
import subprocess

import pytest

from sol_execbench.containers.commands import is_smoke_command

from .conftest import ALL_TARGETS, HOST_READY, REPO, clean_environ

SMOKE = ["sol-execbench", "examples/rmsnorm", "--solution", "examples/rmsnorm/solution_triton.json"]
FORBIDDEN_DOCKER = "docker-must-not-run"


def _expected_build_words(target: dict) -> list[str]:
    policy = target["pytorch_dependency_policy"]
    prefix = "ROCM" if target["platform"] == "rocm" else "CUDA"
    triton = "TRITON_ROCM" if target["platform"] == "rocm" else "TRITON"
    return [
        f"sol-execbench:{target['platform']}-{target['docker_image_tag']}",
        f"{prefix}_DOCKER_IMAGE={target['docker_image_repository']}",
        f"{prefix}_DOCKER_TAG={target['docker_image_tag']}",
        f"PYTORCH_TORCH_VERSION={policy['torch_version']}",
        f"PYTORCH_TORCHVISION_VERSION={policy['torchvision_version']}",
        f"PYTORCH_{prefix}_INDEX_URL={policy['index_url']}",
        f"{triton}_VERSION={policy['triton_version']}",
        f"{triton}_INDEX_URL={policy['triton_index_url']}",
        f"HOST_UID={os.getuid()}", f"HOST_GID={os.getgid()}",
        f"SOL_EXECBENCH_CONTAINER_TARGET={target['target_id']}",
        str(REPO / target["dockerfile"]),
    ]


def _lines(out: str) -> list[list[str]]:
    commands = [shlex.split(line[2:]) for line in out.splitlines() if line.startswith("+ ")]
    assert len(commands) == len(out.splitlines()), out
    return commands


@pytest.mark.parametrize("target", ALL_TARGETS, ids=[t["target_id"] for t in ALL_TARGETS])
def test_dry_run_command_lines_of_every_target(docker_cli, target):
    env = clean_environ(**HOST_READY, SOL_EXECBENCH_GPU_CLK_MHZ="1980")
    args = ["run", "--dry-run", "--build", "--target", target["target_id"], "--shm-size", "8g", "--", *SMOKE]
    code, out, err = docker_cli(args, env)
    build, run = _lines(out)
    assert build[:2] == ["docker", "build"] and build[-1] == str(REPO)
    assert set(_expected_build_words(target)) <= set(build)
    image = f"sol-execbench:{target['platform']}-{target['docker_image_tag']}"
    assert run[:3] == ["docker", "run", "--rm"] and "--ipc=host" in run
    assert run[run.index("-v") + 1] == f"{REPO}:/sol-execbench"
    assert "FLASHINFER_TRACE_DIR=/sol-execbench/data/flashinfer-trace" in run
    assert "SOL_EXECBENCH_GPU_CLK_MHZ=1980" in run and "SOL_EXECBENCH_DRAM_CLK_MHZ=" in run
    gpu_flags = ["--device=/dev/kfd", "--device=/dev/dri"] if target["platform"] == "rocm" else ["--gpus", "all"]
    assert all(flag in run for flag in gpu_flags)
    at = run.index(image)
    assert run[at - 2:at] == ["--shm-size", "8g"] and run[at + 1:] == SMOKE
    # not_tested + smoke command + no allow flag: refused, with the flag named
    assert target["validation_status"] == "not_tested"
    assert code == 1 and "--allow-untested-target-smoke" in err
    code, out_allowed, err = docker_cli([*args[:2], "--allow-untested-target-smoke", *args[2:]], env)
    assert code == 0 and "would refuse" not in err and out_allowed == out


@pytest.mark.parametrize("command, smoke", [
    ([], False), (["bash"], False), (["sol-execbench", "env", "probe"], False), (["sol-execbench", "doctor", "--json"], False),
    (["uv", "run", "sol-execbench", "--help"], False), (["nvidia-smi"], False),
    (SMOKE, True), (["sol-execbench", "dataset", "run", "bench"], True), (["python3", "scripts/run_dataset.py", "x"], True),
    (["uv", "run", "pytest", "-q"], True), (["python", "-m", "pytest"], True), (["bash", "-c", "cd x && sol-execbench y"], True),
])
def test_which_commands_are_smoke_runs(command, smoke):
    assert is_smoke_command(command) is smoke


def test_a_failing_preflight_still_prints_every_command(docker_cli):
    env = clean_environ(**{**HOST_READY, "SOL_EXECBENCH_DEV_KFD_PRESENT": "0"})
    code, out, err = docker_cli(["run", "--dry-run", "--build", "--allow-untested-target-smoke", "--", *SMOKE], env)
    assert code == 1 and [c[:2] for c in _lines(out)] == [["docker", "build"], ["docker", "run"]]
    assert "/dev/kfd is missing" in err


def test_the_wrapper_script_never_calls_docker_in_a_dry_run(tmp_path):
    """scripts/run_docker.sh as a real process, with a `docker` on PATH that fails loudly if run."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "docker").write_text(f"#!/bin/sh\necho {FORBIDDEN_DOCKER} >&2\nexit 99\n")
    (fake / "docker").chmod(0o755)
    env = clean_environ(**HOST_READY, SOL_EXECBENCH_RUN_DOCKER_DRY_RUN="1", SOL_EXECBENCH_HOST_PYTHON="python3",
                        PATH=f"{fake}:{os.environ['PATH']}", IMAGE_NAME="mine", IMAGE_TAG="t1")
    result = subprocess.run([str(REPO / "scripts" / "run_docker.sh"), "--build", "--target", "cuda-13.0-ubuntu-24.04-container",
                             "-e", "X=1", "--", "bash"], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert FORBIDDEN_DOCKER not in result.stderr
    build, run = _lines(result.stdout)
    assert build[build.index("-t") + 1] == "mine:t1" and run[-4:] == ["-e", "X=1", "mine:t1", "bash"]


def test_wrapper_flags_need_their_values(docker_cli):
    for flag in ("--target", "--compatibility-entry", "--compatibility-matrix"):
        code, _, err = docker_cli(["run", "--dry-run", flag], clean_environ())
        assert code == 2 and "requires an argument" in err
