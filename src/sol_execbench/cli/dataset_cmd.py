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


@dataset_group.command("run")
@click.argument("root", type=PATH)
@click.option("--category", cls=ManyValuesOption, multiple=True, metavar="NAME...",
              help="Only problems below these category folders (--category L1 L2, repeatable, or comma-separated).")
@click.option("--limit", type=click.IntRange(min=1), help="At most this many problems.")
@click.option("--phase", type=click.Choice(["all", "traces", "derived", "timing"]), default="all", show_default=True,
              help="traces: evaluate; derived: write the derived outputs from the traces in --output; all: both; "
                   "timing: not available yet.")
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
@click.option("--timing-evidence-dir", type=PATH, help="ROCm timing evidence (not available yet).")
@click.option("--timing-tool-version", default="rocprofv3", show_default=True, help="For timing evidence (not available yet).")
@click.option("--gpu-architecture", default="unknown", show_default=True, help="For timing evidence (not available yet).")
def dataset_run(root, category, limit, phase, jobs, execution_mode, executor, ray_address, prepare_jobs, gpu_jobs, timeout, timeout_policy,
                timeout_overrides, blob_precheck, log_order, output, max_workloads, workload_shard_size, iterations,
                warmup_runs, lock_clocks, rerun, keep_staging, verbose, ready_subset, readiness, execution_closure,
                dataset_manifest, config_path, solution_name, device, amd_score_report, scoring_baseline,
                amd_sol_bound_dir, solar_derivation, hardware, timing_evidence_dir, timing_tool_version, gpu_architecture) -> None:
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
                         executor=executor, ray_address=ray_address)
    sys.exit(run_and_render(options))
