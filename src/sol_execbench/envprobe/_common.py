"""Helpers every probe block shares: reasons, time-boxed commands, file reads, a torch-free torch lookup.

Nothing here raises to its caller: each helper returns a value or ``None`` and, where the caller
wants to know why, a short cause string.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from sol_execbench.files import replace_file
from sol_execbench.platform.host import torch_dir  # noqa: F401  (re-exported for the probe modules)

SHORT_TIMEOUT_S = 5.0
"""Time box of one external command in a default probe."""
EXTENDED_TIMEOUT_S = 30.0
"""Time box of one expensive command (``--extended`` only), e.g. ``nm`` over libtorch."""


@dataclass
class Reasons:
    """The ``partial_reasons`` lines one block contributes: ``block.field: cause``."""

    block: str
    lines: list[str] = field(default_factory=list)

    def add(self, field_name: str, cause: str) -> None:
        where = f"{self.block}.{field_name}" if field_name else self.block
        self.lines.append(f"{where}: {cause}")


@dataclass(frozen=True)
class CommandResult:
    """What a time-boxed command did. ``error`` is None only when it ran and exited 0."""

    argv: tuple[str, ...]
    stdout: str
    stderr: str
    returncode: int | None
    error: str | None

    @property
    def ok(self) -> bool:
        return self.error is None


def run_command(argv: list[str], timeout: float = SHORT_TIMEOUT_S, env: dict[str, str] | None = None) -> CommandResult:
    """Run ``argv`` with a time box; never raises. A non-zero exit is an error that names the code."""
    key = tuple(argv)
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL, errors="replace"
        )
    except subprocess.TimeoutExpired:
        return CommandResult(key, "", "", None, f"'{argv[0]}' did not finish within {timeout:g} s")
    except OSError as exc:
        return CommandResult(key, "", "", None, f"'{argv[0]}' could not be started: {exc.strerror or exc}")
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or [""]
        return CommandResult(key, proc.stdout, proc.stderr, proc.returncode, f"'{' '.join(argv)}' exited {proc.returncode}: {tail[0][:200]}")
    return CommandResult(key, proc.stdout, proc.stderr, 0, None)


def find_tool(name: str, extra_dirs: tuple[str, ...] = ()) -> str | None:
    """``name`` on PATH, else in one of ``extra_dirs`` (e.g. ``/opt/rocm/bin``), else None."""
    found = shutil.which(name)
    if found:
        return found
    for folder in extra_dirs:
        candidate = os.path.join(folder, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def read_text(path: str | Path, limit: int = 1 << 20) -> str | None:
    """The start of a text file, or None when it cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read(limit)
    except OSError:
        return None


def error_text(exc: BaseException) -> str:
    """``TypeName: message`` on one line, cut to a readable length."""
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {message[:200]}" if message else type(exc).__name__


def import_torch() -> tuple[Any, str | None]:
    """``(torch, None)`` or ``(None, cause)``; a broken torch install is a cause, not a crash."""
    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - any import failure is a fact to report
        return None, f"torch cannot be imported: {error_text(exc)}"
    return torch, None


def cache_dir() -> Path:
    """sol-execbench's cache folder (``platform.host.cache_root``: one home for it)."""
    from sol_execbench.platform.host import cache_root

    return cache_root()


def read_json_cache(path: Path) -> dict[str, Any]:
    """A cache file's JSON object; ``{}`` when it is missing, unreadable, corrupt or not an object."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_json_cache(path: Path, data: Any) -> None:
    """Replace a cache file atomically (readers never see half a file); a failure only costs time."""
    try:
        replace_file(path, json.dumps(data, sort_keys=True, default=str))
    except OSError:
        pass


def rocm_root() -> Path:
    """The ROCm installation root: ``$ROCM_PATH``, else ``/opt/rocm``."""
    return Path(os.environ.get("ROCM_PATH") or "/opt/rocm")


@dataclass(frozen=True)
class Context:
    """What the blocks that describe torch and the GPUs share: the torch facts, the mode, the caches."""

    facts: Any = None
    """A ``torch_facts.TorchFacts`` (version.py now, the imported torch's facts when asked); None: no torch."""
    torch_error: str | None = None
    """Why there is no torch, when ``facts`` is None."""
    extended: bool = False
    loaded: tuple[str, ...] | None = None
    """Shared objects ``import torch`` maps; None: ask ``facts`` (tests pass a tuple)."""
    refresh: bool = False
    """``env probe --no-cache``: recompute what the caches hold (and store the fresh results)."""

    def build_facts(self) -> tuple[dict[str, Any] | None, str | None]:
        """The imported torch's build record, or None and why there is none."""
        if self.facts is None:
            return None, self.torch_error or "torch is not importable"
        return self.facts.build()

    @property
    def cuda_build(self) -> bool:
        return bool(self.facts is not None and self.facts.cuda_version)

    @property
    def hip_build(self) -> bool:
        return bool(self.facts is not None and self.facts.hip_version)

    def libraries(self) -> tuple[str, ...]:
        if self.loaded is not None:
            return self.loaded
        return self.facts.loaded() if self.facts is not None else ()


def run_parts(block: str, parts: dict[str, Callable[[Reasons], Any]]) -> tuple[dict[str, Any], list[str]]:
    """Run independent parts of a block concurrently (each waits on a command or a file read).

    Each part gets its own ``Reasons``; the lines are joined in the order of ``parts`` so the
    list does not depend on thread timing. A part that raises propagates (the snapshot's guard
    turns it into a reason for the whole block).
    """
    reasons = {name: Reasons(block) for name in parts}
    with ThreadPoolExecutor(max_workers=max(1, len(parts))) as pool:
        futures = {name: pool.submit(fn, reasons[name]) for name, fn in parts.items()}
        results = {name: future.result() for name, future in futures.items()}
    return results, [line for name in parts for line in reasons[name].lines]


UNREAD: Any = object()
"""Default of a block's ``prefetched`` argument: the part was not read ahead, read it now."""


def start_vendor_block(
    block: dict[str, Any], name: str, prefetched: tuple[dict[str, Any], list[str]] | None, torch_build: bool, cause: str
) -> Reasons | None:
    """Open a vendor block from its torch-free part (``None`` when that vendor's stack is absent).

    Returns None when neither the stack nor a torch build for that vendor is here (the block stays
    null and says nothing is missing); otherwise marks ``present``, merges the part, and returns
    the block's reasons (with ``cause`` when only the torch build is here).
    """
    if prefetched is None and not torch_build:
        return None
    why = Reasons(name)
    block["present"] = True
    if prefetched is None:
        why.add("", cause)
    else:
        block.update(prefetched[0])
        why.lines.extend(prefetched[1])
    return why
