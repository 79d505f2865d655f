"""The options of a dataset run (the flags of ``dataset run`` and ``scripts/run_dataset.py``), and
the checks of how they combine."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from .discovery import DatasetUsageError
from .solutions import GeneratedSolution

AUTO = "auto"
PHASES = ("all", "traces", "derived", "timing")
PIPELINE_PHASES = ("all", "traces")
EXECUTION_MODES = ("serial", "pipeline")
EXECUTORS = ("local", "ray")
TIMEOUT_POLICIES = ("record", "fail")
BLOB_PRECHECKS = ("fail", "warn", "off")
LOG_ORDERS = ("completion", "problem")
DEFAULT_OUTPUT = Path("out")
DEFAULT_TIMEOUT_S = 300.0
PREPARE_JOBS_CAP = 8  # native builds are memory-hungry: more at once than this slows a host down
JOBS_CAP = 32
CLOSURE_FILE = "execution_closure.json"
SOLUTION_SUFFIXES = (".json", ".py")

TIMING_FLAGS = ("--timing-evidence-dir", "--timing-tool-version", "--gpu-architecture")


@dataclass(frozen=True)
class RunOptions:
    root: Path
    output: Path = DEFAULT_OUTPUT
    categories: tuple[str, ...] = ()
    limit: int | None = None
    phase: str = "all"
    jobs: str = "1"
    """CPU workers for loading and checking the problems before the run: N or ``auto``."""
    execution_mode: str = "serial"
    prepare_jobs: str = AUTO
    gpu_jobs: str = "1"
    timeout_s: float = DEFAULT_TIMEOUT_S
    timeout_policy: str = "record"
    timeout_overrides: Path | None = None
    blob_precheck: str = "fail"
    log_order: str = "completion"
    max_workloads: int | None = None
    workload_shard_size: int | None = None
    iterations: int | None = None
    warmup_runs: int | None = None
    lock_clocks: bool = False
    rerun: bool = False
    keep_staging: bool = False
    verbose: bool = False
    ready_subset: Path | None = None
    readiness: Path | None = None
    execution_closure: Path | None = None
    dataset_manifest: Path | None = None
    config: Path | None = None
    solution_name: str | None = None
    device: str | None = None
    amd_score_report: Path | None = None
    """Write the SOL score report (``ScoreReport``) here."""
    scoring_baseline: Path | None = None
    """Baseline times to score against (``ScoringBaseline``) instead of the reference's latency."""
    amd_sol_bound_dir: Path | None = None
    """Write each problem's priced bounds below it (with a score report only)."""
    solar_derivation: Path | None = None
    """Write each problem's bytes and FLOPs derivation below it."""
    hardware: str | None = None
    """The part whose datasheet peaks price T_SOL [default: the GPU the traces name]."""
    generated_solution: GeneratedSolution | None = None
    """Each problem's solution made from its definition (Python callers only; not with solution_name)."""
    use_warm_pool: bool = True
    """False: every evaluation in a fresh child (one that sees the variables this process set)."""
    timing_requested: tuple[str, ...] = field(default=())
    """The timing-evidence flags given (with --phase all or timing only)."""
    timing_evidence: object | None = None
    """``timing_evidence.TimingEvidenceOptions``: what --phase timing (and --phase all with
    --timing-evidence-dir) collects after the traces."""
    executor: str = "local"
    """local: this process evaluates on its slots; ray: Ray tasks on a cluster, this process writes."""
    ray_address: str | None = None
    """The Ray cluster to attach to (``HOST:PORT``, ``auto``, ``ray://...``); None: a local instance."""

    @property
    def derived_requested(self) -> tuple[str, ...]:
        """The derived-output flags given."""
        return tuple(flag for flag, value in (("--amd-score-report", self.amd_score_report),
                                              ("--solar-derivation", self.solar_derivation),
                                              ("--amd-sol-bound-dir", self.amd_sol_bound_dir),
                                              ("--scoring-baseline", self.scoring_baseline),
                                              ("--hardware", self.hardware)) if value is not None)

    @property
    def pipeline(self) -> bool:
        return self.execution_mode == "pipeline"

    @property
    def closure_path(self) -> Path | None:
        if self.execution_closure is not None:
            return self.execution_closure
        return self.output / CLOSURE_FILE if self.ready_subset is not None else None

    def config_overrides(self) -> dict[str, object]:
        """The benchmark config fields the flags set (over ``config.json`` and ``--config``)."""
        fields: dict[str, object] = {}
        if self.iterations is not None:
            fields["iterations"] = self.iterations
        if self.warmup_runs is not None:
            fields["warmup_runs"] = self.warmup_runs
        if self.lock_clocks:
            fields["lock_clocks"] = True
        return fields


def check_combination(options: RunOptions) -> None:
    """Flags that cannot go together, or ask for what does not exist yet: one line naming them."""
    if options.timing_requested and options.phase not in ("all", "timing"):
        raise DatasetUsageError(f"{options.timing_requested[0]} goes with --phase all (evaluate, then profile) or "
                                f"--phase timing (profile what an earlier run evaluated), not --phase {options.phase}")
    if options.phase == "timing" and options.timing_evidence is None:
        raise DatasetUsageError("--phase timing: no timing-evidence options were given (the command line always gives them)")
    if options.phase == "timing" and options.pipeline:
        raise DatasetUsageError("--phase timing profiles serially: drop --execution-mode pipeline")
    _check_derived(options)
    _check_executor(options)
    if options.pipeline:
        if options.phase not in PIPELINE_PHASES:
            raise DatasetUsageError(f"--execution-mode pipeline runs --phase traces or all, not {options.phase}")
        for flag, value in (("--ready-subset", options.ready_subset), ("--execution-closure", options.execution_closure)):
            if value is not None:
                raise DatasetUsageError(f"--execution-mode pipeline does not take {flag}: use --execution-mode serial "
                                        f"with {flag}")
    for flag, value in (("--jobs", options.jobs), ("--prepare-jobs", options.prepare_jobs),
                        ("--gpu-jobs", options.gpu_jobs)):
        resolve_count(flag, value, 1)  # the form only; what auto means is known later
    if options.solution_name is not None and options.generated_solution is not None:
        raise DatasetUsageError(f"--solution-name {options.solution_name}: this run generates each problem's solution "
                                f"({options.generated_solution.origin}); give one or the other")
    if options.solution_name is not None and Path(options.solution_name).suffix not in SOLUTION_SUFFIXES:
        raise DatasetUsageError(f"--solution-name {options.solution_name}: give a .json or .py file name (a solution "
                                "JSON, or Python with a run function)")
    if options.readiness is not None and options.closure_path is None:
        raise DatasetUsageError("--readiness enriches the execution closure: give --ready-subset or "
                                "--execution-closure with it")
    for flag, path in (("--timeout-overrides", options.timeout_overrides), ("--ready-subset", options.ready_subset),
                       ("--readiness", options.readiness), ("--dataset-manifest", options.dataset_manifest),
                       ("--config", options.config)):
        if path is not None and not path.is_file():
            raise DatasetUsageError(f"{flag} {path}: {'is a directory' if path.is_dir() else 'no such file'}; "
                                    "give the path of a JSON file")


def _check_executor(options: RunOptions) -> None:
    if options.executor != "ray":
        if options.ray_address is not None:
            raise DatasetUsageError("--ray-address goes with --executor ray: add --executor ray, or drop --ray-address")
        return
    if options.pipeline:
        raise DatasetUsageError("--executor ray: every Ray task builds its own solution on its node, so there is no "
                                "pipeline to run; drop --execution-mode pipeline")
    if options.gpu_jobs != "1":
        raise DatasetUsageError(f"--gpu-jobs {options.gpu_jobs}: with --executor ray the cluster's GPUs set how many "
                                "evaluations run at once; drop --gpu-jobs")
    if options.device not in (None, "auto", "cpu"):
        raise DatasetUsageError(f"--device {options.device}: with --executor ray each task gets the GPU Ray assigns "
                                "it; drop --device (or give --device cpu for a CPU run)")


def _check_derived(options: RunOptions) -> None:
    given = options.derived_requested
    if options.phase == "traces" and given:
        raise DatasetUsageError(f"--phase traces writes traces only: drop {given[0]}, or use --phase all (evaluate, "
                                "then derive) or --phase derived (from the traces in --output)")
    if options.phase == "derived" and options.amd_score_report is None and options.solar_derivation is None:
        raise DatasetUsageError("--phase derived: give --amd-score-report FILE and/or --solar-derivation DIR (what to "
                                "derive from the traces in --output)")
    if options.amd_score_report is None:
        for flag, value in (("--amd-sol-bound-dir", options.amd_sol_bound_dir),
                            ("--scoring-baseline", options.scoring_baseline), ("--hardware", options.hardware)):
            if value is not None:
                raise DatasetUsageError(f"{flag} goes with a score report: add --amd-score-report FILE")
    if options.hardware is not None:
        from sol_execbench.platform.peaks import UnknownPartError, peaks_for

        try:
            peaks_for(options.hardware)
        except UnknownPartError as exc:
            raise DatasetUsageError(f"--hardware: {exc}") from None
    elif options.amd_score_report is not None and options.device == "cpu" and options.phase == "all":
        raise DatasetUsageError("--amd-score-report with --device cpu: the traces name no GPU to price T_SOL on; pass "
                                "--hardware NAME (H100, MI300X, ...)")
    if options.scoring_baseline is not None and not options.scoring_baseline.is_file():
        raise DatasetUsageError(f"--scoring-baseline {options.scoring_baseline}: no such file; give the baseline "
                                "times JSON (docs/scoring.md)")
    for flag, folder in (("--amd-sol-bound-dir", options.amd_sol_bound_dir),
                         ("--solar-derivation", options.solar_derivation)):
        if folder is not None and folder.exists() and not folder.is_dir():
            raise DatasetUsageError(f"{flag} {folder}: is a file; give a folder (one sidecar per problem path below it)")
    if options.amd_score_report is not None and options.amd_score_report.is_dir():
        raise DatasetUsageError(f"--amd-score-report {options.amd_score_report}: is a directory; give a file name")


def resolve_count(flag: str, value: str, auto: int, upper: int | None = None) -> int:
    """``N`` (a whole number above 0) or ``auto`` (then ``auto``), at most ``upper``."""
    if value == AUTO:
        count = auto
    else:
        try:
            count = int(value)
        except ValueError:
            raise DatasetUsageError(f"{flag} {value!r}: give a whole number above 0 or 'auto'") from None
        if count < 1:
            raise DatasetUsageError(f"{flag} {value}: give a whole number above 0 or 'auto'")
    count = max(1, count)
    return min(count, upper) if upper is not None else count


def cpu_jobs(flag: str, value: str, problems: int, cap: int) -> int:
    """CPU workers: ``auto`` is the CPU count, both capped by the problem count and ``cap``."""
    return resolve_count(flag, value, min(os.cpu_count() or 1, cap), max(problems, 1))
