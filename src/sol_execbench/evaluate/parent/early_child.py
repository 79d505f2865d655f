"""A fresh evaluation child started before its job exists.

The command line starts it first, so that the child's start-up (the interpreter, torch, the device
context: 4.4 to 5.3 s on the H100 host) runs while the command line imports its own modules, reads
and checks the problem and stages the solution (0.7 to 0.8 s there). It is a fresh child in every
other respect: started through the supervisor in a session of its own, with the command line's
environment and the staging folder as its working directory, running only the harness's code until
the job, the evaluation's environment and the channel and log descriptors arrive on a socket in
the staging folder (``evaluate/child/handoff.py``). It is the evaluation's first child where a
fresh child would run unwrapped under the same start-up environment; otherwise it is ended and the
evaluation starts a fresh child.

This module stays light (no pydantic, no torch): the command line imports it before anything else.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sol_execbench.platform.host import kill_session, remove_orphaned_sockets, runtime_socket, use_bytecode_cache
from sol_execbench.platform.lifetime import preexec_die_with_parent

from .child_env import (CHILD_STDERR_LOG, CHILD_STDOUT_LOG, STAGING_CLEANUP_ENV, SUPERVISOR, SUPERVISOR_FDS_ENV,
                        SUPERVISOR_PARENT_ENV, child_environment, send_job, startup_values)

EARLY_SOCKET_ENV = "SOL_EXECBENCH_EARLY_SOCKET"  # read by evaluate/child/early_child.py
SOCKET_NAME = ".early-child.sock"
SOCKET_PATH_MAX = 100  # AF_UNIX paths end at 107 bytes; a deep TMPDIR puts the socket in the runtime folder
SOCKET_WAIT_S = 60.0  # for the child to open its socket (an interpreter start on a loaded machine)
RUNTIME_SOCKET_PREFIX = "early-"  # early-<pid of the evaluation>-<random>.sock in the runtime folder
# Two of Triton's first-use costs in a process, paid by a process of the harness's while the child
# starts up (only Triton's own code runs there; a failure leaves both to the child):
# - its driver utilities, a C module it compiles with the host compiler on first use into a cache
#   (0.35 to 0.46 s of a cold evaluation's first Triton call on the H100 host): built into the run's
#   private Triton cache, they are a cache hit at that call;
# - its cache key, a hash of its own sources and of libtriton (0.4 s): written to the run's private
#   folder, the child takes it from there (evaluate/child/triton_key.py).
# One after the other, well within the child's start-up (3 to 4 s on the H200 host): hashing in a
# thread beside the build deadlocked, two threads importing Triton's packages at once.
_TRITON_AHEAD = """import json, os, sys
from pathlib import Path
try:
    import triton
    from triton.runtime.cache import triton_key
    from sol_execbench.files import replace_file
    record = {"triton": os.path.dirname(os.path.abspath(triton.__file__)), "key": triton_key()}
    replace_file(Path(sys.argv[2]), json.dumps(record))
except Exception:
    pass
try:
    if sys.argv[1] == "rocm":
        from triton.backends.amd.driver import HIPUtils as Utils
    else:
        from triton.backends.nvidia.driver import CudaUtils as Utils
    Utils()
except Exception:
    pass
"""


class EarlyChild:
    """A child waiting for its job, and the staging folder it was started in (the evaluation stages
    into that folder)."""

    def __init__(self, device: str | None, keep_staging: bool):
        self.staging = Path(tempfile.mkdtemp(prefix="sol-execbench-"))
        self.device = device
        self.socket_path = self.staging / SOCKET_NAME
        if len(str(self.socket_path)) > SOCKET_PATH_MAX:
            # Outside the staging folder its supervisor removes: the next one removes those left.
            remove_orphaned_sockets(RUNTIME_SOCKET_PREFIX)
            self.socket_path = runtime_socket(RUNTIME_SOCKET_PREFIX)
        self.handed = False  # the job went to it
        self._triton_ahead: subprocess.Popen | None = None
        self.staging_taken = False  # an evaluation stages into (and removes) the folder
        self._startup = startup_values(dict(os.environ))
        env = child_environment({EARLY_SOCKET_ENV: str(self.socket_path), SUPERVISOR_FDS_ENV: "",
                                 SUPERVISOR_PARENT_ENV: str(os.getpid()),
                                 **({} if keep_staging else {STAGING_CLEANUP_ENV: str(self.staging)})})
        with open(self.staging / CHILD_STDOUT_LOG, "ab") as out, open(self.staging / CHILD_STDERR_LOG, "ab") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-S", str(SUPERVISOR), sys.executable, "-m",
                 "sol_execbench.evaluate.child.early_child", device or ""],
                stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env, start_new_session=True,
                cwd=str(self.staging), preexec_fn=preexec_die_with_parent)

    def misfit(self, env: dict[str, str], device: str | None) -> str | None:
        """Why a fresh child for ``env`` and ``device`` would not have started as this one did (None:
        it would have)."""
        if self.handed:
            return "it already has a job"
        if device != self.device:
            return f"it started for device {self.device or 'auto'}, the job is for {device or 'auto'}"
        if startup_values(env) != self._startup:
            return "the job's start-up environment differs from the one it started with"
        return None

    def hand(self, job_path: Path, env: dict[str, str], fds: list[int]) -> str | None:
        """Send the job, the environment and the descriptors (channel, stdout's log, stderr's log);
        None once sent, else why it was not. The child reads them once its start-up is done; this
        does not wait for that."""
        deadline = time.monotonic() + SOCKET_WAIT_S
        while not self.socket_path.exists():
            if self.proc.poll() is not None:
                return f"it exited (status {self.proc.returncode}) before it listened for its job"
            if time.monotonic() > deadline:
                return f"it did not listen for its job within {SOCKET_WAIT_S:.0f} s"
            time.sleep(0.005)
        # The staging folder's removal is the supervisor's, as for a fresh child, which never sees the variable.
        job_env = {name: value for name, value in env.items() if name != STAGING_CLEANUP_ENV}
        self.handed = send_job(self.socket_path, job_path, job_env, fds, answer=False)
        return None if self.handed else "its socket did not take the job"

    def prepare_triton(self) -> None:
        """Start building Triton's driver utilities into the run's private Triton cache and writing
        its cache key into the run's private folder (GPU devices only; the evaluation's child
        compiles its kernels there)."""
        from sol_execbench.platform import vendor_hint
        from sol_execbench.sandbox import private_environment, triton_key_file

        vendor = vendor_hint()
        if self._triton_ahead is not None or vendor not in ("cuda", "rocm") or self.device == "cpu":
            return
        # With the children's bytecode cache where they have one: Triton's modules load compiled.
        env = use_bytecode_cache(dict(os.environ, TRITON_CACHE_DIR=private_environment(self.staging)["TRITON_CACHE_DIR"]))
        # -P and the staging folder as working directory: no module of the working directory (a
        # problem folder may hold a triton.py) shadows Triton in this unsandboxed process.
        self._triton_ahead = subprocess.Popen(
            [sys.executable, "-P", "-c", _TRITON_AHEAD, vendor, str(triton_key_file(self.staging))], stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=str(self.staging),
            start_new_session=True, preexec_fn=preexec_die_with_parent)

    def discard(self) -> None:
        """End the child if it never got its job (its whole session: the supervisor and the child)."""
        if self.handed:
            return
        self.handed = True  # never handed out after this
        if self.proc.poll() is None:
            kill_session(self.proc.pid, settle_s=1.0)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)

    def close(self) -> None:
        """After the evaluation: the child ended if unused, the staging folder removed if no
        evaluation took it."""
        self.discard()
        if self._triton_ahead is not None:
            if self._triton_ahead.poll() is None:
                kill_session(self._triton_ahead.pid, settle_s=0.5)  # not needed any more
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._triton_ahead.wait(timeout=5)
        with contextlib.suppress(OSError):  # the child removes it when it takes its job
            self.socket_path.unlink()
        if not self.staging_taken:
            shutil.rmtree(self.staging, ignore_errors=True)
