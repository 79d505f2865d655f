"""Timing evidence on the CPU: ``dataset timing-evidence`` and ``dataset run --phase timing`` (one
function) with a stand-in ncu (a real script that runs the program and writes ncu's CSV shape:
a marker, a 40 us kernel and a marker per call), sharded, resumable, with coverage."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from sol_execbench.cli.main import _register, cli
from sol_execbench.schema.profiling import ProblemTimingEvidence, TimingCoverage, TimingCoverageSummary

from ..conftest import LIGHT_CONFIG
from ..problems import add_definition, solution, workloads, write_problem
from .stand_ins import NCU_OPTIONS, write_tool

_register()
HEAD = '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"'
CALLS = 2


def _csv() -> str:
    rows, k = [HEAD], 0
    for _ in range(CALLS):
        for name, ns in (("spin_kernel(long)", "1,000"), ("vector_add_kernel", "40,000"), ("spin_kernel(long)", "1,000")):
            rows.append(f'"{k}","1","python3","h","{name}","1","7","(256, 1, 1)","(4, 1, 1)","0","9.0","m",'
                        f'"gpu__time_duration.sum","nsecond","{ns}"')
            k += 1
    return "\n".join(rows)


def _fake_ncu(folder: Path, runs: Path) -> None:
    version = '[ "$1" = "--version" ] && { echo "NVIDIA (R) Nsight Compute Command Line Profiler (stand-in)"; exit 0; }\n'
    write_tool(folder, "ncu", "#!/bin/sh\n" + version + NCU_OPTIONS + f"""echo run >> "{runs}"
"$@"
code=$?
cat > "$log" <<'CSV'
==PROF== Connected to process 1
{_csv()}
CSV
exit $code
""")


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.fixture
def dataset(tmp_path: Path) -> tuple[Path, Path, Path]:
    root = tmp_path / "root"
    for name in ("a", "b"):
        write_problem(root / "L1" / name, add_definition(), workloads(8, 16), solution("def run(a, b):\n    return a + b\n"))
    config = tmp_path / "light.json"
    config.write_text(json.dumps(LIGHT_CONFIG))
    return root, tmp_path / "out", config


def test_timing_evidence_ties_latency_to_kernel_time_sharded_and_resumable(dataset, tmp_path, monkeypatch):
    root, out, config = dataset
    result = invoke("dataset", "run", str(root), "-o", str(out), "--device", "cpu", "--config", str(config))
    assert result.exit_code == 0, result.output
    runs = tmp_path / "ncu_runs.txt"
    _fake_ncu(tmp_path / "bin", runs)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    evidence_dir = tmp_path / "evidence"
    args = ["dataset", "timing-evidence", str(root), "-o", str(out), "--timing-evidence-dir", str(evidence_dir),
            "--device", "cpu", "--profiler", "ncu", "--profile-calls", str(CALLS), "--workload-sharded",
            "--mark-blocked-problem", "L1/b=the profiler hangs on this one", "--expected-problem-denominator", "3"]
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    assert runs.read_text().count("run") == 2  # one profiler run per workload
    a = ProblemTimingEvidence.model_validate_json((evidence_dir / "L1/a/timing_evidence.json").read_text())
    assert a.coverage == "full" and a.tool == "ncu" and "stand-in" in a.tool_version and len(a.workloads) == 2
    traces = {json.loads(line)["workload"]["uuid"]: json.loads(line) for line in (out / "L1/a/traces.jsonl").read_text().splitlines()}
    for w in a.workloads:
        assert w.status == "profiled" and w.profiler_kernel_ms_per_call == pytest.approx(0.040)
        assert w.reported_latency_ms == pytest.approx(traces[w.uuid]["evaluation"]["performance"]["latency_ms"])
        assert w.ratio == pytest.approx(w.reported_latency_ms / 0.040)
        assert [k.name for k in w.kernels] == ["vector_add_kernel"] and w.kernels[0].calls == CALLS
    assert sorted(p.name for p in (evidence_dir / "L1/a/workloads").iterdir()) == ["w0-8.json", "w1-16.json"]
    b = ProblemTimingEvidence.model_validate_json((evidence_dir / "L1/b/timing_evidence.json").read_text())
    assert b.coverage == "none" and b.reason == "blocked: the profiler hangs on this one"
    coverage = TimingCoverage.model_validate_json((evidence_dir / "coverage.json").read_text())
    assert [(p.problem, p.coverage, p.target_status) for p in coverage.problems] == [("L1/a", "full", "full"),
                                                                                       ("L1/b", "none", "blocked")]
    summary = TimingCoverageSummary.model_validate_json((evidence_dir / "coverage-summary.json").read_text())
    assert (summary.full, summary.none, summary.denominator, summary.complete) == (1, 1, 3, False)
    assert "| L1/a | full | 2 / 2 |" in (evidence_dir / "coverage.md").read_text()

    # Resumed: the profiled shards stand, nothing is profiled again; the gate fails the incomplete dataset.
    result = invoke(*args, "--require-profiler-complete")
    assert result.exit_code == 1 and runs.read_text().count("run") == 2
    # The runner's --phase timing is the same function: only the problems not yet full are targeted.
    result = invoke("dataset", "run", str(root), "-o", str(out), "--phase", "timing", "--timing-evidence-dir",
                    str(evidence_dir), "--device", "cpu", "--profiler", "ncu", "--profile-calls", str(CALLS),
                    "--workload-sharded", "--target-status", "blocked", "--target-status", "missing")
    assert result.exit_code == 0, result.output
    assert runs.read_text().count("run") == 4  # only L1/b's two workloads
    b = ProblemTimingEvidence.model_validate_json((evidence_dir / "L1/b/timing_evidence.json").read_text())
    assert b.coverage == "full" and "2 full, 0 partial, 0 none" in result.output


def test_phase_all_collects_evidence_after_the_traces_and_no_profiler_on_the_cpu_says_why(dataset, tmp_path):
    root, out, config = dataset
    evidence_dir = tmp_path / "evidence"
    result = invoke("dataset", "run", str(root), "-o", str(out), "--device", "cpu", "--config", str(config), "--limit", "1",
                    "--timing-evidence-dir", str(evidence_dir), "--only-problem", "L1/a", "--workload-limit", "1",
                    "--workload-offset", "1")
    assert result.exit_code == 0, result.output
    assert (out / "L1/a/traces.jsonl").is_file() and "timing evidence in" in result.output
    a = ProblemTimingEvidence.model_validate_json((evidence_dir / "L1/a/timing_evidence.json").read_text())
    assert a.coverage == "none" and a.workloads_expected == 1 and a.workloads[0].uuid == "w1-16"
    assert "needs ncu (NVIDIA) or rocprofv3 (ROCm)" in a.reason and a.tool is None


def test_timing_evidence_bad_input_exits_2(dataset, tmp_path):
    root, out, _ = dataset
    result = invoke("dataset", "timing-evidence", str(root), "-o", str(out), "--only-problem", "L9/nope")
    assert result.exit_code == 2 and "--only-problem L9/nope" in result.output
    result = invoke("dataset", "timing-evidence", str(root), "-o", str(out), "--skip-problem-file", str(tmp_path / "missing.txt"))
    assert result.exit_code == 2 and "--skip-problem-file" in result.output
    result = invoke("dataset", "run", str(root), "-o", str(out), "--phase", "traces", "--timing-evidence-dir", str(tmp_path))
    assert result.exit_code == 2 and "--timing-evidence-dir goes with --phase all" in result.output
