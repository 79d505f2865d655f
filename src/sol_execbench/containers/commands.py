"""The docker command lines of a wrapper run, and which container commands are smoke runs."""

from __future__ import annotations

import getpass
import os
import shlex
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Mapping

from sol_execbench.schema.containers import ContainerPlatform, TargetSelection

CONTAINER_PROJECT = "/sol-execbench"
"""Where the repository is mounted in the container (the images' WORKDIR and PYTHONPATH root)."""
CONTAINER_TRACE_DIR = f"{CONTAINER_PROJECT}/data/flashinfer-trace"
FORWARDED_VARIABLES = ("SOL_EXECBENCH_GPU_CLK_MHZ", "SOL_EXECBENCH_DRAM_CLK_MHZ")
"""Passed into every container, empty when unset (the clock checks read them)."""
LOCK_REQUEST_VARIABLE = "SOL_EXECBENCH_ENTRYPOINT_LOCK_CLOCKS"
"""Passed in only when set: the entrypoint locks clocks only when asked."""
DEFAULT_COMMAND = ("bash",)

NOT_SMOKE_SUBCOMMANDS = frozenset({"env", "contract", "doctor", "toolchain", "docker", "--help", "-h", "--version"})
"""``sol-execbench`` subcommands that only describe the environment: no smoke run."""
SMOKE_WORDS = ("sol-execbench", "run_dataset.py", "pytest")


def is_smoke_command(command: tuple[str, ...] | list[str]) -> bool:
    """Whether a container command is a smoke/E2E run, which a ``not_tested`` target refuses
    without ``--allow-untested-target-smoke``: an evaluation (``sol-execbench PROBLEM ...``,
    ``sol-execbench evaluate|dataset|bound|worker ...``), ``scripts/run_dataset.py``, or pytest
    (``pytest``, ``python -m pytest``), also behind ``uv run``; and a shell ``-c`` string naming one
    of them. Not smoke runs: no command (an interactive shell), another shell or program, and the
    describing subcommands (``sol-execbench env|contract|doctor|toolchain|docker``, ``--help``)."""
    words = list(command)
    while words[:2] == ["uv", "run"]:
        words = words[2:]
    if not words:
        return False
    program = PurePosixPath(words[0]).name
    if program in ("bash", "sh") and len(words) >= 3 and words[1] == "-c":
        return any(word in words[2] for word in SMOKE_WORDS)
    if program.startswith("python") and len(words) >= 2:
        if words[1:3] == ["-m", "pytest"]:
            return True
        return PurePosixPath(words[1]).name == "run_dataset.py"
    if program == "sol-execbench":
        return not (len(words) > 1 and words[1] in NOT_SMOKE_SUBCOMMANDS)
    return program in ("run_dataset.py", "pytest")


@dataclass(frozen=True)
class HostUser:
    """The image user mirrors the host user (``HOST_UID``, ``HOST_GID``, ``HOST_USER``)."""

    uid: int
    gid: int
    name: str

    @classmethod
    def current(cls) -> "HostUser":
        try:
            name = getpass.getuser()
        except (KeyError, OSError):
            name = "sol-execbench"
        return cls(os.getuid(), os.getgid(), name)


def build_argv(selection: TargetSelection, repo_root: Path, user: HostUser) -> list[str]:
    """``docker build`` of the selected target's image with its build arguments."""
    args = {**selection.build_args, "HOST_UID": str(user.uid), "HOST_GID": str(user.gid), "HOST_USER": user.name,
            "SOL_EXECBENCH_CONTAINER_TARGET": selection.target_id}
    argv = ["docker", "build", "-t", selection.image]
    for name, value in args.items():
        argv += ["--build-arg", f"{name}={value}"]
    return argv + ["-f", str(repo_root / selection.dockerfile), str(repo_root)]


@dataclass(frozen=True)
class RunSpec:
    """What a ``docker run`` needs besides the target: the user's docker flags and command."""

    repo_root: Path
    docker_args: tuple[str, ...] = ()
    """Arguments before ``--`` that are not the wrapper's own."""
    command: tuple[str, ...] = ()
    """After ``--``; empty: an interactive shell."""
    tty: bool = False
    """Add ``-it`` (the wrapper does when its stdin and stdout are terminals)."""


def run_argv(selection: TargetSelection, spec: RunSpec, environ: Mapping[str, str]) -> list[str]:
    """``docker run`` of the image with the GPU devices, ``--ipc=host``, the repository at
    ``/sol-execbench`` and the FlashInfer trace root."""
    argv = ["docker", "run", "--rm", *(["-it"] if spec.tty else [])]
    if selection.platform is ContainerPlatform.ROCM:
        argv += ["--device=/dev/kfd", "--device=/dev/dri", "--group-add", "video", "--security-opt", "seccomp=unconfined"]
    else:
        argv += ["--gpus", "all"]
    argv += ["--ipc=host", "--ulimit", "memlock=-1", "--ulimit", "stack=67108864",
             "-v", f"{spec.repo_root}:{CONTAINER_PROJECT}", "-e", f"FLASHINFER_TRACE_DIR={CONTAINER_TRACE_DIR}"]
    argv += [arg for name in FORWARDED_VARIABLES for arg in ("-e", f"{name}={environ.get(name, '')}")]
    if environ.get(LOCK_REQUEST_VARIABLE):
        argv += ["-e", f"{LOCK_REQUEST_VARIABLE}={environ[LOCK_REQUEST_VARIABLE]}"]
    return argv + [*spec.docker_args, selection.image, *(spec.command or DEFAULT_COMMAND)]


def shown(argv: list[str]) -> str:
    """The line a dry run (and a real run) prints for a command: ``+ `` and the shell-quoted words."""
    return "+ " + shlex.join(argv)
