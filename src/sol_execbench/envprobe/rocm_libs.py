"""ROCm math and collective libraries, Composable Kernel, Tensile and AOTriton.

For each library: the header version in ``$ROCM_PATH/include`` (and its ``_TWEAK``, which AMD sets
to the ROCm release identifier shared by every library of a release, hence ``rocm_release_tweak``,
not a per-library commit), the library file this process uses (loaded by torch, else bundled in
the torch wheel, else ``$ROCM_PATH/lib``) with the version its name carries and its sha256, and a
fingerprint of its kernel database's file names.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._common import Reasons, read_text, rocm_root, torch_dir
from .files import best_versioned_file, filename_fingerprint, find_loaded, sha256_file, so_version
from .packages import distribution_version

KERNEL_DB_PATTERNS = ("*.dat", "*.co", "*.hsaco", "*.yaml", "*.kdb", "*.db", "*.fdb.txt")


@dataclass(frozen=True)
class RocmLib:
    key: str
    stem: str
    header: str
    prefix: str
    kernel_db: str | None
    """Kernel database folder relative to the library's folder's parent (``lib/..``), if any."""


ROCM_LIBS: tuple[RocmLib, ...] = (
    RocmLib("hipblaslt", "libhipblaslt", "hipblaslt/hipblaslt-version.h", "HIPBLASLT_VERSION_", "lib/hipblaslt/library"),
    RocmLib("rocblas", "librocblas", "rocblas/internal/rocblas-version.h", "ROCBLAS_VERSION_", "lib/rocblas/library"),
    RocmLib("miopen", "libMIOpen", "miopen/version.h", "MIOPEN_VERSION_", "share/miopen/db"),
    RocmLib("rccl", "librccl", "rccl/rccl.h", "NCCL_", None),
)


def parse_version_header(text: str, prefix: str) -> tuple[str | None, str | None]:
    """``(MAJOR.MINOR.PATCH, TWEAK)`` from ``#define <prefix>MAJOR 0`` ... lines; None where absent."""
    found = dict(re.findall(rf"^\s*#\s*define\s+{re.escape(prefix)}(MAJOR|MINOR|PATCH|TWEAK)\s+(\S+)", text, re.M))
    parts = [found.get(k, "").strip('"') for k in ("MAJOR", "MINOR", "PATCH")]
    version = ".".join(parts) if all(p.isdigit() for p in parts) else None
    tweak = found.get("TWEAK", "").strip('"') or None
    return version, tweak


def empty_library() -> dict[str, Any]:
    return {
        "header_version": None,
        "rocm_release_tweak": None,
        "path": None,
        "location": None,
        "file_version": None,
        "sha256": None,
        "kernel_db_fingerprint": None,
        "kernel_db_files": None,
    }


def _locate(lib: RocmLib, loaded: tuple[str, ...]) -> tuple[Path | None, str | None]:
    hit = find_loaded(lib.stem, list(loaded))
    if hit:
        return Path(hit), "loaded"
    tdir = torch_dir()
    for location, folder in (("torch_bundled", tdir / "lib" if tdir else None), ("rocm_path", rocm_root() / "lib")):
        found = best_versioned_file(folder, f"{lib.stem}.so") if folder else None
        if found is not None:
            return found, location
    return None, None


def describe(lib: RocmLib, loaded: tuple[str, ...], why: Reasons, refresh: bool = False) -> dict[str, Any]:
    entry = empty_library()
    header = read_text(rocm_root() / "include" / lib.header)
    if header:
        entry["header_version"], entry["rocm_release_tweak"] = parse_version_header(header, lib.prefix)
    else:
        why.add(f"libraries.{lib.key}.header_version", f"{rocm_root() / 'include' / lib.header} not found")
    path, location = _locate(lib, loaded)
    if path is None:
        why.add(f"libraries.{lib.key}.path", f"{lib.stem}.so not loaded, not in the torch wheel, not in {rocm_root() / 'lib'}")
        return entry
    entry.update(path=str(path), location=location, file_version=so_version(path), sha256=sha256_file(path, refresh))
    if lib.kernel_db:
        folder = path.parent.parent / lib.kernel_db
        entry["kernel_db_fingerprint"], entry["kernel_db_files"] = filename_fingerprint({lib.key: folder}, KERNEL_DB_PATTERNS)
    return entry


def kernel_db_folders(libraries: dict[str, dict[str, Any]]) -> dict[str, Path]:
    """hipBLASLt's and rocBLAS's kernel database folders next to the library files in use."""
    folders = {}
    for lib in ROCM_LIBS:
        path = libraries.get(lib.key, {}).get("path")
        if path and lib.key in ("hipblaslt", "rocblas") and lib.kernel_db:
            folders[lib.key] = Path(path).parent.parent / lib.kernel_db
    return folders


def tensile(libraries: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Tensile: the pip package if any (a build-time tool, usually absent) and one fingerprint over both GEMM DBs."""
    fingerprint, count = filename_fingerprint(kernel_db_folders(libraries), KERNEL_DB_PATTERNS)
    return {"package_version": distribution_version("tensile"), "kernel_db_fingerprint": fingerprint, "kernel_db_files": count or None}


def composable_kernel(why: Reasons) -> dict[str, Any]:
    """System CK: version and commit from ``include/ck/version.h``, and whether ck_tile ships."""
    include = rocm_root() / "include"
    block = {"version": None, "commit": None, "ck_tile_present": (include / "ck_tile").is_dir()}
    text = read_text(include / "ck" / "version.h")
    if text is None:
        why.add("composable_kernel.version", f"{include / 'ck' / 'version.h'} not found (CK headers not installed)")
        return block
    block["version"], _ = parse_version_header(text, "CK_VERSION_")
    commit = re.search(r"COMMIT\w*\s+\"?([0-9a-f]{40})", text)
    block["commit"] = commit.group(1) if commit else None
    return block


def aotriton(refresh: bool = False) -> dict[str, Any]:
    """AOTriton bundled in the torch wheel (``torch/lib/libaotriton_v2.so.X.Y.Z``); a cmake download, not a submodule."""
    block = {
        "bundled_present": False,
        "bundled_version": None,
        "bundled_lib_path": None,
        "bundled_lib_hash": None,
        "bundled_images_dir_present": None,
        "installed_prefix": os.environ.get("AOTRITON_INSTALLED_PREFIX"),
    }
    tdir = torch_dir()
    if tdir is None:
        return block
    lib_dir = tdir / "lib"
    best = best_versioned_file(lib_dir, "libaotriton_v2.so", prefer_versioned=True)
    block["bundled_images_dir_present"] = (lib_dir / "aotriton.images").is_dir()
    if best is not None:
        # Version and hash come from the same file: the highest version by numeric order.
        block.update(bundled_present=True, bundled_version=so_version(best), bundled_lib_path=str(best), bundled_lib_hash=sha256_file(best, refresh))
    return block
