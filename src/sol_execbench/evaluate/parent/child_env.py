"""How an evaluation child starts, fresh, early or warm: its environment, its supervisor, its logs
(shared by ``process``, ``early_child`` and ``warm_pool`` without any importing another's module;
this one stays light, so that the command line can start a child before its own heavy imports)."""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

from sol_execbench.platform.host import runtime_dir, use_bytecode_cache

ALLOC_CONF = "expandable_segments:True"
# Variables read when torch starts; a child started under other values would differ.
STARTUP_ENV = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "PYTORCH_ALLOC_CONF",
               "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF", "CUDA_MODULE_LOADING", "LD_LIBRARY_PATH",
               "LD_PRELOAD", "PYTHONPATH", "HSA_OVERRIDE_GFX_VERSION", "TORCH_CUDA_ARCH_LIST")
SUPERVISOR = Path(__file__).with_name("supervisor.py")
SUPERVISOR_FDS_ENV = "SOL_EXECBENCH_PASS_FDS"
SUPERVISOR_PARENT_ENV = "SOL_EXECBENCH_SUPERVISOR_PARENT"
# A pool of one run's own (``warm_pools``): its name is in the environment of the process that
# started it, so that process's evaluations find it and no other run's do.
POOL_NAME_ENV = "SOL_EXECBENCH_POOL_NAME"
POOL_PIPE_ENV = "SOL_EXECBENCH_POOL_PIPE"  # the read end of the pipe a warm child watches to end with its pool
# The child's stdout and stderr, kept apart in the staging folder.
CHILD_STDOUT_LOG, CHILD_STDERR_LOG = "child.stdout.log", "child.stderr.log"
# The staging folder to remove when the command line dies without removing it (SIGKILL): by the
# supervisor of a fresh child, by the pool for a warm one.
STAGING_CLEANUP_ENV = "SOL_EXECBENCH_STAGING_CLEANUP"


def child_environment(extra: dict[str, str]) -> dict[str, str]:
    """The environment of an evaluation child (and of a warm one)."""
    env = dict(os.environ)
    env.setdefault("PYTORCH_ALLOC_CONF", ALLOC_CONF)
    use_bytecode_cache(env)
    env.update(extra)
    return env


def startup_values(env: dict[str, str]) -> dict[str, str | None]:
    """The values in ``env`` that a child's start-up reads (``STARTUP_ENV``), as the child would see them."""
    values = {name: env.get(name) for name in STARTUP_ENV}
    values["PYTORCH_ALLOC_CONF"] = values["PYTORCH_ALLOC_CONF"] or ALLOC_CONF
    return values


def pool_file(device: str | None, suffix: str) -> Path:
    """A warm pool's file (``sock``: where it answers) for ``device``, in this user's runtime folder."""
    name = os.environ.get(POOL_NAME_ENV, "")
    return runtime_dir() / f"pool-{name + '-' if name else ''}{(device or 'auto').replace(':', '_')}.{suffix}"


def server_socket_path(device: str | None) -> Path:
    return pool_file(device, "sock")


def package_identity() -> dict[str, str]:
    """The interpreter, package folder and version this process runs: a warm process (a pool's
    child, its command-line process) serves only a caller with the same."""
    import sol_execbench

    return {"python": sys.executable, "package": str(Path(sol_execbench.__file__).parent),
            "version": sol_execbench.__version__}


FRONT_TAKEN = b"t"  # what a front writes on its pipe to the pool when it has taken a command line


def front_socket_path() -> Path:
    """Where the default warm pool's command-line process (``cli/warm_front.py``) waits."""
    return runtime_dir() / "front.sock"


def read_json_line(conn: socket.socket) -> Any:
    """One newline-ended JSON message from ``conn`` (None if it closed first, or sent nothing but
    whitespace); raises OSError and ValueError as the socket and the parser do."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    return json.loads(data) if data.strip() else None


def send_job(socket_path: str | Path, job_path: Path, env: dict[str, str], fds: list[int], answer: bool) -> bool:
    """Hand a child waiting on ``socket_path`` (``evaluate/child/handoff.py``) its job file, the
    environment and the descriptors (channel, stdout's log, stderr's log); with ``answer``, wait
    for its "ok". Whether it was sent (and answered)."""
    message = json.dumps({"job": str(job_path), "env": env}).encode()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(10)
            conn.connect(str(socket_path))
            socket.send_fds(conn, [message], fds)
            return conn.recv(16) == b"ok" if answer else True
    except OSError:
        return False
