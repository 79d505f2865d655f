"""The sandbox of the evaluation and build children: what a running solution may write, reach and
signal (docs/security.md). Standard library and ctypes only."""

from .attempts import Attempt, AttemptLog, Protected, TreeDigest, file_sha256
from .policy import (MECHANISMS_ENV, IsolationRefused, RunFolders, enforce_in_process, plan, private_environment,
                     triton_key_file, unsandboxed, wrapper_for)

__all__ = ["Attempt", "AttemptLog", "IsolationRefused", "MECHANISMS_ENV", "Protected", "RunFolders", "TreeDigest",
           "enforce_in_process", "file_sha256", "plan", "private_environment", "triton_key_file",
           "unsandboxed", "wrapper_for"]
