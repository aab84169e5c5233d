"""The effects the pure engine yields; the runner answers them (engine.md §3.1).

Blocking effects (:class:`RunAction`, :class:`RunChooser`) expect the runner to send back
the result; deferred ones are recorded for the commit and answered with ``None``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from harel.engine.definition import ActionRef, Chooser, Node
from harel.model import Event


@dataclass(frozen=True)
class RunAction:
    """Call ``action`` for ``node``'s ``hook``; ``event`` is None on start and automatic moves."""

    node: Node
    hook: Literal["enter", "exit"]
    action: ActionRef
    event: Event | None


@dataclass(frozen=True)
class RunChooser:
    """Evaluate a join chooser; the runner sends back the chosen target node."""

    node: Node
    chooser: Chooser
    event: Event | None


@dataclass(frozen=True)
class EmitEvent:
    """Append ``event`` for ``to`` (None = untargeted) to this commit's outbox."""

    event: Event
    to: str | None


@dataclass(frozen=True)
class SpawnChildren:
    """Create these children after the commit: ``(child_id, root_path, context)`` each."""

    children: tuple[tuple[str, str, dict[str, Any]], ...]


@dataclass(frozen=True)
class ScheduleTimer:
    """Arm the timer of ``path`` after ``delay`` seconds from the runner's clock."""

    path: str
    delay: float


@dataclass(frozen=True)
class CancelTimer:
    """Disarm the timer of ``path``."""

    path: str


Effect = RunAction | RunChooser | EmitEvent | SpawnChildren | ScheduleTimer | CancelTimer
