"""benchmarks/aa_replay.py: the stopping rule replayed on recorded rounds (files as an A/A run writes them)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import aa_replay  # noqa: E402
from sol_execbench.schema import SideRounds, SpeedupInterval, TimingRounds  # noqa: E402

Setting = aa_replay.Setting

ROUNDS = 50


def _side(name: str, device_ms: float, host_ms: list[float]) -> SideRounds:
    return SideRounds(name=name, instrument="device", device_ms=[device_ms] * ROUNDS, host_ms=host_ms,
                      device_call_indices=list(range(ROUNDS)),
                      host_call_indices=list(range(ROUNDS, ROUNDS + len(host_ms))),  # the host pass follows
                      sync_floor_ms=0.005, launch_allowance_ms=0.1, latency_ms=device_ms)


def _write(folder: Path, workload: str, pid: int, device_ms: float, reference: list[float], solution: list[float]):
    record = TimingRounds(definition="aa", workload=workload,
                          sides=[_side("reference", device_ms, reference), _side("solution", device_ms, solution)],
                          speedup=1.0, speedup_interval=SpeedupInterval(low=0.99, high=1.01, verdict="parity",
                                                                        rounds=len(reference)))
    (folder / f"aa__{workload}__{pid}.json").write_text(record.model_dump_json())


def test_a_looser_precision_stops_host_set_workloads_sooner_and_leaves_device_set_ones_alone(tmp_path):
    rng = np.random.default_rng(7)
    for pid in (1, 2, 3):
        # host-set: 150 us of host time (50 us of latency), spans spread 20%, 600 rounds recorded
        _write(tmp_path, "eager", pid, 0.03, list(0.15 + 0.03 * rng.standard_normal(600)),
               list(0.15 + 0.03 * rng.standard_normal(600)))
        # device-set: 80 us of host time cannot set a 50 us device time
        _write(tmp_path, "gemm", pid, 0.05, list(0.08 + 0.01 * rng.standard_normal(ROUNDS)),
               list(0.08 + 0.01 * rng.standard_normal(ROUNDS)))
    runs = aa_replay.load(tmp_path)
    assert sorted(runs) == ["aa/eager", "aa/gemm"] and all(len(r) == 3 for r in runs.values())
    tight, loose = aa_replay.evaluate(runs, Setting(0.0125, 12)), aa_replay.evaluate(runs, Setting(0.05, 12))
    gemm = [aa_replay.replay(r, Setting(0.0125, 12))["host_rounds"] for r in runs["aa/gemm"]]
    assert gemm == [2 * ROUNDS] * 3  # no added rounds where the host cannot set the latency
    assert [aa_replay.replay(r, Setting(0.0125, 12))["host_rounds"] for r in runs["aa/eager"]] == [2 * 600] * 3  # all recorded
    assert tight["host_rounds"] > loose["host_rounds"] >= 6 * 2 * ROUNDS
    assert aa_replay.evaluate(runs, Setting(0.0125, 4))["host_rounds"] == 3 * 2 * 4 * ROUNDS + 3 * 2 * ROUNDS  # the factor caps
    assert tight["workloads"] == 2 and tight["workload_runs"] == 6


def test_the_command_prints_a_row_per_setting_and_writes_json(tmp_path, capsys):
    rng = np.random.default_rng(8)
    folder = tmp_path / "rounds"
    folder.mkdir()
    for pid in (1, 2):
        _write(folder, "eager", pid, 0.03, list(0.15 + 0.03 * rng.standard_normal(300)),
               list(0.15 + 0.03 * rng.standard_normal(300)))
    out = tmp_path / "replay.json"
    assert aa_replay.main([str(folder), "--precision", "0.0125,0.03", "--factor", "12", "--lone-precision", "0.025,0.05",
                           "--device-share", "0.6", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "0.0125" in printed and "0.0300" in printed and "0.0500" in printed
    results = json.loads(out.read_text())["results"]
    assert [(r["precision"], r["factor"], r["lone_precision"]) for r in results] == [
        (0.0125, 12, 0.025), (0.0125, 12, 0.05), (0.03, 12, 0.025), (0.03, 12, 0.05)]
    assert {r["device_share"] for r in results} == {0.6}
    assert all(0 < r["interval_width_median"] <= r["interval_width_p90"] and 0 <= r["rerun_coverage"] <= 1
               for r in results)
    assert aa_replay.main([str(folder), "--only", "no-such-workload"]) == 2
    assert aa_replay.main([str(tmp_path / "empty")]) == 2


def test_a_host_set_side_beside_a_partner_far_below_gets_no_added_rounds(tmp_path):
    """A device-set reference (its host time well below its device time) and a noisy host-set
    solution, 600 rounds recorded for both: the replay adds no rounds, at any precision; with a
    reference whose host time is near its device time, both sides get them until the lone
    precision is met."""
    rng = np.random.default_rng(9)
    _write(tmp_path, "mixed", 1, 0.05, list(0.11 + 0.005 * rng.standard_normal(600)),
           list(0.20 + 0.04 * rng.standard_normal(600)))
    _write(tmp_path, "near", 1, 0.05, list(0.13 + 0.005 * rng.standard_normal(600)),  # 30 us after the allowance
           list(0.20 + 0.04 * rng.standard_normal(600)))
    runs = aa_replay.load(tmp_path)
    (mixed,), (near,) = runs["aa/mixed"], runs["aa/near"]
    assert aa_replay.replay(mixed, Setting(0.0125, 12))["host_rounds"] == 2 * ROUNDS
    assert aa_replay.replay(mixed, Setting(0.0125, 12, lone_precision=0.0125))["host_rounds"] == 2 * ROUNDS
    paired_rounds = aa_replay.replay(near, Setting(0.0125, 12))["host_rounds"]
    assert 2 * 2 * ROUNDS <= paired_rounds < 2 * 600 and paired_rounds % (2 * ROUNDS) == 0
    # the lone precision, not the pair's, stops them: at the pair's they take all 600 recorded
    assert aa_replay.replay(near, Setting(0.0125, 12, lone_precision=0.0125))["host_rounds"] == 2 * 600


def test_the_batches_of_added_host_rounds_are_a_pass_s_rounds_also_after_an_added_device_pass():
    """A record whose device spans hold an added device pass (after the host pass): the host
    rounds are replayed in batches of one pass's rounds, not of all device spans."""
    first = _side("solution", 0.03, [0.15] * ROUNDS)
    assert aa_replay._pass_rounds(TimingRounds(definition="aa", workload="w", sides=[first])) == ROUNDS
    second = first.model_copy(update={"device_ms": [0.03] * 2 * ROUNDS,
                                      "device_call_indices": list(range(ROUNDS)) + list(range(2 * ROUNDS, 3 * ROUNDS))})
    assert aa_replay._pass_rounds(TimingRounds(definition="aa", workload="w", sides=[second])) == ROUNDS


def test_a_looser_device_precision_drops_added_device_passes_that_a_run_made(tmp_path):
    """Device-set sides whose spans spread 8% (a 3 us kernel on the records' steps), two device
    passes recorded: at the run's precision the second pass stays; at a precision above the first
    pass's standard error it is dropped, and the speedup comes from the first pass's rounds alone."""
    rng = np.random.default_rng(10)
    for pid in (1, 2):
        sides = []
        for name in ("reference", "solution"):
            side = _side(name, 0.003, list(0.03 + 0.003 * rng.standard_normal(ROUNDS)))
            device = list(0.003 * (1 + 0.08 * rng.standard_normal(2 * ROUNDS)))
            sides.append(side.model_copy(update={
                "device_ms": device,
                "device_call_indices": list(range(ROUNDS)) + list(range(2 * ROUNDS, 3 * ROUNDS))}))
        record = TimingRounds(definition="aa", workload="small", sides=sides, speedup=1.0,
                              speedup_interval=SpeedupInterval(low=0.97, high=1.03, verdict="parity", rounds=ROUNDS))
        (tmp_path / f"aa__small__{pid}.json").write_text(record.model_dump_json())
    runs = aa_replay.load(tmp_path)
    kept, dropped = aa_replay.evaluate(runs, Setting(0.0125, 12, 0.005)), aa_replay.evaluate(runs, Setting(0.0125, 12, 0.05))
    assert kept["added_device_passes"] == 2 and dropped["added_device_passes"] == 0
    (record, _) = runs["aa/small"]
    first_only = aa_replay._cut(record, {"reference": ROUNDS, "solution": ROUNDS}, {"reference": ROUNDS, "solution": ROUNDS})
    assert aa_replay.replay(record, Setting(0.0125, 12, 0.05))["latency_ms"] == first_only[1].latency_ms
    assert aa_replay.replay(record, Setting(0.0125, 12, 0.005))["latency_ms"] != first_only[1].latency_ms


def test_interval_spread_counts_how_often_a_runs_interval_holds_the_other_runs_speedups():
    def run(speedup, low, high):
        return {"speedup": speedup, "low": low, "high": high}

    # the first run's interval holds both others' speedups, each other one's only the first's: 4 of 6
    steady = [run(1.0, 0.9, 1.1), run(1.05, 1.0, 1.1), run(0.95, 0.9, 1.0)]
    lone = [run(2.0, 1.0, 3.0)]  # a workload of one run counts for the widths only
    spread = aa_replay.interval_spread([steady, lone])
    assert spread["rerun_coverage"] == 4 / 6
    assert spread["interval_width_median"] == pytest.approx((0.1 / 0.95 + 0.2) / 2)  # widths 0.2, 0.095, 0.105, 1.0
    assert spread["interval_width_p90"] == 1.0
    assert spread["speedup_spread_median"] == (1.05 - 0.95) / 1.0
    assert aa_replay.interval_spread([lone])["rerun_coverage"] is None
