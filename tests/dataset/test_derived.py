"""The dataset runner's derived outputs: the score report, the priced bounds and the derivation
sidecars keyed by problem path, from a real CPU run (``--phase all``) and from an output folder's
traces alone (``--phase derived``); the inputs they refuse."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from sol_execbench.cli.main import _register, cli
from sol_execbench.platform.peaks import peaks_for
from sol_execbench.schema.bound import ProblemBound, ProblemDerivation
from sol_execbench.schema.scores import ScoreReport
from sol_execbench.schema.trace_files import read_traces
from sol_execbench.scoring.score import sol_score

from ..scoring.crafted import trace, write_traces
from .conftest import ROOT, add_problem, run_to_end
from .test_bad_inputs import _one_error_line

_register()
CPU_CONFIG = ROOT / "examples" / "cpu_config.json"
WRONG = "def run(a, b):\n    return a - b\n"
RIGHT = "def run(a, b):\n    return a + b\n"


def test_a_cpu_run_writes_scores_bounds_and_derivations_keyed_by_problem_path(tmp_path: Path):
    root = tmp_path / "suite"
    (add_problem(root, "L1/add", sizes=(8, 16)) / "solution.py").write_text(RIGHT)
    (add_problem(root, "L2/add", sizes=(8,)) / "solution.py").write_text(WRONG)  # same definition name
    add_problem(root, "L2/unsolved", sizes=(8,))  # no solution.py: skipped, scores 0
    out = tmp_path / "out"
    report_path, bounds, derivations = tmp_path / "score.json", tmp_path / "bounds", tmp_path / "derivation"
    done = run_to_end(tmp_path, root, out, CPU_CONFIG, "--solution-name", "solution.py", "--amd-score-report",
                      str(report_path), "--hardware", "MI300X", "--amd-sol-bound-dir", str(bounds),
                      "--solar-derivation", str(derivations))
    assert done.returncode == 1, done.stderr + done.stdout  # L2/add is INCORRECT_NUMERICAL
    assert "SOL scores on AMD Instinct MI300X" in done.stdout
    report = ScoreReport.model_validate_json(report_path.read_text())
    mi300x = peaks_for("MI300X")
    assert report.hardware.name == "MI300X" and report.baseline.kind == "reference"
    by = {p.problem: p for p in report.problems}
    assert set(by) == {"L1/add", "L2/add", "L2/unsolved"}
    for key, n in (("L1/add", 16), ("L2/add", 8)):
        derivation = ProblemDerivation.model_validate_json((derivations / key / "derivation.json").read_text())
        (w,) = [w for w in derivation.workloads if w.axes["N"] == n]
        assert w.bytes_moved == 3 * n * 4 and w.total_flops == n  # a, b read, c written; one add per element
        bound = ProblemBound.model_validate_json((bounds / key / "bound.json").read_text())
        assert bound.problem == key and bound.hardware.name == "MI300X"
        assert {b.uuid: b.t_sol_s for b in bound.workloads}[w.uuid] == pytest.approx(3 * n * 4 / mi300x.memory_bandwidth)
    for t in read_traces(out / "L1/add" / "traces.jsonl"):
        (row,) = [w for w in by["L1/add"].workloads if w.uuid == t.workload.uuid]
        performance = t.evaluation.performance
        assert row.sol_score == pytest.approx(sol_score(performance.latency_ms, performance.reference_latency_ms,
                                                        row.t_sol_ms))
    assert [w.sol_score for w in by["L2/add"].workloads] == [0.0] and by["L2/add"].statuses == {"INCORRECT_NUMERICAL": 1}
    assert by["L2/unsolved"].sol_score == 0.0 and by["L2/unsolved"].note.startswith("no traces")
    assert report.totals.sol_score == pytest.approx(sum(p.sol_score for p in report.problems) / 3)
    # a CPU reference is far slower than an MI300X's bound: every timed workload is flagged
    assert {(f.problem, f.kind) for f in report.flags} == {("L1/add", "bound_far_from_reference")}


def _crafted_output(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "suite"
    add_problem(root, "L1/add", sizes=(8, 16))
    add_problem(root, "L2/add", sizes=(8,))
    out = tmp_path / "out"
    write_traces(out / "L1/add/traces.jsonl", [trace("vector_add", "w0-8", latency_ms=2.0, reference_ms=3.0),
                                               trace("vector_add", "w1-16", latency_ms=1.0, reference_ms=3.0)])
    write_traces(out / "L2/add/traces.json", [trace("vector_add", "w0-8", status="RUNTIME_ERROR")])
    return root, out


def _derived(root: Path, out: Path, *flags: str):
    return CliRunner().invoke(cli, ["dataset", "run", str(root), "-o", str(out), "--phase", "derived", *flags])


def test_phase_derived_scores_existing_traces_against_a_baseline_file(tmp_path: Path):
    root, out = _crafted_output(tmp_path)
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps({"description": "crafted", "latency_ms": {"L1/add": {"w0-8": 4.0}}}))
    report_path = tmp_path / "score.json"
    done = _derived(root, out, "--amd-score-report", str(report_path), "--scoring-baseline", str(baseline))
    assert done.exit_code == 0, done.output
    assert not (out / "summary.json").exists()  # nothing was evaluated
    report = ScoreReport.model_validate_json(report_path.read_text())
    assert report.hardware.name == "H100" and report.hardware.resolved_from == "NVIDIA H100 80GB HBM3"  # from the traces
    assert report.baseline.kind == "file" and report.baseline.description == "crafted"
    w8, w16 = report.problems[0].workloads
    assert w8.baseline_ms == 4.0 and w8.sol_score == pytest.approx(sol_score(2.0, 4.0, w8.t_sol_ms))
    assert w16.sol_score is None and [(f.workload, f.kind) for f in report.flags if f.kind == "no_baseline_time"] \
        == [("w1-16", "no_baseline_time")]
    assert report.problems[1].problem == "L2/add" and report.problems[1].sol_score == 0.0


def test_derived_inputs_it_refuses(tmp_path: Path):
    root, out = _crafted_output(tmp_path)
    report = str(tmp_path / "r.json")
    _one_error_line(_derived(root, out), "--phase derived", "--amd-score-report")
    _one_error_line(_derived(root, tmp_path / "empty", "--amd-score-report", report), "no traces")
    _one_error_line(_derived(root, out, "--amd-sol-bound-dir", str(tmp_path / "b"), "--solar-derivation",
                             str(tmp_path / "d")), "--amd-sol-bound-dir", "--amd-score-report")
    _one_error_line(_derived(root, out, "--amd-score-report", report, "--hardware", "Radeon 7900"),
                    "--hardware", "known parts")
    _one_error_line(_derived(root, out, "--amd-score-report", report, "--scoring-baseline", str(tmp_path / "none")),
                    "--scoring-baseline", "no such file")
    negative = tmp_path / "negative.json"
    negative.write_text(json.dumps({"latency_ms": {"L1/add": {"w0-8": -1}}}))
    _one_error_line(_derived(root, out, "--amd-score-report", report, "--scoring-baseline", str(negative)),
                    str(negative), "latency_ms.L1/add.w0-8")
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps({"latency_ms": {"L9/add": {"w0-8": 1.0}}}))
    _one_error_line(_derived(root, out, "--amd-score-report", report, "--scoring-baseline", str(elsewhere)),
                    "latency_ms.L9/add", "problem path")
    write_traces(out / "L1/add/traces.jsonl", [trace("vector_add", "w0-8", hardware="Intel Xeon")])
    write_traces(out / "L2/add/traces.json", [trace("vector_add", "w0-8", hardware="cpu", vendor="cpu")])
    _one_error_line(_derived(root, out, "--amd-score-report", report), "--hardware", "Intel Xeon")
    _one_error_line(CliRunner().invoke(cli, ["dataset", "run", str(root), "-o", str(out), "--phase", "traces",
                                             "--solar-derivation", str(tmp_path / "d")]), "--phase traces")
    assert not Path(report).exists()
