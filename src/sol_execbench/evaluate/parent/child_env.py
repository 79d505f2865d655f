"""The start-up environment of an evaluation child, fresh or warm (shared by ``process`` and
``warm_pool`` without either importing the other's module)."""

from __future__ import annotations

import os

from sol_execbench.platform.host import use_bytecode_cache

ALLOC_CONF = "expandable_segments:True"
# The staging folder to remove when the command line dies without removing it (SIGKILL): by the
# supervisor of a fresh child, by the pool for a warm one.
STAGING_CLEANUP_ENV = "SOL_EXECBENCH_STAGING_CLEANUP"


def child_environment(extra: dict[str, str]) -> dict[str, str]:
    """The environment of an evaluation child (and of a warm one)."""
    env = dict(os.environ)
    env.setdefault("PYTORCH_ALLOC_CONF", ALLOC_CONF)
    use_bytecode_cache(env)
    env.update(extra)
    return env
