"""The pipeline's scheduler: a problem whose preparation (a native build) is still running holds
back no problem that is ready, and every problem is still evaluated once."""

from __future__ import annotations

import threading

from sol_execbench.dataset.scheduler import Scheduler


def test_a_ready_problem_is_evaluated_while_the_one_before_it_still_builds():
    built_last = threading.Event()
    evaluated: list[str] = []

    def prepare(item: str) -> None:
        if item == "slow_build":  # finishes only once the ready problem has been evaluated (or after 10 s)
            built_last.wait(timeout=10)

    def evaluate(item: str, slot: str | None) -> None:
        evaluated.append(item)
        if item == "ready":
            built_last.set()

    Scheduler(["slow_build", "ready"], [None], evaluate, prepare, prepare_jobs=2).run()
    assert evaluated == ["ready", "slow_build"]


def test_without_preparation_the_queue_order_stands():
    evaluated: list[str] = []
    Scheduler(["a", "b", "c"], [None], lambda item, slot: evaluated.append(item)).run()
    assert evaluated == ["a", "b", "c"]


def test_a_failed_preparation_still_stops_the_run_with_its_error():
    def prepare(item: str) -> None:
        if item == "broken":
            raise RuntimeError("the builder itself broke")

    evaluated: list[str] = []
    scheduler = Scheduler(["broken", "fine"], [None], lambda item, slot: evaluated.append(item), prepare, 2)
    try:
        scheduler.run()
    except RuntimeError as exc:
        assert "builder itself broke" in str(exc)
    else:
        raise AssertionError("the preparation's error was lost")
    assert "broken" not in evaluated
