"""Which ids a store holds something for, found through the contract alone."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from harel.store.contract import ExecutionStore

PAGE = 200
"""Summaries read per ``list_executions`` page."""


def listed_ids(store: ExecutionStore, *, page: int = PAGE) -> Iterator[str]:
    """Every stored execution's id (all statuses, children included), in listing order."""
    cursor: str | None = None
    while True:
        result = store.list_executions(limit=page, cursor=cursor)
        for summary in result.items:
            yield summary.id
        cursor = result.next_cursor
        if cursor is None:
            return


@dataclass(frozen=True, slots=True)
class SourceIds:
    """The ids to move: every listed execution, then every id that only pending outbox entries
    target (an event relayed to a child whose spawn intent is still pending), each once.

    ``untargeted_outbox`` counts pending entries with no target: the runner drops them, so
    a migration counts and reports them but does not move them.
    """

    ids: tuple[str, ...]
    relay_only: frozenset[str]
    untargeted_outbox: int


def source_ids(store: ExecutionStore, *, page: int = PAGE) -> SourceIds:
    """Enumerate what ``store`` holds (one listing pass, then one ``pending_outbox`` read)."""
    listed = list(listed_ids(store, page=page))
    known = set(listed)
    relay_only: list[str] = []
    untargeted = 0
    for entry in store.pending_outbox():
        if entry.target_id is None:
            untargeted += 1
        elif entry.target_id not in known:
            known.add(entry.target_id)
            relay_only.append(entry.target_id)
    return SourceIds(
        ids=(*listed, *sorted(relay_only)),
        relay_only=frozenset(relay_only),
        untargeted_outbox=untargeted,
    )
