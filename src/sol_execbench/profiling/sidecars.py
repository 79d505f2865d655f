"""Where the diagnostic sidecars go: beside ``-o`` as ``<stem>.<suffix>``, else in the per-user
temp folder (``<tmp>/sol-execbench-<uid>/profiles``), whose path the command prints."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from pydantic import BaseModel

from sol_execbench.evaluate.parent.runner import private_dir, safe_file_stem
from sol_execbench.files import replace_json


def profiles_dir() -> Path:
    return Path(tempfile.gettempdir()) / f"sol-execbench-{os.getuid()}" / "profiles"


def sidecar_stem(output_path: Path | None, solution_name: str) -> Path:
    """The path every sidecar of one evaluation starts with (``traces`` for ``-o traces.jsonl``)."""
    if output_path is not None:
        return output_path.parent / output_path.stem
    folder = profiles_dir()
    if not private_dir(folder):  # not a folder of ours (a shared /tmp): a private one of its own
        folder = Path(tempfile.mkdtemp(prefix="sol-execbench-profiles-"))
    return folder / f"{safe_file_stem(solution_name)}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.getpid()}"


def write_sidecar(stem: Path, suffix: str, model: BaseModel) -> Path:
    """Write ``<stem>.<suffix>``; raises OSError when it cannot."""
    target = stem.with_name(f"{stem.name}.{suffix}")
    return replace_json(target, model)
