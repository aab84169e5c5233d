"""The tutorial store: the smallest complete harel store, in one module.

Read it beside the tutorial (``conformance/tutorial-store/README.md``).  It keeps every
execution in a few plain dicts behind one lock, in this process only, and passes the whole
conformance kit (strict, sync and async).  Its four parts, in the order a backend is written
(the declaration, :data:`harel_tutorial_store.SPEC`, is the package's ``__init__``):

1. the data model (:class:`Tables`): one dict per kind of record, values kept as JSON text;
2. the plan (:class:`TutorialPlan`): one sans-IO operation per contract method, each built on
   the commit rule and claim helpers of :mod:`harel.store.author`;
3. the sync store (:class:`TutorialStore`): a :class:`~harel.store.author.PlanStore` that
   drives the plan under the lock;
4. the async store (:class:`AsyncTutorialStore`): the sync store in a worker thread
   (:class:`~harel.store.author.ThreadedAsyncStore`).

The kit's harness is in :mod:`harel_tutorial_store.testing`.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Generator
from dataclasses import dataclass, field
from functools import partial
from typing import Any, ClassVar, Literal, Self, TypeVar

from harel.model import Execution, ExecutionPage, ExecutionSummary, Status
from harel.store.author import (
    MAX_DOCUMENT_BYTES,
    RECEIPT_WINDOW,
    AsyncFromUrl,
    BackendSpec,
    FromUrl,
    ListingQuery,
    PlanStore,
    PreparedCommit,
    PreparedEnqueue,
    PreparedExecution,
    PreparedImport,
    ThreadedAsyncStore,
    WorkRow,
    WorkTouch,
    base_holds,
    cas_decision,
    check_event_ref,
    check_flag,
    check_id,
    check_now,
    check_prune,
    check_seq,
    check_timer_ref,
    claim_order,
    decode_event,
    decode_execution,
    decode_trace_step,
    drive,
    encode_trace_step,
    held_leases,
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
    touch,
    trace_keep_from,
    work_touches,
)
from harel.store.contract import (
    FINISHED,
    Capabilities,
    Claim,
    DueTimer,
    ExecutionRecord,
    Lease,
    OutboxEntry,
    SpawnEntry,
)
from harel.store.errors import (
    ExecutionActive,
    ExecutionAlreadyExists,
    ExecutionNotFound,
    StoreError,
)

from harel_tutorial_store import CAPABILITIES, SPEC

__all__ = ["AsyncTutorialStore", "Tables", "TutorialPlan", "TutorialStore"]

T = TypeVar("T")

# -- 1. the data model ------------------------------------------------------------------------

NO_RECEIPTS: tuple[str | None, ...] = (None,) * RECEIPT_WINDOW
"""The receipt ring of an execution no commit wrote yet (an import)."""


@dataclass(frozen=True, slots=True)
class Row:
    """One stored execution: its version, its document (JSON text), its listing summary and
    its receipt ring (slot ``receipt_slot(v)`` holds the token of the commit that wrote
    version ``v``, for the last ``RECEIPT_WINDOW`` versions)."""

    version: int
    document: str
    summary: ExecutionSummary
    receipts: tuple[str | None, ...] = NO_RECEIPTS

    def receipt(self, version: int) -> str | None:
        """The token that wrote ``version`` (``None``: unknown)."""
        return self.receipts[receipt_slot(version)]


@dataclass(eq=False)
class Tables:
    """One dataset: a dict per kind of record, and the one lock every operation holds.

    Values are JSON text (documents, events, contexts, trace steps), so a store never shares
    an object with its caller.  Relay rows (outbox, spawns) share one increasing ``seq``;
    dicts keep insertion order, so iterating one is iterating by ``seq``.
    """

    lock: threading.Lock = field(default_factory=threading.Lock)
    executions: dict[str, Row] = field(default_factory=dict)
    marks: dict[tuple[str, str], float] = field(default_factory=dict)
    """Dedupe marks: ``(execution id, event id)`` -> the epoch second it was recorded."""
    timers: dict[tuple[str, str], float] = field(default_factory=dict)
    """Armed timers: ``(execution id, path)`` -> ``fire_at``."""
    outbox: dict[int, tuple[str | None, str]] = field(default_factory=dict)
    """``seq`` -> ``(target id or None, event JSON)``."""
    spawns: dict[int, tuple[str, str, str, str]] = field(default_factory=dict)
    """``seq`` -> ``(parent id, child id, root path, context JSON)``."""
    trace: dict[str, dict[int, str]] = field(default_factory=dict)
    """Execution id -> trace ring: index -> step JSON."""
    work: dict[str | None, WorkRow] = field(default_factory=dict)
    """The claims' work rows, one per execution id (``None``: untargeted outbox entries)."""
    last_seq: int = 0

    @classmethod
    def named(cls, name: str) -> Tables:
        """The dataset ``name`` of this process, made empty on first use (``""``: a new
        private dataset each time)."""
        if not name:
            return cls()
        with _NAMED_LOCK:
            return _NAMED.setdefault(name, cls())

    def add_outbox(self, target_id: str | None, event_json: str) -> int:
        """Append one outbox row; its ``seq``."""
        self.last_seq += 1
        self.outbox[self.last_seq] = (target_id, event_json)
        return self.last_seq

    def add_spawn(self, parent_id: str, child_id: str, root_path: str, context: str) -> int:
        """Append one spawn intent; its ``seq``."""
        self.last_seq += 1
        self.spawns[self.last_seq] = (parent_id, child_id, root_path, context)
        return self.last_seq

    def outbox_of(self, key: str | None) -> list[OutboxEntry]:
        """The outbox entries targeted at ``key``, by ``seq``, decoded."""
        rows = self.outbox.items()
        return [OutboxEntry(s, t, decode_event(event)) for s, (t, event) in rows if t == key]

    def spawns_of(self, parent_id: str | None) -> list[SpawnEntry]:
        """The spawn intents ``parent_id`` wrote, by ``seq``, decoded."""
        return [
            SpawnEntry(seq, parent, child, root, loads(context))
            for seq, (parent, child, root, context) in self.spawns.items()
            if parent == parent_id
        ]

    def timers_of(self, execution_id: str | None) -> list[tuple[str, float]]:
        """The armed timers of ``execution_id`` as ``(path, fire_at)``, by path."""
        return sorted((path, at) for (eid, path), at in self.timers.items() if eid == execution_id)

    def append_step(self, execution_id: str, body: str, trace_max: int | None) -> None:
        """Store one trace step under the next index; drop what falls out of the ring."""
        ring = self.trace.setdefault(execution_id, {})
        index = next_trace_index(max(ring, default=None))
        ring[index] = body
        keep_from = trace_keep_from(index, trace_max)
        for old in [i for i in ring if keep_from is not None and i < keep_from]:
            del ring[old]

    def touch(self, change: WorkTouch) -> None:
        """Apply one work-row change with core's rule (:func:`~harel.store.author.touch`)."""
        self.work[change.key] = touch(self.work.get(change.key), change)

    def settle(self, row: WorkRow, now: float, retry_at: float | None) -> None:
        """Free ``row``, dated by the work its group still has (dropped when none is left)."""
        has_relay = bool(self.outbox_of(row.key) or self.spawns_of(row.key))
        fire_ats = (at for _, at in self.timers_of(row.key))
        ready = next_ready(fire_ats, has_relay, now, retry_at)
        if ready is None:
            self.work.pop(row.key, None)
        else:
            self.work[row.key] = WorkRow(row.key, row.priority, ready)

    def forget(self, execution_id: str) -> None:
        """Delete everything stored under ``execution_id`` (what ``purge`` removes)."""
        for table in (self.marks, self.timers):
            for key in [key for key in table if key[0] == execution_id]:
                del table[key]
        for seq in [s for s, (target, _) in self.outbox.items() if target == execution_id]:
            del self.outbox[seq]
        for seq in [s for s, row in self.spawns.items() if row[0] == execution_id]:
            del self.spawns[seq]
        self.trace.pop(execution_id, None)
        self.work.pop(execution_id, None)
        self.executions.pop(execution_id, None)


_NAMED: dict[str, Tables] = {}
_NAMED_LOCK = threading.Lock()


def _summary(
    execution_id: str, source: PreparedCommit | PreparedExecution, version: int, at: float
) -> ExecutionSummary:
    """The listing summary of a commit or an imported execution."""
    return ExecutionSummary(
        id=execution_id,
        definition_id=source.definition_id,
        status=Status(source.status),
        outcome=source.outcome,
        active_path=source.active_path,
        version=version,
        parent_id=source.parent_id,
        updated_at=at,
    )


# -- 2. the plan ------------------------------------------------------------------------------

TABLES: Literal["tables"] = "tables"
"""The one request this plan yields.  A database plan yields statements and is sent their
results; here the whole database is :class:`Tables`, so each operation asks for it once and
the driver answers while it holds the lock, for the rest of the operation."""

Op = Generator[Literal["tables"], Tables, T]
"""One operation of the plan: yields :data:`TABLES`, is sent the dataset, returns a ``T``."""


class TutorialPlan:
    """One sans-IO operation per contract method (stateless; every store shares :data:`PLAN`).

    Arguments arrive as the caller passed them and are checked here with ``check_*`` before
    anything is read; ``commit``, ``enqueue`` and ``import_execution`` receive what core
    already validated and encoded.  Every check happens before the first write, so an
    operation that raises has written nothing.
    """

    max_document_bytes: int = MAX_DOCUMENT_BYTES

    # -- the execution and its commit ---------------------------------------------------------

    def load(self, execution_id: str) -> Op[Execution | None]:
        """A fresh copy of the stored execution, or ``None``."""
        execution_id = check_id(execution_id)
        tables = yield TABLES
        row = tables.executions.get(execution_id)
        return None if row is None else decode_execution(row.document)

    def load_for_event(self, execution_id: str, event_id: str) -> Op[tuple[Execution | None, bool]]:
        """The execution and whether it processed ``event_id``, from one read."""
        execution_id, event_id = check_event_ref(execution_id, event_id)
        tables = yield TABLES
        row = tables.executions.get(execution_id)
        if row is None:
            return None, False
        return decode_execution(row.document), (execution_id, event_id) in tables.marks

    def commit(self, prepared: PreparedCommit, trace_max: int | None) -> Op[None]:
        """The contract's commit rule, then every write of the step (all, or none)."""
        trace_keep_from(0, trace_max)  # a bad trace_max fails before anything is written
        tables = yield TABLES
        execution_id, event_id = prepared.execution_id, prepared.processed_event_id
        row = tables.executions.get(execution_id)
        found = None if row is None else row.version
        marked = event_id is not None and (execution_id, event_id) in tables.marks
        if (
            marked
            or cas_decision(prepared.expected_version, found) == "conflict"
            or (row is not None and not base_holds(prepared, row.receipt(row.version)))
        ):
            receipt = None if row is None else row.receipt(prepared.new_version)
            error = refuse_lost(prepared, found, receipt, marked)
            if error is None:
                return  # this very commit was stored before (a re-send): write nothing again
            raise error
        ring = list(NO_RECEIPTS if row is None else row.receipts)
        ring[receipt_slot(prepared.new_version)] = prepared.token or None
        summary = _summary(execution_id, prepared, prepared.new_version, prepared.committed_at)
        tables.executions[execution_id] = Row(
            prepared.new_version, prepared.document, summary, tuple(ring)
        )
        for emit in prepared.emits:
            tables.add_outbox(emit.target_id, emit.event_json)
        if event_id is not None:
            tables.marks[(execution_id, event_id)] = prepared.committed_at
        for op in prepared.timers:
            if op.action == "schedule":
                tables.timers[(execution_id, op.path)] = op.fire_at
            else:
                tables.timers.pop((execution_id, op.path), None)
        for spawn in prepared.spawns:
            tables.add_spawn(execution_id, spawn.child_id, spawn.root_path, spawn.context_json)
        if prepared.trace is not None:
            tables.append_step(execution_id, prepared.trace, trace_max)
        for change in work_touches(prepared):
            tables.touch(change)

    def is_processed(self, execution_id: str, event_id: str) -> Op[bool]:
        """Whether the dedupe mark is stored."""
        key = check_event_ref(execution_id, event_id)
        tables = yield TABLES
        return key in tables.marks

    # -- relays and timers --------------------------------------------------------------------

    def enqueue(self, prepared: PreparedEnqueue) -> Op[int]:
        """One outbox row and its target's work-row touch; the row's ``seq``."""
        tables = yield TABLES
        seq = tables.add_outbox(prepared.emit.target_id, prepared.emit.event_json)
        tables.touch(prepared.touch)
        return seq

    def pending_outbox(self, limit: int | None) -> Op[list[OutboxEntry]]:
        """Undelivered events by ``seq``, at most ``limit``."""
        limit = sweep_limit(limit)
        tables = yield TABLES
        rows = itertools.islice(tables.outbox.items(), limit)
        return [OutboxEntry(seq, target, decode_event(event)) for seq, (target, event) in rows]

    def ack_outbox(self, seq: int) -> Op[None]:
        """Forget one outbox row (an unknown ``seq``: nothing)."""
        seq = check_seq(seq)
        tables = yield TABLES
        tables.outbox.pop(seq, None)

    def pending_spawns(self, limit: int | None) -> Op[list[SpawnEntry]]:
        """Uncreated children by ``seq``, at most ``limit``."""
        limit = sweep_limit(limit)
        tables = yield TABLES
        return [
            SpawnEntry(seq, parent, child, root, loads(context))
            for seq, (parent, child, root, context) in itertools.islice(
                tables.spawns.items(), limit
            )
        ]

    def ack_spawn(self, seq: int) -> Op[None]:
        """Forget one spawn intent (an unknown ``seq``: nothing)."""
        seq = check_seq(seq)
        tables = yield TABLES
        tables.spawns.pop(seq, None)

    def due_timers(self, now: float, limit: int | None) -> Op[list[DueTimer]]:
        """Armed timers with ``fire_at <= now`` by ``(fire_at, execution id, path)``."""
        now, limit = check_now(now), sweep_limit(limit)
        tables = yield TABLES
        due = sorted((at, eid, path) for (eid, path), at in tables.timers.items() if at <= now)
        return [(eid, path, at) for at, eid, path in due[:limit]]

    def delete_timer(self, execution_id: str, path: str, fire_at: float) -> Op[None]:
        """Disarm a timer only while it still holds exactly ``fire_at``."""
        execution_id, path, fire_at = check_timer_ref(execution_id, path, fire_at)
        tables = yield TABLES
        if tables.timers.get((execution_id, path)) == fire_at:
            del tables.timers[(execution_id, path)]

    # -- claims -------------------------------------------------------------------------------

    def claim(self, owner: str, now: float, lease: float, limit: int) -> Op[list[Claim]]:
        """Lease up to ``limit`` due units to ``owner``, ready rows in claim order."""
        tables = yield TABLES
        claims: list[Claim] = []
        budget = limit
        for row in claim_order(row for row in tables.work.values() if row.ready_at <= now):
            if not budget:
                break
            timers, outbox = tables.timers_of(row.key), tables.outbox_of(row.key)
            spawns = tables.spawns_of(row.key)
            claim = take_units(row, budget, now, timers, outbox, spawns, owner, now + lease)
            if claim is None:  # an early row (its timer moved): date it by what is left
                tables.settle(row, now, None)
                continue
            tables.work[row.key] = WorkRow(row.key, row.priority, now + lease, owner)
            claims.append(claim)
            budget -= claim.units
        return claims

    def renew(self, owner: str, key: str | None, now: float, lease: float) -> Op[float]:
        """Extend ``owner``'s unexpired lease to ``now + lease``."""
        tables = yield TABLES
        row = tables.work.get(key)
        if row is None or row.owner != owner or row.ready_at <= now:
            raise lease_lost(row, key, owner, now)
        tables.work[key] = WorkRow(key, row.priority, now + lease, owner)
        return now + lease

    def release(self, owner: str, key: str | None, retry_at: float | None, now: float) -> Op[None]:
        """Give ``owner``'s lease back; the row is dated by what is left (not before
        ``retry_at``)."""
        tables = yield TABLES
        row = tables.work.get(key)
        if row is None or row.owner != owner:
            raise lease_lost(row, key, owner, None)
        tables.settle(row, now, retry_at)

    def list_leases(self, now: float, limit: int) -> Op[list[Lease]]:
        """The leases held at ``now`` (the work rows with an owner and a later expiry)."""
        tables = yield TABLES
        return held_leases(tables.work.values(), now, limit)

    # -- trace, listing, retention ------------------------------------------------------------

    def read_trace(self, execution_id: str) -> Op[list[dict[str, Any]]]:
        """The retained steps, oldest first, each with its index."""
        execution_id = check_id(execution_id)
        tables = yield TABLES
        ring = tables.trace.get(execution_id, {})
        return [decode_trace_step(body, index) for index, body in sorted(ring.items())]

    def append_trace(
        self, execution_id: str, entry: dict[str, Any], trace_max: int | None
    ) -> Op[None]:
        """Append a step to a stored execution's ring (``ExecutionNotFound`` otherwise)."""
        execution_id = check_id(execution_id)
        body = encode_trace_step(entry, max_document_bytes=self.max_document_bytes)
        trace_keep_from(0, trace_max)
        tables = yield TABLES
        if execution_id not in tables.executions:
            raise ExecutionNotFound(execution_id)
        tables.append_step(execution_id, body, trace_max)

    def list_executions(self, query: ListingQuery) -> Op[ExecutionPage]:
        """One page of summaries by id after the cursor's id (a keyset), exact."""
        tables = yield TABLES
        if query.matches_nothing:
            return ExecutionPage()
        rows: list[ExecutionSummary] = []
        for execution_id in sorted(tables.executions):
            summary = tables.executions[execution_id].summary
            if (query.after is None or execution_id > query.after) and query.matches(summary):
                rows.append(summary)
                if len(rows) == query.probe_limit:
                    break
        return page_from_probe(query, rows)

    def purge(self, execution_id: str, force: bool) -> Op[bool]:
        """Delete the execution and all it owns (``ExecutionActive`` while it is unfinished,
        unless ``force``); whether it was stored."""
        execution_id, force = check_id(execution_id), check_flag(force, "force")
        tables = yield TABLES
        row = tables.executions.get(execution_id)
        if row is not None and not force and row.summary.status not in FINISHED:
            raise ExecutionActive(execution_id, row.summary.status.value)
        tables.forget(execution_id)
        return row is not None

    def prune_processed(self, older_than: float, batch_size: int) -> Op[int]:
        """Drop the dedupe marks recorded before ``older_than``; how many.  One lock hold:
        ``batch_size`` (checked) bounds a database's transactions, and this store has none."""
        before, _batch_size = check_prune(older_than, batch_size)
        tables = yield TABLES
        old = [key for key, at in tables.marks.items() if at < before]
        for key in old:
            del tables.marks[key]
        return len(old)

    # -- moving executions between stores -----------------------------------------------------

    def export_execution(self, execution_id: str) -> Op[ExecutionRecord | None]:
        """Everything stored for the id, from one read (``None``: nothing)."""
        execution_id = check_id(execution_id)
        tables = yield TABLES
        row = tables.executions.get(execution_id)
        marks = sorted((ev, at) for (eid, ev), at in tables.marks.items() if eid == execution_id)
        ring = sorted(tables.trace.get(execution_id, {}).items())
        record = ExecutionRecord(
            execution_id=execution_id,
            execution=None if row is None else decode_execution(row.document),
            updated_at=None if row is None else row.summary.updated_at,
            processed=tuple(marks),
            timers=tuple(tables.timers_of(execution_id)),
            outbox=tuple(tables.outbox_of(execution_id)),
            spawns=tuple(tables.spawns_of(execution_id)),
            trace=tuple(decode_trace_step(body, index) for index, body in ring),
        )
        return None if record.is_empty else record

    def import_execution(self, prepared: PreparedImport) -> Op[None]:
        """Write an exported record (``ExecutionAlreadyExists``, nothing written, when its
        execution is already stored); relay rows get new ``seq`` values in record order."""
        tables = yield TABLES
        execution_id, imported = prepared.execution_id, prepared.execution
        if imported is not None:
            if execution_id in tables.executions:
                raise ExecutionAlreadyExists(execution_id)
            summary = _summary(execution_id, imported, imported.version, imported.updated_at)
            tables.executions[execution_id] = Row(imported.version, imported.document, summary)
        for event_id, recorded_at in prepared.processed:
            tables.marks.setdefault((execution_id, event_id), recorded_at)
        for path, fire_at in prepared.timers:
            tables.timers[(execution_id, path)] = fire_at
        for emit in prepared.emits:
            tables.add_outbox(emit.target_id, emit.event_json)
        for spawn in prepared.spawns:
            tables.add_spawn(execution_id, spawn.child_id, spawn.root_path, spawn.context_json)
        for index, body in prepared.trace:
            tables.trace.setdefault(execution_id, {})[index] = body
        for change in import_touches(prepared):
            tables.touch(change)


PLAN = TutorialPlan()
"""The plan every tutorial store drives."""

# -- 3. the sync store ------------------------------------------------------------------------


class TutorialStore(FromUrl, PlanStore[TutorialPlan]):
    """A thread-safe :class:`~harel.store.contract.ExecutionStore` over one :class:`Tables`.

    Every contract method comes from :class:`~harel.store.author.PlanStore` and runs one plan
    operation whole under the dataset's lock, so each is atomic and operations never
    interleave.  ``dataset`` is a :class:`Tables`, or the name of this process's dataset
    (``""``: a new private one); stores over the same tables share their data (a restart, in
    memory).  ``trace_max`` is the only knob; after :meth:`close` every call raises.
    """

    capabilities: ClassVar[Capabilities] = CAPABILITIES
    spec: ClassVar[BackendSpec] = SPEC

    def __init__(self, dataset: Tables | str = "", **knobs: Any) -> None:
        self.trace_max: int | None = SPEC.knob_values(knobs)["trace_max"]
        self.tables = dataset if isinstance(dataset, Tables) else Tables.named(dataset)
        self._plan = PLAN
        self._closed = False

    def _run(self, operation: Op[T]) -> T:
        """Drive one operation to its value under the lock (its errors propagate as raised)."""
        if self._closed:
            raise StoreError(f"{self!r} is closed; open a new store")
        with self.tables.lock:
            return drive(operation, self._answer)

    def _answer(self, request: Literal["tables"]) -> Tables:
        """The driver's side of the plan's one request."""
        return self.tables

    def close(self) -> None:
        """Refuse every later call (the data stays with the other stores over it)."""
        self._closed = True

    def __repr__(self) -> str:
        return f"TutorialStore(executions={len(self.tables.executions)})"


# -- 4. the async store -----------------------------------------------------------------------


class AsyncTutorialStore(AsyncFromUrl, ThreadedAsyncStore[TutorialStore]):
    """The :class:`~harel.store.contract.AsyncExecutionStore` twin: a :class:`TutorialStore`
    owned by one worker thread, every contract method run whole there (one thread hop each;
    a cancelled call returns once its operation was withdrawn or finished)."""

    capabilities: ClassVar[Capabilities] = CAPABILITIES
    spec: ClassVar[BackendSpec] = SPEC

    @classmethod
    async def open(cls, dataset: Tables | str = "", **knobs: Any) -> Self:
        """Build the sync store (same arguments) in a new worker thread."""
        return await cls.start(partial(TutorialStore, dataset, **knobs), name="harel-tutorial")
