"""``DictStore``: the synchronous in-memory reference store (thread-safe, copy semantics).

Each contract method checks its arguments with the shared rules of
:mod:`harel.store.common`, then reads and changes the tables of one
:class:`~harel.store.memory._tables.MemoryData` under its lock, so every operation is atomic
and nothing is written before every check passed.  Sweeps and listings read the sorted
indexes from the front (O(log n + k)).  The small ``_`` methods are plain steps of those
operations, separate so a test double can break exactly one of them.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence
from operator import itemgetter
from typing import Any, ClassVar, Self

from harel.model import Event, Execution, ExecutionPage, ExecutionSummary, Status
from harel.store.common import plan_store
from harel.store.common.claims import (
    WorkRow,
    WorkTouch,
    check_claim,
    check_list_leases,
    check_release,
    check_renew,
    claim_order,
    held_leases,
    import_touches,
    lease_lost,
    next_ready,
    take_units,
    touch,
    work_touches,
)
from harel.store.common.codec import decode_event, decode_execution, loads
from harel.store.common.commit import (
    PreparedCommit,
    PreparedEmit,
    PreparedSpawn,
    base_holds,
    cas_decision,
    committing,
    refuse_lost,
)
from harel.store.common.enqueue import PreparedEnqueue, prepare_enqueue
from harel.store.common.listing import ListingQuery, listing_query, page_from_probe
from harel.store.common.records import PreparedImport, prepare_import
from harel.store.common.sweeps import sweep_limit
from harel.store.common.trace import (
    decode_trace_step,
    encode_trace_step,
    next_trace_index,
    trace_keep_from,
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
    DEFAULT_LEASE,
    DEFAULT_PRUNE_BATCH,
    DEFAULT_TRACE_MAX,
    FINISHED,
    Capabilities,
    Claim,
    DueTimer,
    Emit,
    ExecutionRecord,
    Lease,
    OutboxEntry,
    Spawn,
    SpawnEntry,
    TimerOp,
)
from harel.store.errors import ExecutionActive, ExecutionAlreadyExists, ExecutionNotFound
from harel.store.memory._spec import CAPABILITIES, SPEC
from harel.store.memory._tables import (
    MemoryData,
    OutboxRow,
    SpawnRow,
    StoredExecution,
    disown,
    head,
    imported_execution,
    insert,
    remove,
    stored_execution,
)


def _now() -> float:
    """The clock ``release`` and ``import_execution`` read: the plan stores' (so a test that
    fakes their clock fakes the reference store's too)."""
    clock: Any = vars(plan_store)["time"]  # read at each call: a test may have replaced it
    return float(clock.time())


Units = tuple[list[tuple[str, float]], list[OutboxEntry], list[SpawnEntry]]
"""A group's timers ``(path, fire_at)`` by path, its outbox and spawn entries by seq."""


class DictStore:
    """In-memory :class:`~harel.store.contract.ExecutionStore`; every store over one
    :class:`MemoryData` sees the same executions, outbox, timers and traces."""

    capabilities: ClassVar[Capabilities] = CAPABILITIES

    def __init__(
        self, data: MemoryData | None = None, *, trace_max: int | None = DEFAULT_TRACE_MAX
    ) -> None:
        self.data = data if data is not None else MemoryData()
        self.trace_max = trace_max

    @classmethod
    def from_url(cls, url: str = "memory://", **knobs: Any) -> Self:
        """``memory://`` is a fresh store; ``memory://NAME`` shares NAME's data in this process."""
        return cls(**SPEC.open_args(url, knobs).arguments)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(executions={len(self.data.executions)})"

    def reopen(self) -> Self:
        """A second store over the same data (what a restart looks like in memory)."""
        return type(self)(self.data, trace_max=self.trace_max)

    def close(self) -> None:
        """Nothing to release."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- executions and commits -----------------------------------------------------------

    def load(self, execution_id: str) -> Execution | None:
        """A fresh copy of the stored execution, or ``None``."""
        execution_id = check_id(execution_id)
        with self.data.lock:
            row = self.data.executions.get(execution_id)
        return None if row is None else decode_execution(row.document)

    def load_for_event(self, execution_id: str, event_id: str) -> tuple[Execution | None, bool]:
        """The execution and whether it processed ``event_id``, read together."""
        execution_id, event_id = check_event_ref(execution_id, event_id)
        with self.data.lock:
            row = self.data.executions.get(execution_id)
            seen = row is not None and self._marked(execution_id, event_id)
        return (None, False) if row is None else (decode_execution(row.document), seen)

    def is_processed(self, execution_id: str, event_id: str) -> bool:
        """Whether that execution already processed that event."""
        execution_id, event_id = check_event_ref(execution_id, event_id)
        with self.data.lock:
            return self._marked(execution_id, event_id)

    def _marked(self, execution_id: str, event_id: str) -> bool:
        return event_id in self.data.processed.get(execution_id, {})

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
        """Write one step atomically: all of it, or nothing and ``exe.version`` restored."""
        with committing(exe, emits, processed_event_id, timers, spawns, trace) as prepared:
            self._commit(prepared)

    def _commit(self, prepared: PreparedCommit) -> None:
        """CAS, then every effect of the step, under the lock."""
        trace_keep_from(0, self.trace_max)  # a bad trace_max fails before anything is written
        with self.data.lock:
            row = self.data.executions.get(prepared.execution_id)
            if self._cas(prepared, row):
                self._write_step(prepared, row)

    def _cas(self, prepared: PreparedCommit, row: StoredExecution | None) -> bool:
        """Whether the step is written over ``row``: ``False`` for a re-send of a stored
        commit (it succeeded once); the contract's refusal is raised otherwise."""
        event_id = prepared.processed_event_id
        marked = (
            row is not None
            and event_id is not None
            and self._marked(prepared.execution_id, event_id)
        )
        found = None if row is None else row.version
        if (
            marked
            or cas_decision(prepared.expected_version, found) == "conflict"
            or (row is not None and not base_holds(prepared, row.receipt(row.version)))
        ):
            receipt = None if row is None else row.receipt(prepared.new_version)
            error = refuse_lost(prepared, found, receipt, marked)
            if error is not None:
                raise error
            return False
        return True

    def _write_step(self, prepared: PreparedCommit, previous: StoredExecution | None) -> None:
        execution_id = prepared.execution_id
        self._put_execution(execution_id, stored_execution(prepared, previous))
        for emit in prepared.emits:
            self._add_emit(emit)
        if prepared.processed_event_id is not None:
            self._put_mark(execution_id, prepared.processed_event_id, prepared.committed_at)
        for op in prepared.timers:
            if op.action == "schedule":
                self._put_timer(execution_id, op.path, op.fire_at)
            else:
                self._drop_timer(execution_id, op.path, None)
        for spawn in prepared.spawns:
            self._add_spawn(execution_id, spawn)
        if prepared.trace is not None:
            self._append_step(execution_id, prepared.trace, self.trace_max)
        for change in work_touches(prepared):
            self._touch(change)

    def _put_execution(self, execution_id: str, row: StoredExecution) -> None:
        if execution_id not in self.data.executions:
            insert(self.data.ids, execution_id)
        self.data.executions[execution_id] = row

    # -- dedupe marks -------------------------------------------------------------------------

    def _put_mark(self, execution_id: str, event_id: str, recorded_at: float) -> None:
        marks = self.data.processed.setdefault(execution_id, {})
        if event_id not in marks:  # an existing mark keeps its first age
            marks[event_id] = recorded_at
            insert(self.data.ages, (recorded_at, execution_id, event_id))

    def _drop_mark(self, execution_id: str, event_id: str) -> bool:
        marks = self.data.processed.get(execution_id, {})
        at = marks.pop(event_id, None)
        if at is None:
            return False
        if not marks:
            del self.data.processed[execution_id]
        remove(self.data.ages, (at, execution_id, event_id))
        return True

    def prune_processed(self, older_than: float, *, batch_size: int = DEFAULT_PRUNE_BATCH) -> int:
        """Drop dedupe marks recorded before ``older_than``, one locked batch at a time."""
        before, size = check_prune(older_than, batch_size)
        dropped = 0
        while True:
            with self.data.lock:
                found, count = self._prune_batch(before, size)
            dropped += count
            if found < size:
                return dropped

    def _prune_batch(self, before: float, size: int) -> tuple[int, int]:
        """Drop up to ``size`` of the oldest marks recorded before ``before``: how many were
        found, how many existed."""
        aged = head(self.data.ages, lambda key: key[0] < before, size)
        return len(aged), sum(self._drop_mark(eid, event) for _, eid, event in aged)

    # -- relays -------------------------------------------------------------------------------

    def _add_emit(self, emit: PreparedEmit) -> int:
        seq = self._next_seq()
        self.data.outbox[seq] = OutboxRow(emit.target_id, emit.event_json)
        self.data.outbox_seqs.append(seq)  # seqs only grow: the list stays sorted
        self.data.outbox_of.setdefault(emit.target_id, set()).add(seq)
        return seq

    def _add_spawn(self, parent_id: str, spawn: PreparedSpawn) -> None:
        seq = self._next_seq()
        row = SpawnRow(parent_id, spawn.child_id, spawn.root_path, spawn.context_json)
        self.data.spawns[seq] = row
        self.data.spawn_seqs.append(seq)
        self.data.spawns_of.setdefault(parent_id, set()).add(seq)

    def _next_seq(self) -> int:
        seq = self.data.next_seq
        self.data.next_seq += 1
        return seq

    def pending_outbox(self, *, limit: int | None = None) -> list[OutboxEntry]:
        """Undelivered events, oldest first (at most ``limit``)."""
        limit = sweep_limit(limit)
        with self.data.lock:
            return [self._outbox_entry(seq) for seq in self.data.outbox_seqs[:limit]]

    def pending_spawns(self, *, limit: int | None = None) -> list[SpawnEntry]:
        """Uncreated children, oldest first (at most ``limit``)."""
        limit = sweep_limit(limit)
        with self.data.lock:
            return [self._spawn_entry(seq) for seq in self.data.spawn_seqs[:limit]]

    def _outbox_entry(self, seq: int) -> OutboxEntry:
        row = self.data.outbox[seq]
        return OutboxEntry(seq, row.target_id, decode_event(row.event_json))

    def _spawn_entry(self, seq: int) -> SpawnEntry:
        row = self.data.spawns[seq]
        context = loads(row.context_json)
        return SpawnEntry(seq, row.parent_id, row.child_id, row.root_path, context)

    def ack_outbox(self, seq: int) -> None:
        """Forget a delivered event (unknown seq: no-op)."""
        seq = check_seq(seq)
        with self.data.lock:
            self._ack_outbox(seq)

    def ack_spawn(self, seq: int) -> None:
        """Forget a created child's intent (unknown seq: no-op)."""
        seq = check_seq(seq)
        with self.data.lock:
            self._ack_spawn(seq)

    def _ack_outbox(self, seq: int) -> None:
        row = self.data.outbox.pop(seq, None)
        if row is not None:
            remove(self.data.outbox_seqs, seq)
            disown(self.data.outbox_of, row.target_id, seq)

    def _ack_spawn(self, seq: int) -> None:
        row = self.data.spawns.pop(seq, None)
        if row is not None:
            remove(self.data.spawn_seqs, seq)
            disown(self.data.spawns_of, row.parent_id, seq)

    def enqueue(self, target_id: str, event: Event, *, priority: int = 0) -> int:
        """Write one outbox entry for ``target_id`` (relay work, due at once); its ``seq``."""
        prepared = prepare_enqueue(target_id, event, priority)
        with self.data.lock:
            return self._enqueue(prepared)

    def _enqueue(self, prepared: PreparedEnqueue) -> int:
        seq = self._add_emit(prepared.emit)
        self._touch(prepared.touch)
        return seq

    # -- timers -------------------------------------------------------------------------------

    def _put_timer(self, execution_id: str, path: str, fire_at: float) -> None:
        self._drop_timer(execution_id, path, None)
        self.data.timers.setdefault(execution_id, {})[path] = fire_at
        insert(self.data.due, (fire_at, execution_id, path))

    def _drop_timer(self, execution_id: str, path: str, only_at: float | None) -> None:
        """Disarm the timer: only while it holds exactly ``only_at`` (``None``: any)."""
        paths = self.data.timers.get(execution_id, {})
        at = paths.get(path)
        if at is None or (only_at is not None and at != only_at):
            return
        del paths[path]
        if not paths:
            del self.data.timers[execution_id]
        remove(self.data.due, (at, execution_id, path))

    def due_timers(self, now: float, *, limit: int | None = None) -> list[DueTimer]:
        """Armed timers with ``fire_at <= now``, ascending by ``(fire_at, execution_id, path)``."""
        now, limit = check_now(now), sweep_limit(limit)
        with self.data.lock:
            return self._due(now, limit)

    def _due(self, now: float, limit: int | None) -> list[DueTimer]:
        due = head(self.data.due, lambda key: key[0] <= now, limit)
        return [(execution_id, path, at) for at, execution_id, path in due]

    def delete_timer(self, execution_id: str, path: str, fire_at: float) -> None:
        """Disarm a timer only if it still holds exactly ``fire_at``."""
        execution_id, path, fire_at = check_timer_ref(execution_id, path, fire_at)
        with self.data.lock:
            self._drop_timer(execution_id, path, fire_at)

    # -- traces -------------------------------------------------------------------------------

    def _append_step(self, execution_id: str, body: str, trace_max: int | None) -> None:
        index = next_trace_index(self.data.last_trace_index.get(execution_id))
        self._put_step(execution_id, index, body, trace_keep_from(index, trace_max))

    def _put_step(self, execution_id: str, index: int, body: str, keep_from: int | None) -> None:
        """Store one step, remember its index as the last, drop the steps below ``keep_from``."""
        ring = self.data.trace.setdefault(execution_id, {})
        ring[index] = body
        self.data.last_trace_index[execution_id] = index
        for old in [i for i in ring if keep_from is not None and i < keep_from]:
            del ring[old]

    def append_trace(self, execution_id: str, entry: dict[str, Any]) -> None:
        """Append a step outside a commit; unknown execution raises ``ExecutionNotFound``."""
        execution_id, body = check_id(execution_id), encode_trace_step(entry)
        trace_keep_from(0, self.trace_max)
        with self.data.lock:
            if execution_id not in self.data.executions:
                raise ExecutionNotFound(execution_id)
            self._append_step(execution_id, body, self.trace_max)

    def read_trace(self, execution_id: str) -> list[dict[str, Any]]:
        """The retained trace steps, oldest first, each with its ``index``."""
        execution_id = check_id(execution_id)
        with self.data.lock:
            rows = sorted(self.data.trace.get(execution_id, {}).items())
        return [decode_trace_step(body, index) for index, body in rows]

    # -- listing and purge --------------------------------------------------------------------

    def list_executions(
        self,
        *,
        status: Iterable[Status] | None = None,
        definition_id: str | None = None,
        roots_only: bool = False,
        limit: int = 100,
        cursor: str | None = None,
    ) -> ExecutionPage:
        """One page of summaries ordered by id, with a keyset cursor."""
        query = listing_query(
            status=status,
            definition_id=definition_id,
            roots_only=roots_only,
            limit=limit,
            cursor=cursor,
        )
        with self.data.lock:
            return self._page(query)

    def _page(self, query: ListingQuery) -> ExecutionPage:
        if query.matches_nothing:
            return ExecutionPage()
        return page_from_probe(query, self._scan(query))

    def _scan(self, query: ListingQuery) -> list[ExecutionSummary]:
        """Summaries matching ``query`` with ``id > query.after``, by id, at most
        ``query.limit + 1`` (the probe row tells whether a page follows)."""
        ids, rows = self.data.ids, []
        start = 0 if query.after is None else bisect_right(ids, query.after)
        for at in range(start, len(ids)):
            summary = self.data.executions[ids[at]].summary
            if query.matches(summary):
                rows.append(summary)
                if len(rows) > query.limit:
                    break
        return rows

    def purge(self, execution_id: str, *, force: bool = False) -> bool:
        """Delete the execution and all it owns in one atomic write (``ExecutionActive`` while
        it is not finished, unless ``force``); whether it was stored."""
        execution_id, force = check_id(execution_id), check_flag(force, "force")
        with self.data.lock:
            row = self.data.executions.get(execution_id)
            if row is not None and not force and row.summary.status not in FINISHED:
                raise ExecutionActive(execution_id, row.summary.status.value)
            self._purge_rows(execution_id)
        return row is not None

    def _purge_rows(self, execution_id: str) -> None:
        """Delete every row of the execution: its marks, timers, the outbox rows targeted at
        it, the spawn rows it wrote, its trace and trace counter, its work row, itself."""
        data = self.data
        for event_id in list(data.processed.get(execution_id, ())):
            self._drop_mark(execution_id, event_id)
        for path in list(data.timers.get(execution_id, ())):
            self._drop_timer(execution_id, path, None)
        for seq in list(data.outbox_of.get(execution_id, ())):
            self._ack_outbox(seq)
        for seq in list(data.spawns_of.get(execution_id, ())):
            self._ack_spawn(seq)
        data.trace.pop(execution_id, None)
        data.last_trace_index.pop(execution_id, None)
        self._drop_work(execution_id)
        if data.executions.pop(execution_id, None) is not None:
            remove(data.ids, execution_id)

    # -- export / import ----------------------------------------------------------------------

    def export_execution(self, execution_id: str) -> ExecutionRecord | None:
        """Everything stored for the id, from one consistent read (``None``: nothing)."""
        execution_id = check_id(execution_id)
        with self.data.lock:
            row = self.data.executions.get(execution_id)
            timers, outbox, spawns = self._units(execution_id)
            record = ExecutionRecord(
                execution_id=execution_id,
                execution=None if row is None else decode_execution(row.document),
                updated_at=None if row is None else row.summary.updated_at,
                processed=tuple(sorted(self.data.processed.get(execution_id, {}).items())),
                timers=tuple(timers),
                outbox=tuple(outbox),
                spawns=tuple(spawns),
                trace=tuple(
                    decode_trace_step(body, index)
                    for index, body in sorted(self.data.trace.get(execution_id, {}).items())
                ),
            )
        return None if record.is_empty else record

    def import_execution(self, record: ExecutionRecord) -> None:
        """Write an exported record in one atomic write (``ExecutionAlreadyExists``, nothing
        written, when the execution is already stored)."""
        prepared = prepare_import(record, trace_max=self.trace_max, now=_now())
        with self.data.lock:
            self._import(prepared)

    def _import(self, prepared: PreparedImport) -> None:
        execution_id = prepared.execution_id
        if prepared.execution is not None:
            if execution_id in self.data.executions:
                raise ExecutionAlreadyExists(execution_id)
            self._put_execution(execution_id, imported_execution(execution_id, prepared.execution))
        for event_id, recorded_at in prepared.processed:
            self._put_mark(execution_id, event_id, recorded_at)
        for path, fire_at in prepared.timers:
            self._put_timer(execution_id, path, fire_at)
        for emit in prepared.emits:
            self._add_emit(emit)
        for spawn in prepared.spawns:
            self._add_spawn(execution_id, spawn)
        for index, body in prepared.trace:
            self._put_step(execution_id, index, body, None)
        for change in import_touches(prepared):
            self._touch(change)

    # -- work rows and claims -----------------------------------------------------------------

    def _put_work(self, row: WorkRow) -> None:
        self._drop_work(row.key)
        self.data.work[row.key] = row
        insert(self.data.ready[row.priority], (row.ready_at, row.key or ""))
        if row.owner is not None:
            insert(self.data.leased, (row.ready_at, row.key or ""))

    def _drop_work(self, key: str | None) -> None:
        row = self.data.work.pop(key, None)
        if row is not None:
            remove(self.data.ready[row.priority], (row.ready_at, key or ""))
            if row.owner is not None:
                remove(self.data.leased, (row.ready_at, key or ""))

    def _touch(self, change: WorkTouch) -> None:
        self._put_work(touch(self.data.work.get(change.key), change))

    def _settle(
        self, row: WorkRow, fire_ats: Iterable[float], relay: bool, now: float, retry: float | None
    ) -> None:
        """Re-date a free row from the units it has left (none: drop it)."""
        ready = next_ready(fire_ats, relay, now, retry)
        if ready is None:
            self._drop_work(row.key)
        else:
            self._put_work(WorkRow(row.key, row.priority, ready))

    def _units(self, key: str | None) -> Units:
        data = self.data
        outbox = [self._outbox_entry(seq) for seq in sorted(data.outbox_of.get(key, ()))]
        if key is None:
            return [], outbox, []
        spawns = [self._spawn_entry(seq) for seq in sorted(data.spawns_of.get(key, ()))]
        return sorted(data.timers.get(key, {}).items()), outbox, spawns

    def claim(
        self, owner: str, now: float, *, lease: float = DEFAULT_LEASE, limit: int = 100
    ) -> list[Claim]:
        """Lease up to ``limit`` units of due work, grouped by execution, to ``owner``."""
        checked = check_claim(owner, now, lease, limit)
        with self.data.lock:
            return self._claim(*checked)

    def _claim(self, owner: str, now: float, lease: float, limit: int) -> list[Claim]:
        claims: list[Claim] = []
        budget = limit
        for row in self._ready(now, limit):
            if not budget:
                break
            timers, outbox, spawns = self._units(row.key)
            claim = take_units(row, budget, now, timers, outbox, spawns, owner, now + lease)
            if claim is None:  # an early row: nothing is due behind it
                self._settle(row, [at for _, at in timers], False, now, None)
                continue
            self._put_work(WorkRow(row.key, row.priority, now + lease, owner))
            claims.append(claim)
            budget -= claim.units
        return claims

    def _ready(self, now: float, limit: int) -> list[WorkRow]:
        """Up to ``limit`` ready rows (``ready_at <= now``) of each priority, in claim order."""
        found = [
            self.data.work[key or None]
            for index in self.data.ready.values()
            for _, key in head(index, lambda entry: entry[0] <= now, limit)
        ]
        return claim_order(found)

    def renew(
        self, owner: str, execution_id: str | None, now: float, *, lease: float = DEFAULT_LEASE
    ) -> float:
        """Extend ``owner``'s unexpired lease to ``now + lease``; the new expiry."""
        checked = check_renew(owner, execution_id, now, lease)
        with self.data.lock:
            return self._renew(*checked)

    def _renew(self, owner: str, key: str | None, now: float, lease: float) -> float:
        row = self.data.work.get(key)
        if row is None or row.owner != owner or row.ready_at <= now:
            raise lease_lost(row, key, owner, now)
        self._put_work(WorkRow(key, row.priority, now + lease, owner))
        return now + lease

    def release(
        self, owner: str, execution_id: str | None, *, retry_at: float | None = None
    ) -> None:
        """Give ``owner``'s lease back; what is left is claimable (not before ``retry_at``)."""
        owner, key, retry_at = check_release(owner, execution_id, retry_at)
        now = _now()
        with self.data.lock:
            row = self.data.work.get(key)
            if row is None or row.owner != owner:
                raise lease_lost(row, key, owner, None)
            # what is left decides the row: the relay rows need no decoding for that
            relay = key in self.data.outbox_of or (key is not None and key in self.data.spawns_of)
            fire_ats = self.data.timers.get(key, {}).values() if key is not None else ()
            self._settle(row, fire_ats, relay, now, retry_at)

    def list_leases(self, now: float, *, limit: int = 100) -> list[Lease]:
        """The leases held at ``now`` (``expires_at > now``), by ``(expires_at,
        execution_id)``, at most ``limit``: a read of the ``leased`` index from ``now`` on."""
        checked = check_list_leases(now, limit)
        with self.data.lock:
            return self._leases(*checked)

    def _leases(self, now: float, limit: int) -> list[Lease]:
        index = self.data.leased
        start = bisect_right(index, now, key=itemgetter(0))
        rows = [self.data.work[key or None] for _, key in index[start : start + limit]]
        return held_leases(rows, now, limit)
