"""The build cache's own rules: where it lives, what counts as an entry, the lock, the atomic publish."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from sol_execbench.build.cache import BuildCache, LockTimeout, cache_root


def test_cache_location_precedence(monkeypatch, tmp_path):
    monkeypatch.setenv("SOL_EXECBENCH_CACHE_DIR", str(tmp_path / "mine"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "mine" / "builds"
    monkeypatch.delenv("SOL_EXECBENCH_CACHE_DIR")
    assert cache_root() == tmp_path / "xdg" / "sol-execbench" / "builds"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_root() == tmp_path / "home" / ".cache" / "sol-execbench" / "builds"


def _finished_build(cache: BuildCache, key: str) -> Path:
    build = cache.new_build_dir(key)
    (build / "benchmark_kernel.so").write_bytes(b"\x7fELF")
    (build / "kernel.o").write_bytes(b"")
    return build


def test_publish_is_atomic_and_lookup_needs_manifest_and_library(tmp_path):
    cache = BuildCache(tmp_path)
    key = "ab" * 32
    assert cache.lookup(key) is None
    build = _finished_build(cache, key)
    entry = cache.publish(key, build, build / "benchmark_kernel.so", {"solution": "s"})
    assert entry.directory == tmp_path / "ab" / key and not build.exists()
    assert entry.library.read_bytes() == b"\x7fELF" and not (entry.directory / "kernel.o").exists()
    assert cache.lookup(key).manifest["solution"] == "s"
    (entry.library).unlink()
    assert cache.lookup(key) is None  # a manifest without its library is no entry
    rebuilt = _finished_build(cache, key)
    assert cache.publish(key, rebuilt, rebuilt / "benchmark_kernel.so", {}).library.exists()  # broken entry replaced


def test_wrong_key_in_manifest_is_no_entry(tmp_path):
    cache = BuildCache(tmp_path)
    key = "cd" * 32
    build = _finished_build(cache, key)
    entry = cache.publish(key, build, build / "benchmark_kernel.so", {})
    manifest = json.loads((entry.directory / "manifest.json").read_text())
    (entry.directory / "manifest.json").write_text(json.dumps({**manifest, "key": "0" * 64}))
    assert cache.lookup(key) is None


def test_lock_waits_until_the_deadline_and_sweeps_dead_builds(tmp_path):
    cache = BuildCache(tmp_path)
    key = "ef" * 32
    stale = cache.new_build_dir(key)
    with cache.locked(key, time.monotonic() + 5):
        assert not stale.exists()  # a build dir of this key nobody holds the lock for is dead
        began = time.monotonic()
        with pytest.raises(LockTimeout, match="building the same solution"), cache.locked(key, time.monotonic() + 0.3):
            pass
        assert 0.25 < time.monotonic() - began < 3
    with cache.locked(key, time.monotonic() + 1):  # released: free again
        pass
