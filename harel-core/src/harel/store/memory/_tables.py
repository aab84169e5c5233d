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
from harel.store.common import ListingQuery, drive
from harel.store.memory._plan import (
    AckRelay,
    AddRelay,
    DeleteOwned,
    DropMarks,
    DropTimer,
    GetExecution,
    HasMark,
    OldMarks,
    OutboxRow,
    PutExecution,
    PutMark,
    PutTimer,
    PutTraceStep,
    ReadTraceRows,
    Request,
    ScanDueTimers,
    ScanExecutions,
    ScanRelay,
    SpawnRow,
    StoredExecution,
    Table,
    Transaction,
)


@dataclass
class MemoryData:
    """The tables behind one or more memory stores, and the one lock that guards them."""

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

    def execute(self, request: Request) -> Any:
        """Run one request atomically and return its result (see the request's docstring)."""
        with self.lock:
            if isinstance(request, Transaction):
                return drive(request.plan, self._apply)
            return self._apply(request)

    def _seq(self) -> int:
        seq = self.next_seq
        self.next_seq += 1
        return seq

    def _apply(self, request: Request) -> Any:
        match request:
            case GetExecution(execution_id):
                return self.executions.get(execution_id)
            case HasMark(execution_id, event_id):
                return (execution_id, event_id) in self.processed
            case ScanRelay(table, limit):
                return list(itertools.islice(self._relay(table).items(), limit))
            case ScanDueTimers(now, limit):
                due = [(eid, path, at) for (eid, path), at in self.timers.items() if at <= now]
                due.sort(key=lambda timer: (timer[2], timer[0], timer[1]))
                return due[:limit]
            case ReadTraceRows(execution_id):
                ring = self.trace.get(execution_id, {})
                return self.last_trace_index.get(execution_id), sorted(ring.items())
            case ScanExecutions(query):
                return self._scan_executions(query)
            case OldMarks(before, limit):
                aged = (key for key, at in self.processed.items() if at < before)
                return list(itertools.islice(aged, limit))
            case PutExecution(execution_id, row):
                self.executions[execution_id] = row
            case AddRelay(row):
                self._relay("outbox" if isinstance(row, OutboxRow) else "spawns")[self._seq()] = row
            case PutMark(execution_id, event_id, recorded_at):
                self.processed.setdefault((execution_id, event_id), recorded_at)
            case PutTimer(execution_id, path, fire_at):
                self.timers[(execution_id, path)] = fire_at
            case DropTimer(execution_id, path, only_at):
                key = (execution_id, path)
                if key in self.timers and (only_at is None or self.timers[key] == only_at):
                    del self.timers[key]
            case PutTraceStep(execution_id, index, body, keep_from):
                ring = self.trace.setdefault(execution_id, {})
                ring[index] = body
                self.last_trace_index[execution_id] = index
                for dropped in [i for i in ring if keep_from is not None and i < keep_from]:
                    del ring[dropped]
            case AckRelay(table, seq):
                self._relay(table).pop(seq, None)
            case DropMarks(keys):
                return sum(self.processed.pop(key, None) is not None for key in keys)
            case DeleteOwned(table, execution_id):
                self._delete_owned(table, execution_id)
            case _:
                raise TypeError(f"the memory tables cannot run {request!r}")
        return None

    def _relay(self, table: str) -> dict[int, Any]:
        return self.outbox if table == "outbox" else self.spawns

    def _scan_executions(self, query: ListingQuery) -> list[ExecutionSummary]:
        rows: list[ExecutionSummary] = []
        for execution_id in sorted(self.executions):
            if query.after is not None and execution_id <= query.after:
                continue
            summary = self.executions[execution_id].summary
            if query.matches(summary):
                rows.append(summary)
                if len(rows) > query.limit:
                    break
        return rows

    def _delete_owned(self, table: Table, execution_id: str) -> None:
        owned: dict[Any, Any]
        keys: list[Any]
        if table == "executions":
            self.executions.pop(execution_id, None)
            return
        if table == "trace":
            self.trace.pop(execution_id, None)
            self.last_trace_index.pop(execution_id, None)
            return
        if table in ("processed", "timers"):
            owned = self.processed if table == "processed" else self.timers
            keys = [key for key in owned if key[0] == execution_id]
        elif table == "outbox":
            owned = self.outbox
            keys = [seq for seq, row in self.outbox.items() if row.target_id == execution_id]
        else:
            owned = self.spawns
            keys = [seq for seq, row in self.spawns.items() if row.parent_id == execution_id]
        for key in keys:
            del owned[key]
