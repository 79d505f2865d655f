"""Writing a file whole: one function every layer uses (it imports nothing of the package)."""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path
from typing import Any


def _fsync_folder(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def replace_file(path: Path, data: bytes | str) -> None:
    """``path`` holds ``data`` or its earlier content, never a part, also after a crash or beside
    another writer: a temporary file of this process and thread, fsync, rename, fsync of the folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with open(temporary, "wb") as fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise
    _fsync_folder(path.parent)


def replace_json(path: Path, model: Any, **dump: Any) -> Path:
    """``replace_file`` with a pydantic model as indented JSON and a final newline (``dump``: the
    options of ``model_dump_json``, as ``exclude``)."""
    replace_file(path, model.model_dump_json(indent=2, **dump) + "\n")
    return path
