"""Triton launchers built ahead (``evaluate/triton_launchers.py``): what a run's record may add to
the wanted list, what a child copies, that a solution cannot plant one, and on a GPU that a run on
an empty Triton cache launches with a launcher built from a record without compiling one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from sol_execbench.cli.main import _register, cli
from sol_execbench.evaluate import triton_launchers as tl
from sol_execbench.evaluate.child.handoff import receive_job
from sol_execbench.evaluate.parent.child_env import send_job
from sol_execbench.platform.host import listening_socket
from sol_execbench.sandbox.landlock import abi_version
from sol_execbench.schema import Trace

from .conftest import LIGHT_CONFIG
from .problems import add_definition, solution, workloads, write_problem

_register()
needs_landlock = pytest.mark.skipif(abi_version()[0] < 6, reason="needs Landlock ABI 6+")

GOOD = {"signature": ["*fp32", "*bf16", "i32", "fp32", "constexpr"], "tensor_maps": None}
GOOD_WITH_DESCRIPTOR = {"signature": ["tensordesc<bf16[64, 64]>", ["*fp16", "i64"], "i32"], "tensor_maps": [True]}


@pytest.mark.parametrize("entry", [
    {"signature": ['*fp32); system("touch /tmp/x"); (']},  # C in a pointer's element type
    {"signature": ["i32\n#include <stdio.h>"]},
    {"signature": ["int"]},  # not Triton's name for it
    {"signature": ["tensordesc<bf16);[64]>"]},
    {"signature": [[[["i32"]]]]},  # nested past a tuple of tuples
    {"signature": ["i32"] * (tl.MAX_TYPES + 1)},
    {"signature": "i32"},
    {"signature": ["tensordesc<bf16[64, 64]>"], "tensor_maps": [True, False]},  # one map per descriptor
    {"signature": ["i32"], "tensor_maps": ["yes"]},
    ["i32"],
])
def test_types_that_are_not_tritons_names_are_refused(entry):
    assert tl.LauncherTypes.parse(entry) is None


def test_tritons_names_round_trip():
    for entry in (GOOD, GOOD_WITH_DESCRIPTOR):
        types = tl.LauncherTypes.parse(entry)
        assert types is not None and tl.LauncherTypes.parse(json.loads(json.dumps(types.to_json()))) == types
    assert tl.LauncherTypes.parse(GOOD_WITH_DESCRIPTOR).signature[1] == ("*fp16", "i64")


def _record(staging: Path, lines: list[str]) -> None:
    tl.record_file(staging).parent.mkdir(parents=True, exist_ok=True)
    tl.record_file(staging).write_text("".join(line + "\n" for line in lines))


def _wanted(store: Path) -> list[dict]:
    return sorted((json.loads(p.read_text()) for p in (store / "wanted").glob("*.json")), key=json.dumps)


def test_learning_keeps_well_formed_entries_and_the_newest(tmp_path):
    staging, store = tmp_path / "staging", tmp_path / "store"
    _record(staging, ["not json", "[" * 5000, json.dumps({"signature": ["evil;"]}), json.dumps(GOOD),
                      json.dumps(GOOD), json.dumps(GOOD_WITH_DESCRIPTOR)])
    assert tl.learn(staging, store) == 3
    assert _wanted(store) == sorted([GOOD, GOOD_WITH_DESCRIPTOR], key=json.dumps)
    # A record's lines past MAX_PER_RUN are not read; the list keeps the MAX_WANTED newest.
    for batch in range(5):
        _record(staging, [json.dumps({"signature": ["i32"] * (2 + batch * tl.MAX_PER_RUN + i)})
                          for i in range(tl.MAX_PER_RUN + 3)])
        assert tl.learn(staging, store) == tl.MAX_PER_RUN
        time.sleep(0.01)
    kept = _wanted(store)
    assert len(kept) == tl.MAX_WANTED
    assert {"signature": ["i32"] * (2 + 4 * tl.MAX_PER_RUN)} in [{"signature": k["signature"]} for k in kept]
    assert GOOD not in kept  # the oldest went
    assert tl.learn(tmp_path / "no-such-run", store) == 0
    # A record that is a pipe (which would block a reader) or a link is not read.
    record = tl.record_file(staging)
    record.unlink()
    os.mkfifo(record)
    assert tl.learn(staging, store) == 0
    record.unlink()
    (tmp_path / "elsewhere.jsonl").write_text(json.dumps({"signature": ["i8"]}) + "\n")
    record.symlink_to(tmp_path / "elsewhere.jsonl")
    assert tl.learn(staging, store) == 0


def test_install_copies_launchers_and_nothing_else(tmp_path):
    store, cache = tmp_path / "store", tmp_path / "cache"
    key = "A2" * 26  # Triton's cache folder names: a sha256 in base32
    launcher = store / "built" / key / f"{tl.LAUNCHER_NAME}.cpython-x.so"
    launcher.parent.mkdir(parents=True)
    launcher.write_bytes(b"\x7fELF built")
    (launcher.parent / "other.so").write_bytes(b"not a launcher")
    (store / "built" / "not-a-key").mkdir()
    (store / "built" / "not-a-key" / f"{tl.LAUNCHER_NAME}.so").write_bytes(b"x")
    assert tl.install(store, cache) == 1
    copied = cache / key / launcher.name
    assert copied.read_bytes() == b"\x7fELF built" and not copied.samefile(launcher)
    assert sorted(p.name for p in cache.iterdir()) == [key]
    copied.write_bytes(b"the run's own")
    assert tl.install(store, cache) == 0 and launcher.read_bytes() == b"\x7fELF built"
    assert tl.install(tmp_path / "no-store", cache) == 0


def test_record_kernels_notes_what_the_launcher_depends_on(tmp_path):
    knobs = pytest.importorskip("triton").knobs
    before = knobs.compilation.listener
    try:
        knobs.compilation.listener = None
        tl.record_file(tmp_path).parent.mkdir(parents=True)
        assert tl.record_kernels(tmp_path)
        assert not tl.record_kernels(tmp_path)  # a listener is set: it is left alone
        note = knobs.compilation.listener
        signature = {"x": "*fp32", "pair": ("*fp16", "i64"), "n": "i32", "BLOCK": "constexpr"}
        note(src=SimpleNamespace(signature=signature), metadata={"tensordesc_meta": None}, cache_hit=False)
        note(src=SimpleNamespace(signature=signature), metadata={}, cache_hit=True)  # the same: noted once
        note(src=SimpleNamespace(signature={"d": "tensordesc<bf16[64, 64]>"}), metadata={"tensordesc_meta": [{"swizzle": 128}]})
        note(src=SimpleNamespace(), metadata={})  # a source from IR: nothing to note, and no error
        lines = tl.record_file(tmp_path).read_text().splitlines()
        assert [tl.LauncherTypes.parse(json.loads(line)) for line in lines] == [
            tl.LauncherTypes(("*fp32", ("*fp16", "i64"), "i32", "constexpr")),
            tl.LauncherTypes(("tensordesc<bf16[64, 64]>",), (True,))]
    finally:
        knobs.compilation.listener = before


def test_a_waiting_child_runs_its_idle_work_until_a_job_comes(tmp_path):
    path = str(tmp_path / "child.sock")
    listener = listening_socket(path)
    ticks: list[float] = []
    sent: list[bool] = []
    read_end, write_end = os.pipe()

    def take_after_a_while() -> None:
        time.sleep(0.5)
        sent.append(send_job(path, tmp_path / "job.json", {"A": "1"}, [write_end, write_end], answer=True))

    thread = threading.Thread(target=take_after_a_while)
    thread.start()
    job, env, fds = receive_job(listener, path, idle=lambda: ticks.append(time.monotonic()), idle_period_s=0.05)
    thread.join()
    assert sent == [True] and job == str(tmp_path / "job.json") and env == {"A": "1"} and len(fds) == 2
    assert len(ticks) >= 3
    for fd in (read_end, write_end, *fds):
        os.close(fd)


PLANT = """
import os
from pathlib import Path

def run(a, b):
    target = Path(os.environ["SANDBOX_TEST_STORE"]) / "built" / ("A2" * 26)
    try:
        target.mkdir(parents=True, exist_ok=True)
        (target / "__triton_launcher.planted.so").write_bytes(b"planted")
    except OSError:
        pass
    return a + b
"""

RECORD = """
from pathlib import Path

def run(a, b):
    record = Path(__file__).resolve().parents[1] / "run" / "triton-launchers.jsonl"
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(LINES)
    return a + b
"""


@pytest.fixture
def problem(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setenv("SOL_EXECBENCH_ALLOW_CPU_TIMING", "1")
    root = write_problem(tmp_path / "vector_add", add_definition(), workloads(16), solution("def run(a, b):\n    return a + b\n"))
    (root / "light.json").write_text(json.dumps(LIGHT_CONFIG))
    return root


def _evaluate(problem: Path, code: str, env: dict[str, str]) -> list[Trace]:
    (problem / "solution.json").write_text(json.dumps(solution(code)))
    output = problem / "traces.jsonl"
    output.unlink(missing_ok=True)
    result = CliRunner().invoke(cli, [str(problem), "--config", str(problem / "light.json"), "--device", "cpu",
                                      "--no-warm-pool", "-o", str(output)],
                                env=env, catch_exceptions=False)
    assert result.exit_code in (0, 1), result.output
    return [Trace.model_validate_json(line) for line in output.read_text().splitlines()]


@needs_landlock
@pytest.mark.parametrize("variable", ["SOL_EXECBENCH_CACHE_DIR", "XDG_CACHE_HOME"])
def test_a_solution_cannot_plant_a_launcher_for_later_runs(problem, tmp_path, variable):
    """Wherever the user's environment puts the tool's cache: the sandboxed child's own cache
    variables point into its run, and the place it protects is still the user's."""
    cache = tmp_path / "user-cache"
    store = cache / ("" if variable == "SOL_EXECBENCH_CACHE_DIR" else "sol-execbench") / "triton-launchers"
    traces = _evaluate(problem, PLANT, {variable: str(cache), "SANDBOX_TEST_STORE": str(store)})
    assert [t.evaluation.status.value for t in traces] == ["REWARD_HACK"], traces[0].evaluation.log
    assert "the tool's cache" in traces[0].evaluation.log
    assert not list(cache.rglob("*planted*"))


def test_what_a_solution_writes_in_its_record_is_learned_only_where_well_formed(problem, tmp_path):
    cache = tmp_path / "tool-cache"
    lines = "".join(json.dumps(e) + "\n" for e in ({"signature": ['*fp32); abort(); (']}, GOOD))
    traces = _evaluate(problem, RECORD.replace("LINES", repr(lines)), {"SOL_EXECBENCH_CACHE_DIR": str(cache)})
    assert [t.evaluation.status.value for t in traces] == ["PASSED"], traces[0].evaluation.log
    assert _wanted(cache / "triton-launchers") == [GOOD]


# On a GPU, in processes of their own: a kernel's compile noted, learned, built ahead; a second process
# on an empty Triton cache with the built launchers copied in launches with no C compiler at hand.
KERNEL = textwrap.dedent("""
    import os, sys
    from pathlib import Path
    import torch, triton, triton.language as tl
    from sol_execbench.evaluate import triton_launchers

    @triton.jit
    def scale(x, y, n, factor, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y + i, tl.load(x + i, mask=i < n) * factor, mask=i < n)

    step, staging, store = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    if step == "record":
        assert triton_launchers.record_kernels(staging)
    if step == "installed":
        assert triton_launchers.install(store, Path(os.environ["TRITON_CACHE_DIR"])) >= 1
    triton.runtime.driver.active.utils  # Triton's own utilities, built with the compiler
    if step != "record":
        os.environ["CC"] = "/bin/false"  # from here on, a launcher Triton had to compile fails
    x = torch.arange(1000, device="cuda", dtype=torch.float32)
    y = torch.empty_like(x)
    scale[(4,)](x, y, x.numel(), 2.5, BLOCK=256)
    torch.cuda.synchronize()
    assert torch.equal(y, x * 2.5)
    print("launched")
""")


@pytest.mark.gpu
def test_a_launcher_built_from_a_runs_record_serves_a_later_run(tmp_path):
    staging, store = tmp_path / "staging", tmp_path / "store"
    tl.record_file(staging).parent.mkdir(parents=True)
    script = tmp_path / "kernel.py"
    script.write_text(KERNEL)

    def run(step: str, cache: str) -> subprocess.CompletedProcess:
        (tmp_path / cache).mkdir(exist_ok=True)
        env = dict(os.environ, TRITON_CACHE_DIR=str(tmp_path / cache))
        return subprocess.run([sys.executable, str(script), step, str(staging), str(store)], env=env,
                              capture_output=True, text=True, timeout=300)

    first = run("record", "cache-1")
    assert first.returncode == 0 and "launched" in first.stdout, first.stderr
    assert tl.learn(staging, store) == 1
    built = subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; "
                            "from sol_execbench.evaluate import triton_launchers as t; "
                            "print(t.build_wanted(Path(sys.argv[1])))", str(store)],
                           capture_output=True, text=True, timeout=300)
    assert built.stdout.strip() == "1", built.stderr
    without = run("bare", "cache-2")
    assert without.returncode != 0 and "launched" not in without.stdout  # the check can fail
    later = run("installed", "cache-3")
    assert later.returncode == 0 and "launched" in later.stdout, later.stderr
