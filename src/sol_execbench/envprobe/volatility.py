"""Which snapshot fields describe the environment, and which change from run to run on the same host.

One home for the classification that both ``env diff`` (exit code) and the environment hash use,
so that ``hash(a) == hash(b)`` exactly when ``env diff a b`` exits 0.

- ``volatile``: changes between two probes of the same host minutes apart (timestamps, current
  clocks, temperatures, power draw, throttle reasons, where this run writes its sidecar).
- ``identity``: names one particular machine, container or GPU rather than its configuration
  (hostname, container id, GPU UUID and PCI address): two identical hosts differ only here.
- ``extended``: filled only by ``--extended``; compared only when both snapshots have it.
- ``config``: everything else; a difference here is a different environment.
"""

from __future__ import annotations

import fnmatch
import re
from typing import Any, Iterator

VOLATILE = "volatile"
IDENTITY = "identity"
EXTENDED = "extended"
CONFIG = "config"

VOLATILE_PATTERNS: tuple[str, ...] = (
    "timestamp",
    "probe_wall_s",
    "extended",
    "partial",
    "partial_reasons",
    "nvidia.devices[*].clocks.current.*",
    "nvidia.devices[*].throttle_reasons",
    "nvidia.devices[*].power.draw_w",
    "nvidia.devices[*].temperature_c",
    "nvidia.devices[*].performance_state",
    "rocm.smi.devices[*].clocks.current.*",
    "rocm.smi.devices[*].socket_power_w",
    "rocm.smi.devices[*].temperature_hotspot_c",
    "env_vars.SOLEXECBENCH_ENV_SNAPSHOT",
    "env_vars.SOLEXECBENCH_ENV_SNAPSHOT_PATH",
    "env_vars.SOL_EXECBENCH_GRACEFUL_EXIT",
)
IDENTITY_PATTERNS: tuple[str, ...] = (
    "host.hostname",
    "host.container.id",
    "nvidia.devices[*].uuid",
    "nvidia.devices[*].pci_bus_id",
)
EXTENDED_PATTERNS: tuple[str, ...] = ("pytorch_build.bundled_symbols.*",)

_INDEX = re.compile(r"\[\d+\]")


def flatten(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """``(dotted.path[i].key, leaf)`` pairs. Lists of dicts are indexed; other lists are one leaf."""
    if isinstance(value, dict):
        if not value and prefix:
            yield prefix, value
        for key, item in value.items():
            yield from flatten(item, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
        for index, item in enumerate(value):
            yield from flatten(item, f"{prefix}[{index}]")
    else:
        yield prefix, value


def _generic(path: str) -> str:
    # "[3]" and "[*]" both become ".#" so that fnmatch (where "[*]" is a character class) can compare.
    return _INDEX.sub(".#", path).replace("[*]", ".#")


_RULES = tuple(
    (kind, tuple(_generic(p) for p in patterns))
    for kind, patterns in ((VOLATILE, VOLATILE_PATTERNS), (IDENTITY, IDENTITY_PATTERNS), (EXTENDED, EXTENDED_PATTERNS))
)


def classify(path: str) -> str:
    """``volatile``, ``identity``, ``extended`` or ``config`` for a flattened path."""
    generic = _generic(path)
    for kind, patterns in _RULES:
        if any(fnmatch.fnmatchcase(generic, p) or generic.startswith(p + ".") for p in patterns):
            return kind
    return CONFIG
