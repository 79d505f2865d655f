"""The ``sol-execbench`` entry point.

``sol-execbench <problem_dir> ...`` evaluates; ``sol-execbench <subcommand> ...`` runs a
subcommand. A subcommand name wins over a directory of the same name (write ``./env`` to reach
the directory); a first word that is neither a command nor an existing path is an error.
"""

from __future__ import annotations

import importlib
import os
import sys

import click

from sol_execbench import __version__

EVALUATE_COMMAND = "evaluate"
# Each command, and the modules under sol_execbench.cli that define it and its subcommands (each
# adds itself to ``cli``). They are imported when the command is looked up: an evaluation needs
# only evaluate_cmd, and importing every command module cost 0.6 s per invocation.
COMMAND_MODULES: dict[str, tuple[str, ...]] = {
    EVALUATE_COMMAND: ("evaluate_cmd",),
    "env": ("env_cmd",),
    "contract": ("diagnostics_cmd",), "doctor": ("diagnostics_cmd",), "toolchain": ("diagnostics_cmd",),
    "worker": ("worker_cmd",),
    "dataset": ("dataset_cmd", "dataset_migrate_cmd", "dataset_timing_cmd"),
    "bound": ("bound_cmd",),
    "docker": ("docker_cmd",),
    "calibrate": ("calibrate_cmd",),
    "report": ("report_cmd",),
    "bench": ("bench_cmd",),
    "baseline": ("baseline_cmd",),
}


def _import_command_modules(name: str) -> None:
    for module in COMMAND_MODULES.get(name, ()):
        importlib.import_module(f"sol_execbench.cli.{module}")


class DefaultToEvaluate(click.Group):
    """A group whose first argument, when not a subcommand name, goes to ``evaluate``: an option,
    or an existing path (a problem directory). Any other first word is an error naming the commands."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(COMMAND_MODULES) | set(self.commands))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        _import_command_modules(cmd_name)
        return super().get_command(ctx, cmd_name)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        for arg in args:  # no path or value can hold one; the OS calls below would raise on it
            if "\0" in arg:
                raise click.UsageError(f"argument {arg[:80]!r} contains a NUL byte: no file name or value can", ctx)
        if args and args[0] in ("--help", "-h", "--version"):
            return super().parse_args(ctx, args)
        commands = self.list_commands(ctx)
        if not args or args[0] not in commands:
            if args and not args[0].startswith("-") and not _exists(args[0]):
                # Not a command, not an option, not a path: a mistyped command, not an evaluation.
                raise click.UsageError(f"'{args[0][:80]}' is not a command and does not exist as a path; the commands "
                                       f"are: {', '.join(commands)} (or give a problem directory)", ctx)
            args = [EVALUATE_COMMAND, *args]
        return super().parse_args(ctx, args)


def _exists(path: str) -> bool:
    try:
        return os.path.exists(path)
    except (OSError, ValueError):
        return False


@click.group(cls=DefaultToEvaluate, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="sol-execbench")
def cli() -> None:
    """Evaluate GPU kernel solutions: correctness, device time, speed of light.

    \b
    sol-execbench PROBLEM_DIR --solution solution.json [-o traces.jsonl] [--json]
    sol-execbench --definition d.json --workload w.jsonl --solution s.json
    sol-execbench SUBCOMMAND ...
    """


def _register() -> None:
    """Every command module imported: ``cli.commands`` then holds every command (the contract, tests)."""
    for name in COMMAND_MODULES:
        _import_command_modules(name)


def main() -> None:
    from sol_execbench.platform.host import use_bytecode_cache_here

    use_bytecode_cache_here()  # before the commands' imports
    from sol_execbench.cli import warm_front

    if warm_front.evaluates(sys.argv[1:], set(COMMAND_MODULES)):
        code = warm_front.run_in_front(sys.argv[1:])
        if code is not None:  # the warm pool's command-line process ran it
            sys.exit(code)
    run_as_process()


def run_as_process(args: list[str] | None = None) -> None:
    """The command line (``args``, else ``sys.argv``) as the process's own: its run owns the
    process's signals and children (``evaluate_cmd.PROCESS_OWNER``). Exits as click does."""
    from sol_execbench.cli import evaluate_cmd

    evaluate_cmd.PROCESS_OWNER[0] = True
    cli(prog_name="sol-execbench", args=args)
