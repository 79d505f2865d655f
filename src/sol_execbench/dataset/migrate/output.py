"""Writing a collected migration: every file into a staging folder beside OUT, renamed into place at
the end, so OUT is either absent or complete; the manifest last."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from sol_execbench.schema.migration import MIGRATION_MANIFEST_NAME, MigrationManifest

from .collect import Migration, MigrationError
from .sources import existing_source


def _is_within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def check_output(src: Path, out: Path, manifest_path: Path | None) -> None:
    """Refuse, before any reading, an OUT that would mix with other files or with the source."""
    out, src = out.resolve(), existing_source(src).resolve()
    if out.exists() and not out.is_dir():
        raise MigrationError(str(out), None, "exists and is not a folder", "give a new folder as OUT")
    if out.is_dir() and any(out.iterdir()):
        raise MigrationError(str(out), None, "exists and is not empty", "migrations write a new folder: give another "
                             "OUT, or remove this one to migrate again")
    if _is_within(out, src) or _is_within(src, out):
        raise MigrationError(str(out), None, f"overlaps the source {src}", "give an OUT outside SRC")
    if manifest_path is not None and manifest_path.is_dir():
        raise MigrationError(str(manifest_path), "--manifest", "is a folder", "give a file path for the manifest")
    if manifest_path is not None and _is_within(manifest_path.resolve(), src):
        raise MigrationError(str(manifest_path), "--manifest", f"lies in the source {src}",
                             "give a path outside SRC: a migration changes nothing in its source")


def _write_file(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def write_migration(migration: Migration, out: Path, manifest_path: Path | None = None) -> MigrationManifest:
    """Write the problem folders and the manifest (default ``OUT/migration-manifest.json``)."""
    manifest = migration.manifest()
    text = manifest.to_json().encode()
    out = out.absolute()
    manifest_path = (manifest_path or out / MIGRATION_MANIFEST_NAME).absolute()
    inside = _is_within(manifest_path, out)
    if inside and manifest_path.relative_to(out).as_posix() in migration.files:
        raise MigrationError(str(manifest_path), "--manifest", "is the path of a migrated file",
                             "give another path for the manifest")
    stage = out.parent / f".{out.name}.migrating-{os.getpid()}"
    try:
        for relative, data in migration.files.items():
            _write_file(stage / relative, data)
        if inside:
            _write_file(stage / manifest_path.relative_to(out), text)
        stage.mkdir(parents=True, exist_ok=True)
        os.rename(stage, out)  # replaces an empty OUT folder too
        if not inside:
            partial = manifest_path.with_name(f".{manifest_path.name}.{os.getpid()}.tmp")
            _write_file(partial, text)
            os.replace(partial, manifest_path)
    except OSError as exc:
        raise MigrationError(str(exc.filename or out), None, f"cannot be written ({exc.strerror or exc})",
                             "check the folder's permissions and free space") from None
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return manifest
