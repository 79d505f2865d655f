"""A warm child's launch level: which probes are kept against the device's recorded ones, the record
kept across processes, and on a GPU the pool going on forking when children are turned away."""

from __future__ import annotations

import json
import multiprocessing
import time

import pytest

from sol_execbench.evaluate import launch_level
from sol_execbench.evaluate.launch_level import FIRST_TURNED_AWAY, HISTORY, MAX_REJECTED, TOLERANCE, decide, judge


def _probes(*values: float, kept: bool = True) -> list[dict]:
    return [{"us": v, "kept": kept} for v in values]


def test_a_device_s_first_probes_record_a_floor_before_any_child_is_kept():
    earlier: list[dict] = []
    for value in (2.2, 1.95, 2.1)[:FIRST_TURNED_AWAY]:
        verdict = judge(earlier, value)
        assert not verdict.kept and verdict.floor_us is None and verdict.why == "recording a floor"
        earlier += [{"us": value, "kept": False}]
    assert judge(earlier, 2.2).why == "slower" and judge(earlier, 1.96).kept  # against the lowest, 1.95


def test_a_probe_near_the_floor_is_kept_and_a_slower_one_turned_away():
    earlier = _probes(2.15, 1.95, 2.18, 1.97)  # the floor: the second-lowest, 1.97
    assert judge(earlier, 1.97 * (1 + TOLERANCE) - 1e-6).kept
    slower = judge(earlier, 1.97 * (1 + TOLERANCE) + 1e-3)
    assert not slower.kept and slower.floor_us == 1.97 and slower.why == "slower"


def test_one_outlying_low_probe_does_not_set_the_floor_once_there_are_enough():
    earlier = _probes(1.0, 2.0, 2.2, 2.1)
    assert judge(earlier, 2.05).kept  # against 2.0, not the outlier 1.0
    assert not judge(earlier[:3], 2.05).kept  # with three, the lowest is the floor


def test_a_child_is_kept_after_the_last_ones_were_all_turned_away():
    earlier = _probes(1.0, 1.0) + _probes(*[2.2] * MAX_REJECTED, kept=False)
    verdict = judge(earlier, 2.2)
    assert verdict.kept and verdict.why == "after rejections"
    interrupted = earlier[:-1] + _probes(2.2)  # a kept one among the last: the count starts again
    assert not judge(interrupted, 2.2).kept


def test_decide_records_each_probe_and_keeps_the_newest(tmp_path):
    path = tmp_path / "levels" / "device.json"
    verdicts = [decide(path, 2.0 + (i % 2) * 0.2) for i in range(HISTORY + 5)]
    probes = json.loads(path.read_text())["probes"]
    assert len(probes) == HISTORY
    assert [p["kept"] for p in probes] == [v.kept for v in verdicts[-HISTORY:]]
    assert not any(v.kept for v in verdicts[:FIRST_TURNED_AWAY])  # recording a floor
    assert not verdicts[FIRST_TURNED_AWAY].kept and verdicts[FIRST_TURNED_AWAY + 1].kept  # 2.2, 2.0 against 2.0


def test_a_record_that_cannot_be_read_counts_as_empty(tmp_path):
    path = tmp_path / "device.json"
    for text in ("not json", json.dumps({"probes": [{"us": "fast", "kept": 1}, 7]}), json.dumps([1, 2])):
        path.write_text(text)
        verdict = decide(path, 2.5)
        assert not verdict.kept and verdict.why == "recording a floor"
        assert [p["us"] for p in json.loads(path.read_text())["probes"]] == [2.5]


def test_a_probe_that_cannot_be_recorded_keeps_its_child(tmp_path):
    # Without its record the selection would turn every child away while it "records a floor".
    path = tmp_path / "device.json"
    path.mkdir()  # neither read nor replaced (a directory is in the way), whoever runs the test
    for _ in range(FIRST_TURNED_AWAY + 1):
        verdict = decide(path, 2.5)
        assert verdict.kept and verdict.why == "not recorded" and verdict.floor_us is None


def _decide_in_process(path: str, value: float) -> None:
    from pathlib import Path

    decide(Path(path), value)


def test_processes_deciding_at_once_each_leave_their_probe(tmp_path):
    path = tmp_path / "device.json"
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_decide_in_process, args=(str(path), 2.0 + i / 100)) for i in range(6)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    assert sorted(p["us"] for p in json.loads(path.read_text())["probes"]) == [2.0 + i / 100 for i in range(6)]


def test_each_device_driver_and_torch_version_has_its_own_record(monkeypatch, tmp_path):
    import torch

    from sol_execbench.platform import ceilings

    monkeypatch.setenv("SOL_EXECBENCH_CACHE_DIR", str(tmp_path))
    driver = ["nvidia 580.159.04"]
    monkeypatch.setattr(ceilings, "driver_version", lambda vendor: driver[0])
    first = launch_level.history_path("GPU-aaaa")
    assert first == launch_level.history_path("GPU-aaaa") and first.is_relative_to(tmp_path)
    assert launch_level.history_path("GPU-bbbb") != first
    driver[0] = "nvidia 590.44.01"
    assert launch_level.history_path("GPU-aaaa") != first
    driver[0] = "nvidia 580.159.04"
    monkeypatch.setattr(torch, "__version__", "2.12.0")
    assert launch_level.history_path("GPU-aaaa") != first


def test_the_selection_can_be_turned_off(monkeypatch):
    assert launch_level.selection_enabled()
    monkeypatch.setenv(launch_level.LEVEL_ENV, "0")
    assert not launch_level.selection_enabled()


def _evaluate_add(**options):
    from sol_execbench import evaluate

    from .problems import LIGHT_CONFIG, add_definition, solution, workloads

    return evaluate(add_definition(), workloads(8), solution("def run(a, b):\n    return a + b\n"), LIGHT_CONFIG,
                    **options)


def test_a_trace_on_the_cpu_has_no_launch_level():
    traces = _evaluate_add(device="cpu")
    assert [t.evaluation.status.value for t in traces] == ["PASSED"]
    assert traces[0].evaluation.environment.launch_level_us is None


@pytest.mark.gpu
def test_an_evaluation_on_an_nvidia_gpu_says_its_process_launch_level():
    import torch

    traces = _evaluate_add()
    assert [t.evaluation.status.value for t in traces] == ["PASSED"]
    level = traces[0].evaluation.environment.launch_level_us
    assert (level is not None and 0.5 < level < 50) if torch.version.cuda else level is None


@pytest.mark.gpu
def test_the_pool_forks_on_while_children_are_turned_away(monkeypatch, tmp_path):
    """With a recorded floor no process reaches, the first MAX_REJECTED children exit slow, the next
    is kept, and the pool still forks its children and serves an evaluation."""
    import torch

    from sol_execbench.evaluate.parent.warm_pool import pool_status

    from .conftest import _warm_pool

    monkeypatch.setenv("SOL_EXECBENCH_CACHE_DIR", str(tmp_path / "cache"))
    path = launch_level.history_path(str(torch.cuda.get_device_properties(0).uuid))
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"probes": _probes(0.01, 0.01, 0.01, 0.01)}))
    pool = _warm_pool(monkeypatch, None)
    next(pool)
    try:
        probes = json.loads(path.read_text())["probes"][4:]
        assert [p["kept"] for p in probes] == [False] * MAX_REJECTED + [True]
        assert all(p["us"] > 0.5 for p in probes)  # real probes: microseconds a queued kernel
        status = pool_status(None)
        assert status["forking"] is True  # turned-away children are not a failed fork
        assert status["turned_away"] == MAX_REJECTED
        logs: list[str] = []
        traces = _evaluate_add(on_log=logs.append)
        assert [t.evaluation.status.value for t in traces] == ["PASSED"]
        assert "took the job from the warm pool" in "".join(logs)
        assert traces[0].evaluation.environment.launch_level_us == pytest.approx(probes[-1]["us"], abs=1e-3)
        deadline = time.monotonic() + 60  # the replacement probes against the same floor
        while len(probes := json.loads(path.read_text())["probes"]) < 4 + MAX_REJECTED + 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert probes[4 + MAX_REJECTED + 1]["kept"] is False  # a kept one among the last three: turned away
    finally:
        next(pool, None)
