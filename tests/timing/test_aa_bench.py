"""benchmarks/aa.py's judgement of one workload's runs (the targets docs/validation.md reports)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import aa  # noqa: E402


def _run(speedup, latency_ms, host_bound, low=0.98, high=1.02, reference_ms=None):
    return {"status": "PASSED", "speedup": speedup, "latency_ms": latency_ms, "host_bound": host_bound,
            "low": low, "high": high, "reference_ms": reference_ms}


def test_a_device_set_workload_is_judged_by_its_latency_across_runs():
    steady = aa.judge([_run(1.0, 0.100, False), _run(1.01, 0.102, False), _run(0.99, 0.101, False)])
    assert steady["setter"] == "dev" and steady["ok"] and steady["covered"] == 3
    drifting = aa.judge([_run(1.0, 0.100, False), _run(1.0, 0.110, False), _run(1.0, 0.100, False)])
    assert drifting["setter"] == "dev" and not drifting["ok"]
    assert "shared_level" not in steady


def test_a_device_set_miss_says_whether_both_sides_moved_together():
    # a process level both sides met: the reference moved by the same 5%, the speedup held
    level = aa.judge([_run(1.0, 0.0250, False, reference_ms=0.0251), _run(1.0, 0.0263, False, reference_ms=0.0264),
                      _run(1.01, 0.0251, False, reference_ms=0.0253)])
    assert not level["ok"] and level["shared_level"]
    assert abs(level["reference_spread"] - 0.0513) < 1e-3 and level["speedup_spread"] < 0.011
    # the solution alone moved: the speedup moved with it
    alone = aa.judge([_run(1.0, 0.0250, False, reference_ms=0.0250), _run(0.95, 0.0263, False, reference_ms=0.0250),
                      _run(1.0, 0.0250, False, reference_ms=0.0250)])
    assert not alone["ok"] and not alone["shared_level"] and alone["reference_spread"] == 0.0
    # no reference timing in a run: nothing to tell
    unknown = aa.judge([_run(1.0, 0.0250, False), _run(1.0, 0.0263, False, reference_ms=0.0264),
                        _run(1.0, 0.0251, False, reference_ms=0.0252)])
    assert not unknown["shared_level"] and "reference_spread" not in unknown


def test_a_workload_the_host_set_in_any_run_is_judged_by_its_speedup():
    # the latency follows the process's absolute host time (twice the device time in one run)
    mixed = aa.judge([_run(1.0, 0.030, False), _run(1.01, 0.060, True), _run(0.99, 0.031, False)])
    assert mixed["setter"] == "mixed" and mixed["ok"]
    spread = aa.judge([_run(0.96, 0.2, True), _run(1.03, 0.3, True), _run(1.0, 0.25, True)])
    assert spread["setter"] == "host" and not spread["ok"]  # 7% apart across runs


def test_a_speedup_out_of_band_or_a_failed_run_misses():
    assert not aa.judge([_run(0.94, 0.1, False), _run(1.0, 0.1, False)])["ok"]
    failed = {"status": "RUNTIME_ERROR", "speedup": None, "latency_ms": None, "host_bound": None, "low": None,
              "high": None}
    assert aa.judge([_run(1.0, 0.1, False), failed])["why"] == "not PASSED in every run"


def test_a_row_keeps_the_trace_s_facts_and_warnings():
    trace = {"workload": {"uuid": "w1"},
             "evaluation": {"status": "PASSED", "warnings": ["2 other process(es) used the GPU"],
                            "environment": {"hardware": "H100", "launch_level_us": 1.97},
                            "performance": {"speedup_factor": 1.01, "latency_ms": 0.02,
                                            "speedup_interval": {"low": 0.98, "high": 1.04, "verdict": "parity"},
                                            "solution_timing": {"method": "device", "host_bound": False}}}}
    row, uuid = aa._row(trace)
    assert uuid == "w1" and row["speedup"] == 1.01 and row["low"] == 0.98 and row["verdict"] == "parity"
    assert row["warnings"] == ["2 other process(es) used the GPU"] and row["launch_level_us"] == 1.97
    bare = aa._row({"workload": {"uuid": "w2"}, "evaluation": {"status": "PASSED"}})[0]
    assert bare["warnings"] == [] and bare["launch_level_us"] is None


def test_a_row_keeps_the_log_of_a_run_that_did_not_pass_only():
    hack = {"workload": {"uuid": "w3"}, "evaluation": {"status": "REWARD_HACK", "log": "why " * 1000}}
    assert aa._row(hack)[0]["log"] == ("why " * 1000)[:aa.LOG_CHARS]
    passed = {"workload": {"uuid": "w4"}, "evaluation": {"status": "PASSED", "log": "reference note"}}
    assert aa._row(passed)[0]["log"] == ""


def test_the_processes_launch_levels_are_summarised():
    found = aa.process_levels([2.0, 2.1, 1.96])
    assert found["spread"] == 2.1 / 1.96 - 1
    assert "3 evaluation processes: 1.960 to 2.100 us (median 2.000, spread 7.1%)" in found["line"]
    assert aa.process_levels([]) is None  # a CPU run: no level


def test_the_report_summarises_every_evaluation_process_beside_a_miss_s_own_levels(tmp_path, capsys):
    # a shared-level miss prints its own runs' levels; the summary still counts all six processes
    def row(latency_ms, level, others=()):
        return dict(_run(1.0, latency_ms, False, reference_ms=latency_ms), launch_level_us=level, warnings=[],
                    other_processes=list(others))

    found = aa.Collected(runs=3, warm=True, per_workload={
        "p/moved": [row(0.0250, 2.13, [1337]), row(0.0263, 1.96), row(0.0251, 1.97)],
        "q/steady": [row(0.100, 1.95), row(0.100, 1.99), row(0.100, 2.00)]},
        levels=[2.13, 1.95, 1.96, 1.99, 1.97, 2.00],
        pool={"takes": 6, "take_wait_s": 2.5, "take_wait_max_s": 1.5, "ending_wait_s": 0.1, "turned_away": 5})
    assert aa.report(tmp_path / "aa.json", found, began=0.0) == 1
    out = capsys.readouterr().out
    assert "the processes' launch levels 2.130 1.960 1.970 us" in out
    assert "launch levels of the 6 evaluation processes: 1.950 to 2.130 us" in out
    assert "handed out 6 process(es); evaluations waited 2.5 s in all for a ready one" in out and "turned away 5 process(es)" in out
    written = json.loads((tmp_path / "aa.json").read_text())
    assert len(written["processes"]["launch_levels_us"]) == 6 and not written["all_targets_met"]
    assert written["pool"]["take_wait_s"] == 2.5
    assert "another process on the GPU around their timed calls: 1 of 6" in out and written["runs_beside_other_processes"] == 1
    assert "device-set latencies across runs (2 workloads): median spread" in out and "1 missed" in out
    assert written["spreads"]["dev"]["workloads"] == 2 and written["spreads"]["dev"]["missed"] == 1
    assert written["spreads"]["dev"]["largest"] == pytest.approx(0.0013 / 0.0251)
    assert written["verdicts"]["q/steady"]["ok"] and not written["verdicts"]["p/moved"]["ok"]


def test_the_pool_s_waits_and_rejections_are_said_and_nothing_without_a_pool(monkeypatch, tmp_path):
    line = aa.pool_line({"takes": 51, "take_wait_s": 40.04, "take_wait_max_s": 3.26, "ending_wait_s": 1.23,
                         "turned_away": 99})
    assert line == ("the warm pool handed out 51 process(es); evaluations waited 40.0 s in all for a ready one "
                    "(longest 3.3 s) and 1.2 s for the last one to end; it turned away 99 process(es) for their "
                    "launch level")
    assert aa.pool_line(None) is None and aa.pool_line({"takes": None}) is None  # no pool, or an older one
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))  # no pool answers here
    assert aa.pool_counts() is None


def test_a_warm_run_uses_a_pool_of_its_environment_and_refuses_one_of_another(monkeypatch):
    """aa.py --warm would otherwise time fresh processes: a pool hands its processes only to
    evaluations whose start-up variables (PYTHONPATH among them) match its own."""
    from tests.conftest import _warm_pool

    monkeypatch.setenv("PYTHONPATH", str(aa.REPO / "src"))
    pool = _warm_pool(monkeypatch, None)
    next(pool)
    try:
        assert aa.own_warm_pool() is False  # the evaluations' environment is the pool's: used, not started
        monkeypatch.setenv("PYTHONPATH", "/elsewhere")
        with pytest.raises(aa.PoolMismatch, match="another start-up environment"):
            aa.own_warm_pool()
    finally:
        next(pool, None)
