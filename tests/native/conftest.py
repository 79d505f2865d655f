"""Build-test fixtures: an isolated build cache, and the bundled cpp example built once.

Under pytest-xdist every worker runs this session fixture; they share one cache folder (beside the
workers' own temp folders), and the build cache's lock lets one worker compile while the other waits
and reuses the result, so the example is compiled once per test run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sol_execbench.schema import Trace

from ..conftest import LIGHT_CONFIG
from .helpers import EXAMPLE, run_cli

EXAMPLE_COMPILE_TIMEOUT = "600"  # a shared 2-core CI machine under load; the default (120 s) is for real use


@pytest.fixture(scope="session")
def shared_cache(tmp_path_factory, request) -> Path:
    base = tmp_path_factory.getbasetemp()
    under_xdist = hasattr(request.config, "workerinput")  # each worker has its own basetemp below a shared one
    root = (base.parent if under_xdist else base) / "native-build-cache"
    root.mkdir(exist_ok=True)
    return root


@pytest.fixture(scope="session")
def light_config_file(tmp_path_factory) -> Path:
    import json

    path = tmp_path_factory.mktemp("config") / "light.json"
    path.write_text(json.dumps(LIGHT_CONFIG))
    return path


@pytest.fixture
def native_env(shared_cache, monkeypatch) -> Path:
    """The shared build cache and CPU timing, for tests that go through the CLI."""
    monkeypatch.setenv("SOL_EXECBENCH_CACHE_DIR", str(shared_cache))
    monkeypatch.setenv("SOL_EXECBENCH_ALLOW_CPU_TIMING", "1")
    return shared_cache


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch) -> Path:
    """An empty build cache of this test's own."""
    monkeypatch.setenv("SOL_EXECBENCH_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "builds"


@pytest.fixture(scope="session")
def cpp_example_run(shared_cache, light_config_file) -> tuple[list[Trace], str]:
    """The bundled cpp example evaluated once through the CLI on the CPU (building it if no other
    worker has)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("SOL_EXECBENCH_CACHE_DIR", str(shared_cache))
    mp.setenv("SOL_EXECBENCH_ALLOW_CPU_TIMING", "1")
    try:
        return run_cli(str(EXAMPLE), "--solution", str(EXAMPLE / "solution_cpp.json"), "--config",
                       str(light_config_file), "--device", "cpu", "--compile-timeout", EXAMPLE_COMPILE_TIMEOUT)
    finally:
        mp.undo()
