"""One wrapper run (``sol-execbench docker run``, ``scripts/run_docker.sh``): select the target,
preflight, refuse what preflight or the target's status does not allow, build, run, record.

A dry run prints every docker command, also when preflight or the smoke rule would refuse, runs
none of them (the daemon is never called) and writes no compatibility record; its exit status says
whether a real run would have gone ahead (0) or been refused (1)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Mapping

from sol_execbench.schema.containers import CompatibilityEntry, DockerPreflight, ValidationStatus

from .commands import HostUser, RunSpec, build_argv, is_smoke_command, run_argv, shown
from .compatibility import entry_from_preflight, update_matrix, write_entry
from .preflight import PreflightRequest, build_preflight
from .targets import SelectedTarget

VALIDATION_RECORD_DIR = "out/container-validation"
"""Where ``--record-container-validation`` writes the entry when no ``--compatibility-entry`` is given."""


@dataclass(frozen=True)
class WrapperOptions:
    """The wrapper's own flags (the target ones are in ``TargetRequest``)."""

    build: bool = False
    allow_mixed_version_dependencies: bool = False
    allow_untested_target_smoke: bool = False
    record_container_validation: bool = False
    preflight_only: bool = False
    compatibility_entry: Path | None = None
    compatibility_matrix: Path | None = None
    dry_run: bool = False


@dataclass
class Streams:
    out: IO[str] = field(default_factory=lambda: sys.stdout)
    err: IO[str] = field(default_factory=lambda: sys.stderr)


def preflight(selected: SelectedTarget, snapshot: dict[str, Any], environ: Mapping[str, str], options: WrapperOptions) -> DockerPreflight:
    return build_preflight(PreflightRequest(selected.selection, selected.target, snapshot, environ, options.dry_run,
                                            options.allow_mixed_version_dependencies))


def refusals(selected: SelectedTarget, report: DockerPreflight, command: tuple[str, ...], options: WrapperOptions) -> list[str]:
    """Why a real run would not start (empty: it would)."""
    reasons = [] if report.classification.benchmark_allowed else [f"preflight: {r}" for r in report.classification.reasons]
    untested = selected.selection.validation_status is ValidationStatus.NOT_TESTED
    if untested and is_smoke_command(command) and not options.allow_untested_target_smoke:
        reasons.append(f"target '{selected.selection.target_id}' is not_tested: a smoke run ({shlex.join(command)}) needs "
                       "--allow-untested-target-smoke, and then makes no validation claim")
    return reasons


def _record(entry: CompatibilityEntry, options: WrapperOptions, repo_root: Path, streams: Streams) -> None:
    entry_path = options.compatibility_entry
    if entry_path is None and entry.status == "container_validated" and options.compatibility_matrix is None:
        entry_path = repo_root / VALIDATION_RECORD_DIR / f"{entry.target_id}.json"
    if entry_path is not None:
        write_entry(entry_path, entry)
        print(f"wrote compatibility entry {entry_path} ({entry.status})", file=streams.err)
    if options.compatibility_matrix is not None:
        update_matrix(options.compatibility_matrix, [entry])
        print(f"updated compatibility matrix {options.compatibility_matrix} ({entry.target_id}: {entry.status})",
              file=streams.err)


def run_preflight_only(report: DockerPreflight, options: WrapperOptions, repo_root: Path, streams: Streams) -> int:
    """Print the preflight document (exactly one JSON document on stdout); 0 when a run would be allowed."""
    print(json.dumps(report.model_dump(mode="json"), indent=2), file=streams.out)
    allowed = report.classification.benchmark_allowed
    if options.compatibility_entry or options.compatibility_matrix:
        _record(entry_from_preflight(report, "preflight_passed" if allowed else "preflight_failed"), options, repo_root, streams)
    return 0 if allowed else 1


def _status_after_run(code: int, smoke: bool, options: WrapperOptions) -> str:
    if code != 0:
        return "run_failed"
    return "container_validated" if smoke and options.record_container_validation else "run_succeeded"


def run_wrapper(selected: SelectedTarget, report: DockerPreflight, spec: RunSpec, options: WrapperOptions,
                environ: Mapping[str, str], streams: Streams) -> int:
    """Refuse, or print and (unless a dry run) run the docker commands; the exit status."""
    commands = ([build_argv(selected.selection, spec.repo_root, HostUser.current())] if options.build else [])
    commands.append(run_argv(selected.selection, spec, environ))
    refused = refusals(selected, report, spec.command, options)
    smoke = is_smoke_command(spec.command)
    if options.record_container_validation and not smoke:
        print("note: --record-container-validation records only a smoke run (sol-execbench, run_dataset.py or pytest); "
              "this command is not one", file=streams.err)
    trace_dir = spec.repo_root / "data" / "flashinfer-trace"
    if not trace_dir.is_dir():
        print(f"warning: {trace_dir} does not exist; the container's entrypoint refuses to start without it "
              "(an empty folder will do for problems without safetensors inputs)", file=streams.err)
    if options.dry_run:
        for argv in commands:
            print(shown(argv), file=streams.out)
        for reason in refused:
            print(f"dry run: a real run would refuse: {reason}", file=streams.err)
        return 1 if refused else 0
    if refused:
        for reason in refused:
            print(f"refused: {reason}", file=streams.err)
        status = "preflight_failed" if not report.classification.benchmark_allowed else "smoke_refused"
        if options.compatibility_entry or options.compatibility_matrix:
            _record(entry_from_preflight(report, status, spec.command), options, spec.repo_root, streams)
        return 1
    code = 0
    for argv in commands:
        print(shown(argv), file=streams.out, flush=True)
        try:
            code = subprocess.call(argv)
        except OSError as exc:
            print(f"error: cannot run {argv[0]}: {exc.strerror or exc}", file=streams.err)
            code = 127
        except KeyboardInterrupt:
            code = 130
        if code != 0:
            break
    status = _status_after_run(code, smoke, options)
    if options.compatibility_entry or options.compatibility_matrix or status == "container_validated":
        _record(entry_from_preflight(report, status, spec.command, code), options, spec.repo_root, streams)
    return code
