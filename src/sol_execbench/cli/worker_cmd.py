"""``sol-execbench worker start|status|stop``: keep warm evaluation processes ready."""

from __future__ import annotations

import json
import time

import click

from sol_execbench.cli.main import cli


@cli.group("worker")
def worker_group() -> None:
    """Warm evaluation processes (torch imported, device ready), one fresh process per evaluation.

    \b
    sol-execbench worker start            # then evaluate as usual; each run takes a warm process
    sol-execbench worker status
    sol-execbench worker stop
    """


@worker_group.command("start")
@click.option("--device", default=None, help="Device the warm processes initialise [default: first GPU, else cpu].")
@click.option("--spares", default=2, show_default=True, help="Warm processes kept ready.")
@click.option("--idle-timeout", default=900.0, show_default=True, help="Seconds without a request before the pool exits.")
@click.option("--wait/--no-wait", default=True, show_default=True, help="Wait until a warm process is ready.")
def worker_start(device, spares, idle_timeout, wait) -> None:
    """Start the warm pool in the background.

    While it warms up, the host's environment probe is run and cached (``--wait``): on a host's
    first evaluation (after a reboot or a package change too) the traces otherwise wait for it, about
    2 s at the end of a 5.8 s evaluation on a fresh H200 host."""
    from sol_execbench.envprobe.hashing import environment_hash_beside
    from sol_execbench.evaluate.parent.warm_pool import pool_status, start_pool
    from sol_execbench.platform.host import runtime_dir

    if pool_status(device):
        click.echo(f"a warm pool for device '{device or 'auto'}' is already running")
        return
    proc = start_pool(device, spares, idle_timeout)
    deadline = time.monotonic() + 120
    probe = environment_hash_beside() if wait else None
    while wait and time.monotonic() < deadline:
        status = pool_status(device)
        if status and status.get("warm", 0) >= 1:
            _wait_for_probe(probe, deadline)
            click.echo(f"warm pool ready (pid {status['pid']}, {status['warm']} warm process(es), "
                       f"exits after {idle_timeout:g} s idle)")
            return
        if proc.poll() is not None:
            raise click.ClickException(f"the warm pool exited (code {proc.returncode}); see {runtime_dir()}")
        time.sleep(0.2)
    click.echo(f"warm pool starting (pid {proc.pid})")


def _wait_for_probe(probe, deadline: float) -> None:
    """Wait for the environment probe until ``deadline``; it never fails the command (the next
    evaluation probes again if it did not finish)."""
    try:
        probe.result(timeout=max(0.0, deadline - time.monotonic()))
    except Exception:  # noqa: BLE001  (a hash is a convenience)
        pass


@worker_group.command("status")
@click.option("--device", default=None)
def worker_status(device) -> None:
    """Print the pool's state as JSON (exit 1 when none runs)."""
    from sol_execbench.evaluate.parent.warm_pool import pool_status
    from sol_execbench.schema.warm_pool import WorkerStatus

    status = pool_status(device)
    document = WorkerStatus.model_validate(status) if status else WorkerStatus(running=False)
    click.echo(json.dumps(document.model_dump(exclude_none=True), indent=2))
    raise SystemExit(0 if status else 1)


@worker_group.command("stop")
@click.option("--device", default=None)
def worker_stop(device) -> None:
    """Stop the pool and its warm processes."""
    from sol_execbench.evaluate.parent.warm_pool import stop_pool

    reply = stop_pool(device)
    if not reply or reply.get("already_stopping"):
        click.echo(f"no warm pool was running for device '{device or 'auto'}'")
    else:
        click.echo(f"stopped the warm pool (pid {reply.get('pid')}, {reply.get('warm', 0)} warm process(es))")
