"""The builder registry and its contract."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from sol_execbench.schema import EvaluationStatus, IsolationMode, Language, Solution


class BuildFailure(Exception):
    """A solution that cannot be built or loaded; becomes a trace with ``status``."""

    def __init__(self, status: EvaluationStatus, message: str, retryable: bool = False):
        super().__init__(message)
        self.status = status
        self.message = message
        # True where the same sources may well build on a second try: the compile process ended
        # without a result (killed: memory, a signal), not the compiler rejecting them.
        self.retryable = retryable or status == EvaluationStatus.TIMEOUT

    @property
    def repeats(self) -> bool:
        """A compile error that building the same sources again would repeat."""
        return self.status == EvaluationStatus.COMPILE_ERROR and not self.retryable


@dataclass
class BuildOutcome:
    """What ``prepare`` did: time spent, whether a cache served it, the compiler's log."""

    build_time_s: float = 0.0
    cached: bool | None = None
    log: str = ""
    artifacts: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # carried into every trace (e.g. a cache entry rebuilt)


class Builder(Protocol):
    languages: frozenset[Language]

    def prepare(self, solution: Solution, source_dir: Path, *, vendor: str, timeout_s: float,
                use_cache: bool, isolation: IsolationMode = IsolationMode.AUTO) -> BuildOutcome:
        """Parent side, before the child starts. Raises BuildFailure."""

    def load(self, solution: Solution, source_dir: Path, artifacts: dict[str, Any]) -> Callable[..., Any]:
        """Child side: the entry-point callable, from ``BuildOutcome.artifacts`` of ``prepare``. Raises BuildFailure."""


_REGISTRY: dict[Language, Builder] = {}


def register(builder: Builder) -> Builder:
    for language in builder.languages:
        _REGISTRY[language] = builder
    return builder


def builder_for(solution: Solution) -> Builder:
    """The builder of the solution's first language (languages of one solution share a family)."""
    language = solution.spec.languages[0]
    builder = _REGISTRY.get(language)
    if builder is None:
        raise BuildFailure(EvaluationStatus.COMPILE_ERROR,
                           f"language '{language.value}' has no builder in this version of sol-execbench")
    return builder


def write_sources(solution: Solution, source_dir: Path) -> None:
    source_dir.mkdir(parents=True, exist_ok=True)
    for src in solution.sources:
        target = source_dir / src.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(src.content, encoding="utf-8")
