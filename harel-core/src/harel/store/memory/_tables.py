"""The memory backend's "database": plain dicts behind one lock, and the executor of requests.

:meth:`MemoryData.execute` runs one request of :mod:`harel.store.memory._plan` atomically; a
:class:`~harel.store.memory._plan.Transaction` runs a whole nested plan under the lock.  Several
stores may share one :class:`MemoryData` (a "reopen" in memory, or ``memory://NAME`` URLs).
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field
from typing import Any

from harel.model import ExecutionSummary
from harel.store.common import PRIORITIES, ListingQuery, WorkRow, claim_order, drive, touch
from harel.store.memory._index import Owned, SortedKeys
from harel.store.memory._plan import (
    AckRelay,
    AddRelay,
    DeleteOwned,
    DropMarks,
    DropTimer,
    DropWork,
    GetExecution,
    GetForEvent,
    GetWork,
    HasMark,
    ListOwned,
    OldMarks,
    OutboxRow,
    PutExecution,
    PutMark,
    PutTimer,
    PutTraceStep,
    PutWork,
    ReadTraceRows,
    ReadyWork,
    Request,
    ScanDueTimers,
    ScanExecutions,
    ScanRelay,
    SpawnRow,
    StoredExecution,
    Table,
    TouchWork,
    Transaction,
)

_COMPACT_SLACK = 64
"""Acknowledged relay rows a table may leave behind before it is compacted (see ``_ack``)."""


@dataclass
class MemoryData:
    """The tables behind one or more memory stores, the one lock that guards them, and the
    sorted indexes that let sweeps, listing, purge and prune read only what they return.

    The dicts are the rows; every index is updated in the same locked step as its rows:
    ``ids`` (listing by id), ``due`` (timers by ``(fire_at, id, path)``), ``ages`` (marks by
    ``(recorded_at, id, event)``), and what each execution owns (``marks_of``, ``timers_of``,
    ``outbox_of`` by target, ``spawns_of`` by parent).
    """

    lock: threading.RLock = field(default_factory=threading.RLock)
    executions: dict[str, StoredExecution] = field(default_factory=dict)
    outbox: dict[int, OutboxRow] = field(default_factory=dict)
    spawns: dict[int, SpawnRow] = field(default_factory=dict)
    processed: dict[tuple[str, str], float] = field(default_factory=dict)
    """Dedupe marks and the epoch second each was recorded at."""
    timers: dict[tuple[str, str], float] = field(default_factory=dict)
    trace: dict[str, dict[int, str]] = field(default_factory=dict)
    last_trace_index: dict[str, int] = field(default_factory=dict)
    next_seq: int = 1
    ids: SortedKeys[str] = field(default_factory=SortedKeys)
    due: SortedKeys[tuple[float, str, str]] = field(default_factory=SortedKeys)
    ages: SortedKeys[tuple[float, str, str]] = field(default_factory=SortedKeys)
    marks_of: Owned[str] = field(default_factory=Owned)
    timers_of: Owned[str] = field(default_factory=Owned)
    outbox_of: Owned[int] = field(default_factory=Owned)
    spawns_of: Owned[int] = field(default_factory=Owned)
    work: dict[str | None, WorkRow] = field(default_factory=dict)
    """Work rows by group (``None``: the untargeted outbox entries)."""
    ready: dict[int, SortedKeys[tuple[float, str]]] = field(
        default_factory=lambda: {priority: SortedKeys() for priority in PRIORITIES}
    )
    """Work rows by ``(ready_at, key)`` per priority (the untargeted group's key is "")."""
    acked: dict[str, int] = field(default_factory=lambda: {"outbox": 0, "spawns": 0})
    """Rows acknowledged per relay since it was last compacted."""

    def execute(self, request: Request) -> Any:
        """Run one request atomically and return its result (see the request's docstring)."""
        with self.lock:
            if isinstance(request, Transaction):
                return drive(request.plan, self._apply)
            return self._apply(request)

    def _apply(self, request: Request) -> Any:
        match request:  # the requests of load_for_event and commit first: tried in order
            case GetForEvent(execution_id, event_id):
                row = self.executions.get(execution_id)
                return row, row is not None and (execution_id, event_id) in self.processed
            case GetExecution(execution_id):
                return self.executions.get(execution_id)
            case HasMark(execution_id, event_id):
                return (execution_id, event_id) in self.processed
            case PutExecution(execution_id, row):
                if execution_id not in self.executions:
                    self.ids.add(execution_id)
                self.executions[execution_id] = row
            case PutMark(execution_id, event_id, recorded_at):
                self._put_mark(execution_id, event_id, recorded_at)
            case ScanRelay(table, limit):
                return list(itertools.islice(self._relay(table).items(), limit))
            case ScanDueTimers(now, limit):
                due = self.due.while_true(lambda key: key[0] <= now, limit)
                return [(execution_id, path, at) for at, execution_id, path in due]
            case ReadTraceRows(execution_id):
                ring = self.trace.get(execution_id, {})
                return self.last_trace_index.get(execution_id), sorted(ring.items())
            case ScanExecutions(query):
                return self._scan_executions(query)
            case ListOwned(table, execution_id):
                return self._list_owned(table, execution_id)
            case OldMarks(before, limit):
                aged = self.ages.while_true(lambda key: key[0] < before, limit)
                return [(execution_id, event_id) for _, execution_id, event_id in aged]
            case AddRelay(row):
                return self._add_relay(row)
            case PutTimer(execution_id, path, fire_at):
                self._drop_timer(execution_id, path, None)
                self.timers[(execution_id, path)] = fire_at
                self.due.add((fire_at, execution_id, path))
                self.timers_of.add(execution_id, path)
            case DropTimer(execution_id, path, only_at):
                self._drop_timer(execution_id, path, only_at)
            case PutTraceStep(execution_id, index, body, keep_from):
                ring = self.trace.setdefault(execution_id, {})
                ring[index] = body
                self.last_trace_index[execution_id] = index
                for dropped in [i for i in ring if keep_from is not None and i < keep_from]:
                    del ring[dropped]
            case AckRelay(table, seq):
                self._ack(table, seq)
            case DropMarks(keys):
                return sum(self._drop_mark(*key) for key in keys)
            case DeleteOwned(table, execution_id):
                self._delete_owned(table, execution_id)
            case ReadyWork(now, limit):
                return self._ready_work(now, limit)
            case GetWork(key):
                return self.work.get(key)
            case PutWork(row):
                self._put_work(row)
            case DropWork(key):
                self._drop_work(key)
            case TouchWork(change):
                self._put_work(touch(self.work.get(change.key), change))
            case _:
                raise TypeError(f"the memory tables cannot run {request!r}")
        return None

    # -- rows and their indexes, changed together ------------------------------------------

    def _relay(self, table: str) -> dict[int, Any]:
        return self.outbox if table == "outbox" else self.spawns

    def _add_relay(self, row: OutboxRow | SpawnRow) -> int:
        seq = self.next_seq
        self.next_seq += 1
        if isinstance(row, OutboxRow):
            self.outbox[seq] = row
            self.outbox_of.add(row.target_id, seq)
        else:
            self.spawns[seq] = row
            self.spawns_of.add(row.parent_id, seq)
        return seq

    def _ack(self, table: str, seq: int) -> None:
        rows = self._relay(table)
        row = rows.pop(seq, None)
        if row is None:
            return
        if isinstance(row, OutboxRow):
            self.outbox_of.discard(row.target_id, seq)
        else:
            self.spawns_of.discard(row.parent_id, seq)
        # A dict keeps a hole for each deleted row and iterates over them: a relay whose head
        # was acknowledged 100k times would make every sweep skip 100k holes.  Copying drops
        # the holes; doing it once the holes outnumber the rows keeps acks amortised O(1).
        self.acked[table] += 1
        if self.acked[table] > len(rows) + _COMPACT_SLACK:
            self.acked[table] = 0
            setattr(self, table, dict(rows))

    def _put_mark(self, execution_id: str, event_id: str, recorded_at: float) -> None:
        key = (execution_id, event_id)
        if key not in self.processed:
            self.processed[key] = recorded_at
            self.ages.add((recorded_at, execution_id, event_id))
            self.marks_of.add(execution_id, event_id)

    def _drop_mark(self, execution_id: str, event_id: str) -> bool:
        at = self.processed.pop((execution_id, event_id), None)
        if at is None:
            return False
        self.ages.discard((at, execution_id, event_id))
        self.marks_of.discard(execution_id, event_id)
        return True

    def _drop_timer(self, execution_id: str, path: str, only_at: float | None) -> None:
        at = self.timers.get((execution_id, path))
        if at is None or (only_at is not None and at != only_at):
            return
        del self.timers[(execution_id, path)]
        self.due.discard((at, execution_id, path))
        self.timers_of.discard(execution_id, path)

    def _put_work(self, row: WorkRow) -> None:
        self._drop_work(row.key)
        self.work[row.key] = row
        self.ready[row.priority].add((row.ready_at, row.key or ""))

    def _drop_work(self, key: str | None) -> None:
        row = self.work.pop(key, None)
        if row is not None:
            self.ready[row.priority].discard((row.ready_at, key or ""))

    def _ready_work(self, now: float, limit: int) -> list[WorkRow]:
        found: list[WorkRow] = []
        for index in self.ready.values():
            for _, key in index.while_true(lambda entry: entry[0] <= now, limit):
                found.append(self.work[key or None])
        return claim_order(found)

    # -- reads through the indexes -----------------------------------------------------------

    def _scan_executions(self, query: ListingQuery) -> list[ExecutionSummary]:
        rows: list[ExecutionSummary] = []
        for execution_id in self.ids.after(query.after):
            summary = self.executions[execution_id].summary
            if query.matches(summary):
                rows.append(summary)
                if len(rows) > query.limit:
                    break
        return rows

    def _list_owned(self, table: str, execution_id: str | None) -> list[tuple[Any, Any]]:
        if execution_id is None:  # the untargeted outbox entries
            return [(seq, self.outbox[seq]) for seq in sorted(self.outbox_of.of(None))]
        if table == "processed":
            events = self.marks_of.of(execution_id)
            return sorted((event, self.processed[(execution_id, event)]) for event in events)
        if table == "timers":
            paths = self.timers_of.of(execution_id)
            return sorted((path, self.timers[(execution_id, path)]) for path in paths)
        rows = self._relay(table)
        owned = self.outbox_of if table == "outbox" else self.spawns_of
        return [(seq, rows[seq]) for seq in sorted(owned.of(execution_id))]

    def _delete_owned(self, table: Table, execution_id: str) -> None:
        if table == "executions":
            if self.executions.pop(execution_id, None) is not None:
                self.ids.discard(execution_id)
        elif table == "trace":
            self.trace.pop(execution_id, None)
            self.last_trace_index.pop(execution_id, None)
        elif table == "work":
            self._drop_work(execution_id)
        elif table == "processed":
            for event_id in self.marks_of.of(execution_id):
                self._drop_mark(execution_id, event_id)
        elif table == "timers":
            for path in self.timers_of.of(execution_id):
                self._drop_timer(execution_id, path, None)
        else:
            owned = self.outbox_of if table == "outbox" else self.spawns_of
            for seq in owned.of(execution_id):
                self._ack(table, seq)
