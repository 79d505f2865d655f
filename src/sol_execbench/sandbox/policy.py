"""Which sandbox a child gets, and applying it: Landlock in-process where the kernel offers it,
else bubblewrap around the child, else none (``--isolation strict`` refuses that)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from sol_execbench.schema import IsolationMode, IsolationRecord

from . import bwrap, landlock

# Which mechanisms may be tried, in order (comma-separated; "none" or empty: none). Lets a host
# without a sandbox be reproduced on one that has one, e.g. to check --isolation strict.
MECHANISMS_ENV = "SOL_EXECBENCH_SANDBOX"
DEFAULT_MECHANISMS = ("landlock", "bwrap")
DEVICE_FOLDERS = (Path("/dev"),)  # GPU device nodes (their ioctls) and /dev/shm (torch, NCCL shared memory)


class IsolationRefused(Exception):
    """``--isolation strict`` and no sandbox could be enforced; the message says why."""


@dataclass(frozen=True)
class RunFolders:
    """What a sandboxed child may write: the run's private folders, and the device nodes."""

    private: tuple[Path, ...]
    devices: tuple[Path, ...] = field(default=DEVICE_FOLDERS)

    @property
    def writable(self) -> list[Path]:
        return [*self.private, *self.devices]

    @classmethod
    def of_run(cls, staging: Path, dump_dir: str | None, rounds_dir: str | None = None) -> "RunFolders":
        """An evaluation's folders: its staging folder (the solution's temp folder and JIT caches
        live in it), ``--dump-failures`` and ``SOL_EXECBENCH_TIMING_ROUNDS``'s folder, both named by
        the user for the harness's own output. The parent plans with them, the child enforces them."""
        return cls(private=(staging, *(Path(d) for d in (dump_dir, rounds_dir) if d)))


def allowed_mechanisms() -> list[str]:
    raw = os.environ.get(MECHANISMS_ENV)
    if raw is None:
        return list(DEFAULT_MECHANISMS)
    return [m.strip() for m in raw.split(",") if m.strip() and m.strip() != "none"]


def unsandboxed(reason: str) -> IsolationRecord:
    return IsolationRecord(mechanism="none", reason=reason)


def landlock_record(abi: int, folders: RunFolders) -> IsolationRecord:
    missing = [what for what, needs in (("TCP", 4), ("signal and abstract-socket scoping", 6)) if abi < needs]
    return IsolationRecord(mechanism="landlock", version=str(abi), filesystem=True, network=abi >= 4,
                           signals=abi >= 6, writable=[str(p) for p in folders.writable],
                           reason=f"Landlock ABI {abi} has no {' or '.join(missing)} restriction" if missing else None)


def bwrap_record(version: str, folders: RunFolders) -> IsolationRecord:
    return IsolationRecord(mechanism="bwrap", version=version, filesystem=True, network=True, signals=False,
                           writable=[str(p) for p in folders.writable],
                           reason="bubblewrap does not stop signals to processes outside it")


def plan(mode: IsolationMode, folders: RunFolders) -> IsolationRecord:
    """The sandbox a child will get, decided in the parent without restricting anything. Raises
    IsolationRefused under ``strict`` when it would be none."""
    if mode is IsolationMode.OFF:
        return unsandboxed("--isolation off")
    reasons = []
    for mechanism in allowed_mechanisms():
        if mechanism == "landlock":
            abi, why = landlock.abi_version()
            if abi:
                return landlock_record(abi, folders)
            reasons.append(f"Landlock: {why}")
        elif mechanism == "bwrap":
            version, why = bwrap.probe()
            if version:
                return bwrap_record(version, folders)
            reasons.append(f"bubblewrap: {why}")
    if not reasons:
        reasons.append(f"no sandbox mechanism allowed ({MECHANISMS_ENV}={os.environ.get(MECHANISMS_ENV, '')!r})")
    record = unsandboxed("; ".join(reasons))
    if mode is IsolationMode.STRICT:
        raise IsolationRefused(f"--isolation strict: no sandbox can be enforced here ({record.reason})")
    return record


def wrapper_for(record: IsolationRecord, folders: RunFolders) -> list[str] | None:
    """The command prefix a child starts under (bubblewrap), or None when it restricts itself."""
    return bwrap.wrapper(list(folders.private)) if record.mechanism == "bwrap" else None


def enforce_in_process(record: IsolationRecord, folders: RunFolders, strict: bool) -> IsolationRecord:
    """Apply a planned Landlock restriction to this process (its calling thread and what it starts
    from now on); other mechanisms were applied by the parent. A kernel that refuses leaves the
    child unsandboxed, recorded as such, or raises IsolationRefused under strict."""
    if record.mechanism != "landlock":
        return record
    try:
        landlock.restrict_self(folders.writable, int(record.version or 0))
    except landlock.LandlockError as exc:
        if strict:
            raise IsolationRefused(f"--isolation strict: Landlock could not be applied ({exc})") from None
        return unsandboxed(f"Landlock could not be applied: {exc}")
    return record


def triton_key_file(private: Path) -> Path:
    """Where, in the run's private folder, a process of the harness leaves Triton's cache key for the
    run's child (written in ``evaluate/parent/early_child.py``, read in ``evaluate/child/triton_key.py``)."""
    return private / "run" / "triton-key.json"


def private_environment(private: Path) -> dict[str, str]:
    """Temp and cache variables pointing inside the run's private folder: the JIT caches a later run
    would read (Triton, inductor, CUDA's PTX cache, XDG caches) are this run's own."""
    names = {"TMPDIR": "tmp", "TRITON_CACHE_DIR": "triton", "TORCHINDUCTOR_CACHE_DIR": "inductor",
             "CUDA_CACHE_PATH": "cuda-cache", "XDG_CACHE_HOME": "xdg-cache"}
    env = {}
    for name, sub in names.items():
        folder = private / "run" / sub
        folder.mkdir(parents=True, exist_ok=True)
        env[name] = str(folder)
    return env
