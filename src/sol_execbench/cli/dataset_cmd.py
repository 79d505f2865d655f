"""``sol-execbench dataset ...``: suites of problems (run, migrate)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from sol_execbench.cli.evaluate_cmd import SECONDS, check_device, check_seconds
from sol_execbench.cli.main import cli

PATH = click.Path(path_type=Path)
TIMING_DEFAULTS = {"timing_tool_version": "rocprofv3", "gpu_architecture": "unknown"}


@cli.group("dataset")
def dataset_group() -> None:
    """Suites of problems: run a whole dataset root, or migrate another layout into it.

    \b
    sol-execbench dataset run ROOT [-o out]
    sol-execbench dataset migrate-sol SRC OUT
    """


def _timing_requested(values: dict[str, object]) -> tuple[str, ...]:
    """The timing-evidence flags given (a value other than the default)."""
    return tuple(f"--{name.replace('_', '-')}" for name, value in values.items()
                 if value is not None and value != TIMING_DEFAULTS.get(name))


def _categories(values: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(part for value in values for part in value.split(",") if part)


class ManyValuesOption(click.Option):
    """A repeatable option that also takes several values at once, as the reference's
    ``--category L1 L2`` does (argparse ``nargs='+'``): the words after it up to the next option."""

    def add_to_parser(self, parser, ctx) -> None:
        super().add_to_parser(parser, ctx)
        for name in self.opts:
            option = parser._long_opt.get(name) or parser._short_opt.get(name)
            if option is None:
                continue
            take_one = option.process

            def take_many(value, state, take_one=take_one) -> None:
                take_one(value, state)
                while state.rargs and not state.rargs[0].startswith("-"):
                    take_one(state.rargs.pop(0), state)

            option.process = take_many


def timing_evidence_options(command):  # noqa: ANN001, ANN201 - a click command
    """The profiler-closure flags (seed 000's timing batch and coverage scripts), shared with ``dataset run``."""
    for option in reversed([
        click.option("--only-problem", multiple=True, metavar="PROBLEM", help="Profile only this problem (repeatable)."),
        click.option("--skip-problem", multiple=True, metavar="PROBLEM", help="Do not profile this problem (repeatable)."),
        click.option("--skip-problem-file", type=PATH, help="Text file of problems not to profile, one a line."),
        click.option("--mark-blocked-problem", multiple=True, metavar="PROBLEM[=REASON]",
                     help="Write blocked evidence for this problem instead of profiling it (repeatable)."),
        click.option("--workload-limit", type=click.IntRange(min=1), help="Profile at most this many workloads per problem."),
        click.option("--workload-offset", type=click.IntRange(min=0), default=0, show_default=True,
                     help="Start the workload slice here."),
        click.option("--workload-sharded", is_flag=True, help="One profiler run per workload (else one per problem)."),
        click.option("--expected-problem-denominator", type=click.IntRange(min=1),
                     help="The problem count coverage is judged against [default: the problems found]."),
        click.option("--require-profiler-complete", is_flag=True,
                     help="Exit 1 unless every denominator problem has full profiler-backed timing."),
        click.option("--target-status", multiple=True, type=click.Choice(["full", "partial", "none", "blocked", "missing"]),
                     help="Only profile problems whose evidence currently has this coverage (repeatable)."),
        click.option("--profiler", "timing_tool", type=click.Choice(["auto", "ncu", "rocprofv3"]), default="auto",
                     show_default=True, help="auto: ncu on NVIDIA, rocprofv3 on ROCm."),
        click.option("--profile-calls", "timing_calls", type=click.IntRange(min=1, max=1000), default=10, show_default=True,
                     help="Profiled calls per workload."),
    ]):
        command = option(command)
    return command


def build_options(root: Path, output: Path, evidence_dir: Path | None, **kw):  # noqa: ANN003, ANN201
    from sol_execbench.dataset.timing_evidence import TimingEvidenceOptions, parse_blocked

    version = kw.pop("timing_tool_version", None)
    arch = kw.pop("gpu_architecture", None)
    return TimingEvidenceOptions(
        root=root, output=output, evidence_dir=evidence_dir, categories=kw.get("categories", ()), limit=kw.get("limit"),
        solution_name=kw.get("solution_name"), tool=kw["timing_tool"], calls=kw["timing_calls"],
        tool_version=None if version in (None, "rocprofv3") else version,
        gpu_architecture=None if arch in (None, "unknown") else arch, timeout_s=kw.get("timeout", 300.0),
        device=kw.get("device"), only_problems=tuple(kw["only_problem"]), skip_problems=tuple(kw["skip_problem"]),
        skip_problem_file=kw["skip_problem_file"], blocked=parse_blocked(tuple(kw["mark_blocked_problem"])),
        workload_limit=kw["workload_limit"], workload_offset=kw["workload_offset"],
        workload_sharded=kw["workload_sharded"], expected_problem_denominator=kw["expected_problem_denominator"],
        require_profiler_complete=kw["require_profiler_complete"], target_statuses=tuple(kw["target_status"]),
        keep_staging=kw.get("keep_staging", False))


@dataset_group.command("run")
@click.argument("root", type=PATH)
@click.option("--category", cls=ManyValuesOption, multiple=True, metavar="NAME...",
              help="Only problems below these category folders (--category L1 L2, repeatable, or comma-separated).")
@click.option("--limit", type=click.IntRange(min=1), help="At most this many problems.")
@click.option("--phase", type=click.Choice(["all", "traces", "derived", "timing"]), default="all", show_default=True,
              help="traces: evaluate; derived: write the derived outputs from the traces in --output; all: both (and "
                   "timing evidence with --timing-evidence-dir); timing: the timing evidence of the traces in --output.")
@click.option("--jobs", default="1", show_default=True, metavar="N|auto", help="CPU workers for loading and checking the problems.")
@click.option("--execution-mode", type=click.Choice(["serial", "pipeline"]), default="serial", show_default=True,
              help="pipeline: build the next problems' native solutions while one evaluates.")
@click.option("--executor", type=click.Choice(["local", "ray"]), default="local", show_default=True,
              help="local: evaluate here; ray: each problem a Ray task on a cluster, one GPU each (pip install "
                   "'sol-execbench[ray]').")
@click.option("--ray-address", metavar="HOST:PORT",
              help="The Ray head to attach to (with --executor ray) [default: start a local instance].")
@click.option("--prepare-jobs", default="auto", show_default=True, metavar="N|auto", help="Preparation workers in pipeline mode.")
@click.option("--gpu-jobs", default="1", show_default=True, metavar="N|auto",
              help="Evaluations at once, one per GPU (cuda:0..N-1); auto: every visible GPU.")
@click.option("--timeout", default=300.0, show_default=True, type=SECONDS, callback=check_seconds,
              help="Seconds per evaluator call (a problem, or a shard of it).")
@click.option("--timeout-policy", type=click.Choice(["record", "fail"]), default="record", show_default=True,
              help="record: a timeout is a TIMEOUT trace; fail: also stop the run (exit 2).")
@click.option("--timeout-overrides", type=PATH, help="JSON: 'default', 'problems' {path: s}, 'workloads' {path:uuid: s}.")
@click.option("--blob-precheck", type=click.Choice(["fail", "warn", "off"]), default="fail", show_default=True,
              help="Look up every safetensors input first: fail exits 2 listing the missing, warn records them as RUNTIME_ERROR.")
@click.option("--log-order", type=click.Choice(["completion", "problem"]), default="completion", show_default=True,
              help="Report problems as they finish, or in queue order.")
@click.option("-o", "--output", type=PATH, default=Path("out"), show_default=True, help="Output folder.")
@click.option("--max-workloads", type=click.IntRange(min=1), help="At most this many workloads per problem (the first).")
@click.option("--workload-shard-size", type=click.IntRange(min=1), help="At most this many workloads per evaluator call.")
@click.option("--iterations", type=click.IntRange(min=1), help="Timed rounds (config field iterations).")
@click.option("--warmup-runs", type=click.IntRange(min=0), help="Untimed calls first (config field warmup_runs).")
@click.option("--lock-clocks", is_flag=True, help="Require locked GPU clocks (lock_clocks).")
@click.option("--rerun", is_flag=True, help="Evaluate every problem again, even those whose results stand.")
@click.option("--keep-staging", is_flag=True, help="Keep the evaluations' staging folders.")
@click.option("-v", "--verbose", is_flag=True, help="Show the evaluation children's output.")
@click.option("--ready-subset", type=PATH, help="Only the workloads this ready-subset JSON lists.")
@click.option("--readiness", type=PATH, help="Readiness JSON: the reasons of skipped workloads in the closure.")
@click.option("--execution-closure", type=PATH, help="Write the execution closure here [default with --ready-subset: OUTPUT/execution_closure.json].")
@click.option("--dataset-manifest", type=PATH, help="Dataset manifest JSON; its hash joins the reuse rule.")
@click.option("--config", "config_path", type=PATH, help="Benchmark config JSON, over each problem's config.json.")
@click.option("--solution-name", help="Evaluate this file of each problem folder (.json, or .py wrapped) [default: the reference].")
@click.option("--device", default=None, callback=check_device, help="cpu, N or cuda:N [default: the first GPU, else cpu].")
@click.option("--amd-score-report", type=PATH, help="Write the SOL score report (JSON, score_report format) here.")
@click.option("--scoring-baseline", type=PATH,
              help="Baseline times JSON (scoring_baseline format) to score against instead of the reference's latency.")
@click.option("--amd-sol-bound-dir", type=PATH,
              help="Write each problem's priced bounds to DIR/<problem>/bound.json (with --amd-score-report).")
@click.option("--solar-derivation", type=PATH,
              help="Write each problem's bytes and FLOPs derivation to DIR/<problem>/derivation.json.")
@click.option("--hardware", metavar="NAME",
              help="Part whose datasheet peaks price T_SOL in the score report [default: the GPU the traces name].")
@click.option("--timing-evidence-dir", type=PATH,
              help="Write per-problem timing evidence (profiler kernel time per workload) and coverage here "
                   "[--phase timing default: OUTPUT/timing_evidence].")
@click.option("--timing-tool-version", default="rocprofv3", show_default=True,
              help="Tool version recorded in the timing evidence [default value: the profiler's own --version].")
@click.option("--gpu-architecture", default="unknown", show_default=True,
              help="GPU architecture recorded in the timing evidence [default value: the traces' device arch].")
@timing_evidence_options
def dataset_run(root, category, limit, phase, jobs, execution_mode, executor, ray_address, prepare_jobs, gpu_jobs, timeout, timeout_policy,
                timeout_overrides, blob_precheck, log_order, output, max_workloads, workload_shard_size, iterations,
                warmup_runs, lock_clocks, rerun, keep_staging, verbose, ready_subset, readiness, execution_closure,
                dataset_manifest, config_path, solution_name, device, amd_score_report, scoring_baseline,
                amd_sol_bound_dir, solar_derivation, hardware, timing_evidence_dir, timing_tool_version, gpu_architecture,
                **closure) -> None:
    """Evaluate every problem below ROOT (a problem folder, or a root of category folders).

    Each problem's traces go to OUTPUT/<problem path>/traces.jsonl with its run.json, and the run's
    summary to OUTPUT/summary.json; a second run skips the problems whose results stand. Exit 0 when
    every workload PASSED, 1 when some did not, 2 on a bad input or flag.
    """
    from sol_execbench.cli.dataset_render import run_and_render
    from sol_execbench.dataset.options import RunOptions

    timing = _timing_requested({"timing_evidence_dir": timing_evidence_dir, "timing_tool_version": timing_tool_version,
                                "gpu_architecture": gpu_architecture})
    options = RunOptions(root=root, output=output, categories=_categories(category), limit=limit, phase=phase, jobs=jobs,
                         execution_mode=execution_mode, prepare_jobs=prepare_jobs, gpu_jobs=gpu_jobs, timeout_s=timeout,
                         timeout_policy=timeout_policy, timeout_overrides=timeout_overrides, blob_precheck=blob_precheck,
                         log_order=log_order, max_workloads=max_workloads, workload_shard_size=workload_shard_size,
                         iterations=iterations, warmup_runs=warmup_runs, lock_clocks=lock_clocks, rerun=rerun,
                         keep_staging=keep_staging, verbose=verbose, ready_subset=ready_subset, readiness=readiness,
                         execution_closure=execution_closure, dataset_manifest=dataset_manifest, config=config_path,
                         solution_name=solution_name, device=device, amd_score_report=amd_score_report,
                         scoring_baseline=scoring_baseline, amd_sol_bound_dir=amd_sol_bound_dir,
                         solar_derivation=solar_derivation, hardware=hardware, timing_requested=timing,
                         executor=executor, ray_address=ray_address,
                         timing_evidence=build_options(root, output, timing_evidence_dir, categories=_categories(category),
                                                       limit=limit, solution_name=solution_name, timeout=timeout,
                                                       device=device, keep_staging=keep_staging,
                                                       timing_tool_version=timing_tool_version,
                                                       gpu_architecture=gpu_architecture, **closure))
    sys.exit(run_and_render(options))
