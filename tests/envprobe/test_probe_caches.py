"""The probe's caches: torch build and device records, per-file hashes and library versions.

Hits, misses when what the key covers changes, corrupt cache files, ``--no-cache``, and the
end-to-end promise: a warm probe imports no torch and differs from a cold one only in volatile fields.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sol_execbench.envprobe import files, nvidia_libs, torch_facts
from sol_execbench.envprobe._common import Reasons
from sol_execbench.envprobe.diff import diff_snapshots
from sol_execbench.envprobe.hashing import snapshot_hash

VERSION_PY = textwrap.dedent("""\
    from typing import Optional

    __all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip']
    __version__ = '9.9.0+fake'
    debug = False
    cuda: Optional[str] = {cuda!r}
    git_version = '{commit}'
    hip: Optional[str] = {hip!r}
    """)
COMMIT = "ab" * 20


def _write_version(torch_dir: Path, cuda=None, hip=None) -> None:
    (torch_dir / "version.py").write_text(VERSION_PY.format(cuda=cuda, hip=hip, commit=COMMIT))


@pytest.fixture
def fake_torch(tmp_path, monkeypatch):
    """A torch install folder (version.py, _C*.so) and a counting stand-in for the child interpreter."""
    tdir = tmp_path / "site" / "torch"
    (tdir / "lib").mkdir(parents=True)
    _write_version(tdir)
    (tdir / "_C.cpython-311-x86_64-linux-gnu.so").write_bytes(b"C extension")
    monkeypatch.setattr(torch_facts, "torch_dir", lambda: tdir)
    torch_facts.clear_process_memo()
    calls: list[str] = []
    answers: dict[str, tuple] = {
        "build": ({"version": "9.9.0+fake", "install_path": str(tdir), "config": "Build settings: BUILD_TYPE=Release",
                   "arch_flags": None, "cxx11_abi": True, "loaded": [str(tdir / "_C.cpython-311-x86_64-linux-gnu.so")]}, None),
        "devices": ({"available": True, "count": 1, "errors": [], "source": "torch",
                     "devices": [{"index": 0, "name": "AMD Instinct MI300X", "arch": "gfx942", "memory_bytes": 1,
                                  "compute_units": 304, "l2_bytes": 4194304}]}, None),
    }

    def worker(mode, timeout=torch_facts.TORCH_TIMEOUT_S):
        calls.append(mode)
        return answers[mode]

    monkeypatch.setattr(torch_facts, "run_worker", worker)
    yield tdir, calls, answers
    torch_facts.clear_process_memo()


def _fresh(refresh=False):
    """A new probe's view: no per-process memo, so only the file cache can answer."""
    torch_facts.clear_process_memo()
    return torch_facts.TorchFacts(refresh=refresh)


def test_build_record_hit_after_one_computation(fake_torch, isolated_cache):
    tdir, calls, answers = fake_torch
    record, error = torch_facts.TorchFacts().build()
    assert error is None and record == answers["build"][0] and calls == ["build"]
    assert torch_facts.TorchFacts().build()[0] == record  # the process memo
    assert _fresh().build()[0] == record and calls == ["build"]  # the file cache
    stored = json.loads((isolated_cache / "envprobe-torch-build.json").read_text())
    assert stored[str(tdir)]["record"] == record


def test_version_file_is_read_without_torch(fake_torch):
    tdir, calls, _ = fake_torch
    _write_version(tdir, cuda="13.0")
    facts = _fresh()
    assert facts.declared["__version__"] == "9.9.0+fake" and facts.declared["git_version"] == COMMIT
    assert facts.cuda_version == "13.0" and facts.hip_version is None and calls == []
    (tdir / "version.py").write_text("this is not python (")
    assert torch_facts.read_version_file(tdir) is None


@pytest.mark.parametrize("change", ["c_extension", "version_py", "libtorch_cuda", "ld_preload"])
def test_build_record_missed_when_the_torch_stamp_changes(fake_torch, monkeypatch, change):
    tdir, calls, _ = fake_torch
    _fresh().build()
    if change == "c_extension":
        (tdir / "_C.cpython-311-x86_64-linux-gnu.so").write_bytes(b"rebuilt C extension")
    elif change == "version_py":
        _write_version(tdir, cuda="12.8")
    elif change == "libtorch_cuda":
        (tdir / "lib" / "libtorch_cuda.so").write_bytes(b"cuda")
    else:
        monkeypatch.setenv("LD_PRELOAD", "/opt/libshim.so")
    _fresh().build()
    assert calls == ["build", "build"]


def test_corrupt_cache_files_are_recomputed(fake_torch, isolated_cache):
    tdir, calls, answers = fake_torch
    cache = isolated_cache / "envprobe-torch-build.json"
    cache.parent.mkdir(parents=True, exist_ok=True)
    for garbage in ("{not json", "[1, 2, 3]", json.dumps({str(tdir): "not a slot"}),
                    json.dumps({str(tdir): {"key": "old", "record": {}}})):
        cache.write_text(garbage)
        assert _fresh().build() == answers["build"]
    assert calls == ["build"] * 4
    assert json.loads(cache.read_text())[str(tdir)]["record"] == answers["build"][0]  # rewritten whole


def test_failures_are_not_kept(fake_torch):
    _, calls, answers = fake_torch
    answers["build"] = (None, "torch cannot be imported: ImportError: libcudart.so.13: cannot open shared object file")
    assert _fresh().build() == answers["build"]
    assert _fresh().build() == answers["build"] and calls == ["build", "build"]


def test_refresh_recomputes_and_stores(fake_torch):
    _, calls, _ = fake_torch
    _fresh().build()
    torch_facts.TorchFacts(refresh=True).build()
    _fresh().build()
    assert calls == ["build", "build"]


def test_device_record_keyed_on_visibility(fake_torch, monkeypatch):
    _, calls, answers = fake_torch
    monkeypatch.delenv("HIP_VISIBLE_DEVICES", raising=False)
    record, _ = _fresh().devices()
    assert record["devices"][0]["arch"] == "gfx942"
    _fresh().devices()
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "1")
    _fresh().devices()
    assert calls == ["devices", "devices"]
    answers["devices"][0]["errors"] = [[1, "hipErrorInvalidDevice"]]  # a device that did not answer: asked again
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "0,1")
    _fresh().devices()
    _fresh().devices()
    assert calls == ["devices"] * 4


def test_no_torch_installed(monkeypatch):
    monkeypatch.setattr(torch_facts, "torch_dir", lambda: None)
    monkeypatch.setattr(torch_facts, "run_worker", lambda *a, **k: pytest.fail("no child without torch"))
    facts = torch_facts.TorchFacts()
    assert facts.build() == (None, torch_facts.NO_TORCH) and facts.loaded() == () and facts.cuda_version is None


def test_loaded_keeps_files_that_still_exist(fake_torch):
    tdir, _, answers = fake_torch
    answers["build"][0]["loaded"].append(str(tdir / "lib" / "libgone.so"))
    assert _fresh().loaded() == (str(tdir / "_C.cpython-311-x86_64-linux-gnu.so"),)


def test_the_real_child_interpreter():
    """The worker imports the installed torch in a child; this process stays without it."""
    tdir = torch_facts.torch_dir()
    if tdir is None:
        pytest.skip("torch is not installed")
    record, error = torch_facts.run_worker("build")
    assert error is None
    assert record["version"] == torch_facts.read_version_file(tdir)["__version__"]
    assert "Build settings" in record["config"] and Path(record["install_path"]) == tdir
    assert any("libtorch" in Path(path).name for path in record["loaded"])
    record, error = torch_facts.run_worker("build", timeout=0.01)
    assert record is None and "did not finish within" in error


# -- the per-file cache: sha256 and library version calls -----------------------------------------

@pytest.fixture
def cublaslt(tmp_path, monkeypatch):
    """A pip-layout libcublasLt whose version call is counted instead of made."""
    lib_dir = tmp_path / "site" / "nvidia" / "cublas" / "lib"
    lib_dir.mkdir(parents=True)
    path = lib_dir / "libcublasLt.so.13"
    path.write_bytes(b"not really a library")
    monkeypatch.setattr(nvidia_libs, "pip_lib_dirs", lambda lib: [lib_dir])
    monkeypatch.setattr(nvidia_libs, "SYSTEM_DIRS", ())
    monkeypatch.setattr(nvidia_libs, "_package_version", lambda lib: None)
    calls = []
    monkeypatch.setattr(nvidia_libs, "_call_version", lambda lib, real: calls.append(real) or "13.1.0")
    lib = next(x for x in nvidia_libs.NVIDIA_LIBS if x.key == "cublaslt")
    return lib, path, calls


def _reset_file_memo(monkeypatch):
    monkeypatch.setattr(files, "_hash_memo", None)  # a new process: only the cache file remembers


def test_library_version_is_kept_with_the_hash(cublaslt, monkeypatch):
    lib, path, calls = cublaslt
    first = nvidia_libs.describe(lib, (), Reasons("nvidia"))
    _reset_file_memo(monkeypatch)
    second = nvidia_libs.describe(lib, (), Reasons("nvidia"))
    assert first == second and len(calls) == 1
    assert second["version"] == "13.1.0" and second["version_from"] == "library_call" and second["location"] == "pip"
    path.write_bytes(b"another build of the library")  # new size and mtime: both facts go
    third = nvidia_libs.describe(lib, (), Reasons("nvidia"))
    assert len(calls) == 2 and third["sha256"] != first["sha256"]
    nvidia_libs.describe(lib, (), Reasons("nvidia"), refresh=True)
    assert len(calls) == 3


def test_a_failed_version_call_is_not_kept(cublaslt, monkeypatch):
    lib, _, _ = cublaslt
    attempts = []

    def broken(lib, real):
        attempts.append(real)
        raise OSError("undefined symbol: cublasLtGetVersion")

    monkeypatch.setattr(nvidia_libs, "_call_version", broken)
    for _ in range(2):
        why = Reasons("nvidia")
        entry = nvidia_libs.describe(lib, (), why)
        assert entry["version"] is None and "undefined symbol" in why.lines[0]
    assert len(attempts) == 2 and entry["sha256"]


def test_corrupt_hash_cache_is_recomputed(tmp_path, isolated_cache, monkeypatch):
    lib = tmp_path / "libx.so.1"
    lib.write_bytes(b"x")
    expected = files.sha256_file(lib)
    for garbage in ("\x00\x01 not json", "[]", json.dumps({os.path.realpath(lib): "oops"})):
        (isolated_cache / "envprobe-file-hashes.json").write_text(garbage)
        _reset_file_memo(monkeypatch)
        assert files.sha256_file(lib) == expected
    assert json.loads((isolated_cache / "envprobe-file-hashes.json").read_text())[os.path.realpath(lib)]["sha256"] == expected


# -- end to end ------------------------------------------------------------------------------------

_PROBE = textwrap.dedent("""\
    import json, sys
    from sol_execbench.envprobe.snapshot import collect
    snap = collect(use_cache=sys.argv[1] == "warm")
    print(json.dumps({"snapshot": snap, "torch_imported": "torch" in sys.modules}))
    """)


def _probe_in_child(kind: str, cache_home: Path) -> dict:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache_home)}
    out = subprocess.run([sys.executable, "-c", _PROBE, kind], capture_output=True, text=True, check=True, env=env, timeout=300)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_cold_and_warm_probes_agree_and_warm_imports_no_torch(tmp_path):
    cold = _probe_in_child("cold", tmp_path)
    warm = _probe_in_child("warm", tmp_path)
    assert not cold["torch_imported"] and not warm["torch_imported"]
    result = diff_snapshots(cold["snapshot"], warm["snapshot"])
    assert {entry.kind for entry in result.entries} <= {"volatile"} and result.exit_code == 0
    assert snapshot_hash(cold["snapshot"]) == snapshot_hash(warm["snapshot"])
    assert cold["snapshot"]["pytorch_build"]["version"]  # the cold probe did get torch's facts
    for name in ("envprobe-torch-build.json",):
        assert (tmp_path / "sol-execbench" / name).exists()
