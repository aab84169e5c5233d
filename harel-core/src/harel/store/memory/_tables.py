"""The memory backend's "database": plain dicts, the sorted lists that index them, one lock.

Several stores may share one :class:`MemoryData` (``memory://NAME`` URLs, a harness).  Rows
hold JSON text, never the caller's objects.  The stores change a row and its index entries in
the same locked step, with :func:`insert` / :func:`remove` on the sorted lists.
"""

from __future__ import annotations

import threading
from bisect import bisect_left, insort
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar

from harel.model import ExecutionSummary, Status
from harel.store.common.claims import PRIORITIES, WorkRow
from harel.store.common.commit import RECEIPT_WINDOW, PreparedCommit, receipt_slot
from harel.store.common.records import PreparedExecution

K = TypeVar("K")

NO_RECEIPTS: tuple[str | None, ...] = (None,) * RECEIPT_WINDOW
"""The receipt ring of a row no commit wrote (an import)."""


@dataclass(frozen=True, slots=True)
class StoredExecution:
    """One executions row: the CAS token, the document, its summary and the receipt ring
    (slot :func:`~harel.store.author.receipt_slot` of a version holds the token of the commit
    that wrote it, for the last ``RECEIPT_WINDOW`` versions)."""

    version: int
    document: str
    summary: ExecutionSummary
    receipts: tuple[str | None, ...] = NO_RECEIPTS

    def receipt(self, version: int) -> str | None:
        """The token that wrote ``version``; ``None`` once the ring no longer holds it (older
        than the window, newer than the row, or written by an import)."""
        if not 0 <= self.version - version < RECEIPT_WINDOW:
            return None
        return self.receipts[receipt_slot(version)]


class OutboxRow(NamedTuple):
    """One outbox row: its target (``None``: untargeted) and the event's JSON."""

    target_id: str | None
    event_json: str


class SpawnRow(NamedTuple):
    """One spawn row, owned by the parent that wrote it."""

    parent_id: str
    child_id: str
    root_path: str
    context_json: str


@dataclass
class MemoryData:
    """Every table of one dataset and the lock that guards them (held for each operation).

    Indexes (sorted lists, kept equal to their tables): ``ids`` (execution ids), ``due``
    (``(fire_at, id, path)``), ``ages`` (``(recorded_at, id, event_id)``), ``outbox_seqs`` /
    ``spawn_seqs`` (seqs), ``ready[priority]`` (``(ready_at, key or "")``), ``leased`` (the
    leased rows' ``(expires_at, key or "")``, the ``None`` group's ``""`` first); ``outbox_of`` /
    ``spawns_of`` are each execution's relay seqs (target / parent).
    """

    lock: threading.RLock = field(default_factory=threading.RLock)
    executions: dict[str, StoredExecution] = field(default_factory=dict)
    processed: dict[str, dict[str, float]] = field(default_factory=dict)
    """id -> event id -> the epoch second its mark was recorded."""
    timers: dict[str, dict[str, float]] = field(default_factory=dict)
    """id -> path -> fire_at."""
    outbox: dict[int, OutboxRow] = field(default_factory=dict)
    spawns: dict[int, SpawnRow] = field(default_factory=dict)
    trace: dict[str, dict[int, str]] = field(default_factory=dict)
    last_trace_index: dict[str, int] = field(default_factory=dict)
    work: dict[str | None, WorkRow] = field(default_factory=dict)
    """Work rows by group (``None``: the untargeted outbox entries)."""
    next_seq: int = 1
    ids: list[str] = field(default_factory=list)
    due: list[tuple[float, str, str]] = field(default_factory=list)
    ages: list[tuple[float, str, str]] = field(default_factory=list)
    outbox_seqs: list[int] = field(default_factory=list)
    spawn_seqs: list[int] = field(default_factory=list)
    outbox_of: dict[str | None, set[int]] = field(default_factory=dict)
    spawns_of: dict[str, set[int]] = field(default_factory=dict)
    ready: dict[int, list[tuple[float, str]]] = field(
        default_factory=lambda: {priority: [] for priority in PRIORITIES}
    )
    leased: list[tuple[float, str]] = field(default_factory=list)


def insert(keys: list[Any], key: Any) -> None:
    """Add ``key`` to the sorted list ``keys`` (binary search, one memmove)."""
    insort(keys, key)


def remove(keys: list[Any], key: Any) -> None:
    """Remove ``key`` from the sorted list ``keys`` (absent: nothing)."""
    at = bisect_left(keys, key)
    if at < len(keys) and keys[at] == key:
        del keys[at]


def head(keys: list[K], keep: Callable[[K], bool], limit: int | None) -> list[K]:
    """The smallest of the sorted ``keys`` up to the first one ``keep`` refuses, at most
    ``limit`` (``None``: no limit): reads only what it returns, plus one."""
    taken: list[K] = []
    for key in keys:
        if len(taken) == limit or not keep(key):
            break
        taken.append(key)
    return taken


def disown(owned: dict[Any, set[int]], owner: Any, seq: int) -> None:
    """Forget that ``seq`` belongs to ``owner`` (an owner left with nothing is dropped)."""
    seqs = owned.get(owner)
    if seqs is not None:
        seqs.discard(seq)
        if not seqs:
            del owned[owner]


def _row(
    execution_id: str,
    source: PreparedCommit | PreparedExecution,
    version: int,
    at: float,
    receipts: tuple[str | None, ...] = NO_RECEIPTS,
) -> StoredExecution:
    summary = ExecutionSummary(
        id=execution_id,
        definition_id=source.definition_id,
        status=Status(source.status),
        outcome=source.outcome,
        active_path=source.active_path,
        version=version,
        parent_id=source.parent_id,
        updated_at=at,
    )
    return StoredExecution(version, source.document, summary, receipts)


def stored_execution(
    prepared: PreparedCommit, previous: StoredExecution | None = None
) -> StoredExecution:
    """The row a prepared commit writes (summary stamped with ``committed_at``), its token
    recorded in the receipt ring carried over from ``previous`` (the row it replaces)."""
    ring = NO_RECEIPTS if previous is None else previous.receipts
    slot = receipt_slot(prepared.new_version)
    receipts = (*ring[:slot], prepared.token or None, *ring[slot + 1 :])
    return _row(
        prepared.execution_id, prepared, prepared.new_version, prepared.committed_at, receipts
    )


def imported_execution(execution_id: str, prepared: PreparedExecution) -> StoredExecution:
    """The row an import writes (version and ``updated_at`` as exported)."""
    return _row(execution_id, prepared, prepared.version, prepared.updated_at)
