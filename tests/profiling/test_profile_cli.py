"""``--profile`` and ``--static-evidence`` end to end on the CPU: the sidecars, and a profiler that
is missing, fails or records nothing, with the evaluation's exit code and traces unchanged."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from sol_execbench.cli.main import _register, cli
from sol_execbench.schema.profiling import ProfileSidecar, StaticEvidenceSidecar

from .stand_ins import NCU_OPTIONS, write_tool

_register()
ROOT = Path(__file__).resolve().parents[2]
RMSNORM = ROOT / "examples" / "rmsnorm"
BASE = [str(RMSNORM), "--solution", str(RMSNORM / "solution_pytorch.json"), "--config", str(ROOT / "examples" / "cpu_config.json"),
        "--device", "cpu", "--only", "rmsnorm-small", "--no-warm-pool", "--profile-calls", "3"]

# Stands in for ncu: skips ncu's options, writes only a banner to --log-file, runs the program.
FAKE_NCU_NO_KERNELS = "#!/bin/sh\n" + NCU_OPTIONS + """echo "==PROF== Disconnected: no kernels were profiled" > "$log"
exec "$@"
"""
FAKE_NCU_FAILING = "#!/bin/sh\necho '==ERROR== the fake ncu refuses to run' >&2\nexit 1\n"


def _evaluate(tmp_path: Path, *extra: str):
    out = tmp_path / "out" / "traces.jsonl"
    result = CliRunner().invoke(cli, [*BASE, "-o", str(out), *extra], catch_exceptions=False)
    return result, out


def _traces(out: Path) -> list[dict]:
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_profile_torch_on_the_cpu_and_static_evidence(tmp_path):
    result, out = _evaluate(tmp_path, "--profile", "torch", "--static-evidence", "auto")
    assert result.exit_code == 0, result.output
    sidecar = ProfileSidecar.model_validate_json((out.parent / "traces.profile.torch.json").read_text())
    assert sidecar.tool == "torch" and sidecar.attempts[0].ok and sidecar.calls_per_workload == 3
    [workload] = sidecar.workloads
    assert workload.uuid == "rmsnorm-small" and workload.calls == 3 and workload.kernels
    assert workload.trace_latency_ms == pytest.approx(_traces(out)[0]["evaluation"]["performance"]["latency_ms"])
    assert all(k.name.startswith("aten::") and k.median_us > 0 for k in workload.kernels)
    assert workload.kernel_us_per_call == pytest.approx(sum(k.per_call_us for k in workload.kernels))
    assert {k.name for k in sidecar.kernels} == {k.name for k in workload.kernels}
    assert "SOL_EXECBENCH_CHILD_PROFILE" in sidecar.note
    evidence = StaticEvidenceSidecar.model_validate_json((out.parent / "traces.static-evidence.json").read_text())
    assert evidence.kernels == [] and "pytorch" in evidence.errors[0]
    assert "profile written to" in result.output and "static evidence written to" in result.output


def test_missing_and_failing_ncu_are_recorded_and_the_evaluation_stands(tmp_path, monkeypatch):
    tools = tmp_path / "bin"
    tools.mkdir()
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}/usr/bin{os.pathsep}/bin")
    result, out = _evaluate(tmp_path / "missing", "--profile", "ncu")
    assert result.exit_code == 0 and [t["evaluation"]["status"] for t in _traces(out)] == ["PASSED"]
    sidecar = ProfileSidecar.model_validate_json((out.parent / "traces.profile.ncu.json").read_text())
    assert sidecar.tool is None and not sidecar.attempts[0].ok and "ncu not found" in sidecar.attempts[0].error

    # Without -o the sidecar goes to the per-user temp folder, and the message names it.
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)
    result = CliRunner().invoke(cli, [*BASE, "--profile", "ncu", "--json"], catch_exceptions=False)
    assert result.exit_code == 0
    written = next(line for line in result.output.splitlines() if line.startswith("profile written to"))
    path = Path(written.split(" to ", 1)[1].split(" (")[0])
    assert path.parent == tmp_path / f"sol-execbench-{os.getuid()}" / "profiles" and path.name.endswith(".profile.ncu.json")
    assert "ncu not found" in ProfileSidecar.model_validate_json(path.read_text()).attempts[0].error

    write_tool(tools, "ncu", FAKE_NCU_FAILING)
    result, out = _evaluate(tmp_path / "failing", "--profile", "ncu")
    assert result.exit_code == 0 and [t["evaluation"]["status"] for t in _traces(out)] == ["PASSED"]
    sidecar = ProfileSidecar.model_validate_json((out.parent / "traces.profile.ncu.json").read_text())
    assert not sidecar.attempts[0].ok and "the fake ncu refuses to run" in sidecar.attempts[0].error
    assert "nothing recorded" in result.output


def test_ncu_recording_no_kernels_then_auto_falls_back_to_torch(tmp_path, monkeypatch):
    tools = tmp_path / "bin"
    write_tool(tools, "ncu", FAKE_NCU_NO_KERNELS)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    result, out = _evaluate(tmp_path, "--profile", "ncu")
    assert result.exit_code == 0
    sidecar = ProfileSidecar.model_validate_json((out.parent / "traces.profile.ncu.json").read_text())
    assert sidecar.attempts[0].command[0] == str(tools / "ncu")
    assert "ncu recorded no kernels" in sidecar.attempts[0].error and "no kernels were profiled" in sidecar.attempts[0].error


def test_profile_calls_must_be_positive(tmp_path):
    result = CliRunner().invoke(cli, [*BASE, "--profile", "torch", "--profile-calls", "0"])
    assert result.exit_code == 2 and "--profile-calls" in result.output
    result = CliRunner().invoke(cli, [*BASE, "--profile", "nsys"])
    assert result.exit_code == 2 and "--profile" in result.output


def test_launcher_hook_prefix_and_environment_reach_the_child(tmp_path):
    """The evaluator's own option: a prefix (here a script that records its arguments and a variable
    of the child's environment, then runs the command) and extra environment, one path for every child."""
    from sol_execbench import evaluate

    record = tmp_path / "record.txt"
    write_tool(tmp_path, "wrap", f'#!/bin/sh\necho "$HOOK_MARK $#" >> "{record}"\nexec "$@"\n')
    small = json.loads((RMSNORM / "workload.jsonl").read_text().splitlines()[0])
    traces = evaluate(RMSNORM / "definition.json", [small], RMSNORM / "solution_pytorch.json",
                      ROOT / "examples" / "cpu_config.json", device="cpu", child_prefix=[str(tmp_path / "wrap")],
                      child_env={"HOOK_MARK": "seen"}, isolation="off")
    assert [t.evaluation.status.value for t in traces] == ["PASSED"] * len(traces)
    assert record.read_text().startswith("seen ")
