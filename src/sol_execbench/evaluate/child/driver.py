"""The evaluation child: imports the solution and measures it, reporting on the trace channel.

``run_job`` is a plain function of a job description and a channel writer, so a long-lived
worker that has already imported torch can fork and call it with the same isolation.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import secrets
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from .. import launch_level
from ..phases import phase as _phase

GRACEFUL_EXIT_ENV = "SOL_EXECBENCH_GRACEFUL_EXIT"
PROFILE_ENV = "SOL_EXECBENCH_CHILD_PROFILE"  # a path: the child's run under cProfile, stats written there


def _load_reference(staging: Path, source: str):
    """The reference as a module the solution cannot import by name: a random module name, never
    entered in ``sys.modules``, from a file under a random directory that is not on ``sys.path``."""
    token = secrets.token_hex(8)
    folder = staging / f".ref-{token}"
    folder.mkdir()
    path = folder / "reference.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(f"_ref_{token}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_CPP_EXTENSION = "torch.utils.cpp_extension"


def _refuse_cpp_jit(module: Any) -> None:
    def refuse(*_args: Any, **_kwargs: Any) -> None:
        raise RuntimeError("torch.utils.cpp_extension.load/load_inline are not allowed in Python solutions: "
                           "declare a native language (cuda_cpp, hip_cpp, cpp) so the harness builds and caches it")

    module.load = refuse
    module.load_inline = refuse


class _PatchedOnImport(importlib.abc.Loader):
    """The loader of ``torch.utils.cpp_extension``, refusing its JIT as soon as it has run."""

    def __init__(self, loader: Any):
        self._loader = loader

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._loader.exec_module(module)
        _refuse_cpp_jit(module)


class _CppJitRefuser(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        spec = importlib.machinery.PathFinder.find_spec(fullname, path) if fullname == _CPP_EXTENSION else None
        if spec is not None and spec.loader is not None:
            spec.loader = _PatchedOnImport(spec.loader)
        return spec


def _block_cpp_extension_jit() -> None:
    """Python solutions may not compile C++ themselves: native languages go through the builders.
    ``torch.utils.cpp_extension`` is patched where it is imported already (a warm child), else when
    it first is: importing it costs 0.4 to 0.5 s (setuptools), which an evaluation that never uses
    it should not pay."""
    if _CPP_EXTENSION in sys.modules:
        _refuse_cpp_jit(sys.modules[_CPP_EXTENSION])
    else:
        sys.meta_path.insert(0, _CppJitRefuser())


def _triton_version() -> str | None:
    """Triton's version: the module's own where something imported it, else that of the installed
    distribution. Importing it only to read the version cost a child 0.23 s after torch (CPU machine),
    which a child of a PyTorch problem never otherwise pays."""
    from sol_execbench.platform.host import TRITON_DISTRIBUTIONS, distribution_version

    module = sys.modules.get("triton")
    if module is not None:
        return getattr(module, "__version__", None)
    for name in TRITON_DISTRIBUTIONS:
        version = distribution_version(name)
        if version is not None:
            return version
    return None


def _libs() -> dict[str, str]:
    _phase("collecting library versions")
    import torch

    libs = {"torch": torch.__version__}
    if torch.version.cuda:
        libs["cuda"] = torch.version.cuda
    if getattr(torch.version, "hip", None):
        libs["hip"] = torch.version.hip
    triton = _triton_version()
    if triton is not None:
        libs["triton"] = triton
    return libs


def _clock_watch(config: Any, device: Any) -> tuple[Any, str | None, list[str]]:
    """Clocks read at the start (GPU), and with lock_clocks their check under load (not only the env
    var): (watch, why the clocks are not locked, notes)."""
    if not device.is_gpu:
        return None, None, (["lock_clocks: not verified on the CPU device"] if config.lock_clocks else [])
    from .clock_watch import ClockWatch

    clocks = ClockWatch(device)
    return clocks, (clocks.verify_lock() if config.lock_clocks else None), []


def run_job(job: dict[str, Any], channel: Any) -> None:
    """Evaluate every workload of ``job``; each outcome is sent as one trace message."""
    from sol_execbench.platform import use_device

    _phase("child started")
    device = use_device(job.get("device"))
    _phase(f"device {device.torch_device} ready")
    device_hold = None
    if not device.is_gpu:
        os.environ["TRITON_INTERPRET"] = "1"  # Triton kernels run on the CPU through the interpreter
    else:
        from .gpu_quiet import SharedHold, pin_runtime_dir

        device_hold = SharedHold(device.index)  # no warm-pool start-up on this GPU while we measure
        pin_runtime_dir()  # the pool's idle marks are read between workloads, inside the sandbox (clock_watch)

    import torch  # noqa: F401  (after TRITON_INTERPRET is decided)

    from sol_execbench.build import BuildFailure, builder_for
    from sol_execbench.schema import (BenchmarkConfig, BuildRecord, Definition, Environment, EvaluationStatus,
                                      Solution, Workload)

    from . import confinement as confinement_of_run, guards, triton_key
    from .activity_watch import ActivityWatch
    from .workload_eval import Context, evaluate_workload

    staging = Path(job["staging_dir"])
    definition = Definition.model_validate(job["definition"])
    solution = Solution.model_validate(job["solution"])
    workloads = [Workload.model_validate(w) for w in job["workloads"]]
    config = BenchmarkConfig.model_validate(job["config"])
    environment = Environment(hardware=device.name, libs=_libs(),
                              launch_level_us=launch_level.this_process_us(device.torch_device)
                              if device.vendor == "cuda" else None)
    channel.send("ready", hardware=device.name, device=device.to_dict())

    try:
        reference = _load_reference(staging, definition.reference)
    except Exception as exc:
        channel.send("fatal", status=EvaluationStatus.INVALID_REFERENCE.value,
                     log=f"reference could not be loaded: {exc}\n{traceback.format_exc()}")
        return
    custom = getattr(reference, definition.custom_inputs_entrypoint) if definition.custom_inputs_entrypoint else None
    _phase("reference loaded")
    clocks, problem, clock_notes = _clock_watch(config, device)
    _phase("clocks read")
    if problem:
        channel.send("fatal", status=EvaluationStatus.RUNTIME_ERROR.value, log=problem)
        return
    if triton_key.adopt_ahead(staging):  # before any solution code runs: the record is the harness's
        _phase("Triton's cache key taken from the run's private folder")
    watch = ActivityWatch()  # before any solution code runs; installs its thread counter
    integrity = guards.IntegritySnapshot()  # after the watch, so its counter is among what is watched
    build = BuildRecord(language=solution.spec.languages[0].value, build_time_s=job.get("build_time_s"),
                        cached=job.get("build_cached"))
    if not solution.spec.is_native:
        _block_cpp_extension_jit()
    try:
        confinement = confinement_of_run.enter(job, staging)
    except confinement_of_run.IsolationRefused as exc:
        channel.send("fatal", status=EvaluationStatus.RUNTIME_ERROR.value, log=str(exc))
        return
    _phase(f"sandbox: {confinement.record.mechanism}")
    if confinement.private_caches:
        _use_built_launchers(job, staging, solution)
    began = time.perf_counter()
    try:
        fn = builder_for(solution).load(solution, staging / "solution", job.get("build_artifacts", {}))
    except BuildFailure as exc:
        channel.send("fatal", status=exc.status.value, log=exc.message)
        return
    except BaseException as exc:  # an import that raises or exits is the solution's failure
        channel.send("fatal", status=EvaluationStatus.RUNTIME_ERROR.value,
                     log=f"solution import failed: {exc!r}\n{traceback.format_exc()}")
        return
    if not solution.spec.is_native:
        build.build_time_s = round(time.perf_counter() - began, 6)
    tampered = integrity.tampered()
    found = confinement.verdict()
    if found is not None:
        channel.send("fatal", status=found[0].value, log=f"while the solution was imported: {found[1]}")
        return
    if tampered:
        channel.send("fatal", status=EvaluationStatus.REWARD_HACK.value,
                     log=f"importing the solution replaced harness functions: {', '.join(tampered)}")
        return
    ctx = Context(definition=definition, solution_name=solution.name, solution_fn=fn,
                  dps=solution.spec.destination_passing_style, reference_fn=reference.run, custom_inputs_fn=custom,
                  config=config, device=device, staging_dir=staging, environment=environment, build=build,
                  integrity=integrity, dump_dir=Path(job["dump_dir"]) if job.get("dump_dir") else None,
                  rounds_dir=Path(job["rounds_dir"]) if job.get("rounds_dir") else None,
                  warnings=list(job.get("warnings", [])) + clock_notes, watch=watch,
                  clocks=clocks, guard_outputs=bool(job.get("guard_outputs", True)), device_hold=device_hold)
    _phase("solution loaded")
    task = job.get("task")  # a profiling task (--profile, --static-evidence) instead of the evaluation
    if task:
        from .profile_calls import profile_workload

        ctx.hold_device()  # a profiling task times from its first call
    for workload in workloads:
        channel.send("start", uuid=workload.uuid)
        outcome = profile_workload(ctx, workload, task, channel) if task else evaluate_workload(ctx, workload)
        trace = confinement_of_run.judged(outcome, confinement)
        channel.send("trace", trace=trace.model_dump(mode="json"))
        _phase(f"workload {workload.uuid} done")
    channel.send("done")


def _use_built_launchers(job: dict[str, Any], staging: Path, solution: Any) -> None:
    """Before the solution is loaded: copy the Triton launchers warm processes built into the run's
    private Triton cache, and have Triton note the argument types of the run's kernels, which the
    command line adds to what warm processes build (``evaluate/triton_launchers.py``)."""
    from .. import triton_launchers

    store = job.get("triton_launchers")
    if store:
        copied = triton_launchers.install(Path(store), Path(os.environ["TRITON_CACHE_DIR"]))
        _phase(f"{copied} Triton launcher(s) copied from the tool's cache")
    if "triton" in sys.modules or any(lang.value == "triton" for lang in solution.spec.languages):
        triton_launchers.record_kernels(staging)


def main(argv: list[str]) -> None:
    from ..channel import ChannelWriter

    channel = ChannelWriter.from_environment()
    job = json.loads(Path(argv[1]).read_text())
    from sol_execbench.platform.device import start_device_context

    start_device_context(job.get("device") if isinstance(job, dict) else None)  # a fresh child: beside its torch import
    profile_path = os.environ.get(PROFILE_ENV)
    profiler = profile_file = None
    if profile_path:  # where the evaluator itself spends its time (developer switch, docs/configuration.md)
        import cProfile

        # Opened now: the sandbox the job enters allows no write outside the staging directory.
        profile_file = open(profile_path, "wb")  # noqa: SIM115  (closed after the job)
        profiler = cProfile.Profile()
        profiler.enable()
    try:
        run_job(job, channel)
    except BaseException as exc:
        channel.send("crash", log=f"{exc!r}\n{traceback.format_exc()}")
    finally:
        if profile_file is not None:
            import marshal

            profiler.disable()
            profiler.create_stats()
            with profile_file:
                marshal.dump(profiler.stats, profile_file)  # what cProfile's dump_stats writes
        sys.stdout.flush()
        sys.stderr.flush()
        channel.close()
    # os._exit skips interpreter teardown, where solution threads or atexit hooks could still run.
    if os.environ.get(GRACEFUL_EXIT_ENV) == "1":
        sys.exit(0)
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv)
