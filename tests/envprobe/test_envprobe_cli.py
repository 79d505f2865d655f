"""The CLI: env probe / env diff output and exit codes, and the --json-only diagnostics."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from sol_execbench.cli.main import _register, cli
from sol_execbench.envprobe import snapshot as snapshot_module


@pytest.fixture
def run():
    _register()  # every command, as the entry point sees them
    runner = CliRunner()

    def invoke(*args: str):
        return runner.invoke(cli, list(args), catch_exceptions=False)

    return invoke


@pytest.fixture
def probe_calls():
    """The arguments ``fast_probe``'s stand-in for ``collect`` was called with."""
    return []


@pytest.fixture
def fast_probe(monkeypatch, snapshot_copy, probe_calls):
    """``env probe`` answers from the session snapshot instead of probing again."""

    def collect(extended=False, use_cache=True):
        probe_calls.append({"extended": extended, "use_cache": use_cache})
        return {**snapshot_copy, "extended": extended}

    monkeypatch.setattr(snapshot_module, "collect", collect)
    return snapshot_copy


def test_probe_json_only(run, fast_probe):
    result = run("env", "probe", "--json")
    assert result.exit_code == 0
    assert json.loads(result.output)["schema_version"] == snapshot_module.SCHEMA_VERSION


def test_probe_summary_ends_with_status_and_lists_reasons(run, fast_probe):
    result = run("env", "probe")
    assert result.exit_code == 0
    lines = [line for line in result.output.splitlines() if line.strip()]
    count = len(fast_probe["partial_reasons"])
    assert lines[-1] == (f"[PARTIAL, {count} reason(s)]" if count else "[OK]")
    for label in ("Host", "PyTorch", "Accelerator", "NVIDIA", "ROCm", "Packages"):
        assert any(line.startswith(label) for line in lines), label
    for reason in fast_probe["partial_reasons"]:
        assert reason[:40] in result.output
    assert '"schema_version"' not in result.output


def test_probe_ok_marker(run, monkeypatch, snapshot_copy):
    monkeypatch.setattr(snapshot_module, "collect", lambda **_: {**snapshot_copy, "partial_reasons": [], "partial": False})
    assert run("env", "probe").output.rstrip().endswith("[OK]")


def test_probe_verbose_and_output_file(run, fast_probe, tmp_path):
    target = tmp_path / "sub" / "env.json"
    result = run("env", "probe", "-v", "-o", str(target))
    assert result.exit_code == 0 and '"schema_version"' in result.output
    assert json.loads(target.read_text())["timestamp"] == fast_probe["timestamp"]
    assert f"Wrote {target}" in result.output


def test_probe_extended_flag_reaches_collect(run, fast_probe):
    assert json.loads(run("env", "probe", "--json", "--extended").output)["extended"] is True


def test_probe_no_cache_flag_reaches_collect(run, fast_probe, probe_calls):
    assert run("env", "probe", "--json").exit_code == 0
    assert run("env", "probe", "--json", "--no-cache").exit_code == 0
    assert [call["use_cache"] for call in probe_calls] == [True, False]


def test_real_probe_through_the_cli(run, tmp_path):
    result = run("env", "probe", "--json", "-o", str(tmp_path / "env.json"))
    assert result.exit_code == 0 and json.loads(result.output) == json.loads((tmp_path / "env.json").read_text())


def _write(path, snap):
    path.write_text(json.dumps(snap))
    return str(path)


def test_diff_exit_codes(run, snapshot_copy, tmp_path):
    a = _write(tmp_path / "a.json", snapshot_copy)
    later = {**snapshot_copy, "timestamp": "2030-01-01T00:00:00+00:00"}
    b = _write(tmp_path / "b.json", later)
    same = run("env", "diff", a, b)
    assert same.exit_code == 0 and "[volatile]" in same.output and "same environment" in same.output
    changed = json.loads(json.dumps(later))
    changed["pytorch_build"]["version"] = "9.9.9"
    c = _write(tmp_path / "c.json", changed)
    different = run("env", "diff", a, c)
    assert different.exit_code == 1 and "pytorch_build.version" in different.output
    as_json = run("env", "diff", a, c, "--json")
    assert as_json.exit_code == 1 and json.loads(as_json.output)["differs"] is True


def test_diff_rejects_files_that_are_not_snapshots(run, tmp_path, snapshot_copy):
    good = _write(tmp_path / "good.json", snapshot_copy)
    (tmp_path / "bad.json").write_text("{not json")
    result = run("env", "diff", good, str(tmp_path / "bad.json"))
    assert result.exit_code == 2 and "bad.json" in result.output and "not JSON" in result.output
    (tmp_path / "other.json").write_text("[1, 2]")
    result = run("env", "diff", str(tmp_path / "other.json"), good)
    assert result.exit_code == 2 and "not an environment snapshot" in result.output
    assert run("env", "diff", good, str(tmp_path / "missing.json")).exit_code == 2


@pytest.mark.parametrize("command", ["contract", "doctor", "toolchain"])
def test_diagnostics_refuse_without_json(run, command):
    result = run(command)
    assert result.exit_code == 2
    assert "--json" in result.output and f"sol-execbench {command} --json" in result.output


def test_contract_json(run):
    result = run("contract", "--json")
    assert result.exit_code == 0
    doc = json.loads(result.output)
    assert set(doc["formats"]) == {"definition", "workload", "solution", "trace", "benchmark_config", "migration_manifest",
                                   "bound", "calibration", "dataset_run_record", "dataset_summary", "timeout_overrides",
                                   "ready_subset", "readiness", "execution_closure", "docker_target_manifest",
                                   "docker_preflight", "compatibility_entry", "compatibility_matrix", "solar_derivation",
                                   "score_report", "scoring_baseline", "baseline_comparison", "bench_allreduce",
                                   "bench_gemm_sweep", "bench_baseline", "bench_fast_p", "bench_hardware_comparison",
                                   "profile", "static_evidence", "timing_evidence", "timing_evidence_workload",
                                   "timing_coverage", "timing_coverage_summary", "timing_rounds",
                                   "worker_status"}
    # objects with named fields, or a mapping of names to objects (a baseline file: level -> problem -> entry)
    assert all("properties" in schema or "additionalProperties" in schema for schema in doc["formats"].values())
    names = {c["name"] for c in doc["cli_commands"]}
    assert {"env", "env probe", "env diff", "contract", "doctor", "toolchain", "dataset run", "docker preflight", "docker run",
            "docker compat", "bench allreduce", "dataset timing-evidence"} <= names
    toolchain = next(c for c in doc["cli_commands"] if c["name"] == "toolchain")
    assert "--list-registry" in {flag for p in toolchain["params"] for flag in p["flags"]}
    (baseline,) = doc["console_scripts"]
    assert baseline["name"] == "sol-execbench-baseline"
    assert {"--candidate", "--baseline", "--win-pct", "--amd-native-claim"} <= {f for p in baseline["params"] for f in p["flags"]}


def test_contract_does_not_import_torch():
    code = ("import sys; from click.testing import CliRunner; from sol_execbench.cli.main import _register, cli; _register(); "
            "r = CliRunner().invoke(cli, ['contract', '--json']); assert r.exit_code == 0, r.output; print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "False"


def test_toolchain_list_registry_and_filters(run):
    every = json.loads(run("toolchain", "--json", "--list-registry").output)
    assert every["mode"] == "registry" and len(every["artifacts"]) > 30
    compilers = json.loads(run("toolchain", "--json", "--list-registry", "--artifact-type", "compiler").output)
    assert compilers["artifacts"] and {a["artifact_type"] for a in compilers["artifacts"]} == {"compiler"}
    cdna3 = json.loads(run("toolchain", "--json", "--list-registry", "--hardware-generation", "cdna3").output)
    assert "hipblaslt" in {a["id"] for a in cdna3["artifacts"]} and "nvcc" not in {a["id"] for a in cdna3["artifacts"]}


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--gpu-arch", "h100"], "not a GPU architecture"),
        (["--rocm-version", "latest"], "not a version"),
        (["--hardware-generation", "Kepler2"], "choose from"),
        (["--artifact-type", "teapot"], "choose from"),
        (["--evidence-level", "rumoured"], "rumoured"),
    ],
)
def test_toolchain_bad_filters_are_usage_errors(run, args, needle):
    result = run("toolchain", "--json", "--list-registry", *args)
    assert result.exit_code == 2 and needle in result.output


def test_doctor_json(run):
    result = run("doctor", "--json")
    doc = json.loads(result.output)
    assert result.exit_code == (1 if doc["status"] == "fail" else 0)
    assert {c["status"] for c in doc["checks"]} <= {"ok", "warn", "fail"}
    assert {"torch", "gpu_visible", "clock_state"} <= {c["name"] for c in doc["checks"]}
