"""``sol-execbench bench ...``: the benches users run (all-reduce sweep, GEMM sweep, PyTorch baselines,
fast_p, comparing two machines' baselines). Each writes JSON and figures; ``--reuse`` re-renders."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from sol_execbench.cli.errors import fail as _fail
from sol_execbench.cli.main import cli

PATH = click.Path(path_type=Path)


def read_bench_file(model: type, path: Path, flag: str):  # noqa: ANN202 - a pydantic model of ``model``
    """A bench JSON file as its model; a missing or malformed file exits 2 naming it."""
    from pydantic import ValidationError

    try:
        return model.model_validate_json(path.read_bytes())
    except OSError as exc:
        _fail(f"{flag} {path}: cannot be read ({exc.strerror or exc}); give an existing {model.__name__} JSON file")
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error["loc"]) or "(top level)"
        _fail(f"{path}: field '{where}': {error['msg']}; give a {model.__name__} file as the bench writes it")


def _written(paths: list[Path]) -> None:
    for path in paths:
        click.echo(f"wrote {path}")


def _report(model, output: Path | None, as_json: bool) -> bool:  # noqa: ANN001 - a pydantic model
    """The report written to ``output`` (if given) and printed as JSON (``as_json``: then True, the
    table is not wanted)."""
    text = model.model_dump_json(indent=2)
    if output is not None:
        try:
            output.parent.mkdir(parents=True, exist_ok=True)
            output.write_text(text + "\n", encoding="utf-8")
        except OSError as exc:
            _fail(f"-o {output}: cannot be written ({exc.strerror or exc}); give a writable path")
    if as_json:
        click.echo(text)
    return as_json


def _note_figures() -> None:
    from sol_execbench.benches.figures import missing_matplotlib

    reason = missing_matplotlib()
    if reason:
        click.echo(reason)


@cli.group("bench")
def bench_group() -> None:
    """Benches: all-reduce and GEMM sweeps, PyTorch baselines and fast_p (docs/benches.md).

    \b
    sol-execbench bench allreduce -o out/allreduce
    sol-execbench bench gemm -o out/gemm
    sol-execbench bench baselines ROOT --results results/timing
    sol-execbench bench fast-p --baseline B.json --traces RUN_DIR
    """


@bench_group.command("allreduce")
@click.option("-o", "--output", type=PATH, default=Path("out/allreduce"), show_default=True,
              help="Folder for allreduce.json, summary.csv and the figures.")
@click.option("--min-bytes", type=int, default=8, show_default=True, help="Smallest message (bytes).")
@click.option("--max-bytes", type=int, default=1 << 30, show_default=True, help="Largest message (bytes; 1 GiB).")
@click.option("--factor", type=int, default=2, show_default=True, help="Each size is the last times this.")
@click.option("--ranks", "rank_counts", type=int, multiple=True,
              help="GPU counts to run (repeatable); default 1, 2, 4, ... every GPU here (2 gloo ranks on the CPU).")
@click.option("--buffer-kind", "buffer_kinds", multiple=True,
              help="regular, nccl_mem_pool, symm_mem_one_shot, symm_mem_two_shot, cupy_nccl (repeatable; default all).")
@click.option("--warmup", type=int, default=5, show_default=True)
@click.option("--iterations", type=int, default=20, show_default=True, help="Timed calls per window.")
@click.option("--repeats", type=int, default=5, show_default=True,
              help="Timed windows per size; the median window's time per call is reported.")
@click.option("--launch", "launches", multiple=True,
              help="eager (calls one by one), graph (the calls captured into one CUDA graph; GPU only) "
                   "(repeatable; default both).")
@click.option("--cpu", is_flag=True, help="gloo ranks on the CPU even where GPUs exist.")
@click.option("--timeout", "timeout_s", type=float, default=600.0, show_default=True,
              help="Seconds for one GPU count's processes.")
@click.option("--reuse", is_flag=True, help="Re-render the figures from OUTPUT/allreduce.json; runs nothing.")
def allreduce_command(output: Path, min_bytes: int, max_bytes: int, factor: int, rank_counts: tuple[int, ...],
                      buffer_kinds: tuple[str, ...], warmup: int, iterations: int, repeats: int,
                      launches: tuple[str, ...], cpu: bool, timeout_s: float, reuse: bool) -> None:
    """All-reduce over message sizes, GPU counts and buffer kinds: time, algbw, busbw (nccl-tests' columns)."""
    from sol_execbench.benches.allreduce import (BUFFER_KINDS, JSON_FILE, LAUNCHES, AllreduceOptions, run_allreduce,
                                                 write_outputs)
    from sol_execbench.benches.allreduce_metrics import largest_size_link_lines
    from sol_execbench.benches.errors import BenchUsageError
    from sol_execbench.schema.benches import AllreduceSweep

    try:
        if reuse:
            sweep = read_bench_file(AllreduceSweep, output / JSON_FILE, "--reuse")
            _written(write_outputs(sweep, output))
            for line in largest_size_link_lines(sweep):
                click.echo(line)
            return
        sweep = run_allreduce(AllreduceOptions(output=output, min_bytes=min_bytes, max_bytes=max_bytes, factor=factor,
                                               rank_counts=rank_counts, buffer_kinds=buffer_kinds or BUFFER_KINDS,
                                               warmup=warmup, iterations=iterations, repeats=repeats,
                                               launches=launches or LAUNCHES, cpu=cpu, timeout_s=timeout_s))
    except BenchUsageError as exc:
        _fail(str(exc))
    _note_figures()
    for skipped in sweep.skipped:
        launch = f" ({skipped.launch} launch)" if skipped.launch else ""
        click.echo(f"skipped {skipped.buffer_kind}{launch} with {skipped.ranks} rank(s): {skipped.reason}")
    for line in largest_size_link_lines(sweep):
        click.echo(line)
    unchecked = [m for m in sweep.measurements if not m.checked]
    click.echo(f"{len(sweep.measurements)} measurements, {len(unchecked)} with a wrong sum; {output / JSON_FILE}")
    if unchecked:
        sys.exit(1)


def _config(path: Path | None, iterations: int | None, warmup_runs: int | None) -> dict | None:
    """The benchmark config fields a bench passes to the evaluator: a config file, then the flags."""
    import json

    fields: dict = {}
    if path is not None:
        try:
            fields = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            _fail(f"--config {path}: not a readable JSON object ({exc}); give a benchmark config file")
        if not isinstance(fields, dict):
            _fail(f"--config {path}: the top level is not an object; give a benchmark config file")
    if iterations is not None:
        fields["iterations"] = iterations
    if warmup_runs is not None:
        fields["warmup_runs"] = warmup_runs
    return fields or None


@bench_group.command("gemm")
@click.option("-o", "--output", type=PATH, default=Path("out/gemm"), show_default=True,
              help="Folder for gemm_sweep.json and the three figures.")
@click.option("--shape", "shapes", multiple=True, metavar="MxNxK|NAME",
              help="Shapes to run instead of the built-in set: MxNxK or a built-in shape's name (repeatable).")
@click.option("--family", "families", multiple=True, type=click.Choice(["square", "tall_skinny", "llm"]),
              help="Only these families of the built-in shapes (repeatable).")
@click.option("--dtype", "dtypes", multiple=True, help="bf16, fp16, fp8 (repeatable; default all; fp8 where supported).")
@click.option("--variant", "variants", multiple=True, help="torch, triton (repeatable; default both).")
@click.option("--solution", "solutions", multiple=True, type=PATH, help="Also evaluate this solution JSON (repeatable).")
@click.option("--config", "config_path", type=PATH, help="Benchmark config JSON for every evaluation.")
@click.option("--iterations", type=int, help="Timed rounds per point (the evaluator's iterations).")
@click.option("--warmup-runs", type=int, help="Untimed calls before the timed ones.")
@click.option("--device", help="cpu, N or cuda:N (default: the first GPU, else the CPU).")
@click.option("--timeout", "timeout_s", type=float, default=600.0, show_default=True,
              help="Seconds for one variant's evaluation of every shape of a dtype.")
@click.option("--calibration", type=PATH, help="A calibration ('sol-execbench calibrate --json'); default: this "
              "device's cached calibration, where one exists.")
@click.option("--reuse", is_flag=True, help="Re-render the figures from OUTPUT/gemm_sweep.json; needs no GPU.")
def gemm_command(output: Path, shapes: tuple[str, ...], families: tuple[str, ...], dtypes: tuple[str, ...],
                 variants: tuple[str, ...], solutions: tuple[Path, ...], config_path: Path | None,
                 iterations: int | None, warmup_runs: int | None, device: str | None, timeout_s: float,
                 calibration: Path | None, reuse: bool) -> None:
    """GEMM shapes x dtypes x variants through the evaluator: latency, TFLOP/s, fraction of peak, roofline."""
    from sol_execbench.benches.errors import BenchUsageError
    from sol_execbench.benches.gemm import (JSON_FILE, SHAPES, VARIANTS, GemmOptions, parse_shape, run_gemm,
                                            write_outputs)
    from sol_execbench.schema.benches import GemmSweep

    try:
        if reuse:
            _written(write_outputs(read_bench_file(GemmSweep, output / JSON_FILE, "--reuse"), output))
            return
        chosen = tuple(parse_shape(s) for s in shapes) or tuple(s for s in SHAPES
                                                                 if not families or s.family in families)
        sweep = run_gemm(GemmOptions(output=output, shapes=chosen, dtypes=dtypes or ("bf16", "fp16", "fp8"),
                                     variants=variants or VARIANTS, solutions=solutions,
                                     config=_config(config_path, iterations, warmup_runs), device=device,
                                     timeout_s=timeout_s, calibration=calibration))
    except BenchUsageError as exc:
        _fail(str(exc))
    _note_figures()
    for reason in sweep.skipped:
        click.echo(f"skipped {reason}")
    for point in sweep.points:
        rate = f"{point.tflops:9.2f} TFLOP/s" if point.tflops is not None else f"{point.status:>17}"
        peak = f" {100 * point.fraction_of_datasheet:5.1f}% of datasheet" if point.fraction_of_datasheet else ""
        click.echo(f"{point.dtype:5} {point.variant:24} {point.shape:24} {rate}{peak}")
    click.echo(f"wrote {output / JSON_FILE}")


@bench_group.command("baselines")
@click.argument("root", type=PATH, required=False)
@click.option("--results", type=PATH, default=Path("results/timing"), show_default=True,
              help="Baseline files go to RESULTS/<hardware>/ (dataset runs under RESULTS/<hardware>/runs/<mode>).")
@click.option("--level", "levels", type=int, multiple=True, help="Only ROOT/L<N> (or level<N>); repeatable.")
@click.option("--problem", help="Only this problem of --problem-level: its folder name or its number.")
@click.option("--problem-level", type=int, default=1, show_default=True)
@click.option("--test", is_flag=True, help="Write the _test files; at most 5 problems per level unless --max-problems.")
@click.option("--max-problems", type=int, help="At most this many problems per level.")
@click.option("--hardware", help="The <GPU>_<platform> folder name (default detected: H100_cuda, MI300X_rocm).")
@click.option("--modes", default="eager,inductor-default,inductor-reduce-overhead,inductor-max-autotune,"
              "inductor-max-autotune-no-cudagraphs,cudagraphs", show_default=True,
              help="Comma-separated modes (cudagraphs only on NVIDIA).")
@click.option("--num-trials", type=int, default=100, show_default=True, help="Timed rounds (the evaluator's iterations).")
@click.option("--config", "config_path", type=PATH, help="Benchmark config JSON layered over each problem's.")
@click.option("--device", help="cpu, N or cuda:N (default: the first GPU, else the CPU).")
@click.option("--timeout", "timeout_s", type=float, default=300.0, show_default=True,
              help="Seconds per problem and mode (compilation included); past it the problem records TIMEOUT.")
@click.option("--hsa-disable-sdma", is_flag=True, help="ROCm: HSA_ENABLE_SDMA=0 in the evaluation children.")
@click.option("--single-hw-queue", is_flag=True, help="ROCm: GPU_MAX_HW_QUEUES=1 in the evaluation children.")
@click.option("--reuse", is_flag=True, help="Re-draw baselines.png from RESULTS/<hardware>/ baseline files; runs nothing.")
def baselines_command(root: Path | None, results: Path, levels: tuple[int, ...], problem: str | None,
                      problem_level: int, test: bool, max_problems: int | None, hardware: str | None, modes: str,
                      num_trials: int, config_path: Path | None, device: str | None, timeout_s: float,
                      hsa_disable_sdma: bool, single_hw_queue: bool, reuse: bool) -> None:
    """PyTorch eager and torch.compile baselines of a suite through the evaluator (KernelBench's files)."""
    from sol_execbench.benches.baselines import BaselineOptions, reuse_folder, run_baselines
    from sol_execbench.benches.baselines_figures import render_folder
    from sol_execbench.benches.errors import BenchUsageError

    if reuse:
        try:
            _written([render_folder(reuse_folder(results, hardware), test)])
        except BenchUsageError as exc:
            _fail(str(exc))
        return
    if root is None:
        _fail("bench baselines: give ROOT, a dataset root or problem folder (or --reuse to redraw the figure)")

    if config_path is not None and not config_path.is_file():
        _fail(f"--config {config_path}: no such file; give a benchmark config JSON")
    try:
        written, notes = run_baselines(BaselineOptions(
            root=root, results=results, hardware=hardware, levels=levels, problem=problem, problem_level=problem_level,
            test=test, max_problems=max_problems, modes=tuple(m.strip() for m in modes.split(",") if m.strip()),
            num_trials=num_trials, config=config_path, device=device, timeout_s=timeout_s,
            sdma_off=hsa_disable_sdma, one_hw_queue=single_hw_queue))
    except BenchUsageError as exc:
        _fail(str(exc))
    for note in notes:
        click.echo(note)
    _written(written)


@bench_group.command("fast-p")
@click.option("--baseline", "baseline_path", type=PATH, required=True, help="A baseline file (bench baselines).")
@click.option("--traces", "traces_root", type=PATH, required=True, help="A dataset run's output folder.")
@click.option("--p", "ps", type=float, multiple=True, help="Thresholds (repeatable; default 0 0.5 0.8 1 1.5 2).")
@click.option("-o", "--output", type=PATH, help="Also write the report as JSON here.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def fast_p_command(baseline_path: Path, traces_root: Path, ps: tuple[float, ...], output: Path | None,
                   as_json: bool) -> None:
    """fast_p per level and overall: correct and faster than the baseline by a factor above p."""
    from sol_execbench.benches.errors import BenchUsageError
    from sol_execbench.benches.fast_p import DEFAULT_P, fast_p_report
    from sol_execbench.schema.benches import BaselineFile

    if any(p < 0 for p in ps):
        _fail("--p: give thresholds of 0 or more")
    baseline = read_bench_file(BaselineFile, baseline_path, "--baseline")
    try:
        report = fast_p_report(baseline, baseline_path, traces_root, tuple(sorted(set(ps))) or DEFAULT_P)
    except BenchUsageError as exc:
        _fail(str(exc))
    if _report(report, output, as_json):
        return
    keys = list(report.overall.fast_p)
    click.echo(f"{'level':12} {'problems':>8} {'correct':>7} " + " ".join(f"{'fast_' + k:>9}" for k in keys))
    for level in [*report.levels, report.overall]:
        click.echo(f"{level.level:12} {level.problems:8d} {level.correct:7d} "
                   + " ".join(f"{level.fast_p[k]:9.3f}" for k in keys))
    if report.overall.interval_clears:
        click.echo("interval above p (problems): " + ", ".join(f"p={k}: {v}"
                                                              for k, v in report.overall.interval_clears.items()))


@bench_group.command("compare-hardware")
@click.argument("a_path", type=PATH)
@click.argument("b_path", type=PATH)
@click.option("-o", "--output", type=PATH, help="Also write the comparison as JSON here.")
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
def compare_hardware_command(a_path: Path, b_path: Path, output: Path | None, as_json: bool) -> None:
    """Two machines' baselines of one suite: B's time over A's per problem, geometric means per level."""
    from sol_execbench.benches.fast_p import compare_hardware
    from sol_execbench.schema.benches import BaselineFile

    comparison = compare_hardware(read_bench_file(BaselineFile, a_path, "A"), a_path,
                                  read_bench_file(BaselineFile, b_path, "B"), b_path)
    if _report(comparison, output, as_json):
        return
    click.echo(f"B / A: A = {comparison.a_hardware} ({a_path}), B = {comparison.b_hardware} ({b_path})")
    for level, ratio in comparison.geomean_ratio.items():
        click.echo(f"{level:12} {'-' if ratio is None else f'{ratio:.3f}':>8}  "
                   f"({sum(1 for r in comparison.problems if r.ratio and (level == 'all' or r.level == level))} "
                   "problems timed on both)")
