"""The warm pool: pre-started evaluation processes, one per evaluation, same verdicts."""

from __future__ import annotations

import pytest

from sol_execbench import evaluate

from .conftest import LIGHT_CONFIG
from .problems import add_definition, poll_until, process_alive, solution, workloads


def _logs():
    collected: list[str] = []
    return collected, collected.append


def test_evaluations_take_warm_processes_and_crashes_still_become_traces(warm_pool):
    logs, on_log = _logs()
    good = evaluate(add_definition(), workloads(8, 16), solution("def run(a, b):\n    return a + b\n"),
                    LIGHT_CONFIG, on_log=on_log)
    assert [t.evaluation.status.value for t in good] == ["PASSED", "PASSED"]
    assert "took the job from the warm pool" in "".join(logs)
    assert good[0].evaluation.isolation is not None  # the warm child entered the sandbox once it had the job
    assert "sandbox: " in "".join(logs)

    code = ("import ctypes\ndef run(a, b):\n    if a.numel() == 16:\n        ctypes.string_at(0)\n"
            "    return a + b\n")
    logs, on_log = _logs()
    crashed = evaluate(add_definition(), workloads(8, 16, 8), solution(code), LIGHT_CONFIG, on_log=on_log)
    assert [t.evaluation.status.value for t in crashed] == ["PASSED", "RUNTIME_ERROR", "PASSED"]
    assert "SIGSEGV" in crashed[1].evaluation.log
    assert "took the job from the warm pool" in "".join(logs)
    from sol_execbench.evaluate.parent.warm_pool import pool_status

    status = pool_status(None)  # both evaluations' waits for a warm process counted
    assert status["takes"] >= 2 and 0.0 <= status["take_wait_max_s"] <= status["take_wait_s"]
    assert status["ending_wait_s"] >= 0.0


def test_a_different_startup_environment_starts_its_own_process(warm_pool, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "7")  # read when torch starts: a warm process would not match
    logs, on_log = _logs()
    (trace,) = evaluate(add_definition(), workloads(8), solution("def run(a, b):\n    return a + b\n"),
                        LIGHT_CONFIG, on_log=on_log)
    assert trace.evaluation.status.value == "PASSED"
    assert "warm pool" not in "".join(logs)


def test_timeout_in_a_warm_process(warm_pool):
    code = "import time\ndef run(a, b):\n    time.sleep(600)\n"
    (trace,) = evaluate(add_definition(), workloads(8), solution(code), LIGHT_CONFIG, timeout_s=6)
    assert trace.evaluation.status.value == "TIMEOUT"


def test_children_keep_bytecode_in_the_cache_only_where_torch_has_none(tmp_path, monkeypatch):
    """A torch installed without bytecode where Python may not write it: the children get
    PYTHONPYCACHEPREFIX under the tool's cache; with bytecode present, or with the user's own
    prefix or SOL_EXECBENCH_BYTECODE_CACHE=0, they do not."""
    import importlib.util
    import os
    from types import SimpleNamespace

    from sol_execbench.evaluate.parent import process

    package = tmp_path / "torch"
    package.mkdir()
    (package / "__init__.py").write_text("")
    origin = str(package / "__init__.py")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: SimpleNamespace(origin=origin))
    monkeypatch.setenv("SOL_EXECBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    monkeypatch.delenv("SOL_EXECBENCH_BYTECODE_CACHE", raising=False)
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")  # as container images set it
    env = process.child_environment({})
    assert env["PYTHONPYCACHEPREFIX"] == str(tmp_path / "cache" / "pycache") and "PYTHONDONTWRITEBYTECODE" not in env
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE")
    assert "PYTHONPYCACHEPREFIX" not in process.child_environment({})  # writable: Python keeps it beside torch
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    assert "PYTHONPYCACHEPREFIX" in process.child_environment({})
    monkeypatch.setenv("SOL_EXECBENCH_BYTECODE_CACHE", "0")
    assert "PYTHONPYCACHEPREFIX" not in process.child_environment({})
    monkeypatch.delenv("SOL_EXECBENCH_BYTECODE_CACHE")
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", "/elsewhere")  # the user's own choice stands
    assert process.child_environment({})["PYTHONPYCACHEPREFIX"] == "/elsewhere"
    monkeypatch.delenv("PYTHONPYCACHEPREFIX")
    cached = importlib.util.cache_from_source(origin)
    os.makedirs(os.path.dirname(cached))
    open(cached, "wb").close()
    assert "PYTHONPYCACHEPREFIX" not in process.child_environment({})


def test_children_keep_the_cache_once_the_command_line_itself_uses_it(tmp_path, monkeypatch):
    """The command line keeps its own bytecode under the cache (``use_bytecode_cache_here``), and
    an earlier child has left torch's compiled modules there: later children still get the cache.
    Looking for torch's bytecode where this process's prefix puts it would find that copy, and
    every child after the first would compile torch from source (2.3 s of a 9 to 11 s evaluation on
    an H200 machine whose torch has no bytecode)."""
    import importlib.util
    import os
    import sys
    from types import SimpleNamespace

    from sol_execbench.evaluate.parent import process

    package = tmp_path / "torch"
    package.mkdir()
    (package / "__init__.py").write_text("")
    origin = str(package / "__init__.py")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: SimpleNamespace(origin=origin))
    prefix = tmp_path / "cache" / "pycache"
    monkeypatch.setenv("SOL_EXECBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    monkeypatch.delenv("SOL_EXECBENCH_BYTECODE_CACHE", raising=False)
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.setattr(sys, "pycache_prefix", str(prefix))  # as use_bytecode_cache_here leaves it
    in_cache = importlib.util.cache_from_source(origin)
    assert in_cache.startswith(str(prefix))
    os.makedirs(os.path.dirname(in_cache))
    open(in_cache, "wb").close()  # what the first child wrote
    assert process.child_environment({})["PYTHONPYCACHEPREFIX"] == str(prefix)
    beside = package / "__pycache__" / f"__init__.{sys.implementation.cache_tag}.pyc"
    beside.parent.mkdir()
    beside.write_bytes(b"")  # torch's own bytecode, once it has some: Python loads that
    assert "PYTHONPYCACHEPREFIX" not in process.child_environment({})


def test_an_edited_source_changes_the_pool_fingerprint(tmp_path):
    from sol_execbench.evaluate.parent.warm_pool import source_stamp

    (tmp_path / "pkg").mkdir()
    module = tmp_path / "pkg" / "mod.py"
    module.write_text("x = 1\n")
    before = source_stamp(tmp_path)
    assert source_stamp(tmp_path) == before
    module.write_text("x = 22\n")
    assert source_stamp(tmp_path) != before


def test_the_cli_process_keeps_its_bytecode_in_the_cache_where_python_may_not_write_it(tmp_path, monkeypatch):
    """The sol-execbench process itself: with no bytecode beside the package and writing turned
    off, imports after this point compile into the tool's cache, and later calls load from there."""
    import importlib.util
    import os
    import sys

    from sol_execbench.platform import host

    monkeypatch.setenv("SOL_EXECBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    monkeypatch.delenv("SOL_EXECBENCH_BYTECODE_CACHE", raising=False)
    monkeypatch.setattr(sys, "pycache_prefix", None)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    cached = importlib.util.cache_from_source(os.path.join(os.path.dirname(host.__file__), "..", "__init__.py"))
    if os.path.exists(cached):  # bytecode beside the package: nothing to do
        assert host.use_bytecode_cache_here() is None and sys.pycache_prefix is None
        return
    assert host.use_bytecode_cache_here() == str(tmp_path / "cache" / "pycache")
    assert sys.pycache_prefix == str(tmp_path / "cache" / "pycache") and sys.dont_write_bytecode is False
    module = tmp_path / "fresh_module_for_bytecode.py"
    module.write_text("VALUE = 3\n")
    assert importlib.util.cache_from_source(str(module)).startswith(str(tmp_path / "cache" / "pycache"))
    monkeypatch.setattr(sys, "pycache_prefix", "/the/users/own")
    assert host.use_bytecode_cache_here() is None and sys.pycache_prefix == "/the/users/own"


# A sandboxed solution that tries to take a warm process from the pool (which it could then hand a
# job of its own, outside the sandbox): the pool refuses it, and the attempt is a reward hack.
TAKE_FROM_THE_POOL = """
import json
import socket

def run(a, b):
    from sol_execbench.evaluate.parent.warm_pool import server_socket_path
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(str(server_socket_path(None)))
        conn.sendall(json.dumps({"op": "status"}).encode() + b"\\n")
        reply = conn.recv(65536).decode()
    raise RuntimeError(f"the pool replied {reply}")  # shows the reply in the trace's log
"""


def test_the_pool_serves_no_sandboxed_child(warm_pool):
    from sol_execbench.sandbox.landlock import abi_version

    if abi_version()[0] < 1:
        pytest.skip(f"needs Landlock ({abi_version()[1]})")
    (trace,) = evaluate(add_definition(), workloads(8), solution(TAKE_FROM_THE_POOL), LIGHT_CONFIG)
    log = trace.evaluation.log
    assert trace.evaluation.status.value == "REWARD_HACK", log
    assert "the warm pool's sockets" in log
    assert '"ok": false' in log and "no_new_privs" in log


# A process whose main thread has gone while another thread still runs, as an evaluation child's
# is while its device context is torn down (os._exit: the main thread first, the last thread last).
_ENDING_PROCESS = """import ctypes, os, sys, threading, time
def last_thread():
    while not os.path.exists(sys.argv[1]):
        time.sleep(0.01)
    os._exit(0)
threading.Thread(target=last_thread).start()
ctypes.CDLL(None).pthread_exit(None)
"""


def test_a_take_waits_for_the_handed_child_that_is_ending(tmp_path):
    import subprocess
    import sys
    import threading
    import time

    from sol_execbench.evaluate.parent.warm_pool import PoolServer

    server = PoolServer(None, spares=1, idle_timeout_s=60)
    server.stopping = True  # spawns no warm child: the take finds none
    release = tmp_path / "release"
    ending = subprocess.Popen([sys.executable, "-c", _ENDING_PROCESS, str(release)])
    server.handed[ending.pid] = ending
    try:
        assert poll_until(server._ending, 30.0)  # main thread gone, process not yet reaped
        threading.Timer(0.5, release.touch).start()  # its last thread ends half a second into the take
        began = time.monotonic()
        reply = server._take({"fingerprint": server.fingerprint, "wait_s": 0.05})
        assert not reply["ok"]
        assert ending.poll() == 0  # the take went on only once the ending child was gone
        assert 0.4 < time.monotonic() - began < 5.0
        assert server.takes.count == 0 and server.takes.ending_s > 0.4  # counted, though it handed none
    finally:
        ending.kill()
        ending.wait()
    running = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    server.handed = {running.pid: running}
    try:
        assert poll_until(lambda: process_alive(running.pid), 5.0)
        assert not server._ending()  # another evaluation's child still at work is not waited for
    finally:
        running.kill()
        running.wait()
