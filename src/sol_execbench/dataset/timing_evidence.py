"""Timing evidence: each workload's reported latency (its trace in the run's output) next to the
kernel time a profiler (ncu or rocprofv3, never the records the default timing reads) measured on a
re-run of the same solution, and the dataset's coverage: full, partial or no profiler-backed timing
per problem, and why. ``sol-execbench dataset timing-evidence`` and ``dataset run --phase timing``
are this one function (docs/profiling.md).

Layout below the evidence folder: ``<problem>/workloads/<uuid>.json`` (one shard per workload, kept
once profiled, so a stopped run resumes where it stopped), ``<problem>/timing_evidence.json`` (the
shards of the problem's selected workloads), and ``coverage.json``, ``coverage.md`` and
``coverage-summary.json`` across the dataset.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from sol_execbench import __version__
from sol_execbench.evaluate import EvalOptions
from sol_execbench.files import replace_file, replace_json
from sol_execbench.platform import vendor_hint
from sol_execbench.profiling.profile_run import run_profiling_child, tool_prefix, tool_version, workload_profiles
from sol_execbench.schema import Trace, Workload
from sol_execbench.schema.profiling import (
    ProblemCoverage,
    ProblemTimingEvidence,
    TimingCoverage,
    TimingCoverageSummary,
    WorkloadTimingEvidence,
)
from sol_execbench.schema.trace_files import read_traces, traces_file

from .discovery import DatasetProblem, DatasetUsageError, discover, select
from .loading import LoadContext, LoadedProblem, SkippedProblem, load_for_run

EVIDENCE_FILE = "timing_evidence.json"
SHARD_FOLDER = "workloads"
COVERAGE_FILES = ("coverage.json", "coverage.md", "coverage-summary.json")
DEFAULT_CALLS = 10
TARGET_STATUSES = ("full", "partial", "none", "blocked", "missing")
TOOLS = {"cuda": "ncu", "rocm": "rocprofv3"}


@dataclass(frozen=True)
class TimingEvidenceOptions:
    root: Path
    output: Path
    """The dataset run's output folder: each problem's traces (the reported latencies)."""
    evidence_dir: Path | None = None
    """Where the evidence goes [default: OUTPUT/timing_evidence]."""
    categories: tuple[str, ...] = ()
    limit: int | None = None
    solution_name: str | None = None
    tool: str = "auto"
    tool_version: str | None = None
    gpu_architecture: str | None = None
    calls: int = DEFAULT_CALLS
    timeout_s: float = 300.0
    device: str | None = None
    only_problems: tuple[str, ...] = ()
    skip_problems: tuple[str, ...] = ()
    skip_problem_file: Path | None = None
    blocked: dict[str, str] = field(default_factory=dict)
    """--mark-blocked-problem PROBLEM[=REASON]: evidence that says the profiler cannot cover it."""
    workload_limit: int | None = None
    workload_offset: int = 0
    workload_sharded: bool = False
    expected_problem_denominator: int | None = None
    require_profiler_complete: bool = False
    target_statuses: tuple[str, ...] = ()
    keep_staging: bool = False

    @property
    def folder(self) -> Path:
        return self.evidence_dir if self.evidence_dir is not None else self.output / "timing_evidence"


@dataclass
class TimingEvidenceResult:
    coverage: TimingCoverage
    summary: TimingCoverageSummary
    folder: Path
    profiled_problems: list[str]
    exit_code: int


def _skip_set(options: TimingEvidenceOptions) -> set[str]:
    skipped = set(options.skip_problems)
    if options.skip_problem_file is not None:
        try:
            lines = options.skip_problem_file.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise DatasetUsageError(f"--skip-problem-file {options.skip_problem_file}: cannot be read ({exc}); give a "
                                    "text file of problem paths, one a line") from None
        skipped |= {line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")}
    return skipped


def _check_names(names: list[str], known: set[str], flag: str) -> None:
    for name in names:
        if name not in known:
            raise DatasetUsageError(f"{flag} {name}: no such problem below the dataset root (give its path relative to "
                                    "the root, e.g. L1/rmsnorm)")


def _shard_path(folder: Path, problem: str, uuid: str) -> Path:
    from sol_execbench.evaluate.parent.runner import safe_file_stem

    return folder / problem / SHARD_FOLDER / f"{safe_file_stem(uuid, 120)}.json"


def _read_model(path: Path, model):  # noqa: ANN001, ANN202 - any pydantic model
    try:
        return model.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _passed_latency(trace: Trace | None) -> float | None:
    if trace is None or trace.evaluation is None or trace.evaluation.performance is None:
        return None
    return trace.evaluation.performance.latency_ms if trace.evaluation.status.value == "PASSED" else None


def _slice(workloads: list[Workload], options: TimingEvidenceOptions) -> list[Workload]:
    end = None if options.workload_limit is None else options.workload_offset + options.workload_limit
    return workloads[options.workload_offset:end]


class _Profiler:
    """The tool, its prefix and version, resolved once for the run."""

    def __init__(self, options: TimingEvidenceOptions):
        vendor = "cpu" if options.device == "cpu" else vendor_hint()
        self.tool = options.tool if options.tool != "auto" else TOOLS.get(vendor)
        self.problem = None if self.tool else ("timing evidence needs ncu (NVIDIA) or rocprofv3 (ROCm) on a GPU; "
                                               f"this host's device is {vendor}")
        self.options = options
        self.version: str | None = None

    def profile(self, loaded: LoadedProblem, workloads: list[Workload]) -> dict[str, WorkloadTimingEvidence]:
        """Profile ``workloads`` in one child; a shard each (failed ones carry the error)."""
        if self.problem is not None:
            return {w.uuid: WorkloadTimingEvidence(uuid=w.uuid, status="failed", error=self.problem) for w in workloads}
        base = EvalOptions(device=self.options.device, timeout_s=self.options.timeout_s, keep_staging=self.options.keep_staging)
        with tempfile.TemporaryDirectory(prefix=f"sol-execbench-timing-{self.tool}-") as folder:
            prefix, missing = tool_prefix(self.tool, Path(folder))
            if prefix is None:
                return {w.uuid: WorkloadTimingEvidence(uuid=w.uuid, status="failed", error=missing) for w in workloads}
            self.version = self.version or tool_version(prefix)
            outcome = run_profiling_child(loaded.definition, workloads, loaded.solution, loaded.config, base, self.tool,
                                          prefix, self.options.calls, Path(folder))
            rows, _stats, error, _every = workload_profiles(self.tool, outcome, workloads)
        shards = {}
        for row in rows:
            if row.kernels and row.kernel_us_per_call:
                shards[row.uuid] = WorkloadTimingEvidence(uuid=row.uuid, status="profiled", calls=row.calls,
                                                          kernels=row.kernels,
                                                          profiler_kernel_ms_per_call=row.kernel_us_per_call / 1e3)
            else:
                shards[row.uuid] = WorkloadTimingEvidence(uuid=row.uuid, status="failed", error=row.error or error)
        return shards


def _problem_evidence(loaded: LoadedProblem, options: TimingEvidenceOptions, profiler: _Profiler,
                      traces: dict[str, Trace]) -> ProblemTimingEvidence:
    key = loaded.problem.key
    selected = _slice(loaded.workloads, options)
    shards: dict[str, WorkloadTimingEvidence] = {}
    to_profile = []
    for w in selected:
        kept = _read_model(_shard_path(options.folder, key, w.uuid), WorkloadTimingEvidence)
        if kept is not None and kept.status == "profiled":
            shards[w.uuid] = kept  # resumable: a profiled shard stands
        elif _passed_latency(traces.get(w.uuid)) is None:
            trace = traces.get(w.uuid)
            status = trace.evaluation.status.value if trace is not None and trace.evaluation is not None else None
            shards[w.uuid] = WorkloadTimingEvidence(uuid=w.uuid, status="no-trace", trace_status=status,
                                                    error="no PASSED trace of this workload in the run's output: "
                                                          "nothing reported to tie the profiler's time to")
        else:
            to_profile.append(w)
    groups = [[w] for w in to_profile] if options.workload_sharded else ([to_profile] if to_profile else [])
    for group in groups:
        for uuid, shard in profiler.profile(loaded, group).items():
            shards[uuid] = shard
            replace_json(_shard_path(options.folder, key, uuid), _tied(shard, traces.get(uuid)))
    rows = [_tied(shards[w.uuid], traces.get(w.uuid)) for w in selected]
    coverage, reason = _coverage(rows)
    return ProblemTimingEvidence(problem=key, definition=loaded.definition.name, solution=loaded.solution.name,
                                 tool=profiler.tool, tool_version=options.tool_version or profiler.version
                                 or (profiler.tool or "unknown"), gpu_architecture=options.gpu_architecture or _arch(traces),
                                 workloads=rows, workloads_expected=len(selected), coverage=coverage, reason=reason)


def _tied(shard: WorkloadTimingEvidence, trace: Trace | None) -> WorkloadTimingEvidence:
    latency = _passed_latency(trace)
    update: dict[str, object] = {"reported_latency_ms": latency}
    if trace is not None and trace.evaluation is not None:
        update["trace_status"] = trace.evaluation.status.value
    if latency is not None and shard.profiler_kernel_ms_per_call:
        update["ratio"] = latency / shard.profiler_kernel_ms_per_call
    return shard.model_copy(update=update)


def _arch(traces: dict[str, Trace]) -> str:
    for trace in traces.values():
        if trace.evaluation is not None and trace.evaluation.device is not None and trace.evaluation.device.arch:
            return trace.evaluation.device.arch
    return "unknown"


def _coverage(rows: list[WorkloadTimingEvidence]) -> tuple[str, str]:
    profiled = sum(r.status == "profiled" for r in rows)
    if rows and profiled == len(rows):
        return "full", f"all {len(rows)} workload(s) have profiler-backed kernel time"
    reasons = sorted({f"{r.status}: {(r.error or '').splitlines()[0][:160]}" for r in rows if r.status != "profiled"})
    head = f"{profiled} of {len(rows)} workload(s) profiled"
    return ("partial" if profiled else "none"), f"{head}; " + "; ".join(reasons[:3]) if reasons else head


def _blocked_evidence(loaded: LoadedProblem, options: TimingEvidenceOptions, reason: str) -> ProblemTimingEvidence:
    rows = [WorkloadTimingEvidence(uuid=w.uuid, status="blocked", error=reason) for w in _slice(loaded.workloads, options)]
    return ProblemTimingEvidence(problem=loaded.problem.key, definition=loaded.definition.name,
                                 solution=loaded.solution.name,
                                 tool=TOOLS.get(vendor_hint()) if options.tool == "auto" else options.tool, tool_version=options.tool_version or "unknown",
                                 gpu_architecture=options.gpu_architecture or "unknown", workloads=rows,
                                 workloads_expected=len(rows), coverage="none", reason=f"blocked: {reason}")


def _current_status(folder: Path, key: str) -> str:
    evidence = _read_model(folder / key / EVIDENCE_FILE, ProblemTimingEvidence)
    if evidence is None:
        return "missing"
    return "blocked" if evidence.reason.startswith("blocked:") else evidence.coverage


def _targets(options: TimingEvidenceOptions, every: list[DatasetProblem]) -> list[DatasetProblem]:
    known = {p.key for p in every}
    _check_names(list(options.only_problems), known, "--only-problem")
    _check_names(list(options.blocked), known, "--mark-blocked-problem")
    skipped = _skip_set(options)
    chosen = select(every, options.categories, None)
    if options.only_problems:
        chosen = [p for p in chosen if p.key in set(options.only_problems)]
    chosen = [p for p in chosen if p.key not in skipped]
    if options.target_statuses:
        chosen = [p for p in chosen if _current_status(options.folder, p.key) in options.target_statuses]
    return chosen[:options.limit] if options.limit is not None else chosen


def check_options(options: TimingEvidenceOptions) -> None:
    for status in options.target_statuses:
        if status not in TARGET_STATUSES:
            raise DatasetUsageError(f"--target-status {status}: give one of {', '.join(TARGET_STATUSES)}")
    if options.tool not in ("auto", "ncu", "rocprofv3"):
        raise DatasetUsageError(f"--tool {options.tool}: timing evidence comes from ncu or rocprofv3 (or auto)")
    if options.workload_offset < 0 or (options.workload_limit is not None and options.workload_limit < 1):
        raise DatasetUsageError("--workload-offset must be 0 or more and --workload-limit 1 or more")
    if options.evidence_dir is not None and options.evidence_dir.is_file():
        raise DatasetUsageError(f"--timing-evidence-dir {options.evidence_dir}: is a file; give a folder")


def collect_timing_evidence(options: TimingEvidenceOptions, on_line=None) -> TimingEvidenceResult:  # noqa: ANN001
    """Profile the targets (resuming), then write the coverage across the dataset."""
    check_options(options)
    root, output = options.root.resolve(), options.output.resolve()
    if not root.is_dir():
        raise DatasetUsageError(f"{options.root}: no such directory; give the dataset root")
    every = discover(root, skip=output)
    if not every:
        raise DatasetUsageError(f"{options.root}: no problem below it")
    targets = _targets(options, every)
    ctx = LoadContext(root, output, options.solution_name, None, {}, None, "off", {"evaluator_version": __version__})
    profiler = _Profiler(options)
    done = []
    for problem in targets:
        loaded = load_for_run(problem, ctx)
        if isinstance(loaded, SkippedProblem):
            if on_line:
                on_line(f"{problem.key}: skipped ({loaded.reason})")
            continue
        if problem.key in options.blocked:
            evidence = _blocked_evidence(loaded, options, options.blocked[problem.key])
        else:
            path = traces_file(output / problem.key)
            traces = {t.workload.uuid: t for t in read_traces(path)} if path is not None else {}
            evidence = _problem_evidence(loaded, options, profiler, traces)
        replace_json(options.folder / problem.key / EVIDENCE_FILE, evidence)
        done.append(problem.key)
        if on_line:
            on_line(f"{problem.key}: {evidence.coverage} ({evidence.reason[:200]})")
    coverage, summary = write_coverage(root, [p.key for p in select(every, options.categories, None)], options)
    failed = options.require_profiler_complete and not summary.complete
    return TimingEvidenceResult(coverage, summary, options.folder, done, 1 if failed else 0)


def write_coverage(root: Path, problems: list[str], options: TimingEvidenceOptions) -> tuple[TimingCoverage, TimingCoverageSummary]:
    """coverage.json, coverage.md and coverage-summary.json in the evidence folder."""
    rows = []
    for key in problems:
        evidence = _read_model(options.folder / key / EVIDENCE_FILE, ProblemTimingEvidence)
        if evidence is None:
            rows.append(ProblemCoverage(problem=key, coverage="none", workloads_expected=0, workloads_profiled=0,
                                        reason="no timing evidence for this problem yet", target_status="missing"))
            continue
        rows.append(ProblemCoverage(problem=key, coverage=evidence.coverage, workloads_expected=evidence.workloads_expected,
                                    workloads_profiled=sum(w.status == "profiled" for w in evidence.workloads),
                                    reason=evidence.reason, target_status=_current_status(options.folder, key)))
    coverage = TimingCoverage(dataset_root=str(root), evidence_dirs=[str(options.folder)],
                              expected_problem_denominator=options.expected_problem_denominator, problems=rows)
    counts = {c: sum(r.coverage == c for r in rows) for c in ("full", "partial", "none")}
    denominator = options.expected_problem_denominator or len(rows)
    summary = TimingCoverageSummary(problems=len(rows), denominator=denominator,
                                    complete=counts["full"] >= denominator, **counts)
    folder = options.folder
    folder.mkdir(parents=True, exist_ok=True)
    replace_json(folder / COVERAGE_FILES[0], coverage)
    replace_file(folder / COVERAGE_FILES[1], _markdown(coverage, summary).encode())
    replace_json(folder / COVERAGE_FILES[2], summary)
    return coverage, summary


def _markdown(coverage: TimingCoverage, summary: TimingCoverageSummary) -> str:
    lines = ["# Profiler-backed timing coverage", "",
             f"{summary.full} full, {summary.partial} partial, {summary.none} none of {summary.problems} problem(s); "
             f"denominator {summary.denominator}; complete: {'yes' if summary.complete else 'no'}.", "",
             "| problem | coverage | profiled / expected | why |", "|---|---|---|---|"]
    for row in coverage.problems:
        reason = row.reason.replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {row.problem} | {row.coverage} | {row.workloads_profiled} / {row.workloads_expected} | {reason} |")
    return "\n".join(lines) + "\n"


def parse_blocked(values: tuple[str, ...]) -> dict[str, str]:
    """``PROBLEM`` or ``PROBLEM=REASON`` each."""
    out = {}
    for value in values:
        key, _, reason = value.partition("=")
        out[key.strip()] = reason.strip() or "marked blocked (--mark-blocked-problem)"
    return out


def result_json(result: TimingEvidenceResult) -> str:
    return json.dumps({"folder": str(result.folder), "profiled_problems": result.profiled_problems,
                       "summary": result.summary.model_dump(mode="json")}, indent=2)
