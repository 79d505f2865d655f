"""Matching a GPU's name to a named part ("NVIDIA H100 80GB HBM3" -> H100).

One matcher for every table keyed by part name (the build's arch table, the peak table): the
name is normalised (upper case, letters and digits only, vendor words dropped), then an exact
key wins, else the longest key the name starts with that ends a token, so "H100PCIE" beats
"H100" and "H1000" matches neither.
"""

from __future__ import annotations

import re
from typing import Iterable


_VENDOR_WORDS = ("NVIDIA", "AMD", "INSTINCT")


def _words(name: str) -> list[str]:
    """The name's words of letters and digits, upper case; vendor words at the front dropped (also
    where written together with the part, as in "NVIDIAH100")."""
    words = re.findall(r"[A-Z0-9]+", name.upper())
    while words:
        head = words[0]
        vendor = next((v for v in _VENDOR_WORDS if head.startswith(v)), None)
        if vendor is None:
            break
        words[0] = head[len(vendor):]
        if not words[0]:
            words.pop(0)
    return words


def normalize_part_name(name: str) -> str:
    return "".join(_words(name))


def _ends_a_token(wanted_words: list[str], length: int) -> bool:
    """Whether the first ``length`` characters of the joined words end at a token's end: at a word
    boundary, or where digits meet letters ("H100" in "H100PCIE"), but not inside a number ("H100"
    in "H1000")."""
    joined = "".join(wanted_words)
    if length >= len(joined):
        return True
    ends, at = set(), 0
    for word in wanted_words:
        at += len(word)
        ends.add(at)
    return length in ends or joined[length - 1].isdigit() != joined[length].isdigit()


def match_part(name: str, keys: Iterable[str]) -> str | None:
    """The key of ``keys`` (normalised names) that ``name`` denotes, or None."""
    words = _words(name)
    wanted = "".join(words)
    known = set(keys)
    if wanted in known:
        return wanted
    prefixes = [k for k in known if wanted.startswith(k) and _ends_a_token(words, len(k))]
    return max(prefixes, key=len) if prefixes else None
