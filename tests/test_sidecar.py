"""The no-trace diagnostic sidecar: where it goes (never outside its folder), what it records
(stdout and stderr apart, how the child ended), and that the temp folder does not fill up."""

from __future__ import annotations

import json
import os
import stat
import tempfile
import time
from pathlib import Path

import pytest

from sol_execbench import evaluate
from sol_execbench.evaluate.parent import runner
from sol_execbench.evaluate.parent.process import ChildRun, exit_record, tail
from sol_execbench.evaluate.parent.runner import no_trace_dir, prune_no_trace_dir, safe_file_stem

from .conftest import LIGHT_CONFIG
from .problems import add_definition, solution, workloads

# Writes a line to each stream, then leaves during import: no trace can come from the child.
TWO_STREAMS_THEN_EXIT = ("import os, sys\nprint('line on stdout')\nprint('line on stderr', file=sys.stderr)\n"
                         "sys.stdout.flush(); sys.stderr.flush()\nos._exit(3)\n")


@pytest.fixture
def temp_root(tmp_path, monkeypatch) -> Path:
    """The system temp directory, for this test only (staging directories land here too)."""
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root


def _run(code: str, *sizes: int, name: str = "candidate", **options):
    return evaluate(add_definition(), workloads(*(sizes or (8,))), solution(code, name=name), LIGHT_CONFIG,
                    use_warm_pool=False, **options)


# -- file names --------------------------------------------------------------------------------

@pytest.mark.parametrize("name,expected", [
    ("../../var/tmp/escaped_audit/x", "var_tmp_escaped_audit_x"),
    ("my-kernel_v2.1", "my-kernel_v2.1"),
    ("a b/c\\d", "a_b_c_d"),
    ("..", "solution"),
    ("", "solution"),
    (".hidden", "hidden"),
    ("/abs/path", "abs_path"),
    ("nul\x00byte", "nul_byte"),
    ("überkernel", "berkernel"),
])
def test_solution_names_become_one_harmless_path_component(name, expected):
    stem = safe_file_stem(name)
    assert stem == expected
    assert "/" not in stem and "\\" not in stem and not stem.startswith(".")


def test_long_names_are_bounded():
    assert len(safe_file_stem("k" * 5000)) == 80


def test_a_traversing_solution_name_stays_in_the_sidecar_folder(temp_root):
    traces = _run(TWO_STREAMS_THEN_EXIT, name="../../escaped_audit/x")
    assert [t.evaluation.status.value for t in traces] == ["RUNTIME_ERROR"]
    written = [p for p in temp_root.parent.rglob("*") if p.is_file()]
    folder = no_trace_dir()
    assert folder == temp_root / f"sol-execbench-{os.getuid()}" / "no-trace"
    assert len(written) == 1 and written[0].parent == folder, written
    assert written[0].name.startswith("escaped_audit_x-")
    assert not (temp_root.parent / "escaped_audit").exists()
    sidecar = json.loads(written[0].read_text())
    assert sidecar["solution"] == "../../escaped_audit/x"  # the real name inside, only the file name is cleaned
    for folder_path in (folder, folder.parent):  # private: a shared /tmp must not show other users the output
        assert stat.S_IMODE(folder_path.stat().st_mode) == 0o700


# -- contents ----------------------------------------------------------------------------------

def test_stdout_and_stderr_are_kept_apart_and_the_exit_is_recorded(tmp_path):
    out = tmp_path / "traces.jsonl"
    (trace,) = _run(TWO_STREAMS_THEN_EXIT, output_path=out, timeout_s=120)
    log = trace.evaluation.log
    assert "exited with code 3" in log and "line on stdout" in log and "line on stderr" in log
    sidecar = json.loads(out.with_name("traces.jsonl.no-trace.json").read_text())
    assert "line on stdout" in sidecar["stdout_tail"] and "line on stderr" not in sidecar["stdout_tail"]
    assert "line on stderr" in sidecar["stderr_tail"] and "line on stdout" not in sidecar["stderr_tail"]
    assert sidecar["stdout_lines"] == 1 and sidecar["stderr_lines"] >= 1
    assert sidecar["timeout_s"] == 120
    (run,) = sidecar["child_runs"]
    assert run["returncode"] == 3 and run["signal"] is None
    assert run["timed_out"] is False and run["memory_limit_exceeded"] is False
    assert run["warm_pool"] is False and run["wall_s"] > 0
    assert "exited with code 3" in run["description"]


def test_a_bad_device_is_refused_before_any_child_runs(tmp_path):
    """The options are checked in the parent (evaluate/parent/option_checks.py): no child, no sidecar."""
    out = tmp_path / "traces.jsonl"
    with pytest.raises(ValueError, match="'bogus' is not a device"):
        _run("def run(a, b):\n    return a + b\n", output_path=out, device="bogus")
    assert not out.with_name("traces.jsonl.no-trace.json").exists()


def test_a_killed_child_names_the_signal(tmp_path):
    out = tmp_path / "traces.jsonl"
    _run("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n", output_path=out)
    (run,) = json.loads(out.with_name("traces.jsonl.no-trace.json").read_text())["child_runs"]
    assert run["signal"] == "SIGKILL" and run["returncode"] == -9


def test_a_timeout_is_recorded(tmp_path):
    out = tmp_path / "traces.jsonl"
    (trace,) = _run("import time\ntime.sleep(600)\n", output_path=out, timeout_s=5)
    assert trace.evaluation.status.value == "TIMEOUT"
    (run,) = json.loads(out.with_name("traces.jsonl.no-trace.json").read_text())["child_runs"]
    assert run["timed_out"] is True and 4 < run["wall_s"] < 60


def test_every_child_run_is_described_when_each_crashes(tmp_path):
    code = "import os\ndef run(a, b):\n    os.kill(os.getpid(), 9)\n"
    out = tmp_path / "traces.jsonl"
    traces = _run(code, 8, 16, output_path=out)
    assert [t.evaluation.status.value for t in traces] == ["RUNTIME_ERROR", "RUNTIME_ERROR"]
    sidecar = json.loads(out.with_name("traces.jsonl.no-trace.json").read_text())
    assert sidecar["child_run_count"] == 2 and [r["signal"] for r in sidecar["child_runs"]] == ["SIGKILL"] * 2


def test_memory_limit_in_the_exit_record():
    record = exit_record(ChildRun(returncode=-9, memory_exceeded_bytes=3 * 2**30, wall_s=1.23456))
    assert record["memory_limit_exceeded"] is True and record["memory_resident_bytes"] == 3 * 2**30
    assert record["signal"] == "SIGKILL" and record["wall_s"] == 1.235
    assert "host memory limit exceeded" in record["description"]


def test_tail_is_bounded_and_counts_a_last_unterminated_line(tmp_path):
    path = tmp_path / "log"
    path.write_bytes(b"x\n" * 100000 + b"end")
    text, lines = tail(path, 10)
    assert lines == 100001 and text.endswith("end") and len(text) == 10
    assert tail(tmp_path / "missing") == ("", 0)


def test_the_warm_pool_keeps_the_streams_apart_too(warm_pool, tmp_path):
    out = tmp_path / "traces.jsonl"
    logs: list[str] = []
    evaluate(add_definition(), workloads(8), solution(TWO_STREAMS_THEN_EXIT), LIGHT_CONFIG, output_path=out,
             on_log=logs.append)
    sidecar = json.loads(out.with_name("traces.jsonl.no-trace.json").read_text())
    (run,) = sidecar["child_runs"]
    assert run["warm_pool"] is True and run["returncode"] == 3
    assert "line on stdout" in sidecar["stdout_tail"] and "line on stderr" not in sidecar["stdout_tail"]
    assert "line on stderr" in sidecar["stderr_tail"] and "took the job from the warm pool" in sidecar["stderr_tail"]
    shown = "".join(logs)  # -v shows both streams
    assert "line on stdout" in shown and "line on stderr" in shown


# -- the temp folder ---------------------------------------------------------------------------

def test_old_and_surplus_sidecars_are_pruned(tmp_path):
    now = time.time()
    for i in range(60):
        path = tmp_path / f"s{i:02d}.json"
        path.write_text("{}")
        os.utime(path, (now - i * 60, now - i * 60))  # s00 newest
    stale = tmp_path / "stale.json"
    stale.write_text("{}")
    os.utime(stale, (now - 8 * 86400, now - 8 * 86400))
    (tmp_path / "other.txt").write_text("not ours")
    prune_no_trace_dir(tmp_path)
    kept = sorted(p.name for p in tmp_path.glob("*.json"))
    assert kept == [f"s{i:02d}.json" for i in range(50)]
    assert (tmp_path / "other.txt").exists()


def test_writing_prunes_the_folder(temp_root, monkeypatch):
    monkeypatch.setattr(runner, "SIDECAR_KEEP_FILES", 2)
    folder = no_trace_dir()
    folder.mkdir(parents=True)
    for i in range(3):
        old = folder / f"old{i}.json"
        old.write_text("{}")
        os.utime(old, (time.time() - 100 + i, time.time() - 100 + i))
    _run(TWO_STREAMS_THEN_EXIT)
    kept = sorted(p.name for p in folder.glob("*.json"))
    assert len(kept) == 2 and "old2.json" in kept and any(n.startswith("candidate-") for n in kept)


def test_a_planted_folder_is_not_used(temp_root):
    """Another user of a shared /tmp could create the per-user folder (or a link) first."""
    elsewhere = temp_root / "elsewhere"
    elsewhere.mkdir()
    (temp_root / f"sol-execbench-{os.getuid()}").symlink_to(elsewhere)
    written = runner._write_in_temp("../x", "{}")
    assert written is not None and written.parent == temp_root and written.name.startswith("sol-execbench-no-trace-x-")
    assert list(elsewhere.iterdir()) == []
