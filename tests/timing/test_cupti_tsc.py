"""The CUPTI timestamp workaround's machinery, on the CPU: finding and redirecting an import.

Two small shared libraries are built with the system C compiler (skipped without one): ``a``
calls ``target`` from ``b``; redirecting ``a``'s import of ``target`` changes what the call
returns, through a read-only (RELRO, bind-now) slot and through a lazily bound PLT slot.
"""

from __future__ import annotations

import ctypes
import platform
import shutil
import subprocess
import sys

import pytest

from sol_execbench.evaluate.child.timing import cupti_tsc

needs_cc = pytest.mark.skipif(shutil.which("cc") is None or not sys.platform.startswith("linux")
                              or platform.machine() not in ("x86_64", "aarch64"), reason="needs cc on Linux")


def _build(tmp_path, name: str, link_flags: list[str]) -> ctypes.CDLL:
    (tmp_path / "b.c").write_text("int target(void *p) { return 42; }\n")
    (tmp_path / f"{name}.c").write_text("int target(void *p);\nint call_target(void) { return target(0) + 1; }\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(tmp_path / "libtsc_b.so"), str(tmp_path / "b.c")], check=True)
    subprocess.run(["cc", "-shared", "-fPIC", *link_flags, "-o", str(tmp_path / f"lib{name}.so"),
                    str(tmp_path / f"{name}.c"), f"-L{tmp_path}", "-ltsc_b", f"-Wl,-rpath,{tmp_path}"], check=True)
    return ctypes.CDLL(str(tmp_path / f"lib{name}.so"))


def _returns_zero() -> int:
    return ctypes.cast(ctypes.CDLL(None).sched_yield, ctypes.c_void_p).value


@needs_cc
@pytest.mark.parametrize("name,flags", [("tsc_relro", ["-Wl,-z,relro,-z,now"]), ("tsc_lazy", ["-Wl,-z,lazy"])])
def test_an_import_is_redirected_in_the_library_that_makes_it(tmp_path, name, flags):
    lib = _build(tmp_path, name, flags)
    assert lib.call_target() == 43
    slots = cupti_tsc.redirect_imports("target", _returns_zero(), (f"lib{name}",))
    assert len(slots) == 1 and slots[0].startswith(f"lib{name}.so+")
    assert lib.call_target() == 1  # sched_yield() returned 0
    assert cupti_tsc.redirect_imports("target", _returns_zero(), ("no-such-library",)) == []


@needs_cc
def test_only_the_named_symbol_is_found(tmp_path):
    _build(tmp_path, "tsc_names", [])
    slot_types = cupti_tsc._SLOT_TYPES[platform.machine()]
    assert len(cupti_tsc.import_slots(str(tmp_path / "libtsc_names.so"), "target", slot_types)) == 1
    assert cupti_tsc.import_slots(str(tmp_path / "libtsc_names.so"), "targe", slot_types) == []
    assert cupti_tsc.import_slots(str(tmp_path / "b.c"), "target", slot_types) == []  # not ELF


def test_nothing_is_changed_without_an_affected_cupti(monkeypatch):
    monkeypatch.setattr(cupti_tsc, "_memo", {})
    monkeypatch.setattr(cupti_tsc, "_cupti_version", lambda: None)
    state = cupti_tsc.prepare()
    assert not state.applied and cupti_tsc.prepare() is state  # decided once per process
    cupti_tsc.after_start()  # a no-op when not applied
    monkeypatch.setattr(cupti_tsc, "_memo", {})
    monkeypatch.setattr(cupti_tsc, "_cupti_version", lambda: 130100)
    assert cupti_tsc.prepare().reason == "CUPTI 130100 is not affected"


def test_the_environment_switches_it_off_and_a_missing_kineto_flag_leaves_cupti_alone(monkeypatch):
    monkeypatch.setattr(cupti_tsc, "_memo", {})
    monkeypatch.setenv(cupti_tsc.ENV, "0")
    assert cupti_tsc.prepare().reason == f"{cupti_tsc.ENV}=0"
    monkeypatch.setattr(cupti_tsc, "_memo", {})
    monkeypatch.setenv(cupti_tsc.ENV, "1")
    monkeypatch.setattr(cupti_tsc, "_kineto_flag", lambda: None)
    if sys.platform.startswith("linux") and platform.machine() in ("x86_64", "aarch64"):
        assert "flag is not exported" in cupti_tsc.prepare().reason


def test_deciding_leaves_the_integrity_snapshot_clean():
    """The decision is kept without rebinding a module global: the harness's integrity snapshot
    watches its modules' globals, and a first GPU run called a rebound one REWARD_HACK."""
    import sol_execbench.evaluate.child.workload_eval  # noqa: F401  (the harness modules the snapshot watches)
    from sol_execbench.evaluate.child import guards

    snapshot = guards.IntegritySnapshot()
    cupti_tsc._memo.pop("state", None)
    cupti_tsc.prepare()
    cupti_tsc.after_start()
    assert snapshot.tampered() == []
