"""``run_dataset``: a whole suite, in this process, through the evaluator's public function.

Before any device time: discover and select the problems, load and check every one of them (on
``--jobs`` threads), precheck their blobs, and set aside the problems whose earlier results stand.
Then evaluate the rest longest first on the evaluation slots, committing each problem's traces
and run record the moment it is done, and write ``summary.json``."""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from sol_execbench import __version__
from sol_execbench.build import BuildFailure
from sol_execbench.files import replace_json
from sol_execbench.schema.dataset_run import DatasetSummary, ProblemSummary, RunRecord
from sol_execbench.schema.trace_files import traces_file

from .closure import build_closure, write_closure
from .derived import DerivedOutputs, derive_outputs
from .devices import evaluation_slots
from .discovery import DatasetProblem, DatasetUsageError, discover, is_problem_folder, select
from .events import EventSink, ProblemOrder, RunEvent, RunPlan
from .execution import EvaluationSettings, ProblemResult, evaluate_problem_shards, now_iso, prebuild, prebuild_note
from .inputs import RunInputs, read_run_inputs
from .loading import LoadContext, LoadedProblem, SkippedProblem, load_for_run
from .options import JOBS_CAP, PREPARE_JOBS_CAP, RunOptions, check_combination, cpu_jobs
from .ray_executor import RayCluster, ray_cluster, run_on_ray
from .records import commit_problem, partial_traces, sha256_bytes, traces_bytes
from .reuse import Reused, earlier_results
from .scheduler import RunControl, Scheduler
from .shards import load_timeout_plan
from .summary import all_passed, category_summaries, problem_summary, speedups
from .timing_evidence import collect_timing_evidence

SUMMARY_FILE = "summary.json"
LOCK_FILE = ".dataset-run.lock"
EXIT_PASSED, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class BlobsMissing(DatasetUsageError):
    """``--blob-precheck fail`` found missing blobs: the message, then one line per blob."""

    def __init__(self, lines: list[str]):
        super().__init__(f"--blob-precheck fail: {len(lines)} safetensors blob(s) not found below the dataset root, "
                         "the problem folders or FLASHINFER_TRACE_DIR (set it to the dataset root, or use "
                         "--blob-precheck warn)")
        self.lines = lines


@dataclass(frozen=True)
class RunResult:
    summary: DatasetSummary | None
    """None for ``--phase derived`` (nothing is evaluated)."""
    summary_path: Path | None
    exit_code: int
    closure_path: Path | None = None
    derived: DerivedOutputs | None = None
    timing: object | None = None
    """``timing_evidence.TimingEvidenceResult`` when timing evidence was collected."""


def _ignore(_event: RunEvent) -> None:
    pass


@contextlib.contextmanager
def output_lock(output: Path) -> Iterator[None]:
    """One run at a time per output folder (a second would rerun and overwrite the same problems)."""
    try:
        output.mkdir(parents=True, exist_ok=True)
        fd = os.open(output / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise DatasetUsageError(f"--output {output}: cannot be used ({exc.strerror or exc}); give a writable folder") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise DatasetUsageError(f"--output {output}: another dataset run is using it; wait for it to end or "
                                    "give another -o") from None
        yield
    finally:
        os.close(fd)


def _dataset_root(root: Path) -> Path:
    try:
        if not root.is_dir():
            raise DatasetUsageError(f"{root}: {'is a file' if root.exists() else 'no such directory'}; give a problem "
                                    "directory or a dataset root of category folders")
    except (OSError, ValueError) as exc:
        raise DatasetUsageError(f"{str(root)[:80]!r} is not a usable path ({exc})") from None
    return root.resolve()


def _problems(options: RunOptions, root: Path, output: Path) -> tuple[list[DatasetProblem], list[DatasetProblem]]:
    """Every problem below the root, and those the run selects."""
    every = discover(root, skip=output)
    if not every:
        raise DatasetUsageError(f"{root}: no problem below it (a problem is a folder with definition.json and "
                                "workload.jsonl)")
    if options.categories and is_problem_folder(root):
        raise DatasetUsageError(f"--category: {root} is one problem, not a dataset root of category folders")
    return every, select(every, options.categories, options.limit)


def _load_all(problems: list[DatasetProblem], ctx: LoadContext, jobs: int) -> list[LoadedProblem | SkippedProblem]:
    with ThreadPoolExecutor(jobs, thread_name_prefix="load") as pool:
        return list(pool.map(lambda p: load_for_run(p, ctx), problems))


def _check_blobs(loaded: list[LoadedProblem], mode: str) -> None:
    if mode != "fail":
        return
    lines = [m.describe() for p in loaded if p.blobs is not None for m in p.blobs.missing]
    if lines:
        raise BlobsMissing(lines)


def _load_warnings(loaded: list[LoadedProblem | SkippedProblem]) -> list[str]:
    """One line per problem whose files hold something worth a warning (an unknown key, a solution
    written for another definition): every trace of it carries them all."""
    return [f"{p.problem.key}: {len(p.warnings)} warning(s), in every trace of it; first: {p.warnings[0]}"
            for p in loaded if isinstance(p, LoadedProblem) and p.warnings]


def _longest_first(problems: list[LoadedProblem]) -> list[LoadedProblem]:
    """The last run's wall time where a record has it; problems never timed first, by input bytes."""
    return sorted(problems, key=lambda p: (p.last_wall_s is not None, -(p.last_wall_s or 0.0), -p.input_bytes,
                                           p.problem.key))


class DatasetRun:
    """One run's state: the problems' summaries as they are decided, and the evaluation of each."""

    def __init__(self, options: RunOptions, inputs: RunInputs, settings: EvaluationSettings, on_event: EventSink):
        self.options, self.inputs, self.settings, self.on_event = options, inputs, settings, on_event
        self.control = RunControl()
        self.summaries: dict[str, ProblemSummary] = {}
        self.speedups: dict[str, list[float]] = {}
        self.statuses: dict[str, dict[str, str]] = {}  # problem -> uuid -> status (for the closure)
        self.order: ProblemOrder | None = None
        self.again: list[str] = []  # why problems with a run record are evaluated again
        self.build_failures: dict[str, BuildFailure] = {}  # compile errors of the pipeline's prebuilds

    def add(self, summary: ProblemSummary, traces: list) -> None:
        self.summaries[summary.problem] = summary
        self.speedups[summary.problem] = speedups(traces)
        self.statuses[summary.problem] = {t.workload.uuid: t.evaluation.status.value for t in traces if t.evaluation}

    def settle(self, loaded: list[LoadedProblem | SkippedProblem]) -> list[LoadedProblem]:
        """Skipped and reused problems get their summaries now; the rest are returned, to evaluate."""
        to_run = []
        again: Counter[str] = Counter()
        for item in loaded:
            if isinstance(item, SkippedProblem):
                self.add(problem_summary(item.problem.key, item.problem.category, item.definition, None, "skipped", [],
                                         None, note=item.reason), [])
                continue
            reused = earlier_results(item, self.options.rerun)
            if not isinstance(reused, Reused):
                to_run.append(item)
                again.update([reused] if reused else [])
                continue
            self.add(problem_summary(item.problem.key, item.problem.category, item.definition.name, item.solution.name,
                                     "reused", reused.traces, reused.record.wall_s, reused.record.device), reused.traces)
        self.again = [f"{count} problem(s) finished earlier are evaluated again: {why}" for why, count in again.items()]
        return _longest_first(to_run)

    def prepare(self, loaded: LoadedProblem) -> None:
        failure = prebuild(loaded)
        if failure is not None:
            if failure.repeats:
                self.build_failures[loaded.problem.key] = failure
            self.on_event(RunEvent("note", loaded.problem.key, text=prebuild_note(loaded.problem.key, failure)))

    def evaluate(self, loaded: LoadedProblem, device: str | None) -> None:
        key = loaded.problem.key
        if self.control.stopped is not None:
            self.dropped(key)
            return
        self.on_event(RunEvent("start", key, device))
        settings = self.settings
        if self.options.verbose:
            settings = dataclasses.replace(settings, on_log=lambda text: self.on_event(RunEvent("log", key, device, text=text)))
        with partial_traces(loaded.out_folder) as sink:
            result = evaluate_problem_shards(loaded, device, settings, sink, self.build_failures.get(key))
        self.finish(result)

    def dropped(self, key: str) -> None:
        """A problem that will not finish (the run stopped): the problems after it are not held for it."""
        if self.order is not None:
            self.order.dropped(key)

    def finish(self, result: ProblemResult) -> None:
        """An evaluated problem: its traces and run record committed (unless the run is being
        interrupted), its summary added, and its end told."""
        loaded, device = result.loaded, result.device
        key = loaded.problem.key
        with self.control.committing() as allowed:
            if not allowed:
                self.dropped(key)
                return
            commit_problem(loaded.out_folder, result.traces, self._record(result))
        summary = problem_summary(key, loaded.problem.category, loaded.definition.name, loaded.solution.name,
                                  "evaluated", result.traces, result.wall_s, device)
        self.add(summary, result.traces)
        if result.timed_out and self.options.timeout_policy == "fail":
            self.control.stop(f"--timeout-policy fail: {key} workload {result.timed_out[0]} timed out; give it more "
                              "time with --timeout or --timeout-overrides")
        finished = RunEvent("finish", key, device, summary=summary)
        if self.order is not None:
            self.order.finished(finished)
        else:
            self.on_event(finished)

    def _record(self, result: ProblemResult) -> RunRecord:
        loaded = result.loaded
        summary = problem_summary(loaded.problem.key, loaded.problem.category, loaded.definition.name,
                                  loaded.solution.name, "evaluated", result.traces, result.wall_s)
        return RunRecord(problem=loaded.problem.key, definition=loaded.definition.name, solution=loaded.solution.name,
                         solution_origin=loaded.solution_origin, traces_sha256=sha256_bytes(traces_bytes(result.traces)),
                         workloads=len(result.traces), statuses=summary.statuses, all_passed=all_passed(summary),
                         wall_s=result.wall_s, shards=result.shards, device=result.device,
                         started_at=result.started_at, finished_at=result.finished_at, hashes=loaded.hashes)

    def run(self, problems: list[LoadedProblem], slots: list[str | None], cluster: RayCluster | None = None) -> None:
        self.order = ProblemOrder(self.on_event, [p.problem.key for p in problems], self.options.log_order == "problem")
        if cluster is not None:
            run_on_ray(self, problems, cluster)
            return
        prepare_jobs = cpu_jobs("--prepare-jobs", self.options.prepare_jobs, len(problems), PREPARE_JOBS_CAP)
        Scheduler(problems, slots, self.evaluate, self.prepare if self.options.pipeline else None, prepare_jobs,
                  self.control).run()


def _summary(run: DatasetRun, root: Path, output: Path, started_at: str, began: float) -> DatasetSummary:
    problems = [run.summaries[k] for k in sorted(run.summaries)]
    categories, totals = category_summaries(problems, run.speedups)
    return DatasetSummary(root=str(root), output=str(output), solution_name=run.options.solution_name,
                          started_at=started_at, finished_at=now_iso(), wall_s=round(time.monotonic() - began, 3),
                          stopped=run.control.stopped, totals=totals, categories=categories, problems=problems)


def _exit_code(summary: DatasetSummary, stopped: str | None) -> int:
    if stopped is not None:
        return EXIT_USAGE
    ran = [p for p in summary.problems if p.outcome != "skipped"]
    return EXIT_PASSED if ran and all(all_passed(p) for p in ran) else EXIT_FAILED


def run_dataset(options: RunOptions, on_event: EventSink = _ignore) -> RunResult:
    """Run the suite; raises DatasetUsageError (one line) for a bad input before any evaluation."""
    from sol_execbench.envprobe.hashing import host_cached_environment_hash

    check_combination(options)
    began, started_at = time.monotonic(), now_iso()
    root, output = _dataset_root(options.root), options.output.resolve()
    every, selected = _problems(options, root, output)
    if options.phase == "derived":
        return _derive_only(options, root, output, selected)
    if options.phase == "timing":
        timing = collect_timing_evidence(options.timing_evidence)
        return RunResult(None, None, timing.exit_code, timing=timing)
    timeouts = load_timeout_plan(options.timeout_s, options.timeout_overrides)
    timeouts.check_problems([p.key for p in every])
    slots = evaluation_slots(options.device, options.gpu_jobs)
    env_hash = host_cached_environment_hash()
    with output_lock(output), _executor(options) as cluster, _warm_pools(options, slots, cluster):
        inputs = read_run_inputs(options, root, [p.key for p in every])
        ctx = LoadContext(root, output, options.solution_name, options.config, options.config_overrides(),
                          options.max_workloads, options.blob_precheck,
                          {"evaluator_version": __version__, "environment": env_hash, **inputs.hashes},
                          inputs.workload_filter, options.generated_solution)
        loaded = _load_all(selected, ctx, cpu_jobs("--jobs", options.jobs, len(selected), JOBS_CAP))
        _check_blobs([p for p in loaded if isinstance(p, LoadedProblem)], options.blob_precheck)
        settings = EvaluationSettings(timeouts, options.workload_shard_size, options.keep_staging, env_hash,
                                      use_warm_pool=options.use_warm_pool)
        run = DatasetRun(options, inputs, settings, on_event)
        to_run = run.settle(loaded)
        on_event(RunEvent("plan", plan=RunPlan(len(selected), len(to_run),
                                               sum(s.outcome == "reused" for s in run.summaries.values()),
                                               sum(s.outcome == "skipped" for s in run.summaries.values()),
                                               cluster.slots if cluster else tuple(s or "default" for s in slots),
                                               options.execution_mode)))
        for note in run.again + _load_warnings(loaded):
            on_event(RunEvent("note", text=note))
        try:
            run.run(to_run, slots, cluster)
        finally:  # a stopped run still says what it finished
            summary = _summary(run, root, output, started_at, began)
            replace_json(output / SUMMARY_FILE, summary)
        closure_path = options.closure_path
        if closure_path is not None:
            outcomes = {k: (s.outcome, run.statuses.get(k, {})) for k, s in run.summaries.items()}
            write_closure(closure_path, build_closure(inputs, root, selected, outcomes))
        derived = derive_outputs(options, root, output, selected) if run.control.stopped is None else None
    timing = None
    if options.timing_evidence is not None and "--timing-evidence-dir" in options.timing_requested \
            and run.control.stopped is None:
        timing = collect_timing_evidence(options.timing_evidence)
    code = _exit_code(summary, run.control.stopped)
    return RunResult(summary, output / SUMMARY_FILE, max(code, timing.exit_code) if timing else code, closure_path,
                     derived, timing)


def _executor(options: RunOptions) -> contextlib.AbstractContextManager[RayCluster | None]:
    """The Ray cluster of an ``--executor ray`` run (attached for the run's length); None: local slots."""
    if options.executor == "ray":
        return ray_cluster(options.ray_address, options.device)
    return contextlib.nullcontext()


def _warm_pools(options: RunOptions, slots: list[str | None], cluster: RayCluster | None
                ) -> contextlib.AbstractContextManager[object]:
    """Local runs evaluate in children of a warm pool, one pool per device, started for the run where
    none is running (and ended with it): a child that has imported torch already saves each problem
    the seconds a fresh process spends on it. A pool serves as many evaluations at once as the run
    has slots on that device."""
    if cluster is not None or not options.use_warm_pool:
        return contextlib.nullcontext()
    from sol_execbench.evaluate import warm_pools

    return warm_pools(slots, spares=max(slots.count(s) for s in slots))


def _derive_only(options: RunOptions, root: Path, output: Path, selected: list[DatasetProblem]) -> RunResult:
    """``--phase derived``: the derived outputs from the traces an earlier run left in ``output``."""
    if not any(traces_file(output / p.key) for p in selected):
        raise DatasetUsageError(f"--phase derived: no traces of the selected problems below {output}; give the "
                                "earlier run's -o, or evaluate first (--phase traces or all)")
    with output_lock(output):
        derived = derive_outputs(options, root, output, selected)
    return RunResult(None, None, EXIT_PASSED, derived=derived)
