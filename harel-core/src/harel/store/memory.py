"""``DictStore`` and ``AsyncDictStore``: the in-memory reference implementation of the contract.

Values are held as the shared codec's JSON text, so a store never aliases the caller's
objects and has exactly the type fidelity of the durable backends.  Every operation runs
under one lock and validates and encodes everything before it changes anything, so a failed
commit leaves no trace.  Several store objects may share one :class:`MemoryData` (that is
how tests "reopen" a memory store, and what ``memory://NAME`` URLs do within a process).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from harel.model import Execution, ExecutionPage, ExecutionSummary, Status
from harel.store.common import (
    PreparedCommit,
    cas_decision,
    committing,
    conflict,
    decode_event,
    decode_execution,
    decode_trace_step,
    encode_trace_step,
    listing_query,
    loads,
    next_trace_index,
    page_from_probe,
    parse_store_url,
    sweep_limit,
    trace_keep_from,
)
from harel.store.contract import (
    DEFAULT_TRACE_MAX,
    Capabilities,
    DueTimer,
    Emit,
    OutboxEntry,
    Spawn,
    SpawnEntry,
    TimerOp,
)
from harel.store.errors import ExecutionNotFound, InvalidStoreURL

CAPABILITIES = Capabilities(
    persistent=False, multi_process=False, ordered_listing=True, exact_pages=True
)


@dataclass
class _Row:
    version: int
    document: str
    summary: ExecutionSummary


@dataclass
class MemoryData:
    """The state behind one or more memory stores (shared by stores opened over it)."""

    lock: threading.RLock = field(default_factory=threading.RLock)
    executions: dict[str, _Row] = field(default_factory=dict)
    outbox: dict[int, tuple[str | None, str]] = field(default_factory=dict)
    spawns: dict[int, tuple[str, str, str, str]] = field(default_factory=dict)
    processed: set[tuple[str, str]] = field(default_factory=set)
    timers: dict[tuple[str, str], float] = field(default_factory=dict)
    trace: dict[str, dict[int, str]] = field(default_factory=dict)
    last_trace_index: dict[str, int] = field(default_factory=dict)
    next_seq: int = 1


_NAMED: dict[str, MemoryData] = {}
_NAMED_LOCK = threading.Lock()


def _data_for_url(url: str) -> MemoryData:
    parsed = parse_store_url(url)
    if parsed.scheme != "memory":
        raise InvalidStoreURL(f"{parsed.redacted!r} is not a memory:// URL")
    parsed.knobs(frozenset())
    name = (parsed.host or "") + parsed.path.strip("/")
    if not name:
        return MemoryData()
    with _NAMED_LOCK:
        return _NAMED.setdefault(name, MemoryData())


class _MemoryCore:
    """The IO-free logic both memory stores delegate to (one plan, two shells)."""

    def __init__(self, data: MemoryData) -> None:
        self.data = data

    def load(self, execution_id: str) -> Execution | None:
        with self.data.lock:
            row = self.data.executions.get(execution_id)
        return None if row is None else decode_execution(row.document)

    def load_for_event(self, execution_id: str, event_id: str) -> tuple[Execution | None, bool]:
        with self.data.lock:
            row = self.data.executions.get(execution_id)
            seen = row is not None and (execution_id, event_id) in self.data.processed
        return (None, False) if row is None else (decode_execution(row.document), seen)

    def commit(
        self,
        exe: Execution,
        emits: Sequence[Emit],
        processed_event_id: str | None,
        timers: Sequence[TimerOp],
        spawns: Sequence[Spawn],
        trace: dict[str, Any] | None,
        trace_max: int | None,
    ) -> None:
        with committing(exe, emits, processed_event_id, timers, spawns, trace) as plan:
            trace_keep_from(0, trace_max)  # validate before anything changes
            with self.data.lock:
                row = self.data.executions.get(plan.execution_id)
                found = None if row is None else row.version
                if cas_decision(plan.expected_version, found) == "conflict":
                    raise conflict(plan, found)
                self._apply(plan, exe, trace_max)

    def _apply(self, plan: PreparedCommit, exe: Execution, trace_max: int | None) -> None:
        data = self.data
        data.executions[plan.execution_id] = _Row(
            plan.new_version, plan.document, ExecutionSummary.of(exe)
        )
        for emit in plan.emits:
            data.outbox[data.next_seq] = (emit.target_id, emit.event_json)
            data.next_seq += 1
        if plan.processed_event_id is not None:
            data.processed.add((plan.execution_id, plan.processed_event_id))
        for op in plan.timers:
            key = (plan.execution_id, op.path)
            if op.action == "schedule":
                data.timers[key] = op.fire_at
            else:
                data.timers.pop(key, None)
        for spawn in plan.spawns:
            data.spawns[data.next_seq] = (
                plan.execution_id,
                spawn.child_id,
                spawn.root_path,
                spawn.context_json,
            )
            data.next_seq += 1
        if plan.trace is not None:
            self._append_trace_locked(plan.execution_id, plan.trace, trace_max)

    def _append_trace_locked(self, execution_id: str, body: str, trace_max: int | None) -> None:
        data = self.data
        index = next_trace_index(data.last_trace_index.get(execution_id))
        keep_from = trace_keep_from(index, trace_max)
        ring = data.trace.setdefault(execution_id, {})
        ring[index] = body
        data.last_trace_index[execution_id] = index
        if keep_from is not None:
            for old in [i for i in ring if i < keep_from]:
                del ring[old]

    def is_processed(self, execution_id: str, event_id: str) -> bool:
        with self.data.lock:
            return (execution_id, event_id) in self.data.processed

    def pending_outbox(self, limit: int | None) -> list[OutboxEntry]:
        sweep_limit(limit)
        with self.data.lock:
            rows = list(self.data.outbox.items())[:limit]
        return [OutboxEntry(seq, target, decode_event(event)) for seq, (target, event) in rows]

    def ack_outbox(self, seq: int) -> None:
        with self.data.lock:
            self.data.outbox.pop(seq, None)

    def pending_spawns(self, limit: int | None) -> list[SpawnEntry]:
        sweep_limit(limit)
        with self.data.lock:
            rows = list(self.data.spawns.items())[:limit]
        return [
            SpawnEntry(seq, parent, child, root, loads(context))
            for seq, (parent, child, root, context) in rows
        ]

    def ack_spawn(self, seq: int) -> None:
        with self.data.lock:
            self.data.spawns.pop(seq, None)

    def due_timers(self, now: float, limit: int | None) -> list[DueTimer]:
        sweep_limit(limit)
        with self.data.lock:
            due = [
                (execution_id, path, fire_at)
                for (execution_id, path), fire_at in self.data.timers.items()
                if fire_at <= now
            ]
        due.sort(key=lambda item: (item[2], item[0], item[1]))
        return due[:limit]

    def delete_timer(self, execution_id: str, path: str, fire_at: float) -> None:
        with self.data.lock:
            if self.data.timers.get((execution_id, path)) == fire_at:
                del self.data.timers[(execution_id, path)]

    def read_trace(self, execution_id: str) -> list[dict[str, Any]]:
        with self.data.lock:
            ring = sorted(self.data.trace.get(execution_id, {}).items())
        return [decode_trace_step(body, index) for index, body in ring]

    def append_trace(self, execution_id: str, entry: dict[str, Any], trace_max: int | None) -> None:
        body = encode_trace_step(entry)
        trace_keep_from(0, trace_max)
        with self.data.lock:
            if execution_id not in self.data.executions:
                raise ExecutionNotFound(execution_id)
            self._append_trace_locked(execution_id, body, trace_max)

    def list_executions(
        self,
        status: Iterable[Status] | None,
        definition_id: str | None,
        roots_only: bool,
        limit: int,
        cursor: str | None,
    ) -> ExecutionPage:
        query = listing_query(
            status=status,
            definition_id=definition_id,
            roots_only=roots_only,
            limit=limit,
            cursor=cursor,
        )
        if query.matches_nothing:
            return ExecutionPage()
        with self.data.lock:
            summaries = [row.summary for row in self.data.executions.values()]
        summaries.sort(key=lambda summary: summary.id)
        rows = [
            summary
            for summary in summaries
            if (query.after is None or summary.id > query.after) and query.matches(summary)
        ]
        return page_from_probe(query, rows[: query.limit + 1])


class _MemoryStoreBase:
    """State shared by both memory stores: the data, the core, ``trace_max``."""

    capabilities: ClassVar[Capabilities] = CAPABILITIES

    def __init__(
        self, data: MemoryData | None = None, *, trace_max: int | None = DEFAULT_TRACE_MAX
    ) -> None:
        self.data = data if data is not None else MemoryData()
        self._core = _MemoryCore(self.data)
        self.trace_max = trace_max

    def __repr__(self) -> str:
        return f"{type(self).__name__}(executions={len(self.data.executions)})"

    def reopen(self) -> Self:
        """A second store over the same data (what a restart looks like in memory)."""
        return type(self)(self.data, trace_max=self.trace_max)


class DictStore(_MemoryStoreBase):
    """In-memory :class:`~harel.store.contract.ExecutionStore`; thread-safe, copy semantics."""

    @classmethod
    def from_url(cls, url: str = "memory://", **knobs: Any) -> Self:
        """``memory://`` is a fresh store; ``memory://NAME`` shares NAME's data in this process."""
        return cls(_data_for_url(url), **knobs)

    def load(self, execution_id: str) -> Execution | None:
        """A fresh copy of the stored execution, or ``None``."""
        return self._core.load(execution_id)

    def load_for_event(self, execution_id: str, event_id: str) -> tuple[Execution | None, bool]:
        """``load`` plus whether ``event_id`` was already processed by that execution."""
        return self._core.load_for_event(execution_id, event_id)

    def save(self, exe: Execution) -> None:
        """CAS-write the snapshot alone (``commit(exe, [])``)."""
        self.commit(exe, [])

    def commit(
        self,
        exe: Execution,
        emits: Sequence[Emit],
        processed_event_id: str | None = None,
        timers: Sequence[TimerOp] = (),
        spawns: Sequence[Spawn] = (),
        trace: dict[str, Any] | None = None,
    ) -> None:
        """Write one step atomically (see the contract)."""
        self._core.commit(exe, emits, processed_event_id, timers, spawns, trace, self.trace_max)

    def is_processed(self, execution_id: str, event_id: str) -> bool:
        """Whether that execution already processed that event."""
        return self._core.is_processed(execution_id, event_id)

    def pending_outbox(self, *, limit: int | None = None) -> list[OutboxEntry]:
        """Undelivered events, oldest first."""
        return self._core.pending_outbox(limit)

    def ack_outbox(self, seq: int) -> None:
        """Forget a delivered event (unknown seq: no-op)."""
        self._core.ack_outbox(seq)

    def pending_spawns(self, *, limit: int | None = None) -> list[SpawnEntry]:
        """Uncreated children, oldest first."""
        return self._core.pending_spawns(limit)

    def ack_spawn(self, seq: int) -> None:
        """Forget a created child's intent (unknown seq: no-op)."""
        self._core.ack_spawn(seq)

    def due_timers(self, now: float, *, limit: int | None = None) -> list[DueTimer]:
        """Armed timers with ``fire_at <= now``, ascending."""
        return self._core.due_timers(now, limit)

    def delete_timer(self, execution_id: str, path: str, fire_at: float) -> None:
        """Disarm a timer only if it still holds exactly ``fire_at``."""
        self._core.delete_timer(execution_id, path, fire_at)

    def read_trace(self, execution_id: str) -> list[dict[str, Any]]:
        """The retained trace steps, oldest first."""
        return self._core.read_trace(execution_id)

    def append_trace(self, execution_id: str, entry: dict[str, Any]) -> None:
        """Append a step outside a commit; unknown execution raises ``ExecutionNotFound``."""
        self._core.append_trace(execution_id, entry, self.trace_max)

    def list_executions(
        self,
        *,
        status: Iterable[Status] | None = None,
        definition_id: str | None = None,
        roots_only: bool = False,
        limit: int = 100,
        cursor: str | None = None,
    ) -> ExecutionPage:
        """One page of summaries ordered by id."""
        return self._core.list_executions(status, definition_id, roots_only, limit, cursor)

    def close(self) -> None:
        """Nothing to release."""


class AsyncDictStore(_MemoryStoreBase):
    """In-memory :class:`~harel.store.contract.AsyncExecutionStore` (same core as DictStore)."""

    @classmethod
    async def from_url(cls, url: str = "memory://", **knobs: Any) -> Self:
        """``memory://`` is a fresh store; ``memory://NAME`` shares NAME's data in this process."""
        return cls(_data_for_url(url), **knobs)

    async def load(self, execution_id: str) -> Execution | None:
        """A fresh copy of the stored execution, or ``None``."""
        return self._core.load(execution_id)

    async def load_for_event(
        self, execution_id: str, event_id: str
    ) -> tuple[Execution | None, bool]:
        """``load`` plus whether ``event_id`` was already processed by that execution."""
        return self._core.load_for_event(execution_id, event_id)

    async def save(self, exe: Execution) -> None:
        """CAS-write the snapshot alone."""
        await self.commit(exe, [])

    async def commit(
        self,
        exe: Execution,
        emits: Sequence[Emit],
        processed_event_id: str | None = None,
        timers: Sequence[TimerOp] = (),
        spawns: Sequence[Spawn] = (),
        trace: dict[str, Any] | None = None,
    ) -> None:
        """Write one step atomically (see the contract)."""
        self._core.commit(exe, emits, processed_event_id, timers, spawns, trace, self.trace_max)

    async def is_processed(self, execution_id: str, event_id: str) -> bool:
        """Whether that execution already processed that event."""
        return self._core.is_processed(execution_id, event_id)

    async def pending_outbox(self, *, limit: int | None = None) -> list[OutboxEntry]:
        """Undelivered events, oldest first."""
        return self._core.pending_outbox(limit)

    async def ack_outbox(self, seq: int) -> None:
        """Forget a delivered event."""
        self._core.ack_outbox(seq)

    async def pending_spawns(self, *, limit: int | None = None) -> list[SpawnEntry]:
        """Uncreated children, oldest first."""
        return self._core.pending_spawns(limit)

    async def ack_spawn(self, seq: int) -> None:
        """Forget a created child's intent."""
        self._core.ack_spawn(seq)

    async def due_timers(self, now: float, *, limit: int | None = None) -> list[DueTimer]:
        """Armed timers with ``fire_at <= now``, ascending."""
        return self._core.due_timers(now, limit)

    async def delete_timer(self, execution_id: str, path: str, fire_at: float) -> None:
        """Disarm a timer only if it still holds exactly ``fire_at``."""
        self._core.delete_timer(execution_id, path, fire_at)

    async def read_trace(self, execution_id: str) -> list[dict[str, Any]]:
        """The retained trace steps, oldest first."""
        return self._core.read_trace(execution_id)

    async def append_trace(self, execution_id: str, entry: dict[str, Any]) -> None:
        """Append a step outside a commit; unknown execution raises ``ExecutionNotFound``."""
        self._core.append_trace(execution_id, entry, self.trace_max)

    async def list_executions(
        self,
        *,
        status: Iterable[Status] | None = None,
        definition_id: str | None = None,
        roots_only: bool = False,
        limit: int = 100,
        cursor: str | None = None,
    ) -> ExecutionPage:
        """One page of summaries ordered by id."""
        return self._core.list_executions(status, definition_id, roots_only, limit, cursor)

    async def close(self) -> None:
        """Nothing to release."""
