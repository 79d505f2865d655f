"""One place that checks an evaluation's options, for the command line (which turns the error
into exit 2) and for the Python ``evaluate()`` (which raises it): same rules, same words."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

NO_LIMIT = "none"  # --memory-limit none: no host memory limit
# A folder: every workload's timed calls written there as TimingRounds JSON, for statistics of one's
# own (docs/configuration.md). The run's sandbox lets the child write there.
TIMING_ROUNDS_ENV = "SOL_EXECBENCH_TIMING_ROUNDS"


def timing_rounds_dir() -> Path | None:
    """``SOL_EXECBENCH_TIMING_ROUNDS`` as an absolute folder, made where missing (the sandbox grants
    only folders that exist); None where unset. Raises ValueError where it cannot be made."""
    raw = os.environ.get(TIMING_ROUNDS_ENV)
    if not raw:
        return None
    folder = Path(raw).expanduser().resolve()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"{TIMING_ROUNDS_ENV}={raw}: the folder cannot be made ({exc.strerror}): name a folder "
                         "this user can write, or unset it") from None
    return folder


def check_seconds(value: Any, flag: str) -> float:
    """A finite, positive number of seconds."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{flag} must be a number of seconds, not {type(value).__name__} {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{flag} must be a finite number of seconds above 0, not {value!r}")
    return float(value)


def check_memory_limit(value: Any) -> int | None:
    """Bytes above 0, or None for no limit (spelled ``none`` on the command line): 0 would be
    read as "no limit" by accident."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"--memory-limit must be a whole number of bytes or {NO_LIMIT}, not {type(value).__name__} {value!r}")
    if value <= 0:
        raise ValueError(f"--memory-limit must be above 0 (give '{NO_LIMIT}' for no limit), not {value}")
    return value


def check_device(value: Any) -> str | None:
    from sol_execbench.platform.device import parse_device_spec

    if value is not None and not isinstance(value, str):
        raise TypeError(f"--device must be a string such as cpu or cuda:0, not {type(value).__name__} {value!r}")
    try:
        parse_device_spec(value)
    except ValueError:
        raise ValueError(f"'{value}' is not a device: give cpu, auto, an index N, cuda:N, hip:N or rocm:N "
                         "(cuda, hip, rocm alone mean GPU 0)") from None
    return value


def check_launcher(prefix: Any, env: Any) -> None:
    """The launcher hook: a command prefix (a list of strings) and extra environment (str -> str)."""
    if not isinstance(prefix, (list, tuple)) or not all(isinstance(p, str) and p for p in prefix):
        raise TypeError(f"child_prefix must be a list of non-empty strings (a command prefix such as ['ncu', ...]), "
                        f"not {prefix!r}")
    if not isinstance(env, dict) or not all(isinstance(k, str) and k and isinstance(v, str) for k, v in env.items()):
        raise TypeError(f"child_env must map variable names to string values, not {env!r}")


def check_options(options: dict[str, Any]) -> None:
    """The EvalOptions fields an API caller gives, checked as the CLI checks its flags."""
    if "timeout_s" in options:
        check_seconds(options["timeout_s"], "--timeout (timeout_s)")
    if "compile_timeout_s" in options:
        check_seconds(options["compile_timeout_s"], "--compile-timeout (compile_timeout_s)")
    if "memory_limit_bytes" in options:
        check_memory_limit(options["memory_limit_bytes"])
    if "device" in options:
        check_device(options["device"])
    if "child_prefix" in options or "child_env" in options:
        check_launcher(options.get("child_prefix", []), options.get("child_env", {}))
    timing_rounds_dir()
