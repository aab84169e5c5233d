"""Trace steps as timeline rows: event in, ``from -> to``, actions, and the context change.

A trace can hold thousands of steps; a page shows a window of at most ``size`` of them
(:func:`window`): the newest by default, older ones through ``before=INDEX`` links.  Each
row carries the difference between the context after the step before it and after this one
(:func:`context_diff`), computed only for the rows shown.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

TIMELINE_ROWS = 100
"""Steps shown on one execution page."""


@dataclass(frozen=True)
class ContextDiff:
    """Keys added, removed and changed between two contexts (values as given)."""

    added: dict[str, Any] = field(default_factory=dict)
    removed: dict[str, Any] = field(default_factory=dict)
    changed: dict[str, tuple[Any, Any]] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        """True when nothing changed."""
        return not (self.added or self.removed or self.changed)


def context_diff(before: Mapping[str, Any], after: Mapping[str, Any]) -> ContextDiff:
    """The top-level keys that ``after`` added, removed or changed relative to ``before``."""
    return ContextDiff(
        added={key: after[key] for key in after if key not in before},
        removed={key: before[key] for key in before if key not in after},
        changed={
            key: (before[key], after[key])
            for key in after
            if key in before and before[key] != after[key]
        },
    )


@dataclass(frozen=True)
class TimelineRow:
    """One step as shown: its index, event, transition, actions, time and context diff."""

    index: int
    event_kind: str
    event_data: dict[str, Any]
    from_path: str | None
    to_path: str | None
    actions: list[str]
    timestamp: float | None
    diff: ContextDiff | None
    """``None`` when the step (or the one before it) recorded no context."""


@dataclass(frozen=True)
class TimelineWindow:
    """The rows shown (oldest first) and where the older/newer windows start."""

    rows: list[TimelineRow]
    total: int
    older: int | None
    """``before=`` of the window of older steps, ``None`` when these are the oldest."""
    newer: int | None
    """``before=`` of the window of newer steps (``-1``: the newest), ``None`` at the end."""


def _context(step: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    if step is None:
        return {}
    context = step.get("context_out")
    return context if isinstance(context, Mapping) else None


def _row(step: Mapping[str, Any], previous: Mapping[str, Any] | None, position: int) -> TimelineRow:
    before, after = _context(previous), _context(step)
    stamp = step.get("timestamp")
    data = step.get("event_data")
    actions = step.get("actions")
    return TimelineRow(
        index=_index(step, position),
        event_kind=str(step.get("event_kind", "?")),
        event_data=data if isinstance(data, dict) else {},
        from_path=step.get("from_path"),
        to_path=step.get("to_path"),
        actions=[str(label) for label in actions] if isinstance(actions, list) else [],
        timestamp=float(stamp) if isinstance(stamp, int | float) else None,
        diff=None if before is None or after is None else context_diff(before, after),
    )


def window(
    steps: Sequence[Mapping[str, Any]], *, before: int | None = None, size: int = TIMELINE_ROWS
) -> TimelineWindow:
    """At most ``size`` steps ending just before the step at trace index ``before`` (the
    newest ones when ``None``), each diffed against the step before it in the trace."""
    end = len(steps)
    if before is not None:
        end = next((i for i, step in enumerate(steps) if step.get("index") == before), end)
    start = max(0, end - size)
    rows = [_row(steps[i], steps[i - 1] if i > 0 else None, i) for i in range(start, end)]
    older = rows[0].index if rows and start > 0 else None
    newer: int | None = None
    if end < len(steps):
        later = end + size
        newer = -1 if later >= len(steps) else _index(steps[later], later)
    return TimelineWindow(rows=rows, total=len(steps), older=older, newer=newer)


def _index(step: Mapping[str, Any], position: int) -> int:
    """The step's recorded trace index, else its position in the trace."""
    index = step.get("index")
    return index if isinstance(index, int) else position
