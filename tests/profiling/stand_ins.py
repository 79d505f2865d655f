"""Stand-ins for a profiler on a machine without one: real executable scripts on PATH."""

from __future__ import annotations

import stat
from pathlib import Path

# Part of a stand-in ncu (after its "#!/bin/sh" line): skips ncu's own options, keeping --log-file's
# value in $log, so that "$@" is then the profiled program and its arguments.
NCU_OPTIONS = """log=""
while [ $# -gt 0 ]; do
  case "$1" in
    --log-file) log="$2"; shift 2;;
    --csv|--nvtx) shift;;
    --*) shift 2;;
    *) break;;
  esac
done
"""


def write_tool(folder: Path, name: str, text: str) -> Path:
    """An executable script ``folder/name`` holding ``text``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path
