"""``sol-execbench-baseline`` on crafted traces, as its own process: every class, the totals and the
geometric mean, intervals that span a threshold, the AMD-native claim, and the inputs it refuses."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from sol_execbench.cli.baseline_cmd import baseline_command
from sol_execbench.scoring.comparison import Thresholds, classify

from .crafted import trace, write_traces

ROOT = Path(__file__).resolve().parents[2]
# T_b, T_c (ms) of each workload, and its class at the default thresholds (win 2 %, parity 5 %)
CASES = {"w-win": (1.0, 0.9, "win"), "w-parity": (1.0, 1.03, "parity"), "w-loss": (1.0, 1.1, "loss"),
         "w-span": (1.0, 0.99, "parity")}
BASELINE_TOOL = [sys.executable, "-c",
                 "import sys\nfrom sol_execbench.cli.baseline_cmd import main\ntry:\n    main()\n"
                 "finally:\n    print('torch imported' if 'torch' in sys.modules else 'no torch', file=sys.stderr)"]


def _runs(tmp_path: Path, vendor: str = "cuda") -> tuple[Path, Path]:
    """A baseline run directory in upstream's shape (traces.json) and a candidate one in ours."""
    hardware = "AMD Instinct MI300X" if vendor == "rocm" else "NVIDIA H100 80GB HBM3"
    base = [trace("a", uuid, latency_ms=t_b, reference_ms=t_b) for uuid, (t_b, _, _) in CASES.items()]
    base += [trace("a", "w-failed"), trace("a", "w-missing"), trace("a", "w-base-failed", status="RUNTIME_ERROR")]
    cand = [trace("a", uuid, latency_ms=t_c, reference_ms=t_b, vendor=vendor, hardware=hardware,
                  interval=(0.98, 1.04) if uuid == "w-span" else None) for uuid, (t_b, t_c, _) in CASES.items()]
    cand += [trace("a", "w-failed", status="INCORRECT_NUMERICAL", vendor=vendor, hardware=hardware),
             trace("a", "w-base-failed", vendor=vendor, hardware=hardware), trace("a", "w-extra")]
    baseline = tmp_path / "baseline"
    write_traces(baseline / "L1" / "a" / "traces.json", base)
    candidate = tmp_path / "candidate"
    write_traces(candidate / "L1" / "a" / "traces.jsonl", cand)
    return candidate, baseline


def _tool(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run([*BASELINE_TOOL, *args], capture_output=True, text=True, env=env, timeout=60, cwd=tmp_path)


def test_every_class_totals_and_geomean_in_json_without_torch(tmp_path: Path):
    candidate, baseline = _runs(tmp_path)
    out = tmp_path / "cmp.json"
    done = _tool(tmp_path, "--candidate", str(candidate), "--baseline", str(baseline), "--format", "json",
                 "--output", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().endswith("no torch")
    report = json.loads(out.read_text())
    (section,) = report["sections"]
    rows = {r["workload"]: r for r in section["workloads"]}
    assert {r["problem"] for r in rows.values()} == {"L1/a"}
    for uuid, (t_b, t_c, expected) in CASES.items():
        assert rows[uuid]["classification"] == expected, uuid
        assert rows[uuid]["pct"] == pytest.approx(100 * (t_b - t_c) / t_b)
    assert rows["w-failed"]["classification"] == "failed"
    assert rows["w-missing"]["classification"] == "missing"
    assert rows["w-base-failed"]["classification"] == "baseline_failed"
    assert rows["w-span"]["spans_threshold"] == "win" and rows["w-span"]["pct_low"] < 2.0 <= rows["w-span"]["pct_high"]
    assert rows["w-win"]["spans_threshold"] is None and rows["w-win"]["pct_low"] is None
    totals = section["totals"]
    assert totals["counts"] == {"win": 1, "parity": 2, "loss": 1, "failed": 1, "missing": 1, "baseline_failed": 1}
    assert totals["candidate_only"] == 1 and totals["unsettled"] == 1 and totals["both_passed"] == len(CASES)
    expected_geomean = math.exp(sum(math.log(t_b / t_c) for t_b, t_c, _ in CASES.values()) / len(CASES))
    assert totals["speedup_geomean"] == pytest.approx(expected_geomean)
    assert report["totals"]["counts"] == totals["counts"] and not report["warnings"]


def test_text_has_a_section_per_baseline_and_the_claim_warns_off_amd(tmp_path: Path):
    candidate, baseline = _runs(tmp_path)
    flat = write_traces(tmp_path / "flat.jsonl", [trace("a", "w-win", latency_ms=2.0)])
    done = _tool(tmp_path, "--candidate", str(candidate), "--baseline", str(baseline), "--baseline", str(flat),
                 "--amd-native-claim")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("baseline: ") == 2 and "all baselines:" in done.stdout
    assert "AMD-native claim" in done.stdout and "not made on an AMD GPU" in done.stdout
    assert "no workload in common" in done.stdout  # a flat file against a run directory
    assert "spans the win threshold" in done.stdout
    amd_candidate, amd_baseline = _runs(tmp_path / "amd", vendor="rocm")
    done = _tool(tmp_path, "--candidate", str(amd_candidate), "--baseline", str(amd_baseline), "--amd-native-claim",
                 "--format", "json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    # w-extra has no device record and an NVIDIA hardware string: the one trace warned about
    assert report["amd_native_claim"] and len(report["warnings"]) == 1 and "1 of 7" in report["warnings"][0]


@pytest.mark.parametrize("pct, expected", [(2.0, "win"), (1.999, "parity"), (-5.0, "parity"), (-5.001, "loss")])
def test_thresholds_are_inclusive_where_the_rule_says(pct: float, expected: str):
    assert classify(pct, Thresholds()) == expected


def test_bad_inputs_exit_2_with_one_line(tmp_path: Path):
    twice = write_traces(tmp_path / "twice.jsonl", [trace("a", "w1"), trace("a", "w1"), trace("b", "w2")])
    good = write_traces(tmp_path / "good.jsonl", [trace("a", "w1")])
    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps(trace("a", "w1")) + "\n{not json\n")
    shapeless = write_traces(tmp_path / "shapeless.jsonl", [{"definition": "a"}])
    cases = [(["--candidate", str(twice), "--baseline", str(good)], ["twice.jsonl", "duplicate", "a/w1"]),
             (["--candidate", str(good), "--baseline", str(broken)], ["broken.jsonl", "line 2", "not JSON"]),
             (["--candidate", str(good), "--baseline", str(shapeless)], ["shapeless.jsonl", "line 1", "workload"]),
             (["--candidate", str(tmp_path / "none"), "--baseline", str(good)], ["none", "no such file"]),
             (["--candidate", str(tmp_path), "--baseline", str(good), "--parity-pct", "-1"], ["--parity-pct"]),
             (["--candidate", str(good), "--baseline", str(good), "--win-pct", "-9"], ["--win-pct"]),
             (["--candidate", str(tmp_path / "empty"), "--baseline", str(good)], ["no traces.jsonl"])]
    (tmp_path / "empty").mkdir()
    for args, words in cases:
        done = CliRunner().invoke(baseline_command, args)
        lines = done.stderr.splitlines()
        assert done.exit_code == 2 and len(lines) == 1 and isinstance(done.exception, SystemExit), (args, done.output)
        assert all(word in lines[0] for word in words), (words, lines[0])


@pytest.mark.parametrize("hardware, vendor, amd", [("AMD Instinct MI300X", None, True), ("AMD Radeon PRO W7900", None, True),
                                                   ("AMD EPYC 7763 64-Core Processor", None, False),
                                                   ("AMD EPYC 7763 64-Core Processor", "rocm", True),
                                                   ("AMD Instinct MI300X", "cuda", False)])
def test_the_device_vendor_decides_else_the_hardware_string(hardware: str, vendor: str | None, amd: bool):
    from sol_execbench.schema import Trace
    from sol_execbench.scoring.comparison import made_on_amd

    assert made_on_amd(Trace.model_validate(trace("a", "w", hardware=hardware, vendor=vendor))) is amd


def test_sol_execbench_baseline_is_the_same_command(tmp_path: Path):
    candidate, baseline = _runs(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    args = ["--candidate", str(candidate), "--baseline", str(baseline), "--format", "json"]
    sub = subprocess.run([sys.executable, "-c", "from sol_execbench.cli.main import main; main()", "baseline", *args],
                         capture_output=True, text=True, env=env, timeout=60, cwd=tmp_path)
    assert sub.returncode == 0, sub.stderr
    assert json.loads(sub.stdout) == json.loads(_tool(tmp_path, *args).stdout)
