"""Running the compile worker in its own process group, under the compile timeout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from sol_execbench.platform.host import kill_session, use_bytecode_cache
from sol_execbench.sandbox import IsolationRefused, RunFolders, file_sha256, plan as plan_sandbox, wrapper_for
from sol_execbench.platform.lifetime import preexec_die_with_parent
from sol_execbench.schema import EvaluationStatus, IsolationMode, IsolationRecord, Solution

from .base import BuildFailure
from .compile_errors import first_errors
from .native_plan import BuildPlan

LOG_NAME = "build.log"


@dataclass(frozen=True)
class CompileJob:
    """One build to run: what to compile, from where, by when, under which sandbox mode."""

    plan: BuildPlan
    solution: Solution
    source_dir: Path
    deadline: float  # time.monotonic() value
    timeout_s: float
    isolation: IsolationMode = IsolationMode.AUTO


__all__ = ["CompileJob", "compile_extension", "failure_message", "file_sha256"]


def _request(plan: BuildPlan, solution: Solution, source_dir: Path, build_dir: Path) -> dict:
    return {"family": plan.family, "name": plan.name, "sources": plan.sources, "include_dirs": plan.include_dirs,
            "cflags": plan.cflags, "cuda_cflags": plan.cuda_cflags, "ldflags": plan.ldflags,
            "toolkit_home": plan.toolchain.toolkit_home, "source_dir": str(source_dir.resolve()),
            "build_dir": str(build_dir.resolve()), "result_path": str((build_dir / "result.json").resolve()),
            "entry_symbol": solution.spec.entry_symbol}


def _kill_build(proc: subprocess.Popen) -> None:
    """Kill the compile worker and everything it started: the worker leads a session of its own,
    and ninja puts each compiler command in a process group of its own inside it, so the whole
    session is killed, and "the build is over" holds when this returns."""
    kill_session(proc.pid)
    proc.wait()


def _build_sandbox(job: CompileJob, build_dir: Path) -> IsolationRecord:
    """The compile worker writes only its build folder (the parent publishes it into the cache)."""
    try:
        return plan_sandbox(job.isolation, RunFolders(private=(build_dir.resolve(),)))
    except IsolationRefused as exc:
        raise BuildFailure(EvaluationStatus.RUNTIME_ERROR, str(exc)) from None


def compile_extension(job: CompileJob, build_dir: Path) -> Path:
    """Build in ``build_dir``; the library's path. Raises BuildFailure (TIMEOUT or COMPILE_ERROR)."""
    plan, solution, source_dir, deadline, timeout_s = job.plan, job.solution, job.source_dir, job.deadline, job.timeout_s
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise BuildFailure(EvaluationStatus.TIMEOUT, _timeout_message(plan, timeout_s, "before compiling started"))
    sandbox = _build_sandbox(job, build_dir)
    request = {**_request(plan, solution, source_dir, build_dir), "isolation": sandbox.model_dump(mode="json")}
    request_path = build_dir / "request.json"
    request_path.write_text(json.dumps(request, indent=2))
    log_path = build_dir / LOG_NAME
    wrapper = wrapper_for(sandbox, RunFolders(private=(build_dir.resolve(),))) or []
    with open(log_path, "ab") as log:
        proc = subprocess.Popen([*wrapper, sys.executable, "-m", "sol_execbench.build.compile_worker", str(request_path)],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=str(build_dir),
                                env=use_bytecode_cache({**os.environ, **plan.env}), start_new_session=True,
                                preexec_fn=preexec_die_with_parent)  # no build outlives its parent
    try:
        proc.wait(timeout=remaining)
    except subprocess.TimeoutExpired:
        _kill_build(proc)
        raise BuildFailure(EvaluationStatus.TIMEOUT, _timeout_message(plan, timeout_s, "while compiling")) from None
    except BaseException:
        _kill_build(proc)
        raise
    _kill_build(proc)  # nothing of the build may outlive it
    return _read_result(plan, build_dir, log_path, source_dir)


def _timeout_message(plan: BuildPlan, timeout_s: float, when: str) -> str:
    return (f"compile timeout ({timeout_s:g} s, --compile-timeout) reached {when}; the compiler was stopped. "
            f"Build: {plan.describe()}. A finished build is cached, so later evaluations skip compiling.")


def _read_result(plan: BuildPlan, build_dir: Path, log_path: Path, source_dir: Path) -> Path:
    try:
        result = json.loads((build_dir / "result.json").read_text())
    except (OSError, ValueError):
        result = {"ok": False, "stage": "worker", "message": "the compile process ended without a result",
                  "retryable": True}
    if result.get("ok"):
        return Path(result["library"])
    log = log_path.read_text(errors="replace") if log_path.exists() else ""
    text = result.get("message") or log
    if result.get("stage") == "worker" and log:
        text = log
    raise BuildFailure(EvaluationStatus.COMPILE_ERROR, failure_message(plan, result.get("stage", "compile"), text,
                                                                      [str(source_dir.resolve()), str(build_dir.resolve())]),
                       retryable=bool(result.get("retryable")))


def failure_message(plan: BuildPlan, stage: str, output: str, strip_prefixes: list[str]) -> str:
    what = {"compile": "compilation failed", "load": "the built library does not load",
            "symbol": "entry point missing"}.get(stage, "the build failed")
    if stage == "symbol":
        body = output.strip()
    else:
        body = first_errors(output, strip_prefixes)
    parts = [f"{what} ({plan.describe()}; {plan.toolchain.version_string().replace(chr(10), '; ')}):", body]
    if plan.hints:
        parts.append("possibly missing: " + "; ".join(plan.hints))
    return "\n".join(parts)
