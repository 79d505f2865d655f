"""``toolchain --json``: the registry's artifacts, each with what this host shows of it.

Evidence levels, weakest first:

- ``declared``: only the registry knows it; not found here.
- ``detected``: found (a path), version unknown or older than the registry's ``min_version``.
- ``version_verified``: found, version read and at least ``min_version``.
- ``exercised``: a real run used this very version; runs record that in
  ``<cache>/toolchain-exercised.json`` through ``record_exercised``.
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ._common import cache_dir, error_text
from .files import version_key
from .toolchain_registry import ARCH_GENERATIONS, EVIDENCE_LEVELS, REGISTRY, Artifact

EXERCISED_FILE = "toolchain-exercised.json"


@dataclass(frozen=True)
class Filters:
    evidence_level: str | None = None
    """At least this level (``detected`` also lists ``version_verified`` and ``exercised``)."""
    artifact_types: tuple[str, ...] = ()
    gpu_arch: str | None = None
    hardware_generation: str | None = None
    rocm_version: str | None = None
    """Artifacts usable with this ROCm release: AMD or vendor-neutral, minimum ROCm at most this."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "evidence_level": self.evidence_level,
            "artifact_type": list(self.artifact_types) or None,
            "gpu_arch": self.gpu_arch,
            "hardware_generation": self.hardware_generation,
            "rocm_version": self.rocm_version,
        }


def base_arch(arch: str) -> str:
    """``sm_90a`` -> ``sm_90``; ``gfx942:sramecc+:xnack-`` -> ``gfx942``."""
    arch = arch.strip().lower().split(":")[0]
    return re.sub(r"^(sm_\d+)[af]$", r"\1", arch)


def _exercised_records() -> dict[str, Any]:
    try:
        data = json.loads((cache_dir() / EXERCISED_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def record_exercised(artifact_id: str, version: str | None) -> None:
    """Note that a real run used ``artifact_id`` at ``version`` (best effort; never raises)."""
    records = _exercised_records()
    records[artifact_id] = {"version": version, "when": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    try:
        cache_dir().mkdir(parents=True, exist_ok=True)
        (cache_dir() / EXERCISED_FILE).write_text(json.dumps(records, indent=2, sort_keys=True))
    except OSError:
        pass


def evidence_level(artifact: Artifact, path: str | None, version: str | None, exercised: dict[str, Any]) -> str:
    if path is None and version is None:
        return "declared"
    if version is None or (artifact.min_version and version_key(version) < version_key(artifact.min_version)):
        return "detected"
    record = exercised.get(artifact.id)
    if isinstance(record, dict) and record.get("version") == version:
        return "exercised"
    return "version_verified"


def detect(artifact: Artifact, exercised: dict[str, Any]) -> dict[str, Any]:
    """The registry entry plus ``found``, ``path``, ``version``, ``evidence_level`` and any ``problem``."""
    entry = {**artifact.declared(), "found": False, "path": None, "version": None, "evidence_level": "declared", "problem": None}
    try:
        path, version = artifact.detector()
    except Exception as exc:  # noqa: BLE001 - a detector bug is a problem line, not a crash
        entry["problem"] = f"detection failed: {error_text(exc)}"
        return entry
    entry.update(found=path is not None or version is not None, path=path, version=version)
    entry["evidence_level"] = evidence_level(artifact, path, version, exercised)
    if version and artifact.min_version and version_key(version) < version_key(artifact.min_version):
        entry["problem"] = f"version {version} is older than the supported minimum {artifact.min_version}"
    return entry


def _matches(entry: dict[str, Any], f: Filters) -> bool:
    if f.evidence_level and EVIDENCE_LEVELS.index(entry["evidence_level"]) < EVIDENCE_LEVELS.index(f.evidence_level):
        return False
    if f.artifact_types and entry["artifact_type"] not in f.artifact_types:
        return False
    if f.gpu_arch and entry["gpu_archs"] and base_arch(f.gpu_arch) not in entry["gpu_archs"]:
        return False
    generations = [g.lower() for g in entry["hardware_generations"]]
    if f.hardware_generation and generations and f.hardware_generation.lower() not in generations:
        return False
    if f.rocm_version:
        if entry["vendor"] == "nvidia":
            return False
        minimum = entry["min_rocm_version"]
        if minimum and version_key(minimum) > version_key(f.rocm_version):
            return False
    return True


def select(entries: list[dict[str, Any]], filters: Filters) -> list[dict[str, Any]]:
    """The entries every given filter admits (an artifact with no arch list admits any arch)."""
    return [e for e in entries if _matches(e, filters)]


def registry_entries() -> list[dict[str, Any]]:
    """The whole registry, undetected (every entry at ``declared``)."""
    return [{**a.declared(), "found": None, "path": None, "version": None, "evidence_level": "declared", "problem": None}
            for a in REGISTRY]


def detect_by_id(artifact_id: str) -> dict[str, Any]:
    """``detect`` of the registry's artifact ``artifact_id`` (``nvcc``, ``hipcc``, ...)."""
    return detect(next(a for a in REGISTRY if a.id == artifact_id), {})


def detect_all() -> list[dict[str, Any]]:
    exercised = _exercised_records()
    with ThreadPoolExecutor(max_workers=8) as pool:
        return list(pool.map(lambda a: detect(a, exercised), REGISTRY))


def toolchain_report(filters: Filters, list_registry: bool = False) -> dict[str, Any]:
    """The ``toolchain --json`` document."""
    entries = registry_entries() if list_registry else detect_all()
    return {
        "mode": "registry" if list_registry else "detected",
        "filters": filters.to_dict(),
        "evidence_levels": list(EVIDENCE_LEVELS),
        "hardware_generations": dict(sorted(ARCH_GENERATIONS.items())),
        "artifacts": select(entries, filters),
    }
