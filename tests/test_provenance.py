"""provenance.toml against the repository: every third-party path exists and sits beside its licence
and notice, the corpus is unchanged, and no foreign copyright notice hides in our own files."""

from __future__ import annotations

import fnmatch
import re
import subprocess
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
POLICY = tomllib.loads((REPO / "provenance.toml").read_text())
NOTICE_LINE = re.compile(r"(SPDX-FileCopyrightText|SPDX-License-Identifier|Copyright\s*(\(c\)|\(C\)|©|\d{4}))", re.I)
HEADER_LINES = 8


def tracked_files() -> list[str]:
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout.splitlines()
    return [path for path in listed if (REPO / path).is_file()]


def owner(path: str) -> dict | None:
    return next((entry for entry in POLICY["third_party"] if any(fnmatch.fnmatch(path, p) for p in entry["paths"])), None)


def test_policy_shape_and_document():
    assert set(POLICY["classes"]) == {"independent", "third_party_unchanged", "vendor_excerpt"}
    document = (REPO / POLICY["policy_document"]).read_text()
    for name in POLICY["classes"]:
        assert f"`{name}`" in document, f"{POLICY['policy_document']} does not describe class '{name}'"
    for entry in POLICY["third_party"]:
        assert entry["class"] in POLICY["classes"]
        assert entry["name"] in document and entry.get("revision", entry["name"]) in document
        for pattern in entry["paths"]:
            assert Path(pattern.replace("/**", "")).name in document, f"{pattern} is not in {POLICY['policy_document']}"


@pytest.mark.parametrize("entry", POLICY["third_party"], ids=lambda e: e["name"])
def test_third_party_files_exist_with_their_licence_and_notice(entry):
    files = tracked_files()
    for pattern in entry["paths"]:
        assert any(fnmatch.fnmatch(f, pattern) for f in files), f"provenance.toml lists '{pattern}', which matches no file"
    if "license_file" in entry:
        licence = (REPO / entry["license_file"]).read_text()
        assert entry["license"] == "Apache-2.0" and "Apache License" in licence and "Version 2.0" in licence
        notice = (REPO / entry["notice_file"]).read_text()
        assert entry["revision"][:7] in notice and entry["license"] in notice


def test_the_conformance_corpus_is_the_upstream_copy():
    entry = next(e for e in POLICY["third_party"] if e["class"] == "third_party_unchanged")
    reference = (REPO / entry["reference_copy"]).resolve()
    if not reference.is_dir():
        pytest.skip(f"no reference copy at {reference}")
    ours = [f for f in tracked_files() if owner(f) is entry]
    assert ours
    root = REPO / "tests" / "data" / "conformance"
    for path in ours:
        relative = (REPO / path).relative_to(root)
        assert (reference / relative).read_bytes() == (REPO / path).read_bytes(), f"{path} differs from {reference / relative}"


def test_no_foreign_notice_outside_the_listed_files():
    nvidia_allowed = {p for e in POLICY["third_party"] for p in e.get("nvidia_notice", [])}
    offenders = []
    for path in tracked_files():
        entry = owner(path)
        try:
            head = (REPO / path).read_text(encoding="utf-8").splitlines()[:HEADER_LINES]
        except (UnicodeDecodeError, OSError):
            continue
        notices = [line for line in head if NOTICE_LINE.search(line)]
        if entry is None and notices:
            offenders.append(f"{path}: '{notices[0].strip()}' (an independent file carries another project's notice)")
        if entry is not None and entry["class"] == "vendor_excerpt" and not notices:
            offenders.append(f"{path}: a vendor excerpt without its vendor's copyright line")
        if any("NVIDIA" in line for line in notices) and path not in nvidia_allowed and (entry is None or entry["class"] != "third_party_unchanged"):
            offenders.append(f"{path}: NVIDIA notice in a file provenance.toml does not list under nvidia_notice")
    assert not offenders, "\n".join(offenders)
