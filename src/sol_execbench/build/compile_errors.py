"""Turning a compiler's output into a short COMPILE_ERROR message: its first errors, trimmed."""

from __future__ import annotations

import re

_ERROR = re.compile(r"(\berror\b|undefined reference|undefined symbol|cannot find -l|No such file or directory)",
                    re.IGNORECASE)
_SUMMARY = re.compile(r"^\s*(\d+ errors? detected|collect2: error: ld returned|ninja: build stopped"
                      r"|Error building extension|compilation terminated)")
_COMMAND = re.compile(r"^(\[\d+/\d+\] )?\S*(c\+\+|g\+\+|gcc|clang\+\+|nvcc|hipcc|ld)\s.*\s-(c|o|shared)\s")
_MAX_LINE = 300


def _clean(line: str, strip_prefixes: list[str]) -> str:
    for prefix in strip_prefixes:
        if prefix:
            line = line.replace(prefix.rstrip("/") + "/", "")
    line = line.rstrip()
    return line if len(line) <= _MAX_LINE else line[:_MAX_LINE] + " ..."


def first_errors(output: str, strip_prefixes: list[str] | None = None, *, max_errors: int = 6, context: int = 3,
                 max_chars: int = 3000) -> str:
    """The first ``max_errors`` error lines of ``output``, each with the ``context`` lines after it
    (the source line and caret gcc and nvcc print). Compiler command lines are left out; paths under
    ``strip_prefixes`` are made relative. Falls back to the output's last lines when no line looks
    like an error."""
    lines = [_clean(line, strip_prefixes or []) for line in output.splitlines() if not _COMMAND.match(line)]
    picks = [i for i, line in enumerate(lines) if _ERROR.search(line) and not _SUMMARY.match(line)]
    if not picks:
        kept = [line for line in lines if line.strip() and not _SUMMARY.match(line)][-25:]
        return _bound("\n".join(kept), max_chars)
    chosen: set[int] = set()
    for i in picks[:max_errors]:
        chosen.add(i)
        for j in range(i + 1, min(i + context + 1, len(lines))):
            if _ERROR.search(lines[j]) or _SUMMARY.match(lines[j]):
                break
            chosen.add(j)
    text = "\n".join(lines[j] for j in sorted(chosen))
    more = len(picks) - max_errors
    if more > 0:
        text += f"\n... and {more} more error line(s)"
    return _bound(text, max_chars)


def _bound(text: str, max_chars: int) -> str:
    return text if len(text) <= max_chars else text[:max_chars] + "\n... (trimmed)"
