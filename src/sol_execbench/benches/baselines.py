"""``bench baselines``: every problem of a suite timed in PyTorch eager and under ``torch.compile``,
through the dataset runner and so through the evaluator, written as KernelBench's baseline files.

Eager is the reference evaluated as its own solution; each compile mode is a generated solution,
the reference wrapped in ``torch.compile``, so correctness, fresh inputs, the L2 flush and the
device timing rule all apply. The first call (compilation) is timed apart (``compile_s``). A mode
that fails or times out on a problem records the problem's error and the run goes on. These times
follow the evaluator's latency rule and are not comparable with KernelBench's event timing."""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from sol_execbench.files import replace_json
from sol_execbench.schema import Definition, EvaluationStatus, Solution, Trace
from sol_execbench.schema.benches import BaselineEntry, BaselineFile, BaselineStats

from .baselines_figures import render_folder
from .errors import BenchUsageError
from .figures import missing_matplotlib

DEFAULT_TRIALS = 100  # KernelBench's num_trials
TEST_MAX_PROBLEMS = 5
ENVIRONMENT_FILE = "environment.json"
ROCM_CHILD_ENV = {"HSA_ENABLE_COREDUMP": "0", "AMD_LOG_LEVEL": "0", "ROCM_DISABLE_CRASH_DUMP": "1",
                  "HIP_ENABLE_COREDUMP": "0"}
SDMA_OFF = {"HSA_ENABLE_SDMA": "0"}
ONE_HW_QUEUE = {"GPU_MAX_HW_QUEUES": "1"}


@dataclass(frozen=True)
class BaselineMode:
    name: str
    backend: str | None  # None: eager
    mode: str | None = None

    @property
    def file_stem(self) -> str:
        if self.backend is None:
            return "baseline_time_torch"
        return f"baseline_time_torch_compile_{self.backend}" + (f"_{self.mode}" if self.mode else "")


MODES = {m.name: m for m in (
    BaselineMode("eager", None),
    BaselineMode("inductor-default", "inductor", "default"),
    BaselineMode("inductor-reduce-overhead", "inductor", "reduce-overhead"),
    BaselineMode("inductor-max-autotune", "inductor", "max-autotune"),
    BaselineMode("inductor-max-autotune-no-cudagraphs", "inductor", "max-autotune-no-cudagraphs"),
    BaselineMode("cudagraphs", "cudagraphs"),
)}

COMPILE_WRAPPER = '''

# -- sol-execbench (bench baselines): the reference above under torch.compile ----------------------------
import torch as _sol_bench_torch
import torch._inductor.config as _sol_bench_inductor_config

# Compile in this process: inductor's pool of compile workers is a set of child processes that import
# torch while the calls are timed, which the evaluator rightly reports as work done outside the calls.
_sol_bench_inductor_config.compile_threads = 1
_sol_bench_reference_run = run
_sol_bench_compiled = _sol_bench_torch.compile(_sol_bench_reference_run, backend={backend!r}{mode})


def run(*args, **kwargs):
    return _sol_bench_compiled(*args, **kwargs)
'''


def compile_solution(definition: Definition, mode: BaselineMode) -> Solution:
    """The reference wrapped in ``torch.compile`` with the mode's backend and mode."""
    from sol_execbench.dataset.solutions import python_solution

    code = definition.reference.rstrip("\n") + "\n" + COMPILE_WRAPPER.format(
        backend=mode.backend, mode=f", mode={mode.mode!r}" if mode.mode else "")
    return python_solution(definition, code, name=f"torch_compile_{mode.name}_{definition.name}",
                           entry_file="reference_compiled.py",
                           description=f"The reference under torch.compile(backend={mode.backend!r}, "
                                       f"mode={mode.mode!r}).")


def level_name(category: str) -> str:
    """KernelBench's level key of a problem category: ``L1`` and ``level1`` are ``level1``; any other
    category keeps its name; problems at the root are ``default``."""
    match = re.fullmatch(r"(?:L|level)(\d+)", category, flags=re.IGNORECASE)
    return f"level{match.group(1)}" if match else (category or "default")


def problem_name(key: str) -> str:
    return PurePosixPath(key).name


@dataclass(frozen=True)
class BaselineOptions:
    root: Path
    results: Path = Path("results/timing")
    hardware: str | None = None
    levels: tuple[int, ...] = ()
    problem: str | None = None
    problem_level: int = 1
    test: bool = False
    max_problems: int | None = None
    modes: tuple[str, ...] = tuple(MODES)
    num_trials: int = DEFAULT_TRIALS
    config: Path | None = None
    device: str | None = None
    timeout_s: float = 300.0
    sdma_off: bool = False
    one_hw_queue: bool = False


@dataclass(frozen=True)
class RunUnit:
    """One dataset run of a mode: a root, the categories it keeps, a limit, the level it stands for."""

    root: Path
    categories: tuple[str, ...]
    limit: int | None
    level: str | None  # None: each problem's level from its category


def geometric_mean(values: list[float]) -> float:
    if any(v <= 0 for v in values):
        return 0.0
    return math.exp(sum(math.log(v) for v in values) / len(values))


def _stats(trace: Trace) -> BaselineStats:
    timing = trace.evaluation.performance.solution_timing
    return BaselineStats(mean=timing.mean_ms, std=timing.std_ms, min=timing.min_ms, max=timing.max_ms,
                         num_trials=timing.count, median=timing.median_ms)


def baseline_entry(traces: list[Trace], compiled: bool, device: str | None = None) -> BaselineEntry:
    """A problem's entry from its traces: KernelBench's fields (geometric means over several
    workloads, each in ``workloads``), or its first failure."""
    first = traces[0].evaluation if traces else None
    record = first.device if first is not None else None
    facts = dict(hardware=(record.name if record else (first.environment.hardware if first else "unknown")),
                 gpu_type={"cuda": "NVIDIA", "rocm": "AMD", "cpu": "CPU"}.get(record.vendor if record else "", "unknown"),
                 device=(f"cuda:{record.index}" if record and record.index is not None else (device or "cpu")))
    jit = next((t.evaluation.build.jit_time_s for t in traces
                if t.evaluation and t.evaluation.build and t.evaluation.build.jit_time_s is not None), None)
    compile_s = jit if compiled else None
    failed = next((t for t in traces if t.evaluation is None or t.evaluation.status != EvaluationStatus.PASSED
                   or t.evaluation.performance is None or t.evaluation.performance.solution_timing is None), None)
    if not traces or failed is not None:
        status = failed.evaluation.status.value if failed is not None and failed.evaluation else "NO_TRACE"
        log = (failed.evaluation.log or "").strip() if failed is not None and failed.evaluation else ""
        return BaselineEntry(**facts, status=status, compile_s=compile_s,
                             error=(log.splitlines()[-1][:400] if log else f"{status}: no trace with timing"))
    stats = {t.workload.uuid: _stats(t) for t in traces}
    values = list(stats.values())
    return BaselineEntry(**facts, status="PASSED", compile_s=compile_s,
                         mean=geometric_mean([s.mean for s in values]), std=geometric_mean([s.std for s in values]),
                         min=geometric_mean([s.min for s in values]), max=geometric_mean([s.max for s in values]),
                         num_trials=min(s.num_trials for s in values),
                         workloads=stats if len(values) > 1 else None)


def reuse_folder(results: Path, hardware: str | None) -> Path:
    """The hardware folder ``--reuse`` draws from: ``--hardware``'s, else the only one under ``results``."""
    if hardware:
        return results / hardware
    found = sorted(p for p in results.glob("*") if p.is_dir() and any(p.glob("baseline_time_torch*.json"))) \
        if results.is_dir() else []
    if len(found) != 1:
        raise BenchUsageError(f"--results {results}: {len(found)} hardware folders with baseline files; name one "
                              "with --hardware")
    return found[0]


def hardware_slug(device: Any, given: str | None) -> str:
    """``<GPU>_<platform>``: the peak table's part where it knows the device (H100_cuda, MI300X_rocm)."""
    from sol_execbench.platform.peaks import UnknownPartError, peaks_for

    if given:
        return given
    if not device.is_gpu:
        return "CPU_cpu"
    try:
        part = peaks_for(device.name).name
    except UnknownPartError:
        part = re.sub(r"[^A-Za-z0-9]+", "", device.name.replace("NVIDIA", "").replace("AMD", "")) or "GPU"
    return f"{part}_{device.vendor}"


def _level_folder(root: Path, level: int) -> str:
    for name in (f"L{level}", f"level{level}"):
        if (root / name).is_dir():
            return name
    raise BenchUsageError(f"--level {level}: {root} has no L{level}/ or level{level}/ folder; give a dataset root "
                          "of level folders (dataset migrate-kernelbench writes L1/, L2/, ...)")


def run_units(options: BaselineOptions) -> list[RunUnit]:
    limit = options.max_problems if options.max_problems is not None else (
        TEST_MAX_PROBLEMS if options.test else None)
    if options.problem is not None:
        folder = options.root / _level_folder(options.root, options.problem_level)
        names = sorted(p.name for p in folder.iterdir() if p.is_dir())
        match = [n for n in names if n == options.problem or n.split("_", 1)[0] == options.problem]
        if len(match) != 1:
            raise BenchUsageError(f"--problem {options.problem}: {'no' if not match else 'more than one'} problem of "
                                  f"{folder} matches; give its folder name or its number")
        return [RunUnit(folder / match[0], (), None, f"level{options.problem_level}")]
    if options.levels:
        return [RunUnit(options.root, (_level_folder(options.root, level),), limit, f"level{level}")
                for level in options.levels]
    return [RunUnit(options.root, (), limit, None)]


def _child_environment(options: BaselineOptions, vendor: str) -> dict[str, str]:
    """ROCm's quiet-crash variables, and the opt-in ones that change timings."""
    env: dict[str, str] = {}
    if vendor == "rocm":
        env.update(ROCM_CHILD_ENV)
        env.update(SDMA_OFF if options.sdma_off else {})
        env.update(ONE_HW_QUEUE if options.one_hw_queue else {})
    return env


def _run_mode(options: BaselineOptions, mode: BaselineMode, units: list[RunUnit], work: Path,
              fresh_children: bool) -> dict[str, dict[str, BaselineEntry]]:
    from sol_execbench.dataset.discovery import DatasetUsageError
    from sol_execbench.dataset.options import RunOptions
    from sol_execbench.dataset.runner import run_dataset
    from sol_execbench.dataset.solutions import GeneratedSolution
    from sol_execbench.schema.trace_files import read_traces, traces_file

    generated = None if mode.backend is None else GeneratedSolution(
        f"torch.compile {mode.name}", lambda definition: compile_solution(definition, mode))
    levels: dict[str, dict[str, BaselineEntry]] = {}
    for unit in units:
        run_options = RunOptions(root=unit.root, output=work / mode.name, categories=unit.categories, limit=unit.limit,
                                 iterations=options.num_trials, config=options.config, device=options.device,
                                 timeout_s=options.timeout_s, generated_solution=generated,
                                 use_warm_pool=not fresh_children, blob_precheck="warn")
        try:
            result = run_dataset(run_options)
        except DatasetUsageError as exc:
            raise BenchUsageError(str(exc)) from None
        for summary in result.summary.problems:
            level = unit.level or level_name(summary.category)
            folder = work / mode.name / summary.problem
            found = traces_file(folder) if summary.outcome != "skipped" else None
            traces = read_traces(found) if found is not None else []
            entry = baseline_entry(traces, mode.backend is not None, options.device)
            if summary.outcome == "skipped":
                entry.error = f"skipped: {summary.note}"
            levels.setdefault(level, {})[problem_name(summary.problem)] = entry
    return levels


def run_baselines(options: BaselineOptions) -> tuple[list[Path], list[str]]:
    """Every mode's baseline file under ``results/<hardware>/``, the environment snapshot beside them;
    the dataset runs (traces, run records) under ``results/<hardware>/runs/<mode>``. Returns the files
    written and notes (modes this platform lacks)."""
    from sol_execbench.envprobe.sidecar import write_snapshot_sidecar
    from sol_execbench.platform import use_device

    unknown = [m for m in options.modes if m not in MODES]
    if unknown:
        raise BenchUsageError(f"--modes {unknown[0]}: not a mode; give some of {', '.join(MODES)}")
    if options.num_trials < 1:
        raise BenchUsageError("--num-trials: give a whole number above 0")
    if options.max_problems is not None and options.max_problems < 1:
        raise BenchUsageError("--max-problems: give a whole number above 0")
    if not options.root.is_dir():
        raise BenchUsageError(f"{options.root}: no such directory; give a dataset root or problem folder")
    units = run_units(options)
    try:
        device = use_device(options.device)
    except ValueError as exc:
        raise BenchUsageError(f"--device {options.device}: {exc}") from None
    extra_env = _child_environment(options, device.vendor)
    os.environ.update(extra_env)  # fresh evaluation children inherit them (a warm one started before would not)
    folder = options.results / hardware_slug(device, options.hardware)
    written, notes = [], []
    for name in options.modes:
        mode = MODES[name]
        if mode.backend == "cudagraphs" and device.vendor != "cuda":
            notes.append(f"mode cudagraphs: the cudagraphs backend needs CUDA graphs on an NVIDIA GPU (here: "
                         f"{device.vendor}); not run")
            continue
        levels = _run_mode(options, mode, units, folder / "runs", fresh_children=bool(extra_env))
        path = folder / f"{mode.file_stem}{'_test' if options.test else ''}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_json(path, BaselineFile(levels), exclude_none=True)
        written.append(path)
    snapshot = write_snapshot_sidecar(None, folder / ENVIRONMENT_FILE)
    written += [snapshot] if snapshot else []
    reason = missing_matplotlib()
    if reason:
        notes.append(reason)
    elif written:
        written.append(render_folder(folder, options.test))
    return written, notes
