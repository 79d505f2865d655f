"""``sol-execbench contract|doctor|toolchain --json``: machine-readable diagnostics.

The three print JSON only and refuse to run without ``--json`` (a usage error naming the flag).
"""

from __future__ import annotations

import json
import re
from typing import Any

import click

from sol_execbench.cli.main import cli

EVIDENCE_CHOICES = ("declared", "detected", "version_verified", "exercised")
"""Mirrors ``envprobe.toolchain_registry.EVIDENCE_LEVELS`` (kept here so --help needs no probe import; a test checks they agree)."""


def _require_json(as_json: bool, command: str) -> None:
    if not as_json:
        raise click.UsageError(f"'{command}' prints JSON only: add --json (sol-execbench {command} --json)")


def _emit(document: dict[str, Any]) -> None:
    click.echo(json.dumps(document, indent=2, default=str))


def _describe_param(param: click.Parameter) -> dict[str, Any]:
    return {
        "name": param.name,
        "kind": "option" if isinstance(param, click.Option) else "argument",
        "flags": list(param.opts) + list(param.secondary_opts),
        "type": param.type.name,
        "required": param.required,
        "multiple": param.multiple,
        "default": param.default if isinstance(param.default, (str, int, float, bool, type(None))) else str(param.default),
        "help": getattr(param, "help", None),
    }


def describe_command(command: click.Command, name: str) -> dict[str, Any]:
    return {"name": name, "help": command.get_short_help_str(limit=200),
            "params": [_describe_param(p) for p in command.params if p.name != "help"]}


def describe_commands(group: click.Group, prefix: str = "") -> list[dict[str, Any]]:
    """Every (sub)command of ``group``: its full name, short help and parameters."""
    described = []
    for name in sorted(group.commands):
        command = group.commands[name]
        full = f"{prefix}{name}"
        described.append(describe_command(command, full))
        if isinstance(command, click.Group):
            described.extend(describe_commands(command, f"{full} "))
    return described


@cli.command("contract")
@click.option("--json", "as_json", is_flag=True, help="Required: print the contract as JSON.")
@click.pass_context
def contract_cmd(ctx: click.Context, as_json: bool) -> None:
    """Tool and schema versions, JSON Schemas of every format, trace statuses, CLI commands."""
    _require_json(as_json, "contract")
    from sol_execbench.cli.baseline_cmd import PROG, baseline_command
    from sol_execbench.cli.main import _register
    from sol_execbench.envprobe.contract import build_contract

    _register()  # every command, not only those looked up so far

    _emit(build_contract(describe_commands(ctx.find_root().command), [describe_command(baseline_command, PROG)]))


@cli.command("doctor")
@click.option("--json", "as_json", is_flag=True, help="Required: print the checks as JSON.")
@click.pass_context
def doctor_cmd(ctx: click.Context, as_json: bool) -> None:
    """Can this host evaluate? GPU, torch build, compilers, profilers, clocks, cache dirs. Exit 1 on a failed check."""
    _require_json(as_json, "doctor")
    from sol_execbench.envprobe.doctor import doctor_report

    report = doctor_report()
    _emit(report)
    ctx.exit(1 if report["status"] == "fail" else 0)


def _check_version(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None and not re.fullmatch(r"\d+(\.\d+)*", value.strip()):
        raise click.BadParameter(f"'{value}' is not a version like 6.2 or 7.0.2", ctx=ctx, param=param)
    return value


def _check_arch(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None and not re.fullmatch(r"(sm_\d+[af]?|gfx[0-9a-f]+)(:.*)?", value.strip().lower()):
        raise click.BadParameter(f"'{value}' is not a GPU architecture like sm_90a or gfx942", ctx=ctx, param=param)
    return value


@cli.command("toolchain")
@click.option("--json", "as_json", is_flag=True, help="Required: print the toolchain as JSON.")
@click.option("--evidence-level", type=click.Choice(EVIDENCE_CHOICES), help="Only artifacts with at least this evidence.")
@click.option("--artifact-type", multiple=True, help="Only these artifact types (compiler, profiler, math_library, ...); repeatable.")
@click.option("--gpu-arch", callback=_check_arch, help="Only artifacts supporting this architecture (sm_90a, gfx942, ...).")
@click.option("--hardware-generation", help="Only artifacts supporting this generation (Hopper, Blackwell, CDNA3, RDNA4, ...).")
@click.option("--rocm-version", callback=_check_version, help="Only artifacts usable with this ROCm release.")
@click.option("--list-registry", is_flag=True, help="Print the whole registry without detecting anything.")
def toolchain_cmd(
    as_json: bool,
    evidence_level: str | None,
    artifact_type: tuple[str, ...],
    gpu_arch: str | None,
    hardware_generation: str | None,
    rocm_version: str | None,
    list_registry: bool,
) -> None:
    """Compilers, profilers, runtimes and libraries: the registry, and what this host has of it."""
    _require_json(as_json, "toolchain")
    from sol_execbench.envprobe.toolchain import Filters, toolchain_report
    from sol_execbench.envprobe.toolchain_registry import ARCH_GENERATIONS, ARTIFACT_TYPES

    unknown = [t for t in artifact_type if t not in ARTIFACT_TYPES]
    if unknown:
        raise click.BadParameter(f"unknown {unknown}; choose from {', '.join(ARTIFACT_TYPES)}", param_hint="--artifact-type")
    generations = sorted(set(ARCH_GENERATIONS.values()))
    if hardware_generation and hardware_generation.lower() not in {g.lower() for g in generations}:
        raise click.BadParameter(f"'{hardware_generation}'; choose from {', '.join(generations)}", param_hint="--hardware-generation")
    filters = Filters(evidence_level, tuple(artifact_type), gpu_arch, hardware_generation, rocm_version)
    _emit(toolchain_report(filters, list_registry=list_registry))
