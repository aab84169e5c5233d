"""The store's operations as sans-IO plans: generators that yield file requests.

Every contract operation is one generator method of :class:`JsonDirPlan` (the
:class:`~harel.store.common.ContractPlan` of this store).  It validates its arguments first (a
wrong type raises ``TypeError``/``ValueError`` before anything is read), then yields requests — a
:class:`Read` of one file, a :class:`Write` of several files at once, a :class:`Pause` between
two batches — receives each request's result, and returns the operation's value or raises its
typed error.  Nothing here touches the disk: ``sync.py`` runs a plan under the directory lock
with :func:`harel.store.author.drive`, handing each request to the file layer (``_files``).

The rules of the store live here once: the layout check and upgrade at open, the CAS (with the
commit's dedupe check and fence), what a commit, a purge, a prune or an import writes, the
trace ring, the decoding of stored records (a record that does not decode raises
:class:`~harel.store.errors.StoreCorrupted` naming it).
One exception to the last rule keeps a worker serving: a sweep (``pending_outbox``,
``pending_spawns``) that meets an entry it cannot decode moves it to the quarantine of
``state.json`` with a logged warning and returns the others; reading that entry's owner
directly (``export_execution``) still raises ``StoreCorrupted``.

Claims are the simplest thing that is correct here: the work rows live in ``state.json``
beside the tables they describe, so a commit's, an enqueue's, an import's or a purge's
work-row changes ride in the ``state.json`` write it makes anyway, and ``claim``, ``renew`` and
``release`` are each one read and (when something changed) one write of ``state.json`` under
the directory lock.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, TypeVar

from harel.model import Execution, ExecutionPage
from harel.store.author import (
    MAX_DOCUMENT_BYTES,
    ListingQuery,
    PreparedCommit,
    PreparedEnqueue,
    PreparedImport,
    SchemaVerdict,
    Stored,
    WorkRow,
    base_holds,
    cas_decision,
    check_event_ref,
    check_flag,
    check_id,
    check_now,
    check_prune,
    check_seq,
    check_timer_ref,
    decode_event,
    decode_execution,
    decode_payload,
    decode_trace_step,
    encode_trace_step,
    held_leases,
    lease_lost,
    open_flow,
    page_from_probe,
    refuse_lost,
    release_of,
    show,
    sweep_limit,
    take_units,
    trace_keep_from,
)
from harel.store.contract import (
    FINISHED,
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
    StoreCorrupted,
)

from harel_example_jsondir import _schema
from harel_example_jsondir._state import Relay, StoreState, TraceRing

T = TypeVar("T")
_log = logging.getLogger("harel_example_jsondir")


@dataclass(frozen=True, slots=True)
class Read:
    """Read one file; the result is its text, ``None`` when it does not exist."""

    path: str


@dataclass(frozen=True, slots=True)
class Write:
    """Replace (a text) or delete (``None``) these files, all of them or none; result ``None``."""

    files: tuple[tuple[str, str | None], ...]


@dataclass(frozen=True, slots=True)
class Pause:
    """Release the directory lock and take it again (lets others in between two batches)."""


Request = Read | Write | Pause
Plan = Generator[Request, Any, T]
"""A plan yields requests, is sent their results, and returns ``T``."""

_FINISHED = frozenset(status.value for status in FINISHED)


# -- reading and decoding --------------------------------------------------------------------


def read_state() -> Plan[StoreState]:
    """Read and parse ``state.json``."""
    return StoreState.parse((yield Read(_schema.STATE)))


def read_ring(execution_id: str) -> Plan[TraceRing]:
    """Read and parse the trace ring of ``execution_id``."""
    return TraceRing.parse((yield Read(_schema.trace_path(execution_id))), execution_id)


def decode_document(text: str, execution_id: str) -> Execution:
    """The stored execution; ``StoreCorrupted`` unless the document is that execution's."""
    what = f"the document of execution {show(execution_id)}"
    exe = decode_execution(text, what=what)
    if exe.id != execution_id:
        raise StoreCorrupted(f"{what} holds execution {show(exe.id)}; remove that file")
    return exe


def outbox_entry(seq: int, row: tuple[str | None, str]) -> OutboxEntry:
    """Decode one outbox row (``StoreCorrupted`` naming it when it is damaged)."""
    target, event = row
    return OutboxEntry(seq, target, decode_event(event, what=f"outbox entry {seq}"))


def spawn_entry(seq: int, row: tuple[str, str, str, str]) -> SpawnEntry:
    """Decode one spawn row (``StoreCorrupted`` naming it when it is damaged)."""
    parent, child, root, context = row
    decoded = decode_payload(context, what=f"spawn intent {seq}")
    if not isinstance(decoded, dict):
        raise StoreCorrupted(f"spawn intent {seq} has a context that is not an object")
    return SpawnEntry(seq, parent, child, root, decoded)


def _set_aside(state: StoreState, table: Relay, seq: int, why: str) -> None:
    """Quarantine a relay entry that does not decode, with one logged warning."""
    _log.warning("jsondir: %s entry %d quarantined, the others are served: %s", table, seq, why)
    state.set_aside(table, seq, why)


def _decoded(
    state: StoreState, table: Relay, seqs: list[int], want: int, decode: Callable[[int, Any], T]
) -> list[T]:
    """The first ``want`` of these entries that decode, in ``seqs`` order; the damaged ones
    met on the way are quarantined (:func:`_set_aside`)."""
    rows: dict[int, Any] = state.outbox if table == "outbox" else state.spawns
    found: list[T] = []
    for seq in seqs:
        if len(found) >= want:
            break
        try:
            found.append(decode(seq, rows[seq]))
        except StoreCorrupted as exc:
            _set_aside(state, table, seq, str(exc))
    return found


def _owned_entries(
    state: StoreState, execution_id: str
) -> tuple[tuple[OutboxEntry, ...], tuple[SpawnEntry, ...]]:
    """The outbox entries targeted at / spawn intents written by ``execution_id``, decoded;
    ``StoreCorrupted`` when one of them is damaged or was quarantined by a sweep."""
    for seq, (table, _, why) in state.quarantined_of(execution_id)[:1]:
        raise StoreCorrupted(
            f"{table} entry {seq} of execution {show(execution_id)} was quarantined ({why}); "
            "repair or remove it in state.json's quarantine"
        )
    _, _, outbox, spawns = state.record_parts(execution_id)
    return (
        tuple(outbox_entry(seq, state.outbox[seq]) for seq in outbox),
        tuple(spawn_entry(seq, state.spawns[seq]) for seq in spawns),
    )


class JsonDirOpen(_schema.JsonDirLayout):
    """The jsondir's steps of the shared open flow.  No lock of its own: the driver holds the
    directory's file lock around every operation.  ``create`` and ``upgrade`` build the new
    ``state.json`` object; ``record`` writes it (one journaled write)."""

    def __init__(self, now: float) -> None:
        super().__init__(_schema.STATE)
        self.now = now
        self.text: str | None = None
        self.data: dict[str, Any] = {}
        self.state = StoreState()

    def probe(self) -> Plan[Stored]:
        self.text = yield Read(_schema.STATE)
        if self.text is None:
            return Stored()
        try:
            self.data = _schema.check_object(json.loads(self.text), _schema.STATE)
        except ValueError as exc:
            raise StoreCorrupted(f"{_schema.STATE} is not JSON ({exc}); restore it") from exc
        written_by = self.data.get("written_by")
        return Stored(self.data["format"], written_by if isinstance(written_by, str) else None)

    def verdict(self, found: Stored) -> SchemaVerdict:
        verdict = super().verdict(found)
        if verdict == "ready":
            StoreState.parse(self.text)
        return verdict

    def create(self) -> Plan[None]:
        yield from ()
        self.state = StoreState(written_by=release_of(_schema.DISTRIBUTION))

    def upgrade(self, version: int) -> Plan[None]:
        yield from ()
        upgraded = _schema.upgrade_state(self.data, release_of(_schema.DISTRIBUTION))
        self.state = StoreState.parse(json.dumps(upgraded))
        self.state.backfill_work(self.now)

    def record(self, found: Stored) -> Plan[None]:
        yield Write(((_schema.STATE, self.state.dump()),))


# -- the contract's operations ----------------------------------------------------------------


class JsonDirPlan:
    """One generator per contract operation, plus :meth:`open_directory` (stateless)."""

    max_document_bytes: int = MAX_DOCUMENT_BYTES

    def open_directory(self, now: float) -> Plan[None]:
        """Check the layout: create it in an empty directory, upgrade an older format in one
        journaled write (work rows backfilled, relays as written at ``now``), refuse a newer one
        before writing anything (``SchemaVersionError``): the shared open flow fed with
        :class:`JsonDirOpen`."""
        yield from open_flow(JsonDirOpen(now))

    def load(self, execution_id: str) -> Plan[Execution | None]:
        """A fresh copy of the stored execution, or ``None``."""
        check_id(execution_id)
        text = yield Read(_schema.document_path(execution_id))
        return None if text is None else decode_document(text, execution_id)

    def load_for_event(
        self, execution_id: str, event_id: str
    ) -> Plan[tuple[Execution | None, bool]]:
        """``load`` plus whether ``event_id`` was already processed by that execution."""
        check_event_ref(execution_id, event_id)
        text = yield Read(_schema.document_path(execution_id))
        if text is None:
            return None, False
        state = yield from read_state()
        return decode_document(text, execution_id), state.is_processed(execution_id, event_id)

    def commit(self, prepared: PreparedCommit, trace_max: int | None) -> Plan[None]:
        """Check the commit against the ``state.json`` it reads and write the step's effects,
        in one :class:`Write` — or write nothing and raise.

        Under the one hold of the directory lock, before anything is written: the dedupe mark
        of ``processed_event_id`` must not be stored (else ``AlreadyProcessed``), the stored
        version must be ``expected_version`` and, for a fenced update (``prepared.base``), the
        stored receipt of that version must be the fence (else ``StoreConflict``); a re-send
        of a stored commit (its receipt is stored) answers success instead, writing nothing.
        """
        trace_keep_from(0, trace_max)  # a bad trace_max fails before any IO
        execution_id = prepared.execution_id
        state = yield from read_state()
        found = state.version_of(execution_id)
        marked = prepared.processed_event_id is not None and state.is_processed(
            execution_id, prepared.processed_event_id
        )
        if (
            marked  # the event was processed before
            or cas_decision(prepared.expected_version, found) == "conflict"
            or (  # a fenced update: the stored version must be the one this copy stored
                found is not None
                and not base_holds(prepared, state.receipt_of(execution_id, found))
            )
        ):
            receipt = state.receipt_of(execution_id, prepared.new_version)
            error = refuse_lost(prepared, found, receipt, marked)
            if error is None:
                return  # a re-send of a stored commit: it succeeded once, write nothing again
            raise error
        state.apply(prepared)
        files: list[tuple[str, str | None]] = [
            (_schema.document_path(execution_id), prepared.document),
            (_schema.STATE, state.dump()),
        ]
        if prepared.trace is not None:
            ring = yield from read_ring(execution_id)
            ring.append(prepared.trace, trace_max)
            files.append((_schema.trace_path(execution_id), ring.dump()))
        yield Write(tuple(files))

    def enqueue(self, prepared: PreparedEnqueue) -> Plan[int]:
        """Write one outbox entry for the target and its work-row touch, in one
        :class:`Write` of ``state.json`` (the target's document is not read); the entry's seq."""
        state = yield from read_state()
        seq = state.enqueue(prepared)
        yield Write(((_schema.STATE, state.dump()),))
        return seq

    def is_processed(self, execution_id: str, event_id: str) -> Plan[bool]:
        """Whether that execution already processed that event."""
        check_event_ref(execution_id, event_id)
        state = yield from read_state()
        return state.is_processed(execution_id, event_id)

    def _update_state(self, change: Callable[[StoreState], bool]) -> Plan[None]:
        """Apply ``change`` to the state and write it back when it reports a change."""
        state = yield from read_state()
        if change(state):
            yield Write(((_schema.STATE, state.dump()),))

    def _sweep(
        self, table: Relay, limit: int | None, decode: Callable[[int, Any], T]
    ) -> Plan[list[T]]:
        """The oldest ``limit`` entries of a relay that decode; the ones met on the way that
        do not are quarantined (one write, one warning each) instead of failing the sweep."""
        sweep_limit(limit)
        state = yield from read_state()
        rows: dict[int, Any] = state.outbox if table == "outbox" else state.spawns
        found: list[T] = []
        damaged: list[tuple[int, str]] = []
        for seq in sorted(rows):
            if limit is not None and len(found) >= limit:
                break
            try:
                found.append(decode(seq, rows[seq]))
            except StoreCorrupted as exc:
                damaged.append((seq, str(exc)))
        for seq, why in damaged:
            _set_aside(state, table, seq, why)
        if damaged:
            yield Write(((_schema.STATE, state.dump()),))
        return found

    def pending_outbox(self, limit: int | None) -> Plan[list[OutboxEntry]]:
        """Undelivered events, oldest first (damaged entries quarantined, not returned)."""
        return (yield from self._sweep("outbox", limit, outbox_entry))

    def ack_outbox(self, seq: int) -> Plan[None]:
        """Forget a delivered event (unknown seq: no-op)."""
        yield from self._ack("outbox", seq)

    def _ack(self, table: Relay, seq: int) -> Plan[None]:
        check_seq(seq)
        yield from self._update_state(lambda state: state.drop_relay(table, seq))

    def pending_spawns(self, limit: int | None) -> Plan[list[SpawnEntry]]:
        """Uncreated children, oldest first (damaged intents quarantined, not returned)."""
        return (yield from self._sweep("spawns", limit, spawn_entry))

    def ack_spawn(self, seq: int) -> Plan[None]:
        """Forget a created child's intent (unknown seq: no-op)."""
        yield from self._ack("spawns", seq)

    def due_timers(self, now: float, limit: int | None) -> Plan[list[DueTimer]]:
        """Armed timers with ``fire_at <= now``, ascending by ``(fire_at, id, path)``."""
        moment = check_now(now)
        sweep_limit(limit)
        state = yield from read_state()
        return state.due(moment)[:limit]

    def delete_timer(self, execution_id: str, path: str, fire_at: float) -> Plan[None]:
        """Disarm a timer only if it still holds exactly ``fire_at``."""
        execution_id, path, expected = check_timer_ref(execution_id, path, fire_at)
        key = (execution_id, path)

        def disarm(state: StoreState) -> bool:
            if key in state.timers and state.timers[key] == expected:
                del state.timers[key]
                return True
            return False

        yield from self._update_state(disarm)

    def read_trace(self, execution_id: str) -> Plan[list[dict[str, Any]]]:
        """The retained trace steps, oldest first, each with its ``index``."""
        check_id(execution_id)
        ring = yield from read_ring(execution_id)
        what = f"a trace step of execution {show(execution_id)}"
        return [decode_trace_step(body, index, what=what) for index, body in ring.ordered()]

    def append_trace(
        self, execution_id: str, entry: dict[str, Any], trace_max: int | None
    ) -> Plan[None]:
        """Append a step outside a commit; an unknown execution raises ``ExecutionNotFound``."""
        check_id(execution_id)
        body = encode_trace_step(entry)
        trace_keep_from(0, trace_max)
        state = yield from read_state()
        if state.version_of(execution_id) is None:
            raise ExecutionNotFound(execution_id)
        ring = yield from read_ring(execution_id)
        ring.append(body, trace_max)
        yield Write(((_schema.trace_path(execution_id), ring.dump()),))

    def list_executions(self, query: ListingQuery) -> Plan[ExecutionPage]:
        """One page of summaries ordered by id (keyset cursor, exact pages)."""
        if query.matches_nothing:
            return ExecutionPage()
        state = yield from read_state()
        rows = [
            summary
            for summary in state.summaries()
            if (query.after is None or summary.id > query.after) and query.matches(summary)
        ]
        return page_from_probe(query, rows[: query.limit + 1])

    def purge(self, execution_id: str, force: bool) -> Plan[bool]:
        """Remove the execution and everything that belongs to it, in one :class:`Write`.

        Returns whether the execution was stored; refuses an unfinished one unless ``force``.
        """
        check_id(execution_id)
        check_flag(force, "force")
        state = yield from read_state()
        status = state.status_of(execution_id)
        if status is not None and status not in _FINISHED and not force:
            raise ExecutionActive(execution_id, status)
        if state.forget(execution_id):
            yield Write(
                (
                    (_schema.STATE, state.dump()),
                    (_schema.document_path(execution_id), None),
                    (_schema.trace_path(execution_id), None),
                )
            )
        return status is not None

    def prune_processed(self, older_than: float, batch_size: int) -> Plan[int]:
        """Drop dedupe marks recorded before ``older_than``, ``batch_size`` per write.

        The lock is released between two batches (:class:`Pause`), so a long prune never keeps
        writers out for long; returns how many marks were dropped.
        """
        cutoff, size = check_prune(older_than, batch_size)
        dropped = 0
        while True:
            state = yield from read_state()
            batch = state.marks_before(cutoff, size)
            if not batch:
                return dropped
            state.drop_marks(batch)
            yield Write(((_schema.STATE, state.dump()),))
            dropped += len(batch)
            if len(batch) < size:
                return dropped
            yield Pause()

    def export_execution(self, execution_id: str) -> Plan[ExecutionRecord | None]:
        """Everything stored for the id, read under one hold of the lock (``None``: nothing).

        A damaged or quarantined record of the id raises ``StoreCorrupted`` naming it.
        """
        check_id(execution_id)
        state = yield from read_state()
        text = yield Read(_schema.document_path(execution_id))
        ring = yield from read_ring(execution_id)
        marks, timers, _, _ = state.record_parts(execution_id)
        outbox, spawns = _owned_entries(state, execution_id)
        row = state.executions.get(execution_id)
        what = f"a trace step of execution {show(execution_id)}"
        record = ExecutionRecord(
            execution_id=execution_id,
            execution=None if text is None else decode_document(text, execution_id),
            updated_at=None if row is None else _updated_at(row, execution_id),
            processed=tuple(marks),
            timers=tuple(timers),
            outbox=outbox,
            spawns=spawns,
            trace=tuple(decode_trace_step(b, i, what=what) for i, b in ring.ordered()),
        )
        return None if record.is_empty else record

    def import_execution(self, prepared: PreparedImport) -> Plan[None]:
        """Write a record in one :class:`Write` (document, state, trace ring); refuses an
        execution already stored with ``ExecutionAlreadyExists`` before writing anything."""
        execution_id = prepared.execution_id
        state = yield from read_state()
        files: list[tuple[str, str | None]] = []
        if prepared.execution is not None:
            if state.version_of(execution_id) is not None:
                raise ExecutionAlreadyExists(execution_id)
            files.append((_schema.document_path(execution_id), prepared.execution.document))
        state.apply_import(prepared)
        files.append((_schema.STATE, state.dump()))
        if prepared.trace:
            ring = TraceRing(execution_id, prepared.trace[-1][0], dict(prepared.trace))
            files.append((_schema.trace_path(execution_id), ring.dump()))
        yield Write(tuple(files))

    # -- claims -------------------------------------------------------------------------------

    def claim(self, owner: str, now: float, lease: float, limit: int) -> Plan[list[Claim]]:
        """Lease up to ``limit`` due units, grouped, in claim order: one read and (when a
        ready row was met) one write of ``state.json``, all under the directory lock."""
        state = yield from read_state()
        claims: list[Claim] = []
        budget = limit
        ready = state.ready_work(now, limit)
        for row in ready:
            if not budget:
                break
            timers, outbox_seqs, spawn_seqs = state.units_of(row.key)
            spawns = _decoded(state, "spawns", spawn_seqs, budget, spawn_entry)
            outbox = _decoded(state, "outbox", outbox_seqs, budget - len(spawns), outbox_entry)
            claim = take_units(row, budget, now, timers, outbox, spawns, owner, now + lease)
            if claim is None:  # an early row: nothing is due behind it
                state.settle_work(row, (at for _, at in timers), False, now, None)
                continue
            state.work[row.key] = WorkRow(row.key, row.priority, now + lease, owner)
            claims.append(claim)
            budget -= claim.units
        if ready:
            yield Write(((_schema.STATE, state.dump()),))
        return claims

    def renew(self, owner: str, key: str | None, now: float, lease: float) -> Plan[float]:
        """Extend ``owner``'s unexpired lease to ``now + lease`` (else ``LeaseLost``)."""
        state = yield from read_state()
        row = state.work.get(key)
        if row is None or row.owner != owner or row.ready_at <= now:
            raise lease_lost(row, key, owner, now)
        state.work[key] = WorkRow(key, row.priority, now + lease, owner)
        yield Write(((_schema.STATE, state.dump()),))
        return now + lease

    def release(
        self, owner: str, key: str | None, retry_at: float | None, now: float
    ) -> Plan[None]:
        """Free ``owner``'s lease (expired is fine; else ``LeaseLost``): the row is re-dated
        from the units left (relay units due ``now``, not before ``retry_at``) or dropped."""
        state = yield from read_state()
        row = state.work.get(key)
        if row is None or row.owner != owner:
            raise lease_lost(row, key, owner, None)
        timers, outbox_seqs, spawn_seqs = state.units_of(key)
        fire_ats = (at for _, at in timers)
        state.settle_work(row, fire_ats, bool(outbox_seqs or spawn_seqs), now, retry_at)
        yield Write(((_schema.STATE, state.dump()),))

    def list_leases(self, now: float, limit: int) -> Plan[list[Lease]]:
        """The leases held at ``now``: one read of ``state.json`` (its work rows), no write."""
        state = yield from read_state()
        return held_leases(state.work.values(), now, limit)


def _updated_at(row: dict[str, Any], execution_id: str) -> float | None:
    value = row.get("updated_at")
    if value is not None and not isinstance(value, (int, float)):
        raise StoreCorrupted(f"the index row of execution {show(execution_id)} is damaged")
    return None if value is None else float(value)


PLAN = JsonDirPlan()
"""The plan every jsondir store uses."""
