"""``--executor ray``: the run's problems as Ray tasks on a cluster, one GPU each (one CPU each in
a CPU run), through the same per-problem evaluation as the local slots
(``execution.evaluate_problem_shards``).

The head (this process) loads and checks every problem, decides reuse, and writes every file: a
task is handed the loaded problem as data (definition, workloads, solution sources, layered
config) and hands its traces back as data; the head then commits them exactly as a local run
does, so a rerun, local or on Ray, reuses them under the same rule. Files a workload names by path
(safetensors blobs) are read where the task runs: they must be at the same path on every node.

At most as many tasks are in flight as the cluster has GPUs (CPUs in a CPU run) when the run
starts, submitted longest first, so the queue order holds and a stop lets no further problem
start. Ray is an optional extra: it is imported here only, and only when this executor runs."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import socket
import threading
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator

from sol_execbench import __version__
from sol_execbench.schema import Trace

from .discovery import DatasetUsageError
from .events import RunEvent
from .execution import EvaluationSettings, ProblemResult, evaluate_problem_shards
from .loading import LoadedProblem

if TYPE_CHECKING:
    from .runner import DatasetRun

RAY_EXTRA = "pip install 'sol-execbench[ray]'"
CPU_DEVICE = "cpu"
RAY_SLOT = "ray"  # where a problem started: the node and device come back with its result
_CONNECT_TIMEOUT_S = 5.0
_WAIT_POLL_S = 0.2  # the head wakes this often, so that a signal's handler runs promptly
_INTERRUPT_GRACE_S = 10.0  # an interrupted evaluation ends its child and removes its staging in well under this
_ENV_PREFIX = "SOL_EXECBENCH_"  # the evaluator's variables travel with the tasks


class WorkerMismatch(RuntimeError):
    """A Ray worker runs another sol-execbench version than the head."""


@dataclass(frozen=True)
class RayCluster:
    """The cluster a run's tasks go to."""

    address: str | None
    """None: the local instance this run started."""
    cpu_run: bool
    in_flight: int
    """Tasks submitted at once: the cluster's GPUs (CPUs in a CPU run) when the run started."""

    @property
    def slots(self) -> tuple[str, ...]:
        where = self.address or "local instance"
        return (f"Ray ({where}): {self.in_flight} {'CPU' if self.cpu_run else 'GPU'}(s), one per task",)


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise DatasetUsageError(f"--executor ray: Ray is not installed here; {RAY_EXTRA}") from None
    return ray


def _check_reachable(address: str) -> None:
    """A ``HOST:PORT`` that nothing answers on is refused in seconds (Ray itself retries for a
    minute and more); ``auto`` and ``ray://`` addresses are left to Ray."""
    if address == "auto" or "://" in address:
        return
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise DatasetUsageError(f"--ray-address {address}: give HOST:PORT of the Ray head (ray start --head prints "
                                "it; 6379 by default), 'auto', or ray://HOST:PORT")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=_CONNECT_TIMEOUT_S):
            pass
    except OSError as exc:
        raise DatasetUsageError(f"--ray-address {address}: no Ray head answers there ({exc.strerror or exc}); start "
                                "one with `ray start --head` or give its address") from None


@contextlib.contextmanager
def ray_cluster(address: str | None, device: str | None) -> Iterator[RayCluster]:
    """Attached to the cluster at ``address`` (or a local instance started for the run) for the
    duration of the block."""
    ray = _import_ray()
    if address is not None:
        _check_reachable(address)
    env_vars = {name: value for name, value in os.environ.items() if name.startswith(_ENV_PREFIX)}
    handlers = _signal_handlers()
    try:
        ray.init(address=address or "local", include_dashboard=False, log_to_driver=True, configure_logging=False,
                 runtime_env={"env_vars": env_vars} if env_vars else None)
    except Exception as exc:  # noqa: BLE001  (Ray raises several kinds; each is one line here)
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DatasetUsageError(f"--ray-address {address or '(local instance)'}: Ray could not start or attach "
                                f"({reason}); check the address and that `ray status` works there") from None
    finally:
        _restore(handlers)  # Ray's own SIGTERM handler would end the run without its cleanup
    try:
        cpu_run = device == CPU_DEVICE
        resource = "CPU" if cpu_run else "GPU"
        count = int(ray.cluster_resources().get(resource, 0))
        if count < 1:
            raise DatasetUsageError(f"--executor ray: the Ray cluster at {address or 'the local instance'} has no "
                                    f"{resource}; add nodes with one, or give --device cpu for a CPU run")
        yield RayCluster(address, cpu_run, count)
    finally:
        ray.shutdown()


def _signal_handlers() -> dict[int, Any]:
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {number: signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}


def _restore(handlers: dict[int, Any]) -> None:
    for number, handler in handlers.items():
        if handler is not None:
            signal.signal(number, handler)


class _Discarded:
    """A task's traces go back to the head in its result; the head writes them."""

    def write(self, trace: Trace) -> None:
        pass


def evaluate_on_worker(loaded: LoadedProblem, cpu_run: bool, settings: EvaluationSettings,
                       head_version: str) -> ProblemResult:
    """One problem on the node and device Ray gave the task (its only visible GPU in a GPU run)."""
    import ray

    from sol_execbench.platform.lifetime import protect_from_children

    if __version__ != head_version:
        raise WorkerMismatch(f"this node runs sol-execbench {__version__}, the head {head_version}: install the "
                             "same version on every node")
    device = CPU_DEVICE if cpu_run else None
    protect_from_children()  # as the head does: the worker's files are not the solutions' to read
    result = evaluate_problem_shards(loaded, device, settings, _Discarded())
    context = ray.get_runtime_context()
    gpus = context.get_accelerator_ids().get("GPU") or []
    where = CPU_DEVICE if cpu_run else f"gpu {gpus[0]}" if gpus else "gpu"
    return dataclasses.replace(result, device=f"{ray.util.get_node_ip_address()} {where}")


def _worker_log(text: str) -> None:
    print(text, end="" if text.endswith("\n") else "\n", flush=True)  # Ray forwards it to the head


def run_on_ray(run: "DatasetRun", problems: list[LoadedProblem], cluster: RayCluster) -> None:
    """Every problem as a task, longest first; each result committed by ``run`` as it arrives."""
    import ray

    task = ray.remote(evaluate_on_worker).options(num_gpus=0 if cluster.cpu_run else 1, num_cpus=1, max_retries=1)
    settings = dataclasses.replace(run.settings, on_log=_worker_log if run.options.verbose else None)
    pending: deque[LoadedProblem] = deque(problems)
    in_flight: dict[Any, LoadedProblem] = {}
    errors: list[BaseException] = []
    try:
        while pending or in_flight:
            while pending and len(in_flight) < cluster.in_flight and run.control.stopped is None:
                loaded = pending.popleft()
                run.on_event(RunEvent("start", loaded.problem.key, RAY_SLOT))
                in_flight[task.remote(loaded, cluster.cpu_run, settings, __version__)] = loaded
            if not in_flight:
                break
            done, _ = ray.wait(list(in_flight), num_returns=1, timeout=_WAIT_POLL_S)
            for ref in done:
                loaded = in_flight.pop(ref)
                try:
                    result = ray.get(ref)
                except Exception as exc:  # noqa: BLE001  (the task's error; raised once the others are in)
                    errors.append(exc)
                    run.control.stop(f"an error in a Ray task of {loaded.problem.key}: {_first_line(exc)}")
                    run.dropped(loaded.problem.key)
                    continue
                run.finish(dataclasses.replace(result, loaded=loaded))
    except BaseException as exc:
        signalled = _signalled(exc)
        run.control.stop(f"interrupted ({type(signalled).__name__})", interrupt=True)
        _cancel(ray, list(in_flight))
        raise signalled from None
    for loaded in pending:
        run.dropped(loaded.problem.key)
    if errors:
        raise DatasetUsageError(run.control.stopped or _first_line(errors[0]))


def _cancel(ray: Any, refs: list[Any], grace_s: float = _INTERRUPT_GRACE_S) -> None:
    """Interrupt the tasks in progress, whose evaluations then clean up as an interrupted local one
    does (child ended, staging removed); a task still running after ``grace_s`` is killed with its
    worker (its evaluation children die with it: parent-death signal)."""
    for ref in refs:
        with contextlib.suppress(Exception):
            ray.cancel(ref, force=False)
    with contextlib.suppress(Exception):
        _, refs = ray.wait(refs, num_returns=len(refs), timeout=grace_s)
    for ref in refs:
        with contextlib.suppress(Exception):
            ray.cancel(ref, force=True)


def _signalled(exc: BaseException) -> BaseException:
    """The signal's exception (a BaseException that is no Exception: the run's stop, Ctrl-C) where
    Ray's wait wrapped it in a SystemError; else ``exc``."""
    seen = exc
    while seen is not None:
        if not isinstance(seen, Exception):
            return seen
        seen = seen.__cause__ or seen.__context__
    return exc


def _first_line(exc: BaseException) -> str:
    cause = getattr(exc, "cause", None) or exc  # a RayTaskError wraps the task's own exception
    text = str(cause).strip()
    return text.splitlines()[0] if text else type(cause).__name__
