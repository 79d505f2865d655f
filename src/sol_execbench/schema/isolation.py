"""What isolation a child ran under: the record every trace carries (``Evaluation.isolation``)."""

from __future__ import annotations

from enum import Enum
from typing import Optional

from pydantic import Field

from .base import SchemaModel


class IsolationMode(str, Enum):
    """``--isolation``: ``strict`` refuses to run without an enforced sandbox, ``auto`` uses the best
    one the host offers and records what it got, ``off`` runs unsandboxed."""

    STRICT = "strict"
    AUTO = "auto"
    OFF = "off"


class IsolationRecord(SchemaModel):
    mechanism: str
    """``landlock``, ``bwrap`` or ``none``."""
    version: Optional[str] = None
    """Landlock ABI the kernel reported, or the bubblewrap version."""
    filesystem: bool = False
    """Writes only inside the run's private folders and the device nodes."""
    network: bool = False
    """TCP bind and connect refused (Landlock ABI 4+; bubblewrap: a network namespace of its own)."""
    signals: bool = False
    """Signals and abstract-socket connections to processes outside the sandbox refused (Landlock ABI 6+)."""
    writable: list[str] = Field(default_factory=list)
    """The folders the solution may write."""
    reason: Optional[str] = None
    """Why something was not enforced (absent when everything was)."""

    @property
    def enforced(self) -> bool:
        return self.mechanism != "none" and self.filesystem
