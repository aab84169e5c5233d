"""The memory backend's sans-IO protocol: what each operation asks of the tables, and why.

Each operation is a generator that yields *requests* (small frozen dataclasses: read a row,
write a row, scan an index) and is sent each request's result; it returns the operation's
value or raises the contract's typed error.  :class:`~harel.store.memory._tables.MemoryData`
executes the requests (it is this backend's "database"), and the two drivers only run the
loop (:func:`harel.store.common.drive` / :func:`~harel.store.common.adrive`).

A :class:`Transaction` request runs a nested plan atomically (the tables' lock is held for the
whole of it): the memory equivalent of ``BEGIN ... COMMIT``.  Every other request is atomic on
its own.  Everything is validated and encoded before the first write, so a plan that raises
has written nothing.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from harel.model import Execution, ExecutionPage, ExecutionSummary, Status
from harel.store.common import (
    MAX_DOCUMENT_BYTES,
    RECEIPT_WINDOW,
    ListingQuery,
    PreparedCommit,
    PreparedEnqueue,
    PreparedExecution,
    PreparedImport,
    WorkRow,
    WorkTouch,
    base_holds,
    cas_decision,
    decode_event,
    decode_execution,
    decode_trace_step,
    encode_trace_step,
    import_touches,
    lease_lost,
    loads,
    next_ready,
    next_trace_index,
    page_from_probe,
    receipt_slot,
    refuse_lost,
    sweep_limit,
    take_units,
    trace_keep_from,
    work_touches,
)
from harel.store.common.validate import (
    check_event_ref,
    check_flag,
    check_id,
    check_now,
    check_prune,
    check_seq,
    check_timer_ref,
)
from harel.store.contract import (
    FINISHED,
    Claim,
    DueTimer,
    ExecutionRecord,
    OutboxEntry,
    SpawnEntry,
)
from harel.store.errors import ExecutionActive, ExecutionAlreadyExists, ExecutionNotFound

T = TypeVar("T")


NO_RECEIPTS: tuple[str | None, ...] = (None,) * RECEIPT_WINDOW
"""The receipt ring of a row no commit wrote (an import)."""


@dataclass(frozen=True, slots=True)
class StoredExecution:
    """One row of the executions table: the CAS token, the document, its summary and the
    receipt ring (slot :func:`~harel.store.common.receipt_slot` of a version holds the token
    of the commit that wrote it, for the last ``RECEIPT_WINDOW`` versions)."""

    version: int
    document: str
    summary: ExecutionSummary
    receipts: tuple[str | None, ...] = NO_RECEIPTS

    def receipt(self, version: int) -> str | None:
        """The token that wrote ``version``, or ``None`` when the ring no longer holds it
        (older than the window, newer than the row, or written by an import)."""
        if not 0 <= self.version - version < RECEIPT_WINDOW:
            return None
        return self.receipts[receipt_slot(version)]


@dataclass(frozen=True, slots=True)
class OutboxRow:
    """One row of the outbox table."""

    target_id: str | None
    event_json: str


@dataclass(frozen=True, slots=True)
class SpawnRow:
    """One row of the spawns table."""

    parent_id: str
    child_id: str
    root_path: str
    context_json: str


class Request:
    """Base class of everything a plan may ask the tables to do."""

    __slots__ = ()


Plan = Generator[Request, Any, T]
"""A memory plan: yields requests, returns a ``T``."""

Relay = Literal["outbox", "spawns"]
"""The two relay tables (rows keyed by one shared, increasing ``seq``)."""

Table = Literal["executions", "processed", "timers", "outbox", "spawns", "trace", "work"]
"""Every table; each row belongs to one execution (for the relays: target / parent)."""

OWNED_TABLES: tuple[Table, ...] = (
    "processed",
    "timers",
    "outbox",
    "spawns",
    "trace",
    "work",
    "executions",
)
"""What ``purge`` deletes from, the execution row last."""


# -- reads ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GetExecution(Request):
    """-> ``StoredExecution | None``."""

    execution_id: str


@dataclass(frozen=True, slots=True)
class HasMark(Request):
    """-> ``bool``: whether the dedupe mark ``(execution_id, event_id)`` exists."""

    execution_id: str
    event_id: str


@dataclass(frozen=True, slots=True)
class GetForEvent(Request):
    """-> ``(StoredExecution | None, bool)``: the row and whether the dedupe mark
    ``(execution_id, event_id)`` exists (``load_for_event``'s two reads in one request)."""

    execution_id: str
    event_id: str


@dataclass(frozen=True, slots=True)
class ScanRelay(Request):
    """-> ``list[(seq, OutboxRow | SpawnRow)]`` of one relay, ascending by seq, at most
    ``limit``."""

    table: Relay
    limit: int | None


@dataclass(frozen=True, slots=True)
class ScanDueTimers(Request):
    """-> ``list[DueTimer]`` with ``fire_at <= now``, ascending by (fire_at, id, path), at most
    ``limit``."""

    now: float
    limit: int | None


@dataclass(frozen=True, slots=True)
class ReadTraceRows(Request):
    """-> ``(last index ever written or None, [(index, body), ...] ascending)``."""

    execution_id: str


@dataclass(frozen=True, slots=True)
class ScanExecutions(Request):
    """-> ``list[ExecutionSummary]``: those matching ``query`` with ``id > query.after``,
    ascending by id, at most ``query.limit + 1`` (the probe row tells whether a page follows)."""

    query: ListingQuery


@dataclass(frozen=True, slots=True)
class ListOwned(Request):
    """-> the rows of ``table`` that belong to the execution: ``processed`` ->
    ``[(event_id, recorded_at)]`` by event id, ``timers`` -> ``[(path, fire_at)]`` by path,
    ``outbox`` (targeted at it) / ``spawns`` (written by it) -> ``[(seq, row)]`` by seq."""

    table: Literal["processed", "timers", "outbox", "spawns"]
    execution_id: str | None
    """``None`` only for ``outbox``: the untargeted entries."""


@dataclass(frozen=True, slots=True)
class OldMarks(Request):
    """-> ``list[(execution_id, event_id)]``: at most ``limit`` marks recorded strictly before
    ``before``."""

    before: float
    limit: int


# -- writes -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PutExecution(Request):
    """Insert or replace an execution row."""

    execution_id: str
    row: StoredExecution


@dataclass(frozen=True, slots=True)
class AddRelay(Request):
    """Append an outbox or spawn row under the next seq."""

    row: OutboxRow | SpawnRow


@dataclass(frozen=True, slots=True)
class PutMark(Request):
    """Record a dedupe mark with its age (an existing mark keeps its first age)."""

    execution_id: str
    event_id: str
    recorded_at: float


@dataclass(frozen=True, slots=True)
class PutTimer(Request):
    """Arm (or re-arm) the timer of ``(execution_id, path)``."""

    execution_id: str
    path: str
    fire_at: float


@dataclass(frozen=True, slots=True)
class DropTimer(Request):
    """Disarm the timer of ``(execution_id, path)``: only while it holds exactly ``only_at``,
    or whatever it holds when ``only_at`` is ``None``."""

    execution_id: str
    path: str
    only_at: float | None = None


@dataclass(frozen=True, slots=True)
class PutTraceStep(Request):
    """Store one step under ``index``, remember it as the last index, and drop the steps below
    ``keep_from`` (``None``: keep every step)."""

    execution_id: str
    index: int
    body: str
    keep_from: int | None


@dataclass(frozen=True, slots=True)
class AckRelay(Request):
    """Delete one relay row (unknown seq: nothing)."""

    table: Relay
    seq: int


@dataclass(frozen=True, slots=True)
class DropMarks(Request):
    """-> ``int``: delete these dedupe marks, returning how many existed."""

    keys: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class DeleteOwned(Request):
    """Delete every row of ``table`` that belongs to the execution (the execution row, its
    marks, timers, trace and trace counter, the outbox rows targeted at it, the spawn rows it
    wrote)."""

    table: Table
    execution_id: str


@dataclass(frozen=True, slots=True)
class ReadyWork(Request):
    """-> ``list[WorkRow]``: up to ``limit`` ready rows (``ready_at <= now``) of each priority,
    in claim order."""

    now: float
    limit: int


@dataclass(frozen=True, slots=True)
class GetWork(Request):
    """-> ``WorkRow | None``: the work row of one group."""

    key: str | None


@dataclass(frozen=True, slots=True)
class PutWork(Request):
    """Write one work row (replacing the group's row)."""

    row: WorkRow


@dataclass(frozen=True, slots=True)
class DropWork(Request):
    """Delete the work row of one group (absent: nothing)."""

    key: str | None


@dataclass(frozen=True, slots=True)
class TouchWork(Request):
    """Apply :func:`harel.store.common.touch` to the group's row."""

    change: WorkTouch


@dataclass(frozen=True, slots=True)
class Transaction(Request):
    """-> what ``plan`` returns: run ``plan``'s requests atomically (the tables stay locked)."""

    plan: Plan[Any]


# -- rows -------------------------------------------------------------------------------------


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
    """The executions row a prepared commit writes (summary stamped with ``committed_at``),
    its token recorded in the receipt ring carried over from ``previous`` (the row it
    replaces)."""
    ring = NO_RECEIPTS if previous is None else previous.receipts
    slot = receipt_slot(prepared.new_version)
    receipts = (*ring[:slot], prepared.token or None, *ring[slot + 1 :])
    return _row(
        prepared.execution_id, prepared, prepared.new_version, prepared.committed_at, receipts
    )


def imported_execution(execution_id: str, prepared: PreparedExecution) -> StoredExecution:
    """The executions row an import writes (version and ``updated_at`` as exported)."""
    return _row(execution_id, prepared, prepared.version, prepared.updated_at)


def outbox_entry(seq: int, row: OutboxRow) -> OutboxEntry:
    """Decode an outbox row."""
    return OutboxEntry(seq, row.target_id, decode_event(row.event_json))


def spawn_entry(seq: int, row: SpawnRow) -> SpawnEntry:
    """Decode a spawn row."""
    return SpawnEntry(seq, row.parent_id, row.child_id, row.root_path, loads(row.context_json))


# -- the plans --------------------------------------------------------------------------------


class MemoryPlan:
    """One generator per contract operation (stateless; both drivers share one instance).

    A class rather than module functions only so that a test double can override one
    operation and keep the rest (the kit's proof of strength breaks stores this way).
    """

    max_document_bytes: int = MAX_DOCUMENT_BYTES

    def load(self, execution_id: str) -> Plan[Execution | None]:
        """The stored execution, decoded into a fresh object."""
        row = yield GetExecution(check_id(execution_id))
        return None if row is None else decode_execution(row.document)

    def load_for_event(
        self, execution_id: str, event_id: str
    ) -> Plan[tuple[Execution | None, bool]]:
        """The execution and whether it processed ``event_id``, read in one transaction."""
        execution_id, event_id = check_event_ref(execution_id, event_id)
        found: tuple[Execution | None, bool] = yield Transaction(
            self._load_for_event(execution_id, event_id)
        )
        return found

    def _load_for_event(
        self, execution_id: str, event_id: str
    ) -> Plan[tuple[Execution | None, bool]]:
        found: tuple[StoredExecution | None, bool] = yield GetForEvent(execution_id, event_id)
        row, seen = found  # the ids were checked by load_for_event
        return (None, False) if row is None else (decode_execution(row.document), seen)

    def commit(self, prepared: PreparedCommit, trace_max: int | None) -> Plan[None]:
        """CAS, then every effect of the step, in one transaction."""
        trace_keep_from(0, trace_max)  # a bad trace_max fails before anything is written
        yield Transaction(self._commit(prepared, trace_max))

    def _commit(self, prepared: PreparedCommit, trace_max: int | None) -> Plan[None]:
        row: StoredExecution | None
        marked = False
        if prepared.processed_event_id is None:
            row = yield GetExecution(prepared.execution_id)
        else:
            row, marked = yield GetForEvent(prepared.execution_id, prepared.processed_event_id)
        found = None if row is None else row.version
        if (
            marked
            or cas_decision(prepared.expected_version, found) == "conflict"
            or (row is not None and not base_holds(prepared, row.receipt(found or 0)))
        ):
            receipt = None if row is None else row.receipt(prepared.new_version)
            error = refuse_lost(prepared, found, receipt, marked)
            if error is None:
                return  # a re-send of a stored commit: it succeeded once, write nothing again
            raise error
        yield from self._write_step(prepared, trace_max, row)

    def _write_step(
        self, prepared: PreparedCommit, trace_max: int | None, previous: StoredExecution | None
    ) -> Plan[None]:
        execution_id = prepared.execution_id
        yield PutExecution(execution_id, stored_execution(prepared, previous))
        for emit in prepared.emits:
            yield AddRelay(OutboxRow(emit.target_id, emit.event_json))
        if prepared.processed_event_id is not None:
            yield PutMark(execution_id, prepared.processed_event_id, prepared.committed_at)
        for op in prepared.timers:
            if op.action == "schedule":
                yield PutTimer(execution_id, op.path, op.fire_at)
            else:
                yield DropTimer(execution_id, op.path)
        for spawn in prepared.spawns:
            yield AddRelay(
                SpawnRow(execution_id, spawn.child_id, spawn.root_path, spawn.context_json)
            )
        if prepared.trace is not None:
            yield from self._append_step(execution_id, prepared.trace, trace_max)
        for change in work_touches(prepared):
            yield TouchWork(change)

    def enqueue(self, prepared: PreparedEnqueue) -> Plan[int]:
        """One outbox row and its target's work-row touch, in one transaction; the row's seq."""
        seq: int = yield Transaction(self._enqueue(prepared))
        return seq

    def _enqueue(self, prepared: PreparedEnqueue) -> Plan[int]:
        emit = prepared.emit
        seq: int = yield AddRelay(OutboxRow(emit.target_id, emit.event_json))
        yield TouchWork(prepared.touch)
        return seq

    def _append_step(self, execution_id: str, body: str, trace_max: int | None) -> Plan[None]:
        last, _ = yield ReadTraceRows(execution_id)
        index = next_trace_index(last)
        yield PutTraceStep(execution_id, index, body, trace_keep_from(index, trace_max))

    def append_trace(
        self, execution_id: str, entry: dict[str, Any], trace_max: int | None
    ) -> Plan[None]:
        """Append a step to a stored execution's ring (``ExecutionNotFound`` otherwise)."""
        execution_id = check_id(execution_id)
        body = encode_trace_step(entry)
        trace_keep_from(0, trace_max)
        yield Transaction(self._append_trace(execution_id, body, trace_max))

    def _append_trace(self, execution_id: str, body: str, trace_max: int | None) -> Plan[None]:
        row = yield GetExecution(execution_id)
        if row is None:
            raise ExecutionNotFound(execution_id)
        yield from self._append_step(execution_id, body, trace_max)

    def read_trace(self, execution_id: str) -> Plan[list[dict[str, Any]]]:
        """The retained steps, oldest first, each with its store-assigned index."""
        _, rows = yield ReadTraceRows(check_id(execution_id))
        return [decode_trace_step(body, index) for index, body in rows]

    def is_processed(self, execution_id: str, event_id: str) -> Plan[bool]:
        """Whether the dedupe mark exists."""
        seen = yield HasMark(*check_event_ref(execution_id, event_id))
        return bool(seen)

    def pending_outbox(self, limit: int | None) -> Plan[list[OutboxEntry]]:
        """Undelivered events, oldest first."""
        rows = yield ScanRelay("outbox", sweep_limit(limit))
        return [outbox_entry(seq, row) for seq, row in rows]

    def pending_spawns(self, limit: int | None) -> Plan[list[SpawnEntry]]:
        """Uncreated children, oldest first."""
        rows = yield ScanRelay("spawns", sweep_limit(limit))
        return [spawn_entry(seq, row) for seq, row in rows]

    def ack_outbox(self, seq: int) -> Plan[None]:
        """Forget one outbox row (unknown seq: nothing)."""
        yield AckRelay("outbox", check_seq(seq))

    def ack_spawn(self, seq: int) -> Plan[None]:
        """Forget one spawn row (unknown seq: nothing)."""
        yield AckRelay("spawns", check_seq(seq))

    def due_timers(self, now: float, limit: int | None) -> Plan[list[DueTimer]]:
        """Armed timers with ``fire_at <= now``, ascending."""
        due: list[DueTimer] = yield ScanDueTimers(check_now(now), sweep_limit(limit))
        return due

    def delete_timer(self, execution_id: str, path: str, fire_at: float) -> Plan[None]:
        """Disarm a timer only while it still holds exactly ``fire_at``."""
        yield DropTimer(*check_timer_ref(execution_id, path, fire_at))

    def list_executions(self, query: ListingQuery) -> Plan[ExecutionPage]:
        """One page of summaries ordered by id, after the cursor's id (a keyset)."""
        page: ExecutionPage = yield from self._page(query)
        return page

    def _page(self, query: ListingQuery) -> Plan[ExecutionPage]:
        if query.matches_nothing:
            return ExecutionPage()
        rows = yield ScanExecutions(query)
        return page_from_probe(query, rows)

    def purge(self, execution_id: str, force: bool) -> Plan[bool]:
        """Remove the execution and everything it owns in one transaction."""
        execution_id = check_id(execution_id)
        existed: bool = yield Transaction(self._purge(execution_id, check_flag(force, "force")))
        return existed

    def _purge(self, execution_id: str, force: bool) -> Plan[bool]:
        row = yield GetExecution(execution_id)
        if row is not None and not force and row.summary.status not in FINISHED:
            raise ExecutionActive(execution_id, row.summary.status.value)
        for table in OWNED_TABLES:
            yield DeleteOwned(table, execution_id)
        return row is not None

    def prune_processed(self, older_than: float, batch_size: int) -> Plan[int]:
        """Drop marks recorded before ``older_than``, one short transaction per batch."""
        before, size = check_prune(older_than, batch_size)
        dropped = 0
        while True:
            batch: tuple[int, int] = yield Transaction(self._prune_batch(before, size))
            dropped += batch[1]
            if batch[0] < size:
                return dropped

    def _prune_batch(self, before: float, size: int) -> Plan[tuple[int, int]]:
        keys = yield OldMarks(before, size)
        if not keys:
            return (0, 0)
        count: int = yield DropMarks(tuple(keys))
        return (len(keys), count)

    def export_execution(self, execution_id: str) -> Plan[ExecutionRecord | None]:
        """Everything stored for the id, read in one transaction (``None``: nothing)."""
        record: ExecutionRecord | None = yield Transaction(self._export(check_id(execution_id)))
        return record

    def _export(self, execution_id: str) -> Plan[ExecutionRecord | None]:
        row = yield GetExecution(execution_id)
        marks = yield ListOwned("processed", execution_id)
        timers = yield ListOwned("timers", execution_id)
        outbox = yield ListOwned("outbox", execution_id)
        spawns = yield ListOwned("spawns", execution_id)
        _, trace = yield ReadTraceRows(execution_id)
        record = ExecutionRecord(
            execution_id=execution_id,
            execution=None if row is None else decode_execution(row.document),
            updated_at=None if row is None else row.summary.updated_at,
            processed=tuple(marks),
            timers=tuple(timers),
            outbox=tuple(outbox_entry(seq, item) for seq, item in outbox),
            spawns=tuple(spawn_entry(seq, item) for seq, item in spawns),
            trace=tuple(decode_trace_step(body, index) for index, body in trace),
        )
        return None if record.is_empty else record

    def import_execution(self, prepared: PreparedImport) -> Plan[None]:
        """Write an exported record in one transaction; ``ExecutionAlreadyExists`` (nothing
        written) when its execution is already stored."""
        yield Transaction(self._import(prepared))

    def _import(self, prepared: PreparedImport) -> Plan[None]:
        execution_id = prepared.execution_id
        if prepared.execution is not None:
            row = yield GetExecution(execution_id)
            if row is not None:
                raise ExecutionAlreadyExists(execution_id)
            yield PutExecution(execution_id, imported_execution(execution_id, prepared.execution))
        for event_id, recorded_at in prepared.processed:
            yield PutMark(execution_id, event_id, recorded_at)
        for path, fire_at in prepared.timers:
            yield PutTimer(execution_id, path, fire_at)
        for emit in prepared.emits:
            yield AddRelay(OutboxRow(emit.target_id, emit.event_json))
        for spawn in prepared.spawns:
            yield AddRelay(
                SpawnRow(execution_id, spawn.child_id, spawn.root_path, spawn.context_json)
            )
        for index, body in prepared.trace:
            yield PutTraceStep(execution_id, index, body, None)
        for change in import_touches(prepared):
            yield TouchWork(change)

    # -- claims ---------------------------------------------------------------------------

    def claim(self, owner: str, now: float, lease: float, limit: int) -> Plan[list[Claim]]:
        """Lease up to ``limit`` due units, grouped, in one transaction."""
        claims: list[Claim] = yield Transaction(self._claim(owner, now, lease, limit))
        return claims

    def _claim(self, owner: str, now: float, lease: float, limit: int) -> Plan[list[Claim]]:
        rows: list[WorkRow] = yield ReadyWork(now, limit)
        claims: list[Claim] = yield from self._lease_rows(rows, owner, now, lease, limit)
        return claims

    def _lease_rows(
        self, rows: list[WorkRow], owner: str, now: float, lease: float, limit: int
    ) -> Plan[list[Claim]]:
        claims: list[Claim] = []
        budget = limit
        for row in rows:
            if not budget:
                break
            timers, outbox, spawns = yield from self._units(row.key)
            claim = take_units(row, budget, now, timers, outbox, spawns, owner, now + lease)
            if claim is None:  # an early row: nothing is due behind it
                yield from self._settle_row(row, timers, False, now, None)
                continue
            yield PutWork(WorkRow(row.key, row.priority, now + lease, owner))
            claims.append(claim)
            budget -= claim.units
        return claims

    def _units(
        self, key: str | None
    ) -> Plan[tuple[list[tuple[str, float]], list[OutboxEntry], list[SpawnEntry]]]:
        outbox = yield ListOwned("outbox", key)
        if key is None:
            return [], [outbox_entry(seq, row) for seq, row in outbox], []
        timers = yield ListOwned("timers", key)
        spawns = yield ListOwned("spawns", key)
        return (
            timers,
            [outbox_entry(seq, row) for seq, row in outbox],
            [spawn_entry(seq, row) for seq, row in spawns],
        )

    def _settle_row(
        self,
        row: WorkRow,
        timers: list[tuple[str, float]],
        has_relay: bool,
        now: float,
        retry_at: float | None,
    ) -> Plan[None]:
        ready = next_ready((at for _, at in timers), has_relay, now, retry_at)
        if ready is None:
            yield DropWork(row.key)
        else:
            yield PutWork(WorkRow(row.key, row.priority, ready))

    def renew(self, owner: str, key: str | None, now: float, lease: float) -> Plan[float]:
        """Extend an unexpired lease held by ``owner``."""
        expires: float = yield Transaction(self._renew(owner, key, now, lease))
        return expires

    def _renew(self, owner: str, key: str | None, now: float, lease: float) -> Plan[float]:
        row: WorkRow | None = yield GetWork(key)
        if row is None or row.owner != owner or row.ready_at <= now:
            raise lease_lost(row, key, owner, now)
        yield PutWork(WorkRow(key, row.priority, now + lease, owner))
        return now + lease

    def release(
        self, owner: str, key: str | None, retry_at: float | None, now: float
    ) -> Plan[None]:
        """Free a lease held by ``owner``; the row is re-dated from what is left."""
        yield Transaction(self._release(owner, key, retry_at, now))

    def _release(
        self, owner: str, key: str | None, retry_at: float | None, now: float
    ) -> Plan[None]:
        row: WorkRow | None = yield GetWork(key)
        if row is None or row.owner != owner:
            raise lease_lost(row, key, owner, None)
        # what is left decides the row: the relay rows need no decoding for that
        outbox = yield ListOwned("outbox", key)
        timers = [] if key is None else (yield ListOwned("timers", key))
        spawns = [] if key is None else (yield ListOwned("spawns", key))
        yield from self._settle_row(row, timers, bool(outbox or spawns), now, retry_at)


PLAN = MemoryPlan()
"""The plan both memory stores use."""
