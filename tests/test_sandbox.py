"""The sandbox module and --isolation through the CLI, with real processes (issue 23)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from sol_execbench.cli.main import _register, cli
from sol_execbench.sandbox import MECHANISMS_ENV, RunFolders, plan
from sol_execbench.sandbox.bwrap import probe as bwrap_probe
from sol_execbench.sandbox.landlock import abi_version
from sol_execbench.schema import IsolationMode, Trace

from .conftest import LIGHT_CONFIG
from .problems import add_definition, solution, workloads, write_problem

_register()
ABI, WHY_NO_LANDLOCK = abi_version()
LANDLOCK_MODULE = str(Path(__file__).resolve().parents[1] / "src" / "sol_execbench" / "sandbox" / "landlock.py")
needs_landlock = pytest.mark.skipif(ABI < 6, reason=f"needs Landlock ABI 6+ (kernel offers {ABI}: {WHY_NO_LANDLOCK})")
ADD = "def run(a, b):\n    return a + b\n"

# A process that restricts itself, then reports what it could still do.
PROBE = textwrap.dedent("""
    import importlib.util, json, os, socket, sys
    from pathlib import Path
    # The module alone (standard library only): an unprivileged user may not read root's site-packages.
    spec = importlib.util.spec_from_file_location("landlock", sys.argv[3])
    landlock = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(landlock)
    abi_version, restrict_self = landlock.abi_version, landlock.restrict_self
    private = Path(sys.argv[1])
    restrict_self([private, Path("/dev")], abi_version()[0])
    def attempt(action):
        try:
            action()
            return "allowed"
        except OSError as exc:
            return exc.__class__.__name__
    print(json.dumps({
        "private": attempt(lambda: (private / "f").write_text("x")),
        "outside": attempt(lambda: Path(sys.argv[2]).write_text("x")),
        "dev_null": attempt(lambda: open("/dev/null", "w").write("x")),
        "read": attempt(lambda: Path("/etc/hostname").read_bytes()),
        "tcp": attempt(lambda: socket.create_connection(("127.0.0.1", 9), timeout=1)),
        "signal_parent": attempt(lambda: os.kill(os.getppid(), 0)),
    }))
""")


def _probe(user: list[str]) -> dict:
    # Directly under the temp folder: another user cannot traverse pytest's per-user folder.
    base = Path(tempfile.mkdtemp(prefix="sol-execbench-landlock-probe-"))
    private, outside = base / "private", base / "outside"
    try:
        private.mkdir()
        outside.mkdir()
        for folder in (base, private, outside):
            os.chmod(folder, 0o777)
        return _run_probe(user, private, outside)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _run_probe(user: list[str], private: Path, outside: Path) -> dict:
    out = subprocess.run([*user, sys.executable, "-c", PROBE, str(private), str(outside / "f"), LANDLOCK_MODULE],
                         capture_output=True, text=True, cwd="/", timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@needs_landlock
def test_landlock_refuses_writes_tcp_and_signals_outside_and_keeps_reads():
    seen = _probe([])
    assert seen == {"private": "allowed", "outside": "PermissionError", "dev_null": "allowed", "read": "allowed",
                    "tcp": "PermissionError", "signal_parent": "PermissionError"}


@needs_landlock
@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv to become nobody")
def test_landlock_works_for_an_unprivileged_user():
    seen = _probe(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"])
    assert seen["private"] == "allowed" and seen["outside"] == "PermissionError" and seen["tcp"] == "PermissionError"


def test_plan_follows_the_allowed_mechanisms(monkeypatch):
    monkeypatch.setenv(MECHANISMS_ENV, "none")
    record = plan(IsolationMode.AUTO, RunFolders(private=()))
    assert record.mechanism == "none" and MECHANISMS_ENV in record.reason
    assert plan(IsolationMode.OFF, RunFolders(private=())).reason == "--isolation off"


@pytest.fixture
def problem(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setenv("SOL_EXECBENCH_ALLOW_CPU_TIMING", "1")
    root = write_problem(tmp_path / "vector_add", add_definition(), workloads(16), solution(ADD))
    (root / "light.json").write_text(json.dumps(LIGHT_CONFIG))
    return root


def _evaluate(problem: Path, *args: str, env: dict[str, str] | None = None):
    output = problem / "traces.jsonl"
    result = CliRunner().invoke(cli, [str(problem), "--config", str(problem / "light.json"), "--device", "cpu",
                                      "--no-warm-pool", "-o", str(output), *args], env=env, catch_exceptions=False)
    traces = ([Trace.model_validate_json(line) for line in output.read_text().splitlines()]
              if output.exists() else [])
    return result, traces


def test_strict_without_a_sandbox_exits_2_naming_why(problem):
    result, traces = _evaluate(problem, "--isolation", "strict", env={MECHANISMS_ENV: "none"})
    assert result.exit_code == 2 and not traces
    assert "--isolation strict: no sandbox can be enforced here" in result.output and MECHANISMS_ENV in result.output


def test_unsandboxed_run_is_recorded_and_named_in_the_table(problem):
    result, traces = _evaluate(problem, env={MECHANISMS_ENV: "none"})
    assert result.exit_code == 0, result.output
    isolation = traces[0].evaluation.isolation
    assert isolation.mechanism == "none" and not isolation.filesystem
    assert "not sandboxed:" in result.output


@needs_landlock
def test_strict_with_landlock_runs_and_records_it(problem):
    result, traces = _evaluate(problem, "--isolation", "strict")
    assert result.exit_code == 0, result.output
    isolation = traces[0].evaluation.isolation
    assert (isolation.mechanism, isolation.version) == ("landlock", str(ABI))
    assert "not sandboxed" not in result.output


WRITE_OUTPUT = """
import os

def run(a, b):
    try:
        with open(os.environ["SANDBOX_TEST_OUTPUT"], "a") as fh:
            fh.write('{"forged": true}\\n')
    except OSError:
        pass
    return a + b
"""


@needs_landlock
def test_writing_the_output_file_is_refused_and_a_reward_hack(problem):
    (problem / "solution.json").write_text(json.dumps(solution(WRITE_OUTPUT)))
    result, traces = _evaluate(problem, env={"SANDBOX_TEST_OUTPUT": str(problem / "traces.jsonl")})
    assert [t.evaluation.status.value for t in traces] == ["REWARD_HACK"], result.output
    assert "the -o output" in traces[0].evaluation.log
    assert "forged" not in (problem / "traces.jsonl").read_text()


WRITE_HOME = """
import os

def run(a, b):
    try:
        with open(os.path.expanduser("~/.cache/sol-execbench-bwrap-planted"), "w") as fh:
            fh.write("x")
    except OSError:
        pass
    return a + b
"""


@pytest.mark.skipif(bwrap_probe()[0] is None, reason=f"bubblewrap unusable here: {bwrap_probe()[1]}")
def test_bubblewrap_fallback_passes_honest_and_refuses_writes_outside(problem):
    result, traces = _evaluate(problem, env={MECHANISMS_ENV: "bwrap"})
    assert [t.evaluation.status.value for t in traces] == ["PASSED"], result.output
    assert traces[0].evaluation.isolation.mechanism == "bwrap"
    (problem / "solution.json").write_text(json.dumps(solution(WRITE_HOME)))
    result, traces = _evaluate(problem, env={MECHANISMS_ENV: "bwrap"})
    assert [t.evaluation.status.value for t in traces] == ["REWARD_HACK"], result.output
    assert not Path("~/.cache/sol-execbench-bwrap-planted").expanduser().exists()


JIT_CACHE_WRITE = """
import os

def run(a, b):
    cache = os.path.join(os.path.expanduser("~"), ".triton", "cache", "k")
    os.makedirs(cache, exist_ok=True)  # what Triton's JIT does on the solution's behalf
    with open(os.path.join(cache, "kernel.so"), "w") as fh:
        fh.write("x")
    return a + b
"""


@pytest.mark.parametrize("how", [("--isolation", "off"), ()], ids=["off", "auto-without-a-sandbox"])
def test_unsandboxed_jit_cache_writes_are_not_attempts(problem, tmp_path, how):
    """Unsandboxed, the user's JIT caches keep serving, so writing them is the harness's JIT at
    work, not an exploit; the harness's own files and the -o output stay protected."""
    (problem / "solution.json").write_text(json.dumps(solution(JIT_CACHE_WRITE)))
    home = tmp_path / "home"
    home.mkdir()
    result, traces = _evaluate(problem, *how, env={"HOME": str(home), MECHANISMS_ENV: "none"})
    assert [t.evaluation.status.value for t in traces] == ["PASSED"], result.output
    assert (home / ".triton" / "cache" / "k" / "kernel.so").exists()
    (problem / "solution.json").write_text(json.dumps(solution(WRITE_OUTPUT)))
    result, traces = _evaluate(problem, *how, env={"HOME": str(home), MECHANISMS_ENV: "none",
                                                   "SANDBOX_TEST_OUTPUT": str(problem / "traces.jsonl")})
    assert traces[-1].evaluation.status.value == "REWARD_HACK" and "the -o output" in traces[-1].evaluation.log


def test_tree_digest_names_changed_added_and_removed_files_and_not_a_touch(tmp_path):
    from sol_execbench.sandbox import TreeDigest

    (tmp_path / "pkg").mkdir()
    kept, edited, removed = (tmp_path / "pkg" / f"{n}.py" for n in ("kept", "edited", "removed"))
    for path in (kept, edited, removed):
        path.write_text(f"# {path.stem}\n")
    (tmp_path / "notes.txt").write_text("not watched")
    digest = TreeDigest([tmp_path])
    assert digest.changed() == []
    before = os.stat(edited)
    edited.write_text("# EDITED\n")  # same length, its times set back: the ctime still moves
    os.utime(edited, ns=(before.st_atime_ns, before.st_mtime_ns))
    os.utime(kept)  # touched, content unchanged
    removed.unlink()
    (tmp_path / "pkg" / "added.py").write_text("x = 1\n")
    (tmp_path / "notes.txt").write_text("changed, not watched")
    assert digest.changed() == sorted(str(p) for p in (edited, removed, tmp_path / "pkg" / "added.py"))
