"""Block ``python``: interpreter version, executable, and what kind of environment it runs in."""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path
from typing import Any

from ._common import Reasons, read_text


def empty() -> dict[str, Any]:
    return {
        "version": None,
        "implementation": None,
        "executable": None,
        "prefix": None,
        "venv_kind": None,
        "gil_enabled": None,
    }


def venv_kind(prefix: str, base_prefix: str, environ: dict[str, str]) -> str:
    """uv, virtualenv, venv, conda, or system."""
    if prefix != base_prefix:
        cfg = read_text(Path(prefix) / "pyvenv.cfg") or ""
        if any(line.strip().startswith("uv") for line in cfg.splitlines()):
            return "uv"
        if "virtualenv" in cfg:
            return "virtualenv"
        return "venv"
    if environ.get("CONDA_PREFIX") == prefix or (Path(prefix) / "conda-meta").is_dir():
        return "conda"
    return "system"


def probe() -> tuple[dict[str, Any], list[str]]:
    block = empty()
    is_gil = getattr(sys, "_is_gil_enabled", None)
    block.update(
        version=platform.python_version(),
        implementation=platform.python_implementation(),
        executable=sys.executable or None,
        prefix=sys.prefix,
        venv_kind=venv_kind(sys.prefix, sys.base_prefix, dict(os.environ)),
        gil_enabled=bool(is_gil()) if callable(is_gil) else True,
    )
    return block, Reasons("python").lines
