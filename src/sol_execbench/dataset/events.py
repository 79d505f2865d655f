"""What a run tells its caller as it goes (the command line renders it): the plan, each problem
starting and finishing, notes, and with ``-v`` the evaluation children's output."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Callable, Literal

from sol_execbench.schema.dataset_run import ProblemSummary

EventKind = Literal["plan", "start", "finish", "note", "log"]


@dataclass(frozen=True)
class RunPlan:
    problems: int
    """Selected problems."""
    to_evaluate: int
    reused: int
    skipped: int
    slots: tuple[str, ...]
    """The devices evaluations run on (``default``: the evaluator's choice)."""
    mode: str


@dataclass(frozen=True)
class RunEvent:
    kind: EventKind
    problem: str | None = None
    device: str | None = None
    summary: ProblemSummary | None = None
    plan: RunPlan | None = None
    text: str = ""


EventSink = Callable[[RunEvent], None]


@dataclass
class ProblemOrder:
    """``--log-order problem``: a finished problem is told once every problem queued before it
    has been; ``completion`` tells each as it finishes."""

    sink: EventSink
    order: list[str]
    by_problem: bool
    _held: dict[str, RunEvent] = field(default_factory=dict)
    _next: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def finished(self, event: RunEvent) -> None:
        with self._lock:
            if not self.by_problem:
                self.sink(event)
                return
            self._held[event.problem or ""] = event
            self._release()

    def dropped(self, problem: str) -> None:
        """A problem that will not finish (the run stopped): the ones after it are not held for it."""
        with self._lock:
            self._held.setdefault(problem, RunEvent("note", problem, text=""))
            self._release()

    def _release(self) -> None:
        while self._next < len(self.order) and self.order[self._next] in self._held:
            event = self._held.pop(self.order[self._next])
            self._next += 1
            if event.kind == "finish":
                self.sink(event)
