"""Fixtures for the environment-probe tests: recorded outputs, an isolated cache, one real snapshot."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sol_execbench.envprobe import files

DATA = Path(__file__).resolve().parents[1] / "data" / "envprobe"


@pytest.fixture
def data() -> Path:
    return DATA


@pytest.fixture
def recorded():
    """``recorded(name)``: the text of a recorded output in tests/data/envprobe."""

    def read(name: str) -> str:
        return (DATA / name).read_text()

    return read


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    """Hash cache and other cache files go to a temporary folder, never ~/.cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.setattr(files, "_hash_memo", None)
    return tmp_path / "xdg-cache" / "sol-execbench"


@pytest.fixture(scope="session")
def host_snapshot(tmp_path_factory) -> dict[str, Any]:
    """One real probe of this host (torch imported once for the session)."""
    from sol_execbench.envprobe.snapshot import collect

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("snapshot-cache")))
        mp.setattr(files, "_hash_memo", None)
        return collect()


@pytest.fixture
def snapshot_copy(host_snapshot):
    """A deep copy of the session snapshot that a test may change."""
    return json.loads(json.dumps(host_snapshot))
