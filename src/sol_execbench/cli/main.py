"""The ``sol-execbench`` entry point.

``sol-execbench <problem_dir> ...`` evaluates; ``sol-execbench <subcommand> ...`` runs a
subcommand. A subcommand name wins over a directory of the same name (write ``./env`` to reach
the directory); a first word that is neither a command nor an existing path is an error.
"""

from __future__ import annotations

import os

import click

from sol_execbench import __version__

EVALUATE_COMMAND = "evaluate"


class DefaultToEvaluate(click.Group):
    """A group whose first argument, when not a subcommand name, goes to ``evaluate``: an option,
    or an existing path (a problem directory). Any other first word is an error naming the commands."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        for arg in args:  # no path or value can hold one; the OS calls below would raise on it
            if "\0" in arg:
                raise click.UsageError(f"argument {arg[:80]!r} contains a NUL byte: no file name or value can", ctx)
        if args and args[0] in ("--help", "-h", "--version"):
            return super().parse_args(ctx, args)
        if not args or args[0] not in self.commands:
            if args and not args[0].startswith("-") and not _exists(args[0]):
                # Not a command, not an option, not a path: a mistyped command, not an evaluation.
                raise click.UsageError(f"'{args[0][:80]}' is not a command and does not exist as a path; the commands "
                                       f"are: {', '.join(sorted(self.commands))} (or give a problem directory)", ctx)
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
    # Each command module adds itself to ``cli``; imported here so the entry point sees them all.
    from sol_execbench.cli import evaluate_cmd  # noqa: F401
    from sol_execbench.cli import env_cmd  # noqa: F401
    from sol_execbench.cli import diagnostics_cmd  # noqa: F401
    from sol_execbench.cli import worker_cmd  # noqa: F401
    from sol_execbench.cli import dataset_cmd  # noqa: F401
    from sol_execbench.cli import dataset_migrate_cmd  # noqa: F401
    from sol_execbench.cli import dataset_timing_cmd  # noqa: F401
    from sol_execbench.cli import bound_cmd  # noqa: F401
    from sol_execbench.cli import docker_cmd  # noqa: F401
    from sol_execbench.cli import calibrate_cmd  # noqa: F401
    from sol_execbench.cli import report_cmd  # noqa: F401
    from sol_execbench.cli import bench_cmd  # noqa: F401
    from sol_execbench.cli import baseline_cmd  # noqa: F401


def main() -> None:
    from sol_execbench.platform.host import use_bytecode_cache_here

    use_bytecode_cache_here()  # before the commands' imports
    _register()
    from sol_execbench.cli import evaluate_cmd

    evaluate_cmd.PROCESS_OWNER[0] = True
    cli(prog_name="sol-execbench")
