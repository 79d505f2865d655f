"""``sol-execbench [PROBLEM_DIR] --solution ...``: evaluate a solution and report one trace per workload."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import click
from rich.console import Console

from sol_execbench.cli.main import EVALUATE_COMMAND, cli

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?\s*$", re.IGNORECASE)

# [True] once ``cli.main.main`` runs: the CLI is its own process (a list, mutated, never rebound).
PROCESS_OWNER = [False]
# [pid] when the warm pool's command-line process runs this command for a command line (``warm_front``).
FRONT_PID: list[int | None] = [None]


def parse_size(text: str) -> int:
    match = _SIZE.match(text)
    if not match:
        raise click.BadParameter(f"'{text}' is not a size like 8G, 512M or 1073741824 (or none for no limit)")
    scale = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}[match.group(2).upper()]
    return int(float(match.group(1)) * scale)


def check_device(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Refuse a malformed --device before a child starts; whether the GPU exists is the child's to say."""
    from sol_execbench.evaluate.parent.option_checks import check_device as check

    try:
        return check(value)
    except (TypeError, ValueError) as exc:
        raise click.BadParameter(str(exc)) from None


def check_seconds(ctx: click.Context, param: click.Parameter, value: float) -> float:
    from sol_execbench.evaluate.parent.option_checks import check_seconds as check

    try:
        return check(value, f"--{param.name.replace('_', '-')}")
    except (TypeError, ValueError) as exc:
        raise click.BadParameter(str(exc)) from None


SECONDS = click.FLOAT


@cli.command(EVALUATE_COMMAND)
@click.argument("problem_dir", required=False, type=click.Path(path_type=Path))
@click.option("--definition", type=click.Path(path_type=Path), help="definition.json (instead of a problem directory).")
@click.option("--workload", type=click.Path(path_type=Path), help="workload.jsonl (instead of a problem directory).")
@click.option("--solution", type=click.Path(path_type=Path), help="Solution JSON [default: PROBLEM_DIR/solution.json].")
@click.option("--config", "config_path", type=click.Path(path_type=Path), help="Benchmark config JSON (overrides config.json beside the definition, field by field).")
@click.option("--compile-timeout", default=120.0, show_default=True, type=SECONDS, callback=check_seconds, help="Seconds allowed for building a native solution.")
@click.option("--timeout", default=600.0, show_default=True, type=SECONDS, callback=check_seconds, help="Seconds allowed for the whole evaluation child.")
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Write traces (JSONL) here, each as soon as it is known.")
@click.option("--json", "as_json", is_flag=True, help="Print traces as JSON lines on stdout instead of a table.")
@click.option("--lock-clocks", is_flag=True, help="Require locked GPU clocks (sets lock_clocks).")
@click.option("--keep-staging", is_flag=True, help="Keep the temporary staging directory.")
@click.option("--only", multiple=True, metavar="UUID", help="Evaluate only this workload (repeatable).")
@click.option("--device", default=None, callback=check_device,
              help="cpu, N, cuda:N (hip:N, rocm:N on ROCm) [default: the first visible GPU, else cpu].")
@click.option("--dump-failures", type=click.Path(path_type=Path), help="For each failing workload write inputs, outputs and the seed here.")
@click.option("--memory-limit", default=None, help="Host memory limit of the evaluation child, e.g. 16G, or none [default: 80% of the machine].")
@click.option("--no-build-cache", is_flag=True, help="Build native solutions from scratch, ignoring the build cache.")
@click.option("--sanitize", is_flag=True, help="Also run one call per workload under compute-sanitizer memcheck (NVIDIA) and report its findings in the trace.")
@click.option("--no-warm-pool", is_flag=True, help="Start a fresh evaluation process even if `worker start` keeps warm ones.")
@click.option("--isolation", type=click.Choice(["strict", "auto", "off"]), default="auto", show_default=True,
              help="Sandbox of the evaluation and build children: strict refuses to run without one (exit 2), "
                   "auto uses the best this host offers, off runs unsandboxed.")
@click.option("--profile", type=click.Choice(["none", "torch", "ncu", "rocprofv3", "auto"]), default="none",
              show_default=True, help="After the evaluation, re-run the solution's calls under this profiler and write "
                                      "<stem>.profile.<tool>.json beside -o (auto: ncu then torch on NVIDIA, rocprofv3 "
                                      "then torch on ROCm, torch on the CPU). Not SOL_EXECBENCH_CHILD_PROFILE's cProfile.")
@click.option("--profile-calls", default=20, show_default=True, type=click.IntRange(min=1, max=10000),
              help="Solution calls per workload under --profile.")
@click.option("--static-evidence", type=click.Choice(["none", "auto"]), default="none", show_default=True,
              help="auto: write <stem>.static-evidence.json: registers, shared/LDS memory, local memory and stack per "
                   "kernel (cuobjdump, AMDGPU metadata notes, Triton's compiled-kernel metadata).")
@click.option("-v", "--verbose", is_flag=True, help="Show the child's output and staging details.")
def evaluate_command(problem_dir, definition, workload, solution, config_path, compile_timeout, timeout, output,
                     as_json, lock_clocks, keep_staging, only, device, dump_failures, memory_limit, no_build_cache, no_warm_pool,
                     verbose, sanitize, isolation, profile, profile_calls, static_evidence) -> None:
    """Evaluate SOLUTION on every workload of a problem: correctness, then device timing."""
    from sol_execbench.evaluate.parent.child_env import server_socket_path
    from sol_execbench.evaluate.parent.early_child import EarlyChild

    # The evaluation child starts first, unless a warm pool will provide one or --sanitize runs
    # first: its start-up (torch, the device) runs while this process imports, reads and stages.
    early = None
    if not sanitize and (no_warm_pool or not server_socket_path(device).exists()):
        early = EarlyChild(device, keep_staging)
        click.get_current_context().call_on_close(early.close)  # however the command ends
    from sol_execbench.evaluate import EvalOptions, UsageProblem, evaluate_problem, load_problem, resolve_paths
    from sol_execbench.platform.lifetime import protect_from_children
    from sol_execbench.schema import FormatError

    protect_from_children()  # this process's stdout and -o file are not the solution's to write

    err = Console(stderr=True, soft_wrap=True)
    if verbose and FRONT_PID[0] is not None:
        err.print(f"[sol-execbench] run by the warm pool's command-line process (pid {FRONT_PID[0]})", highlight=False,
                  markup=False)
    try:
        paths = resolve_paths(problem_dir, definition, workload, solution)
        problem = load_problem(*paths, config_path=config_path, only=list(only))
    except UsageProblem as exc:
        raise click.UsageError(str(exc)) from None
    except FormatError as exc:
        err.print(f"[red]error:[/red] {exc.path}: {exc.message}", highlight=False)
        sys.exit(2)
    if early is not None and _uses_triton(problem):
        early.prepare_triton()
    if lock_clocks:
        problem.config.lock_clocks = True
    isolation_mode = _check_isolation(isolation, err)
    _check_timing_rounds(err)
    for message in problem.warnings:
        err.print(f"[yellow]warning:[/yellow] {message}", highlight=False)

    sink = _open_output(output, [*paths, *([config_path] if config_path else []),
                                 paths[0].parent / "config.json", *problem.source_files], problem, err)

    def on_trace(trace) -> None:
        line = trace.model_dump_json()
        if sink is not None:
            sink.write(line)
        if as_json:
            click.echo(line)

    options = EvalOptions(device=device, timeout_s=timeout, compile_timeout_s=compile_timeout,
                          keep_staging=keep_staging, dump_failures=dump_failures, output_path=output,
                          use_build_cache=not no_build_cache, use_warm_pool=not no_warm_pool, sanitize=sanitize, warnings=list(problem.warnings),
                          isolation=isolation_mode, early_child=early,
                          on_trace=on_trace,
                          on_log=(lambda text: err.print(text, markup=False, highlight=False)) if verbose else None)
    if memory_limit:
        from sol_execbench.evaluate.parent.option_checks import NO_LIMIT, check_memory_limit

        try:
            options.memory_limit_bytes = (None if memory_limit.strip().lower() == NO_LIMIT
                                          else check_memory_limit(parse_size(memory_limit)))
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="'--memory-limit'") from None
    _environment_facts(options, output, err)
    from sol_execbench.cli.run_signals import RunStopped, owned_run

    try:
        with owned_run(PROCESS_OWNER[0]):
            traces = evaluate_problem(problem.definition, problem.workloads, problem.solution, problem.config, options)
    except RunStopped as stop:
        err.print(f"stopped by {stop.name}; finished traces are in {output}" if output else f"stopped by {stop.name}",
                  highlight=False)
        sys.exit(128 + stop.signum)
    finally:
        if sink is not None:
            sink.close()
    for message in options.warnings[len(problem.warnings):]:
        err.print(f"[yellow]note:[/yellow] {message}", highlight=False)
    if not as_json:
        from sol_execbench.cli.render import print_traces

        out = Console() if sys.stdout.isatty() else Console(width=160)
        print_traces(traces, f"{problem.definition.name} / {problem.solution.name}", out)
    if output:
        err.print(f"traces written to {output}", highlight=False)
    _diagnostics(problem, options, traces, profile, profile_calls, static_evidence, err)
    sys.exit(0 if all(t.evaluation.status.value == "PASSED" for t in traces) else 1)


def _uses_triton(problem) -> bool:
    """Whether the solution is a Triton one or the reference uses Triton (a guess that only decides
    whether Triton's first-use costs are paid ahead, see ``EarlyChild.prepare_triton``)."""
    from sol_execbench.schema import Language

    return Language.TRITON in problem.solution.spec.languages or "triton" in problem.definition.reference


def _diagnostics(problem, options, traces, profile: str, profile_calls: int, static_evidence: str, err: Console) -> None:
    """--profile and --static-evidence: sidecars after the traces; they never change the exit code."""
    if profile == "none" and static_evidence == "none":
        return  # before the import: the profiling modules cost 20 to 40 ms that a plain run need not pay
    from sol_execbench.profiling import Diagnostics, run_diagnostics

    wanted = Diagnostics(profile, profile_calls, static_evidence)
    options.on_trace = None  # the profiling children's traces are not the evaluation's
    for line in run_diagnostics(problem.definition, problem.workloads, problem.solution, problem.config, options,
                                traces, wanted):
        err.print(line, highlight=False, markup=False)


def _check_timing_rounds(err: Console) -> None:
    """``SOL_EXECBENCH_TIMING_ROUNDS`` naming a folder that cannot be made: exit 2 with one line."""
    from sol_execbench.evaluate.parent.option_checks import timing_rounds_dir

    try:
        timing_rounds_dir()
    except ValueError as exc:
        err.print(f"[red]error:[/red] {exc}", highlight=False)
        sys.exit(2)


def _check_isolation(isolation: str, err: Console):
    """``--isolation strict`` on a host without a sandbox: exit 2 with one line naming why."""
    from sol_execbench.sandbox import IsolationRefused, RunFolders, plan
    from sol_execbench.schema import IsolationMode

    mode = IsolationMode(isolation)
    try:
        plan(mode, RunFolders(private=()))
    except IsolationRefused as exc:
        err.print(f"[red]error:[/red] {exc}", highlight=False)
        sys.exit(2)
    return mode


def _environment_facts(options, output: Path | None, err: Console) -> None:
    """Hand the environment hash down to the traces; write the snapshot sidecar when asked.

    The hash is computed beside the evaluation: on a host's first run (or after a reboot or a
    package change) it probes the environment, torch's import included, which the child's start-up
    need not wait for. The traces are stamped with it as they arrive."""
    from sol_execbench.envprobe.hashing import environment_hash_beside, host_cached_environment_hash
    from sol_execbench.envprobe.sidecar import sidecar_path, write_snapshot_sidecar

    if sidecar_path(output) is None:
        options.env_hash = environment_hash_beside()
        return
    options.env_hash = host_cached_environment_hash()  # the snapshot is probed here anyway
    written = write_snapshot_sidecar(output)
    if written:
        err.print(f"environment snapshot written to {written}", highlight=False)


def _open_output(output: Path | None, inputs: list[Path], problem, err: Console):
    """The -o file opened for appending under its lock; exit 2 when it names an input or cannot be opened."""
    if output is None:
        return None
    from sol_execbench.cli.trace_output import OutputRefused, TraceOutput

    keys = {(problem.definition.name, problem.solution.name, w.uuid) for w in problem.workloads}
    sink = TraceOutput(output, lambda text: err.print(text, markup=False, highlight=False))
    try:
        sink.open(inputs, keys)
    except OutputRefused as exc:
        err.print(f"[red]error:[/red] {exc}", highlight=False)
        sys.exit(2)
    return sink
