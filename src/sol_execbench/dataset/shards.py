"""How a problem's workloads are split into evaluator calls (shards), each with its own timeout:
``--timeout`` per call, ``--timeout-overrides`` by problem or workload (a workload with an override
is a shard of its own), ``--workload-shard-size`` workloads per call at most."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sol_execbench.schema import FormatError, Workload
from sol_execbench.schema.base import closest_name
from sol_execbench.schema.dataset_inputs import TimeoutOverrides
from sol_execbench.schema.loading import load_model

from .discovery import DatasetUsageError

WORKLOAD_KEY_SEPARATOR = ":"


@dataclass(frozen=True)
class Shard:
    workloads: list[Workload]
    timeout_s: float


@dataclass(frozen=True)
class TimeoutPlan:
    default_s: float
    overrides: TimeoutOverrides
    source: Path | None = None

    def problem_timeout(self, problem: str) -> float:
        return self.overrides.problems.get(problem, self.overrides.default or self.default_s)

    def workload_timeout(self, problem: str, uuid: str) -> float | None:
        scoped = self.overrides.workloads.get(f"{problem}{WORKLOAD_KEY_SEPARATOR}{uuid}")
        return scoped if scoped is not None else self.overrides.workloads.get(uuid)

    def check_problems(self, known: list[str]) -> None:
        """A problem key (also the problem part of ``problem:uuid``) must name a problem of the
        dataset: a misspelt key would silently time out at the default."""
        keys = [(k, f"problems.{k}") for k in self.overrides.problems]
        keys += [(k.rpartition(WORKLOAD_KEY_SEPARATOR)[0], f"workloads.{k}")
                 for k in self.overrides.workloads if WORKLOAD_KEY_SEPARATOR in k]
        known_set = set(known)
        for problem, field in keys:
            if problem not in known_set:
                hint = closest_name(problem, known)
                raise DatasetUsageError(f"{self.source}: field '{field}': no problem '{problem}' below the dataset root "
                                        + (f"(did you mean '{hint}'?)" if hint else "(keys are problem paths like 'L1/rmsnorm')"))


def load_timeout_plan(default_s: float, path: Path | None) -> TimeoutPlan:
    if path is None:
        return TimeoutPlan(default_s, TimeoutOverrides())
    try:
        overrides = load_model(TimeoutOverrides, path, "timeout overrides")
    except FormatError as exc:
        raise DatasetUsageError(f"{exc.path}: {exc.message} (--timeout-overrides: a JSON object with 'default', "
                                "'problems' and 'workloads', seconds above 0)") from None
    return TimeoutPlan(default_s, overrides, path)


def plan_shards(problem: str, workloads: list[Workload], plan: TimeoutPlan, shard_size: int | None) -> list[Shard]:
    """Shards in workload order: runs of workloads without an override, at most ``shard_size``
    each, under the problem's timeout; each workload with an override alone under its own."""
    shards: list[Shard] = []
    run: list[Workload] = []
    problem_s = plan.problem_timeout(problem)

    def close_run() -> None:
        if run:
            shards.append(Shard(list(run), problem_s))
            run.clear()

    for workload in workloads:
        own = plan.workload_timeout(problem, workload.uuid)
        if own is not None:
            close_run()
            shards.append(Shard([workload], own))
            continue
        run.append(workload)
        if shard_size is not None and len(run) >= shard_size:
            close_run()
    close_run()
    return shards
