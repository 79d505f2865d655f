"""The evaluation child's side of the sandbox: entering it before solution code is loaded, and
turning what the solution tried outside its run into a verdict after each call."""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sol_execbench.sandbox import (AttemptLog, IsolationRefused, Protected, RunFolders, TreeDigest,
                                   enforce_in_process, plan, private_environment)
from sol_execbench.schema import EvaluationStatus, IsolationMode, IsolationRecord

# The installed harness (sol_execbench/), found from this file rather than by importing the package
# root, which would pull in the parent side.
HARNESS_DIR = Path(__file__).resolve().parents[2]


def _protected_places(output_path: str | None, private_caches: bool) -> Protected:
    """What no solution may change. The JIT caches (Triton's, the user's, CUDA's) and the warm pool's
    folder count only when the run has caches of its own (sandboxed): unsandboxed, the harness's own
    JIT and GPU lock write there on the solution's behalf, and the user's caches keep serving."""
    from sol_execbench.build.cache import cache_root as build_cache_root
    from sol_execbench.platform.host import cache_root, runtime_dir, torch_dir

    home = Path.home()
    places: list[tuple[Path, str]] = [(HARNESS_DIR, "the harness's installed files"),
                                      (cache_root().resolve(), "the tool's cache (builds, bytecode)"),
                                      (build_cache_root().resolve(), "the build cache")]
    if private_caches:
        places.append((runtime_dir().resolve(), "the warm pool's sockets"))
    if os.environ.get("PYTHONPYCACHEPREFIX"):
        places.append((Path(os.environ["PYTHONPYCACHEPREFIX"]).resolve(), "the bytecode cache"))
    torch_home = torch_dir()
    if torch_home is not None:
        places.append((torch_home.resolve(), "an installed package"))
    if private_caches:
        places += [(home / ".cache", "a user cache"), (home / ".triton", "Triton's cache"), (home / ".nv", "CUDA's cache")]
    if output_path:
        places.append((Path(output_path).resolve(), "the -o output"))
    return Protected(tuple(places))


@dataclass
class Confinement:
    """The sandbox a child entered and the watches that judge what the solution tried."""

    record: IsolationRecord
    attempts: AttemptLog
    harness: TreeDigest
    private_caches: bool  # the JIT caches (TRITON_CACHE_DIR, ...) are the run's own, in its staging folder

    def verdict(self) -> tuple[EvaluationStatus, str] | None:
        """REWARD_HACK or RUNTIME_ERROR with what was tried since the last call, else None."""
        attempts = self.attempts.take()
        changed = self.harness.changed()
        if changed:
            return EvaluationStatus.REWARD_HACK, f"the harness's files changed during the run: {', '.join(changed[:5])}"
        exploits = [a.describe() for a in attempts if a.exploit]
        if exploits:
            return EvaluationStatus.REWARD_HACK, f"the solution tried to reach outside its run: {'; '.join(exploits[:5])}"
        if attempts:
            return (EvaluationStatus.RUNTIME_ERROR, "the sandbox refused the solution's write(s) outside its run: "
                    + "; ".join(a.describe() for a in attempts[:5]))
        return None


def enter(job: dict[str, Any], staging: Path) -> Confinement:
    """Enter the planned sandbox (after the harness's imports and device set-up, before the solution
    is loaded). Raises IsolationRefused under ``--isolation strict`` when none could be enforced."""
    isolation = job.get("isolation") or {}
    mode = IsolationMode(isolation.get("mode", IsolationMode.AUTO.value))
    folders = RunFolders.of_run(staging, job.get("dump_dir"), job.get("rounds_dir"))
    for folder in folders.private:  # a folder made after the restriction could not be written
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError:
            pass  # e.g. --dump-failures naming a file: the dump writer warns about it
    planned = (IsolationRecord.model_validate(isolation["record"]) if isolation.get("record")
               else plan(mode, folders))
    private_caches = planned.mechanism != "none"  # unsandboxed, the user's own caches keep serving
    # Before the cache variables point into the run: the tool's cache is where the user's put it.
    protected = _protected_places(job.get("output_path"), private_caches=private_caches)
    if private_caches:
        os.environ.update(private_environment(staging))
        tempfile.tempdir = None  # read TMPDIR again
    harness = TreeDigest([HARNESS_DIR])
    record = enforce_in_process(planned, folders, strict=mode is IsolationMode.STRICT)
    # Python's own bytecode writes would be refused outside the run, and recorded as attempts.
    sys.dont_write_bytecode = True
    attempts = AttemptLog(list(folders.private), protected, sandboxed=record.filesystem)
    attempts.armed = True
    return Confinement(record, attempts, harness, private_caches=private_caches)


def judged(trace: Any, confinement: Confinement) -> Any:
    """The trace with the isolation recorded, and a PASS (or any status) overruled by what was tried."""
    evaluation = trace.evaluation.model_copy(update={"isolation": confinement.record})
    found = confinement.verdict()
    if found is not None:
        status, message = found
        log = f"{evaluation.log}\n{message}" if evaluation.log else message
        evaluation = evaluation.model_copy(update={"status": status, "log": log, "correctness": None,
                                                   "performance": None})
    return trace.model_copy(update={"evaluation": evaluation})


__all__ = ["Confinement", "IsolationRefused", "enter", "judged"]
