"""``sol-execbench docker preflight|run|compat``: declared container targets (docs/containers.md).

``scripts/run_docker.sh`` is ``docker run``. Bad input (an undeclared target, a malformed manifest
or compatibility file, an override that cannot be read) exits 2 with one line.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Callable, NoReturn

import click

from sol_execbench.cli.main import cli

PATH = click.Path(path_type=Path)


@cli.group("docker")
def docker_group() -> None:
    """Declared ROCm and CUDA container targets: preflight a host, run a container, merge compatibility records.

    \b
    sol-execbench docker preflight [--target ID]
    sol-execbench docker run [--target ID] [--build] [DOCKER_RUN_ARGS...] [-- COMMAND...]
    sol-execbench docker compat ENTRY_OR_MATRIX... [-o MATRIX]
    """


def _fail(message: str) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(2)


def _unwritable(exc: OSError) -> NoReturn:
    _fail(f"{exc.filename or 'a compatibility record'}: cannot be written ({exc.strerror or exc}): give a writable path")


def _target_options(command: Callable) -> Callable:
    options = [
        click.option("--target", "target_id", default=None, metavar="ID",
                     help="A target of docker/rocm-targets.json or docker/cuda-targets.json [default: the ROCm default target]."),
        click.option("--allow-unknown-target", is_flag=True,
                     help="Let an undeclared --target through, built from ROCM_DOCKER_IMAGE:ROCM_DOCKER_TAG."),
        click.option("--allow-mixed-version-dependencies", is_flag=True, envvar="SOL_EXECBENCH_ALLOW_MIXED_VERSION_DEPENDENCIES",
                     show_envvar=True, help="Run although the container's torch/torchvision/triton differ from the target's."),
        click.option("--compatibility-entry", type=PATH, default=None, envvar="SOL_EXECBENCH_COMPATIBILITY_ENTRY",
                     show_envvar=True, help="Write this run's per-target compatibility entry (JSON) here."),
        click.option("--compatibility-matrix", type=PATH, default=None, envvar="SOL_EXECBENCH_COMPATIBILITY_MATRIX",
                     show_envvar=True, help="Merge this run's entry into the compatibility matrix (JSON) here."),
        click.option("--dry-run", is_flag=True, envvar="SOL_EXECBENCH_RUN_DOCKER_DRY_RUN", show_envvar=True,
                     help="Run no docker command: print them (and the preflight without docker's facts)."),
        click.option("--repo-root", type=click.Path(file_okay=False, path_type=Path), default=None,
                     help="The repository with docker/ [default: found from the current folder upward]."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _select(repo_root: Path | None, target_id: str | None, allow_unknown_target: bool) -> tuple[Path, Any]:
    from sol_execbench.containers.targets import TargetError, TargetRequest, find_repo_root, load_manifests, select_target
    from sol_execbench.schema.loading import FormatError

    root = repo_root or find_repo_root()
    if root is None:
        _fail("no docker/rocm-targets.json in this folder or above it: run from the sol-execbench repository or give --repo-root")
    try:
        manifests = load_manifests(root)
        return root, select_target(manifests, TargetRequest.from_environ(target_id, allow_unknown_target))
    except FormatError as exc:
        _fail(f"{exc.path}: {exc.message}")
    except TargetError as exc:
        _fail(str(exc))


def _preflight(selected: Any, options: Any) -> Any:
    from sol_execbench.containers.preflight import OverrideError
    from sol_execbench.containers.wrapper import preflight
    from sol_execbench.envprobe.snapshot import cached_snapshot

    try:
        return preflight(selected, cached_snapshot(), os.environ, options)
    except OverrideError as exc:
        _fail(str(exc))


@docker_group.command("preflight")
@_target_options
def preflight_cmd(target_id: str | None, allow_unknown_target: bool, allow_mixed_version_dependencies: bool,
                  compatibility_entry: Path | None, compatibility_matrix: Path | None, dry_run: bool,
                  repo_root: Path | None) -> None:
    """Print one JSON document: the target, the host's and the Python stack's facts, and whether a run is allowed.

    Exit 0 when a benchmark run would be allowed, 1 when not. SOL_EXECBENCH_* overrides replace the facts
    they name (docs/containers.md).
    """
    from sol_execbench.containers.wrapper import Streams, WrapperOptions, run_preflight_only

    root, selected = _select(repo_root, target_id, allow_unknown_target)
    options = WrapperOptions(allow_mixed_version_dependencies=allow_mixed_version_dependencies, preflight_only=True,
                             compatibility_entry=compatibility_entry, compatibility_matrix=compatibility_matrix,
                             dry_run=dry_run)
    report = _preflight(selected, options)
    try:
        sys.exit(run_preflight_only(report, options, root, Streams()))
    except OSError as exc:
        _unwritable(exc)


class SplitAtDoubleDash(click.Command):
    """Everything after the first ``--`` is the container command, kept out of option parsing."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if "--" in args:
            cut = args.index("--")
            ctx.meta["container_command"] = tuple(args[cut + 1:])
            args = args[:cut]
        else:
            ctx.meta["container_command"] = ()
        return super().parse_args(ctx, args)


@docker_group.command("run", cls=SplitAtDoubleDash,
                      context_settings={"ignore_unknown_options": True, "allow_interspersed_args": True})
@_target_options
@click.option("--build", is_flag=True, help="Build the target's image before running.")
@click.option("--allow-untested-target-smoke", is_flag=True, envvar="SOL_EXECBENCH_ALLOW_UNTESTED_TARGET_SMOKE",
              show_envvar=True, help="Let a not_tested target run a smoke command (no validation claim).")
@click.option("--record-container-validation", is_flag=True, envvar="SOL_EXECBENCH_RECORD_CONTAINER_VALIDATION",
              show_envvar=True, help="After a passing smoke run, record the target as container_validated.")
@click.option("--preflight-only", is_flag=True, help="Print the preflight JSON and stop (as 'docker preflight').")
@click.argument("docker_args", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def run_cmd(ctx: click.Context, target_id: str | None, allow_unknown_target: bool, allow_mixed_version_dependencies: bool,
            compatibility_entry: Path | None, compatibility_matrix: Path | None, dry_run: bool, repo_root: Path | None,
            build: bool, allow_untested_target_smoke: bool, record_container_validation: bool, preflight_only: bool,
            docker_args: tuple[str, ...]) -> None:
    """Preflight, then (with --build) build and run the target's container: DOCKER_RUN_ARGS go to 'docker run',
    the words after '--' are the container command [default: bash].

    Exit 1 when preflight refuses, or a not_tested target is asked for a smoke run (sol-execbench,
    run_dataset.py or pytest) without --allow-untested-target-smoke; else docker's exit status.
    """
    from sol_execbench.containers.commands import RunSpec
    from sol_execbench.containers.wrapper import Streams, WrapperOptions, run_preflight_only, run_wrapper

    root, selected = _select(repo_root, target_id, allow_unknown_target)
    options = WrapperOptions(build=build, allow_mixed_version_dependencies=allow_mixed_version_dependencies,
                             allow_untested_target_smoke=allow_untested_target_smoke,
                             record_container_validation=record_container_validation, preflight_only=preflight_only,
                             compatibility_entry=compatibility_entry, compatibility_matrix=compatibility_matrix,
                             dry_run=dry_run)
    report = _preflight(selected, options)
    tty = sys.stdin.isatty() and sys.stdout.isatty()
    spec = RunSpec(root, tuple(docker_args), ctx.meta["container_command"], tty)
    try:
        if preflight_only:
            sys.exit(run_preflight_only(report, options, root, Streams()))
        sys.exit(run_wrapper(selected, report, spec, options, os.environ, Streams()))
    except OSError as exc:
        _unwritable(exc)


@docker_group.command("compat")
@click.argument("records", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("-o", "--output", type=PATH, default=None,
              help="Merge into this matrix file (created when missing) instead of printing the matrix.")
def compat_cmd(records: tuple[Path, ...], output: Path | None) -> None:
    """Merge compatibility entries and matrices into one matrix: the newest entry of each target, by target id."""
    from sol_execbench.containers.compatibility import FormatError, dump, merge, read_records, update_matrix

    try:
        entries = [entry for path in records for entry in read_records(path)]
        if output is None:
            click.echo(dump(merge(entries)), nl=False)
            return
        matrix = update_matrix(output, entries)
    except FormatError as exc:
        _fail(f"{exc.path}: {exc.message}")
    except OSError as exc:
        _unwritable(exc)
    click.echo(f"{output}: {len(matrix.entries)} target(s): "
               + ", ".join(f"{e.target_id} {e.status}" for e in matrix.entries))
