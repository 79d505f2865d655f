"""Shared set-up of the container tests: the repository, its manifests, one probe snapshot, and the
CLI run in process with a controlled environment."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from sol_execbench.cli import docker_cmd  # noqa: F401 - registers the commands on ``cli``
from sol_execbench.cli.main import cli
from sol_execbench.containers.preflight import OVERRIDES
from sol_execbench.containers.targets import TARGET_ENV

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = {name: json.loads((REPO / "docker" / f"{name}-targets.json").read_text()) for name in ("rocm", "cuda")}
ALL_TARGETS = [t for manifest in MANIFESTS.values() for t in manifest["targets"]]

HOST_READY = {
    "SOL_EXECBENCH_DOCKER_CONTEXT": "default",
    "SOL_EXECBENCH_DEV_KFD_PRESENT": "1",
    "SOL_EXECBENCH_DEV_KFD_ACCESSIBLE": "1",
    "SOL_EXECBENCH_DEV_DRI_PRESENT": "1",
    "SOL_EXECBENCH_DEV_DRI_ACCESSIBLE": "1",
    "SOL_EXECBENCH_NVIDIA_CONTAINER_RUNTIME": "1",
    "SOL_EXECBENCH_GPU_ACCESSIBLE": "1",
}
"""Overrides that make any host a ready GPU host (what a test of the gates starts from)."""


def clean_environ(**extra: str) -> dict[str, str]:
    """This process's environment without any override or wrapper variable, plus ``extra``."""
    wrapper = {"IMAGE_NAME", "IMAGE_TAG", "ROCM_DOCKER_IMAGE", "ROCM_DOCKER_TAG", TARGET_ENV,
               "SOL_EXECBENCH_ENTRYPOINT_LOCK_CLOCKS", "SOL_EXECBENCH_GPU_CLK_MHZ", "SOL_EXECBENCH_DRAM_CLK_MHZ"}
    env = {k: v for k, v in os.environ.items() if k not in OVERRIDES and k not in wrapper
           and not k.startswith(("SOL_EXECBENCH_ALLOW_", "SOL_EXECBENCH_RECORD_", "SOL_EXECBENCH_COMPATIBILITY_",
                                 "SOL_EXECBENCH_RUN_DOCKER_"))}
    env.update(extra)
    return env


@pytest.fixture
def docker_cli(monkeypatch):
    """``invoke(args, env)``: the real ``sol-execbench docker ...`` in process, under exactly ``env``
    (os.environ is replaced for the call); returns (exit code, stdout, stderr)."""
    runner = CliRunner()

    def invoke(args: list[str], env: dict[str, str]):
        for key in list(os.environ):
            monkeypatch.delenv(key)
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        result = runner.invoke(cli, ["docker", *args], catch_exceptions=False)
        return result.exit_code, result.stdout, result.stderr

    return invoke
