"""Matching a GPU's name to a named part ("NVIDIA H100 80GB HBM3" -> H100).

One matcher for every table keyed by part name (the build's arch table, the peak table): the
name is normalised (upper case, letters and digits only, vendor words dropped), then an exact
key wins, else the longest key the name starts with, so "H100PCIE" beats "H100".
"""

from __future__ import annotations

import re
from typing import Iterable


def normalize_part_name(name: str) -> str:
    return re.sub(r"[^A-Z0-9]", "", name.upper()).removeprefix("NVIDIA").removeprefix("AMD").removeprefix("INSTINCT")


def match_part(name: str, keys: Iterable[str]) -> str | None:
    """The key of ``keys`` (normalised names) that ``name`` denotes, or None."""
    wanted = normalize_part_name(name)
    known = set(keys)
    if wanted in known:
        return wanted
    prefixes = [k for k in known if wanted.startswith(k)]
    return max(prefixes, key=len) if prefixes else None
