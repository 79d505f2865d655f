"""Collecting a migration: problems drafted from any layout, checked with the real loader, turned
into the files of problem folders and the counts and blockers of the manifest.

Nothing is written here (``output.write_migration`` does that), so a bad input found late leaves no
half-written folder behind.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Optional

from sol_execbench import __version__
from sol_execbench.schema import BenchmarkConfig, Definition, FormatError, Solution, Workload
from sol_execbench.schema.loading import check_workload, validate
from sol_execbench.schema.migration import (Blocker, BlockerCode, BlockerScope, MigratedFile, MigratedProblem,
                                            MigrationDenominators, MigrationManifest, MigrationSource)

DEFINITION_FILE = "definition.json"
WORKLOAD_FILE = "workload.jsonl"
CONFIG_FILE = "config.json"
REFERENCE_FILE = "reference.py"


class MigrationError(Exception):
    """Bad input: the source cannot be read as the layout it claims. The message names the file, the
    field and the fix, in one line; the CLI prints it and exits 2."""

    def __init__(self, where: str, field_name: Optional[str], problem: str, fix: str):
        self.where = where
        if field_name is None:
            at = ""
        elif field_name.startswith("-") or field_name.isupper():  # an option or an argument: SRC, --category
            at = f"{field_name} "
        else:
            at = f"field '{field_name}' "
        super().__init__(f"{where}: {at}{problem}: {fix}")


def json_text(value: Any) -> str:
    """A JSON file's text as migrations write it: keys in the source's order, two-space indent."""
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


def jsonl_text(values: list[Any]) -> str:
    return "".join(json.dumps(v, ensure_ascii=False) + "\n" for v in values)


_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")


def folder_name(name: str) -> str:
    """``name`` as one path component: runs of other characters become ``_``; no leading dot."""
    return _UNSAFE.sub("_", name).lstrip(".") or "_"


@dataclass
class Record:
    """One record of the source (a workload, a solution, a trace line) and where it came from."""

    source: str
    data: Any
    file_name: str = ""
    """Solutions: the file name it is written under in the problem folder."""
    blocker: Optional[tuple[BlockerCode, str]] = None
    """Set by a layout that already knows the record cannot be carried over (a tvm-ffi binding)."""


@dataclass
class ProblemDraft:
    """A problem as a layout read it, before any check."""

    category: str
    name: str
    source: str
    """Where the problem is in the source, below SRC."""
    definition: Any = None
    workloads: list[Record] = field(default_factory=list)
    solutions: list[Record] = field(default_factory=list)
    traces: list[Record] = field(default_factory=list)
    extra_files: dict[str, str] = field(default_factory=dict)
    """Written beside the definition as they are: reference.py, config.json, traces."""
    blocker: Optional[tuple[BlockerCode, str]] = None
    """Set by a layout that already knows the problem cannot be migrated (a missing file)."""

    @property
    def path(self) -> str:
        return f"{folder_name(self.category)}/{folder_name(self.name)}"


class Migration:
    """The outcome of reading one source: files to write, problems, blockers, denominators."""

    def __init__(self, source: MigrationSource):
        self.source = source
        self.files: dict[str, bytes] = {}
        self.problems: list[MigratedProblem] = []
        self.blockers: list[Blocker] = []
        self.denominators = MigrationDenominators()
        self._sources: dict[str, str] = {}  # problem path -> the source it was first drafted from

    def block(self, code: BlockerCode, scope: BlockerScope, source: str, detail: str, problem: str | None = None) -> None:
        """Record a blocker and count its record as seen and blocked."""
        self.blockers.append(Blocker(code=code, scope=scope, problem=problem, source=source, detail=detail))
        self._tally(scope, blocked=1)

    def _tally(self, scope: BlockerScope, migrated: int = 0, blocked: int = 0) -> None:
        tally = getattr(self.denominators, f"{scope.value}s")
        tally.seen += migrated + blocked
        tally.migrated += migrated
        tally.blocked += blocked

    def add(self, draft: ProblemDraft) -> None:
        """Check a drafted problem with the loader and keep what loads; record what does not."""
        path = draft.path
        if path in self._sources:
            self._block_problem(draft, BlockerCode.DUPLICATE_PROBLEM, f"'{path}' is already taken by {self._sources[path]}")
            return
        if draft.blocker is not None:
            self._block_problem(draft, *draft.blocker)
            return
        try:
            definition = validate(Definition, draft.definition, draft.source, "definition", None)
        except FormatError as exc:
            self._block_problem(draft, BlockerCode.DEFINITION_REJECTED, exc.message)
            return
        if CONFIG_FILE in draft.extra_files:
            try:
                validate(BenchmarkConfig, json.loads(draft.extra_files[CONFIG_FILE]), draft.source, "benchmark config", None)
            except FormatError as exc:
                self._block_problem(draft, BlockerCode.CONFIG_REJECTED, exc.message)
                return
        workloads = self._checked_workloads(draft, definition)
        if not workloads:
            self._block_problem(draft, BlockerCode.NO_WORKLOADS, f"none of its {len(draft.workloads)} workload(s) "
                                "could be migrated", count_workloads=False)
            return
        solutions = self._checked_solutions(draft)
        self._tally(BlockerScope.PROBLEM, migrated=1)
        self._tally(BlockerScope.TRACE, migrated=len(draft.traces))
        self.problems.append(MigratedProblem(path=path, source=draft.source, migrated=True, workloads=len(workloads),
                                             solutions=len(solutions)))
        self._sources[path] = draft.source
        self.files[f"{path}/{DEFINITION_FILE}"] = json_text(draft.definition).encode()
        self.files[f"{path}/{WORKLOAD_FILE}"] = jsonl_text(workloads).encode()
        for name, text in draft.extra_files.items():
            self.files[f"{path}/{name}"] = text.encode()
        for name, data in solutions.items():
            self.files[f"{path}/{name}"] = json_text(data).encode()

    def _checked_workloads(self, draft: ProblemDraft, definition: Definition) -> list[Any]:
        kept: list[Any] = []
        uuids: set[str] = set()
        for record in draft.workloads:
            try:
                workload = validate(Workload, record.data, record.source, "workload", None)
                check_workload(definition, workload, record.source, None)
                if workload.uuid in uuids:
                    raise FormatError(record.source, f"workload uuid '{workload.uuid}' appears twice")
            except FormatError as exc:
                self.block(BlockerCode.WORKLOAD_REJECTED, BlockerScope.WORKLOAD, record.source, exc.message, draft.path)
                continue
            uuids.add(workload.uuid)
            kept.append(record.data)
        self._tally(BlockerScope.WORKLOAD, migrated=len(kept))
        return kept

    def _checked_solutions(self, draft: ProblemDraft) -> dict[str, Any]:
        kept: dict[str, Any] = {}
        for record in draft.solutions:
            blocker = record.blocker
            if blocker is None and record.file_name in kept:
                blocker = (BlockerCode.SOLUTION_REJECTED, f"a second solution written as '{record.file_name}'")
            if blocker is None:
                try:
                    validate(Solution, record.data, record.source, "solution", None)
                except FormatError as exc:
                    blocker = (BlockerCode.SOLUTION_REJECTED, exc.message)
            if blocker is not None:
                self.block(blocker[0], BlockerScope.SOLUTION, record.source, blocker[1], draft.path)
                continue
            kept[record.file_name] = record.data
        self._tally(BlockerScope.SOLUTION, migrated=len(kept))
        return kept

    def _block_problem(self, draft: ProblemDraft, code: BlockerCode, detail: str, count_workloads: bool = True) -> None:
        # What a blocked problem held is counted as blocked, under the problem's one blocker.
        self.block(code, BlockerScope.PROBLEM, draft.source, detail, draft.path)
        if count_workloads:
            self._tally(BlockerScope.WORKLOAD, blocked=len(draft.workloads))
        self._tally(BlockerScope.SOLUTION, blocked=len(draft.solutions))
        self._tally(BlockerScope.TRACE, blocked=len(draft.traces))
        self.problems.append(MigratedProblem(path=draft.path, source=draft.source, migrated=False))
        self._sources.setdefault(draft.path, draft.source)

    def manifest(self) -> MigrationManifest:
        files = [MigratedFile(path=path, sha256=hashlib.sha256(data).hexdigest(), bytes=len(data))
                 for path, data in sorted(self.files.items())]
        return MigrationManifest(tool_version=__version__, source=self.source, denominators=self.denominators,
                                 problems=sorted(self.problems, key=lambda p: (p.path, p.source)),
                                 blockers=self.blockers, files=files)
