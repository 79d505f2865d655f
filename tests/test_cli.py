"""The command line: usage errors, file errors without tracebacks, outputs and exit codes."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from sol_execbench.cli.main import _register, cli

from .conftest import LIGHT_CONFIG
from .problems import add_definition, solution, workloads, write_problem

_register()
ADD = "def run(a, b):\n    return a + b\n"


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.fixture
def problem(tmp_path: Path) -> Path:
    root = write_problem(tmp_path / "vector_add", add_definition(), workloads(8, 32), solution(ADD))
    (root / "light.json").write_text(json.dumps(LIGHT_CONFIG))
    return root


def test_no_solution_anywhere_is_a_usage_error(problem: Path):
    (problem / "solution.json").rename(problem / "solution_other.json")
    result = invoke(str(problem))
    assert result.exit_code == 2
    assert "no --solution given" in result.output and "solution_other.json" in result.output


def test_neither_directory_nor_paths(tmp_path: Path):
    result = invoke("--solution", str(tmp_path / "s.json"))
    assert result.exit_code == 2 and "--definition and --workload" in result.output


def test_missing_problem_directory():
    result = invoke("does/not/exist")
    assert result.exit_code == 2 and "does not exist" in result.output


def test_malformed_solution_json_names_file_no_traceback(problem: Path):
    (problem / "solution.json").write_text('{"name": "x", ')
    result = invoke(str(problem))
    assert result.exit_code == 2
    assert "solution.json" in result.output and "malformed JSON" in result.output
    assert "Traceback" not in result.output


def test_schema_violation_names_field(problem: Path):
    sol = json.loads((problem / "solution.json").read_text())
    sol["spec"]["entry_point"] = "kernel.py"
    (problem / "solution.json").write_text(json.dumps(sol))
    result = invoke(str(problem))
    assert result.exit_code == 2 and "spec" in result.output and "file::function" in result.output


def test_unknown_only_uuid(problem: Path):
    result = invoke(str(problem), "--only", "nope")
    assert result.exit_code == 2 and "nope" in result.output


def test_bad_memory_limit(problem: Path):
    result = CliRunner().invoke(cli, [str(problem), "--memory-limit", "lots"])
    assert result.exit_code == 2 and "not a size" in result.output


def test_json_output_file_and_only(problem: Path, tmp_path: Path):
    out = tmp_path / "out" / "traces.jsonl"
    result = invoke(str(problem), "--config", str(problem / "light.json"), "--only", "w1-32", "--json", "-o", str(out))
    assert result.exit_code == 0, result.output
    printed = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert [t["workload"]["uuid"] for t in printed] == ["w1-32"] == [t["workload"]["uuid"] for t in written]
    assert written[0]["evaluation"]["status"] == "PASSED"
    # Upstream's fields are all there, with upstream's names.
    ev = written[0]["evaluation"]
    assert {"status", "environment", "timestamp", "log", "correctness", "performance"} <= set(ev)
    assert {"latency_ms", "reference_latency_ms", "speedup_factor"} <= set(ev["performance"])


def test_failing_workload_exit_code_and_definition_mismatch_warning(problem: Path):
    sol = solution("def run(a, b):\n    return a - b\n", definition="something_else")
    (problem / "solution.json").write_text(json.dumps(sol))
    result = invoke(str(problem), "--config", str(problem / "light.json"))
    assert result.exit_code == 1
    assert "INCORRECT_NUMERICAL" in result.output
    assert "something_else" in result.output and "vector_add" in result.output


def test_definition_and_workload_flags(problem: Path):
    result = invoke("--definition", str(problem / "definition.json"), "--workload", str(problem / "workload.jsonl"),
                    "--solution", str(problem / "solution.json"), "--config", str(problem / "light.json"))
    assert result.exit_code == 0, result.output
    assert "2 PASSED" in result.output


def test_subcommand_name_wins_over_directory(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "evaluate").mkdir()
    result = invoke("./evaluate")  # a path reaches the directory, which has no problem files
    assert result.exit_code == 2 and "no --solution given" in result.output


def test_traces_carry_the_environment_hash_and_the_snapshot_sidecar(problem: Path, tmp_path: Path,
                                                                     monkeypatch):
    monkeypatch.setenv("SOLEXECBENCH_ENV_SNAPSHOT", "1")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    out = tmp_path / "run" / "traces.jsonl"
    result = invoke(str(problem), "--config", str(problem / "light.json"), "--only", "w0-8", "-o", str(out))
    assert result.exit_code == 0, result.output
    snapshot = json.loads((tmp_path / "run" / "traces.env.json").read_text())
    assert {"schema_version", "partial_reasons", "host", "pytorch_build"} <= set(snapshot)
    from sol_execbench.envprobe.hashing import snapshot_hash

    trace = json.loads(out.read_text().splitlines()[0])
    assert trace["evaluation"]["env_hash"] == snapshot_hash(snapshot)


def test_the_environment_hash_computed_beside_the_run_stamps_every_trace(problem: Path, tmp_path: Path,
                                                                          monkeypatch):
    """Without the sidecar the hash is computed on a thread while the evaluation runs (an empty
    cache: a full probe); every trace still carries it, the same the host cache keeps."""
    monkeypatch.delenv("SOLEXECBENCH_ENV_SNAPSHOT", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    out = tmp_path / "traces.jsonl"
    result = invoke(str(problem), "--config", str(problem / "light.json"), "-o", str(out))
    assert result.exit_code == 0, result.output
    from sol_execbench.envprobe.hashing import host_cached_environment_hash

    hashes = {json.loads(line)["evaluation"]["env_hash"] for line in out.read_text().splitlines()}
    assert hashes == {host_cached_environment_hash()} and None not in hashes


def test_an_environment_hash_that_fails_leaves_traces_without_one():
    from concurrent.futures import Future

    from sol_execbench.evaluate import EvalOptions

    failed: Future = Future()
    failed.set_exception(RuntimeError("probe broke"))
    assert EvalOptions(env_hash=failed).environment_hash() is None
    done: Future = Future()
    done.set_result("abc")
    assert EvalOptions(env_hash=done).environment_hash() == "abc"
    assert EvalOptions(env_hash="def").environment_hash() == "def"


@pytest.mark.parametrize("flag,value,words", [
    ("--device", "bogus", "'bogus' is not a device"),
    ("--device", "cuda:x", "'cuda:x' is not a device"),
    ("--device", "cuda:hip:3", "'cuda:hip:3' is not a device"),
    ("--timeout", "-5", "--timeout"),
    ("--timeout", "0", "--timeout"),
    ("--compile-timeout", "0", "--compile-timeout"),
])
def test_bad_flag_values_are_usage_errors(problem: Path, flag: str, value: str, words: str):
    result = invoke(str(problem), "--config", str(problem / "light.json"), flag, value)
    assert result.exit_code == 2, result.output
    assert words in result.output and "Invalid value" in result.output
    assert "RUNTIME_ERROR" not in result.output and "TIMEOUT" not in result.output


def test_non_utf8_source_file_names_the_file_no_traceback(problem: Path):
    (problem / "kernel.py").write_bytes(b"def run(a, b):\n    return a + b  # caf\xe9\n")
    (problem / "solution.json").write_text(json.dumps(solution("")))
    result = invoke(str(problem))
    assert result.exit_code == 2
    assert "kernel.py" in result.output and "not UTF-8" in result.output and "sources.0.content" in result.output
    assert "Traceback" not in result.output


def test_table_note_keeps_the_whole_first_line_and_points_to_the_rest():
    from sol_execbench.cli.render import SEE_FULL_LOG, note_of

    hint = "timing on the CPU needs SOL_EXECBENCH_ALLOW_CPU_TIMING=1 (set it to time on the CPU; results are not GPU timings)"
    assert note_of(f"\n{hint}\n") == hint
    assert note_of(f"{hint}\nTraceback (most recent call last):\n  ...") == f"{hint} {SEE_FULL_LOG}"
    cut = note_of("x" * 1000)
    assert cut.startswith("x" * 300) and cut.endswith(SEE_FULL_LOG) and len(cut) < 1000
    assert note_of("") == ""


def test_table_shows_the_whole_note(tmp_path: Path):
    from rich.console import Console

    from sol_execbench.cli.render import print_traces
    from sol_execbench.schema import Trace

    hint = "timing on the CPU needs SOL_EXECBENCH_ALLOW_CPU_TIMING=1"
    trace = Trace.model_validate({
        "definition": "d", "workload": {"uuid": "u", "axes": {}}, "solution": "s",
        "evaluation": {"status": "RUNTIME_ERROR", "environment": {"hardware": "x"}, "timestamp": "t",
                       "log": f"{'a long preamble ' * 6}{hint}"}})
    console = Console(width=120, record=True)
    print_traces([trace], "d / s", console)
    # The table wraps the note over several lines, between cell borders.
    text = "".join(console.export_text().replace("│", " ").split())
    assert "".join(hint.split()) in text


def test_verbose_shows_staging_details_and_the_childs_output(problem: Path):
    sol = json.loads((problem / "solution.json").read_text())
    sol["sources"][0]["content"] = "print('hello from the solution')\n" + sol["sources"][0]["content"]
    (problem / "solution.json").write_text(json.dumps(sol))
    result = invoke(str(problem), "--config", str(problem / "light.json"), "--only", "w1-32", "-v", "--no-warm-pool")
    assert result.exit_code == 0, result.output
    assert "staging directory:" in result.output and "staged 1 solution file(s)" in result.output
    assert "hello from the solution" in result.output and "staging directory removed" in result.output


def test_timing_rounds_writes_every_timed_call_of_each_workload(problem: Path, monkeypatch):
    """SOL_EXECBENCH_TIMING_ROUNDS: each workload's timed calls, as the trace's statistics were
    computed from them (the folder is under /dev/shm, writable inside the sandbox)."""
    from sol_execbench.schema import TimingRounds

    base = Path("/dev/shm") if Path("/dev/shm").is_dir() else None
    folder = Path(tempfile.mkdtemp(prefix="sol-rounds-", dir=base))
    try:
        monkeypatch.setenv("SOL_EXECBENCH_TIMING_ROUNDS", str(folder / "rounds"))
        result = invoke(str(problem), "--config", str(problem / "light.json"), "--only", "w1-32", "--json")
        assert result.exit_code == 0, result.output
        trace = next(json.loads(line) for line in result.stdout.splitlines() if line.startswith("{"))
        files = list((folder / "rounds").iterdir())
        assert len(files) == 1 and files[0].name.startswith(f"{trace['definition']}__w1-32__")
        rounds = TimingRounds.model_validate_json(files[0].read_text())
        perf = trace["evaluation"]["performance"]
        sides = {s.name: s for s in rounds.sides}
        assert set(sides) == {"reference", "solution"}
        assert len(sides["solution"].host_ms) == perf["solution_timing"]["host_rounds"] == LIGHT_CONFIG["iterations"]
        assert sides["solution"].latency_ms == perf["latency_ms"]
        assert sides["reference"].latency_ms == perf["reference_latency_ms"]
        assert rounds.speedup == perf["speedup_factor"]
        assert sides["solution"].host_call_indices == sides["reference"].host_call_indices
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_timing_rounds_in_a_folder_the_sandbox_would_refuse_are_written(problem: Path, tmp_path: Path, monkeypatch):
    """A folder outside /dev/shm and the run (here under the test's temporary folder, not made yet):
    the run's sandbox lets the child write there, as it does --dump-failures."""
    monkeypatch.setenv("SOL_EXECBENCH_TIMING_ROUNDS", str(tmp_path / "rounds" / "deeper"))
    result = invoke(str(problem), "--config", str(problem / "light.json"), "--only", "w1-32", "--json")
    assert result.exit_code == 0, result.output
    trace = next(json.loads(line) for line in result.stdout.splitlines() if line.startswith("{"))
    assert trace["evaluation"]["status"] == "PASSED", trace["evaluation"]["log"]
    assert len(list((tmp_path / "rounds" / "deeper").glob("*.json"))) == 1


def test_timing_rounds_in_a_folder_that_cannot_be_made_is_exit_2(problem: Path, tmp_path: Path, monkeypatch):
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("SOL_EXECBENCH_TIMING_ROUNDS", str(tmp_path / "a-file" / "rounds"))
    result = invoke(str(problem), "--config", str(problem / "light.json"), "--only", "w1-32")
    assert result.exit_code == 2
    assert "SOL_EXECBENCH_TIMING_ROUNDS=" in result.output and "cannot be made" in result.output
    assert "Traceback" not in result.output


def test_child_profile_is_written_outside_the_sandbox(problem: Path, tmp_path: Path, monkeypatch):
    """SOL_EXECBENCH_CHILD_PROFILE names a file outside the staging directory, which the sandboxed
    child may not open for writing: it is opened before the job starts."""
    import pstats

    path = tmp_path / "child.prof"
    monkeypatch.setenv("SOL_EXECBENCH_CHILD_PROFILE", str(path))
    result = invoke(str(problem), "--config", str(problem / "light.json"), "--only", "w1-32", "--no-warm-pool")
    assert result.exit_code == 0, result.output
    stats = pstats.Stats(str(path))
    assert any(name == "run_job" for (_file, _line, name) in stats.stats)


def test_every_command_module_is_in_the_lazy_table_and_an_evaluation_imports_only_its_own():
    """Commands are imported when looked up (COMMAND_MODULES): every cli/*_cmd.py module must be in
    the table, every command it registers under its name; resolving the evaluation in a fresh
    interpreter imports no other command module, and a group gets the subcommands of all its modules."""
    import subprocess
    import sys

    from sol_execbench.cli import main as cli_main

    modules = {p.stem for p in Path(cli_main.__file__).parent.glob("*_cmd.py")}
    assert modules == {m for names in cli_main.COMMAND_MODULES.values() for m in names}
    assert set(cli.commands) == set(cli_main.COMMAND_MODULES)
    probe = ("import sys, click\n"
             "from sol_execbench.cli.main import cli\n"
             "ctx = click.Context(cli)\n"
             "assert cli.get_command(ctx, 'evaluate') is not None\n"
             "print(sorted(m.rsplit('.', 1)[1] for m in sys.modules if m.startswith('sol_execbench.cli.') and m.endswith('_cmd')))\n"
             "print(sorted(cli.get_command(ctx, 'dataset').commands))\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0] == "['evaluate_cmd']"
    assert out[1] == str(sorted(cli.commands["dataset"].commands))


def test_a_run_without_diagnostics_leaves_the_profiling_modules_unimported(problem: Path, tmp_path: Path):
    """They cost 20 to 40 ms of the command's wall time; only --profile or --static-evidence needs them."""
    import subprocess
    import sys

    probe = ("import atexit, sys\n"
             "atexit.register(lambda: print('profiling imported:', 'sol_execbench.profiling' in sys.modules))\n"
             f"sys.argv = ['sol-execbench', {str(problem)!r}, '--config', {str(problem / 'light.json')!r}, "
             f"'--only', 'w1-32', '-o', {str(tmp_path / 't.jsonl')!r}]\n"
             "from sol_execbench.cli.main import main\n"
             "main()\n")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "profiling imported: False" in proc.stdout
    assert json.loads((tmp_path / "t.jsonl").read_text())["evaluation"]["status"] == "PASSED"


def test_speedups_show_alike_decimals_beside_their_interval():
    from sol_execbench.cli.render import ratio_text

    assert [ratio_text(x) for x in (1.3, 1.14, 0.95, 1.0, 12.345, 123.4, 0.01234)] == \
        ["1.30", "1.14", "0.95", "1.00", "12.35", "123", "0.012"]
