"""The SQL family's sans-IO plan: every store operation as a generator of requests.

Each method of :class:`SqlPlan` returns a generator that yields
:class:`~harel.store.common.sql.requests.Statement` (or, for single-request dialects,
:class:`~harel.store.common.sql.requests.Batch`) requests, is sent each request's
:class:`~harel.store.common.sql.requests.Result`, and returns the operation's value or raises
its typed error.  A backend's drivers run them with :func:`harel.store.author.drive` /
:func:`~harel.store.author.adrive`; the control flow (open → schema check → create or upgrade;
begin → CAS → conflict or side writes → commit; the append-trace guard; purge's refusal of an
active execution; prune's batches) exists only here.

Transactions: an interactive dialect gets ``BEGIN``/``COMMIT`` statements, and ``ROLLBACK``
when a request fails (the exception thrown into the plan) or the plan raises; the driver must
still roll back if the plan is abandoned mid-transaction by a ``BaseException`` (a
``KeyboardInterrupt``), which is not thrown into plans.
"""

from __future__ import annotations

import contextlib
import math
import secrets
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict
from operator import attrgetter, itemgetter
from typing import Any, TypeVar

from harel.model import Execution, ExecutionPage, ExecutionSummary, Status
from harel.store.common.claims import (
    WorkRow,
    WorkTouch,
    held_leases,
    import_touches,
    lease_lost,
    outbox_or_damaged,
    relay_due,
    spawn_or_damaged,
    take_units,
    work_touches,
)
from harel.store.common.codec import decode_event, decode_execution, decode_payload
from harel.store.common.commit import (
    RECEIPT_WINDOW,
    PreparedCommit,
    PreparedEmit,
    receipt_slot,
    refuse_lost,
)
from harel.store.common.enqueue import PreparedEnqueue
from harel.store.common.limits import MAX_DOCUMENT_BYTES, MAX_INT
from harel.store.common.listing import ListingQuery, page_from_probe
from harel.store.common.open_flow import open_flow
from harel.store.common.records import PreparedImport
from harel.store.common.sql.dialect import Dialect, Rendered
from harel.store.common.sql.errors import RequestOutcomeUnknown
from harel.store.common.sql.requests import Batch, Result, Statement
from harel.store.common.sql.schema import SqlOpen
from harel.store.common.sql.statements import FINISHED_SLOTS, SqlStatements, statements_for
from harel.store.common.sweeps import sweep_limit
from harel.store.common.trace import decode_trace_step, encode_trace_step, trace_keep_from
from harel.store.common.validate import (
    check_event_ref,
    check_flag,
    check_id,
    check_now,
    check_prune,
    check_seq,
    check_timer_ref,
    show,
)
from harel.store.contract import (
    FINISHED,
    PRIORITY_AGING,
    Claim,
    DueTimer,
    ExecutionRecord,
    Lease,
    OutboxEntry,
    SpawnEntry,
)
from harel.store.errors import (
    CommitOutcomeUnknown,
    ExecutionActive,
    ExecutionAlreadyExists,
    ExecutionNotFound,
    StoreConfigError,
    StoreCorrupted,
    StoreUnavailable,
)

T = TypeVar("T")
Request = Statement | Batch
SqlOp = Generator[Request, Any, T]
"""A SQL-family operation: yields requests, is sent their results, returns ``T``."""

_FINISHED = dict(zip(FINISHED_SLOTS, sorted(status.value for status in FINISHED), strict=True))


class SqlPlan:
    """The operations of one SQL-family database, for one dialect.

    ``where`` names the database in messages (``"SQLite database '/srv/app.db'"``);
    ``distribution`` is the backend's (``"harel-store-sqlite"``); ``max_document_bytes`` is
    the backend's per-document limit, applied to ``append_trace`` (commits get it from
    :func:`~harel.store.common.committing`).  Arguments are validated by
    :mod:`harel.store.common.validate` before any request is yielded.
    """

    def __init__(
        self,
        dialect: Dialect,
        *,
        where: str,
        distribution: str = "harel-core",
        max_document_bytes: int = MAX_DOCUMENT_BYTES,
    ) -> None:
        self.dialect = dialect
        self.sql: SqlStatements = statements_for(dialect)
        self.where = where
        self.distribution = distribution
        """The backend's distribution: its release is recorded as the layout's writer, and
        named in the ``pip install`` line that reads a newer layout."""
        self.max_document_bytes = max_document_bytes
        self._begin = Statement(dialect.begin or "")
        self._commit = Statement(dialect.commit)
        self._rollback = Statement(dialect.rollback)
        self._interactive = dialect.begin is not None
        sql = self.sql
        self._narrow_cas = {
            (False, False): sql.update_state_at,
            (True, False): sql.update_state_fenced_at,
            (False, True): sql.update_state_deduped_at,
            (True, True): sql.update_state_fenced_deduped_at,
        }
        """The narrow CAS by ``(fenced, deduped)``, each by receipt slot."""
        self._full_cas = {
            (False, False): sql.update_execution_at,
            (True, False): sql.update_execution_fenced_at,
            (False, True): sql.update_execution_deduped_at,
            (True, True): sql.update_execution_fenced_deduped_at,
        }
        """The full CAS by ``(fenced, deduped)``, each by receipt slot."""
        self._state_only = tuple(
            (tuple(form.sql for form in forms), _fields_of(forms[0]))
            for forms in (
                sql.update_state_at,
                sql.update_state_fenced_at,
                sql.update_document_fenced_at,
            )
        )
        """A state-only update's first CAS: the narrow one unfenced ``[0]`` and fenced ``[1]``
        (a copy this process stored), the document-only one ``[2]`` (a stored copy whose
        summary columns are the stored ones): its text by receipt slot (every form binds the
        same slots in order) and its parameters read straight off a :class:`PreparedCommit`
        (one C call: no mapping built on a state-only commit's path)."""

    # -- transactions ---------------------------------------------------------------------------

    def _transaction(self, body: SqlOp[T]) -> SqlOp[T]:
        """``body`` between ``BEGIN`` and ``COMMIT``; ``ROLLBACK`` (errors ignored: SQLite may
        have rolled back on its own) when anything in it fails."""
        yield self._begin
        try:
            value = yield from body
            yield self._commit
        except Exception:
            with contextlib.suppress(Exception):
                yield self._rollback
            raise
        return value

    def _atomic(self, statements: Sequence[Statement]) -> SqlOp[list[Result]]:
        """Run ``statements`` all-or-nothing: one ``Batch`` or one interactive transaction."""
        if self.dialect.single_request:
            return list((yield Batch(tuple(statements))))
        return (yield from self._transaction(_each(statements)))

    # -- open -----------------------------------------------------------------------------------

    def open_schema(self, now: float) -> SqlOp[None]:
        """Check the schema version; create it in an empty database or upgrade an older one
        (:class:`~harel.store.common.sql.schema.SqlOpen`'s steps of the shared open flow).

        Safe with concurrent openers: an interactive dialect re-checks inside ``BEGIN
        IMMEDIATE`` (the second opener finds the work done); a single-request dialect re-checks
        after a failed batch.  ``now`` dates the marks of an upgraded database.
        """
        yield from open_flow(SqlOpen(self, now))

    def holds_store(self) -> SqlOp[bool]:
        """Whether the database holds a harel layout (either marker table, so a foreign or
        older layout counts too: opening then reports or upgrades it): one read of the
        catalogue that creates nothing (``open_store(url, create=False)``)."""
        return bool((yield self.sql.tables_probe.bind()).rows)

    # -- commit ---------------------------------------------------------------------------------

    def state_only_cas(self, prepared: PreparedCommit, trace_max: int | None) -> Statement | None:
        """The first statement of :meth:`commit` when ``prepared`` is a state-only update in an
        interactive dialect — one autocommit statement that, when it changes one row, is the
        whole commit — else ``None``.  Pure (no request is made), so a driver may run it
        itself and hand its outcome to :meth:`commit` (``ran``) only when it did not apply.

        It is the narrow CAS (:attr:`SqlStatements.update_state_at`: no index rewritten while
        status, definition and parent stay as stored), fenced for a copy this process stored;
        for a stored copy whose summary columns are the stored ones
        (:attr:`~harel.store.author.PreparedCommit.summary_stored`), the document-only CAS
        (:attr:`SqlStatements.update_document_fenced_at`).  ``trace_max`` is refused here
        when invalid, before anything runs.
        """
        p = prepared
        trace_keep_from(0, trace_max)  # validates trace_max before anything runs
        if (
            _side_fields(p) != _NO_SIDE_WRITES  # has_side_writes, in one C comparison
            or p[_EXPECTED] == 0  # an insert (fields by index: every commit's path)
            or not self._interactive
        ):
            return None
        fenced = p[_BASE] is not None
        texts, fields = self._state_only[fenced + (fenced and p.summary_stored)]
        statement: Statement = _new_statement(
            Statement, (texts[receipt_slot(p.new_version)], fields(p))
        )
        return statement

    def commit(
        self,
        prepared: PreparedCommit,
        trace_max: int | None,
        ran: Result | Exception | None = None,
    ) -> SqlOp[None]:
        """Write ``prepared`` atomically: the CAS (which also records the commit's token in
        the receipt column of its new version), then every side write.  The CAS itself
        carries the commit's conditions: the stored version is ``expected_version``; for a
        fenced update (:attr:`~harel.store.author.PreparedCommit.base`) the receipt of that
        version is the fence; for a commit with a ``processed_event_id`` no mark of it is
        stored.  When it changes no row nothing is written and the found version, receipt
        ring and mark are read (:func:`settle_lost_cas`): a commit whose token wrote the
        version it writes was already stored (a re-send) and returns as the original did; a
        recorded event id raises :class:`~harel.store.errors.AlreadyProcessed`; any other
        miss :class:`StoreConflict`.

        Interactive dialects try a narrow CAS first (:meth:`state_only_cas` for a state-only
        update; :attr:`SqlStatements.update_state_at` inside the side writes' transaction),
        then the full one; a commit without side writes runs them as autocommit statements
        (one statement is atomic, and skipping ``BEGIN``/``COMMIT`` saves two driver calls).
        A single-request dialect cannot branch inside its one request: it sends the full CAS.

        ``ran``: the driver already ran :meth:`state_only_cas`'s statement itself, and this is
        its result (one that changed no row) or the exception it raised; the plan goes on
        from there exactly as if it had yielded that statement.
        """
        p = prepared
        first = self.state_only_cas(p, trace_max)  # validates trace_max before anything runs
        try:  # free on the happy path (zero-cost exception handling)
            sql = self.sql
            interactive = self._interactive
            insert = p.expected_version == 0
            slot = receipt_slot(p.new_version)
            fenced = p.base is not None  # never on an insert: nothing stored it before
            if first is not None:
                # the hot path, a state-only update: one autocommit statement; when it misses
                # (the summary changed, or the CAS is refused) the full CAS decides
                if isinstance(ran, Exception):
                    raise ran  # as if thrown into the plan at the statement
                result: Result = (yield first) if ran is None else ran
                if result.rowcount == 1:
                    return
            deduped = p.processed_event_id is not None
            token = None if interactive else secrets.token_hex(16)  # a single request's owner
            values = {
                "id": p.execution_id,
                "definition_id": p.definition_id,
                "status": p.status,
                "outcome": p.outcome,
                "active_path": p.active_path,
                "parent_id": p.parent_id,
                "version": p.new_version,
                "data": p.document,
                "updated_at": p.committed_at,
                "token": token,
                "receipt": p.token,
                "expected": p.expected_version,
                "base": p.base,
                "event_id": p.processed_event_id,
            }
            # an insert needs no dedupe condition: a mark is never stored without its execution
            # (purge deletes both; an import refuses marks without one), and an existing row
            # already refuses the insert
            full = (sql.insert_execution_at if insert else self._full_cas[fenced, deduped])[slot]
            effects = list(self._side_writes(p, token, trace_max)) if p.has_side_writes else []
            row: Sequence[Any] | None = None
            if self.dialect.batch_reads:  # the found version rides in the commit's own request
                found = sql.found_receipts.bind_map(values)
                results = yield Batch((full.bind_map(values), *effects, found))
                applied, row = results[0].rowcount == 1, results[-1].first
            elif not interactive:
                applied = (yield Batch((full.bind_map(values), *effects)))[0].rowcount == 1
            elif effects:
                # bound lazily: the full CAS only when the narrow one missed
                forms = (full,) if insert else (self._narrow_cas[fenced, deduped][slot], full)
                casts = (form.bind_map(values) for form in forms)
                applied = yield from self._transaction(_cas_then(casts, effects))
            else:  # an insert, or a state-only update whose narrow CAS missed above
                applied = (yield full.bind_map(values)).rowcount == 1
            if not applied:
                if not self.dialect.batch_reads:
                    row = (yield sql.found_receipts.bind_map(values)).first
                settle_lost_cas(p, row)  # returns only for a re-send of a stored commit
        except RequestOutcomeUnknown as unknown:
            # the CAS or the COMMIT may have been applied: the caller must re-send to settle it
            raise CommitOutcomeUnknown(p.execution_id, p.expected_version, str(unknown)) from None

    def _side_writes(
        self, p: PreparedCommit, token: str | None, trace_max: int | None
    ) -> Iterator[Statement]:
        sql, owner = self.sql, {"id": p.execution_id, "token": token}
        for emit in p.emits:
            yield _outbox_row(sql.insert_outbox, emit, owner)
        if p.processed_event_id is not None:
            yield sql.mark_processed.bind(event_id=p.processed_event_id, at=p.committed_at, **owner)
        for spawn in p.spawns:
            yield sql.insert_spawn.bind(
                child=spawn.child_id, root=spawn.root_path, context=spawn.context_json, **owner
            )
        for op in p.timers:
            if op.action == "schedule":
                yield sql.schedule_timer.bind(
                    path=op.path, fire_at=op.fire_at, fire_at_repr=repr(op.fire_at), **owner
                )
            else:
                yield sql.cancel_timer.bind(path=op.path, **owner)
        if p.trace is not None:
            yield sql.append_trace.bind(entry=p.trace, **owner)
            if trace_max:
                yield sql.trim_trace.bind(keep=trace_max, **owner)
        for change in work_touches(p):  # empty unless the commit arms, spawns or emits
            yield from _touched(sql.touch_work, change, owner)

    # -- enqueue --------------------------------------------------------------------------------

    def enqueue(self, prepared: PreparedEnqueue) -> SqlOp[int]:
        """Write one outbox entry for ``prepared.target_id`` and its target's work-row touch
        (:attr:`~harel.store.common.enqueue.PreparedEnqueue.touch`, the rows a commit's emit
        writes), all-or-nothing, without reading the target; returns the entry's ``seq``.

        An interactive dialect runs ``BEGIN IMMEDIATE``, the insert (``RETURNING seq``), the
        touch and ``COMMIT``; a single-request dialect sends both writes as ONE batch (rqlite:
        one ``/db/execute?transaction``) and reads the seq from the insert's rowid.
        """
        sql = self.sql
        statements = [
            _outbox_row(sql.enqueue_outbox, prepared.emit, _NO_OWNER),
            *_touched(sql.touch_work_free, prepared.touch, _NO_OWNER),
        ]
        results = yield from self._atomic(statements)
        inserted = results[0]
        row = inserted.first
        seq = row[0] if row is not None else inserted.last_id
        if seq is None:
            raise StoreUnavailable(
                f"{self.where} stored an outbox entry for {show(prepared.target_id)} without "
                "telling its seq (the entry may be stored: a re-send is delivered once)"
            )
        return int(seq)

    # -- trace ----------------------------------------------------------------------------------

    def append_trace(
        self, execution_id: str, entry: dict[str, Any], trace_max: int | None
    ) -> SqlOp[None]:
        """Append one step outside a commit (same index and ring rules); the insert itself
        checks that the execution exists, else :class:`ExecutionNotFound` and nothing written."""
        execution_id = check_id(execution_id)
        trace_keep_from(0, trace_max)
        body = encode_trace_step(entry, max_document_bytes=self.max_document_bytes)
        statements = [self.sql.append_trace_alone.bind(id=execution_id, entry=body)]
        if trace_max:
            statements.append(self.sql.trim_trace_alone.bind(id=execution_id, keep=trace_max))
        if self.dialect.single_request:
            results = yield from self._atomic(statements)
        else:
            results = yield from self._transaction(_guarded(statements))
        if not results or results[0].rowcount != 1:
            raise ExecutionNotFound(execution_id)

    def read_trace(self, execution_id: str) -> SqlOp[list[dict[str, Any]]]:
        """The retained steps, oldest first (the column's index wins)."""
        execution_id = check_id(execution_id)
        rows = (yield self.sql.read_trace.bind(id=execution_id)).rows
        return [
            decode_trace_step(entry, int(idx), what=f"trace step {idx} of {execution_id!r}")
            for idx, entry in rows
        ]

    # -- retention ------------------------------------------------------------------------------

    def purge(self, execution_id: str, force: bool) -> SqlOp[bool]:
        """Delete the execution and everything it owns in one transaction; ``True`` when the
        execution existed.  An active one (not finished) is left whole and raises
        :class:`ExecutionActive` unless ``force``."""
        execution_id = check_id(execution_id)
        values = {"id": execution_id, "force": int(check_flag(force, "force")), **_FINISHED}
        deletes = [s.bind(**values) for s in self.sql.purge]
        status = self.sql.execution_status.bind(id=execution_id)
        if self.dialect.batch_reads:  # the status (read before the deletes) in the same request
            results = list((yield Batch((status, *deletes))))
            row = results[0].first
        else:
            results = yield from self._atomic(deletes)
        if results[-1].rowcount > 0:
            return True
        if not self.dialect.batch_reads:
            row = (yield status).first
        if row is not None:
            raise ExecutionActive(execution_id, str(row[0]))
        return False

    def prune_processed(self, older_than: float, batch_size: int) -> SqlOp[int]:
        """Drop dedupe marks recorded before ``older_than``, at most ``batch_size`` per
        statement (each its own short write); returns how many were dropped."""
        cutoff, batch_size = check_prune(older_than, batch_size)
        statement = self.sql.prune_processed.bind(older_than=cutoff, batch=batch_size)
        dropped = 0
        while True:
            count = max(int((yield statement).rowcount), 0)
            dropped += count
            if count < batch_size:
                return dropped

    def footprint(self, execution_id: str) -> SqlOp[list[str]]:
        """Every row ``execution_id`` owns, one label each (``"execution"``, ``"processed:EV"``,
        ``"timer:PATH"``, ``"outbox:SEQ"``, ``"spawn:SEQ"``, ``"trace:IDX"``): what a test
        harness reports as the dataset's footprint of one execution."""
        labels: list[str] = []
        for label, query in self.sql.footprint:
            for (key,) in (yield query.bind(id=execution_id)).rows:
                labels.append(label if label == "execution" else f"{label}:{key}")
        return labels

    # -- records --------------------------------------------------------------------------------

    def export_execution(self, execution_id: str) -> SqlOp[ExecutionRecord | None]:
        """Everything stored for the id from ONE statement (one snapshot in every dialect),
        or ``None`` when nothing is stored for it."""
        execution_id = check_id(execution_id)
        rows = (yield self.sql.export.bind(id=execution_id)).rows
        if not rows:
            return None
        return _record(execution_id, rows, self.where)

    def import_execution(self, prepared: PreparedImport) -> SqlOp[None]:
        """Write ``prepared`` all-or-nothing: the execution inserted only if absent (else
        :class:`ExecutionAlreadyExists`, nothing written), then its marks, timers, relays (new
        seqs, in record order) and trace steps (their own indices).  A relays-only record
        (no execution) appends its outbox rows unconditionally."""
        p, sql = prepared, self.sql
        exe = p.execution
        token = secrets.token_hex(16) if self.dialect.single_request and exe else None
        owner = {"id": p.execution_id, "token": token}
        statements = [
            *(sql.mark_processed.bind(event_id=e, at=at, **owner) for e, at in p.processed),
            *(
                sql.schedule_timer.bind(path=path, fire_at=at, fire_at_repr=repr(at), **owner)
                for path, at in p.timers
            ),
            *(
                _outbox_row(sql.insert_outbox if exe else sql.relay_outbox, e, owner)
                for e in p.emits
            ),
            *(
                sql.insert_spawn.bind(
                    child=s.child_id, root=s.root_path, context=s.context_json, **owner
                )
                for s in p.spawns
            ),
            *(sql.import_trace.bind(idx=idx, entry=entry, **owner) for idx, entry in p.trace),
        ]
        touch = sql.touch_work if exe else sql.touch_work_free
        for change in import_touches(p):
            statements += _touched(touch, change, owner)
        if exe is None:
            if statements:
                yield from self._atomic(statements)
            return
        row = {**asdict(exe), "id": p.execution_id, "data": exe.document, "token": token}
        insert = sql.insert_execution.bind_map(row)
        if self.dialect.single_request:  # the side writes are guarded by the insert's token
            applied = (yield Batch((insert, *statements)))[0].rowcount == 1
        else:
            applied = yield from self._transaction(_cas_then((insert,), statements))
        if not applied:
            raise ExecutionAlreadyExists(p.execution_id)

    # -- executions -----------------------------------------------------------------------------

    def load(self, execution_id: str) -> SqlOp[Execution | None]:
        """A fresh copy of the stored execution, or ``None``."""
        execution_id = check_id(execution_id)
        row = (yield self.sql.load.bind(id=execution_id)).first
        return None if row is None else self._execution(execution_id, row[0])

    def load_for_event(
        self, execution_id: str, event_id: str
    ) -> SqlOp[tuple[Execution | None, bool]]:
        """The execution plus whether ``event_id`` was processed, in one statement."""
        execution_id, event_id = check_event_ref(execution_id, event_id)
        row = (yield self.sql.load_for_event.bind(id=execution_id, event_id=event_id)).first
        if row is None:
            return None, False
        return self._execution(execution_id, row[0]), bool(row[1])

    def is_processed(self, execution_id: str, event_id: str) -> SqlOp[bool]:
        """Whether that execution already processed that event (a primary-key probe)."""
        execution_id, event_id = check_event_ref(execution_id, event_id)
        result = yield self.sql.is_processed.bind(id=execution_id, event_id=event_id)
        return result.first is not None

    def list_executions(self, query: ListingQuery) -> SqlOp[ExecutionPage]:
        """One page ordered by id: a keyset probe of ``limit + 1`` rows after the cursor
        (``query`` from :func:`~harel.store.common.listing_query`, which validates it)."""
        if query.matches_nothing:
            return ExecutionPage()
        clauses: list[str] = []
        # limit + 1 detects a next page; MAX_INT rows can never be stored, so capping is exact
        values: dict[str, Any] = {"probe": min(query.limit + 1, MAX_INT)}
        if query.after is not None:
            clauses.append("id > :after")
            values["after"] = query.after
        if query.definition_id is not None:
            clauses.append("definition_id = :definition_id")
            values["definition_id"] = query.definition_id
        if query.roots_only:
            clauses.append("parent_id IS NULL")
        statuses = query.status_values or ()
        values.update((f"status{n}", value) for n, value in enumerate(statuses))
        statement = self.sql.listing(clauses, len(statuses)).bind(**values)
        rows = (yield statement).rows
        return page_from_probe(query, [self._summary(row) for row in rows])

    # -- relays and timers ----------------------------------------------------------------------

    def pending_outbox(self, limit: int | None) -> SqlOp[list[OutboxEntry]]:
        """Undelivered events, oldest first (served by the ``seq`` key)."""
        rows = (yield self.sql.pending_outbox.bind(limit=bound_limit(limit))).rows
        return [
            OutboxEntry(int(seq), target, decode_event(event, what=f"outbox entry {seq}"))
            for seq, target, event in rows
        ]

    def pending_spawns(self, limit: int | None) -> SqlOp[list[SpawnEntry]]:
        """Uncreated children, oldest first (served by the ``seq`` key)."""
        rows = (yield self.sql.pending_spawns.bind(limit=bound_limit(limit))).rows
        return [
            SpawnEntry(int(seq), parent, child, root, decode_payload(ctx, what=f"spawn {seq}"))
            for seq, parent, child, root, ctx in rows
        ]

    def ack_outbox(self, seq: int) -> SqlOp[None]:
        """Forget one delivered event (unknown seq: nothing changes)."""
        yield self.sql.ack_outbox.bind(seq=check_seq(seq))

    def ack_spawn(self, seq: int) -> SqlOp[None]:
        """Forget one spawn intent (unknown seq: nothing changes)."""
        yield self.sql.ack_spawn.bind(seq=check_seq(seq))

    def due_timers(self, now: float, limit: int | None) -> SqlOp[list[DueTimer]]:
        """Armed timers with ``fire_at <= now``, ascending (a range scan of ``timers_due``);
        ``fire_at`` comes back bit-exact from its ``repr`` column."""
        statement = self.sql.due_timers.bind(now=check_now(now), limit=bound_limit(limit))
        rows = (yield statement).rows
        return [(execution_id, path, float(text)) for execution_id, path, text in rows]

    def delete_timer(self, execution_id: str, path: str, fire_at: float) -> SqlOp[None]:
        """Disarm a timer only while it still holds exactly ``fire_at`` (a re-armed one stays)."""
        execution_id, path, exact = check_timer_ref(execution_id, path, fire_at)
        yield self.sql.delete_timer.bind(id=execution_id, path=path, fire_at=exact)

    # -- claims ---------------------------------------------------------------------------------

    def claim(self, owner: str, now: float, lease: float, limit: int) -> SqlOp[list[Claim]]:
        """Lease up to ``limit`` due units, grouped, in one write transaction (rqlite: one
        ``/db/request?transaction``), after a read that finds any row ready (an idle claim
        writes nothing).  The plan (tier reads, claim order, the unit budget) is computed by
        the statements themselves, so the transaction is a fixed sequence: read the units,
        lease (or re-date) the planned rows, delete the rows found empty."""
        if self.dialect.single_request and not self.dialect.batch_reads:
            raise StoreConfigError(
                f"claims on {self.where} need the unified /db/request endpoint (rqlite 8 or "
                "newer): open the store with unified=true"
            )
        if (yield self.sql.claim_probe.bind(now=now)).first is None:
            return []
        expires = now + lease
        values = {
            "now": now,
            "limit": limit,
            "aging": PRIORITY_AGING,
            "owner": owner,
            "expires": expires,
        }
        results = yield from self._atomic(
            (
                self.sql.claim_units.bind_map(values),
                self.sql.claim_lease.bind_map(values),
                self.sql.claim_drop.bind(),
            )
        )
        return _claims(results[0].rows, owner, now, expires, limit)

    def renew(self, owner: str, key: str | None, now: float, lease: float) -> SqlOp[float]:
        """Extend ``owner``'s unexpired lease of ``key`` to ``now + lease``: one ``UPDATE``
        (rqlite: one request, the row read in it for the error), else :class:`LeaseLost`."""
        expires = now + lease
        update = self.sql.renew_lease.bind(expires=expires, key=key or "", owner=owner, now=now)
        read = self.sql.work_row.bind(key=key or "")
        if self.dialect.batch_reads:
            results = yield Batch((update, read))
            applied, row = results[0].rowcount == 1, results[1].first
        else:
            applied = (yield update).rowcount == 1
            row = None if applied else (yield read).first
        if not applied:
            raise lease_lost(_work_row(key, row), key, owner, now)
        return expires

    def release(
        self, owner: str, key: str | None, retry_at: float | None, now: float
    ) -> SqlOp[None]:
        """Give ``owner``'s lease of ``key`` back, atomically: the row is deleted when no unit
        is left behind it, else freed and re-dated
        (:func:`~harel.store.common.claims.next_ready`); :class:`LeaseLost` when ``owner``
        does not hold it."""
        values = {"key": key or "", "owner": owner, "relay": relay_due(now), "retry_at": retry_at}
        writes = (self.sql.release_drop.bind_map(values), self.sql.release_free.bind_map(values))
        read = self.sql.work_row.bind(key=key or "")
        row: Sequence[Any] | None = None
        if self.dialect.batch_reads:
            results = list((yield Batch((*writes, read))))
            row = results[-1].first
        else:
            results = yield from self._atomic(writes)
        if results[0].rowcount == 1 or results[1].rowcount == 1:
            return
        if not self.dialect.batch_reads:
            row = (yield read).first
        raise lease_lost(_work_row(key, row), key, owner, None)

    def list_leases(self, now: float, limit: int) -> SqlOp[list[Lease]]:
        """The leases held at ``now``: one read of ``work_ready``'s five tiers past ``now``
        (:attr:`SqlStatements.list_leases`), merged in ``(expires_at, execution_id)`` order."""
        rows = (yield self.sql.list_leases.bind(now=now, limit=limit)).rows
        held = (WorkRow(key or None, int(p), float(at), str(owner)) for key, p, at, owner in rows)
        return held_leases(held, now, limit)

    # -- decoding -------------------------------------------------------------------------------

    def _execution(self, execution_id: str, data: Any) -> Execution:
        return decode_execution(data, what=f"the stored document of execution {execution_id!r}")

    def _summary(self, row: Sequence[Any]) -> ExecutionSummary:
        try:
            return ExecutionSummary(
                id=row[0],
                definition_id=row[1],
                status=Status(row[2]),
                outcome=row[3],
                active_path=row[4],
                version=int(row[5]),
                parent_id=row[6],
                updated_at=None if row[7] is None else float(row[7]),
            )
        except (TypeError, ValueError) as exc:
            raise StoreCorrupted(
                f"the summary columns of execution {row[0]!r} in {self.where} cannot be read "
                f"({str(exc)[:200]}); restore the row from a backup or purge it"
            ) from exc


# -- helpers shared by the plans ----------------------------------------------------------------


def settle_lost_cas(prepared: PreparedCommit, row: Sequence[Any] | None) -> None:
    """After a CAS that changed no row, given the :attr:`SqlStatements.found_receipts` row
    (``None``: no execution stored): return when ``prepared`` was already stored (a re-send
    whose token is the receipt of its new version: nothing is written again); else raise
    :class:`~harel.store.errors.AlreadyProcessed` when the execution holds the mark of
    ``prepared.processed_event_id``, else :class:`StoreConflict` with the found version
    (:func:`~harel.store.author.refuse_lost`'s order)."""
    if row is None:
        error = refuse_lost(prepared, None, None, False)
    else:
        marked = len(row) > _MARKED and bool(row[_MARKED])
        receipt = stored_receipt(row, prepared.new_version)
        error = refuse_lost(prepared, int(row[0]), receipt, marked)
    if error is not None:
        raise error


_MARKED = 1 + RECEIPT_WINDOW
"""The column of a :attr:`SqlStatements.found_receipts` row telling whether the mark is stored."""


def stored_receipt(row: Sequence[Any], version: int) -> str | None:
    """The token that wrote ``version``, from a :attr:`SqlStatements.found_receipts` row
    ``(version, r0, .., r7, marked)``; ``None`` when the ring no longer (or never) held it."""
    found = int(row[0])
    if not 0 <= found - version < RECEIPT_WINDOW:
        return None
    column = 1 + receipt_slot(version)
    receipt = row[column] if len(row) > column else None
    return None if receipt is None else str(receipt)


def _outbox_row(statement: Rendered, emit: PreparedEmit, owner: Mapping[str, Any]) -> Statement:
    """The bound insert of one outbox row (a commit's emit, an import's or an enqueue's entry;
    ``owner`` binds the guard's ``id`` and ``token`` where ``statement`` has one)."""
    return statement.bind(target=emit.target_id, event=emit.event_json, **owner)


def _touched(
    statements: Sequence[Rendered], change: WorkTouch, owner: Mapping[str, Any]
) -> list[Statement]:
    """The bound statements of one work-row touch (``change.key`` ``None``: the untargeted
    row; ``owner`` binds the guard's ``id`` and ``token`` where the statements have one)."""
    values = {
        "key": change.key or "",
        "priority": change.priority,
        "due": change.due,
        "own": int(change.own),
        **owner,
    }
    return [statement.bind_map(values) for statement in statements]


_NO_OWNER: Mapping[str, Any] = {}
"""The guard values of a write no execution owns (an enqueue binds no ``id`` / ``token``)."""


def _work_row(key: str | None, row: Sequence[Any] | None) -> WorkRow | None:
    """A :attr:`SqlStatements.work_row` row ``(priority, ready_at, owner)`` as a
    :class:`WorkRow` (``None``: no row)."""
    if row is None:
        return None
    ready_at = math.inf if row[1] is None else float(row[1])
    return WorkRow(key, int(row[0]), ready_at, None if row[2] is None else str(row[2]))


def _spawn(seq: int, parent: str, child: str, root: str, context: str) -> SpawnEntry:
    return SpawnEntry(seq, parent, child, root, decode_payload(context, what=f"spawn {seq}"))


def _outbox(seq: int, target: str | None, event: str) -> OutboxEntry:
    return OutboxEntry(seq, target, decode_event(event, what=f"outbox entry {seq}"))


def _claims(
    rows: Sequence[Sequence[Any]], owner: str, now: float, expires: float, limit: int
) -> list[Claim]:
    """The claims of the :attr:`SqlStatements.claim_units` rows (see ``_CLAIM_UNITS`` for
    their shape), cut by the unit budget as the memory store cuts them."""
    groups: dict[int, tuple[WorkRow, list[Any], list[Any], list[Any]]] = {}
    for kind, ord_, key_text, a, b, c, d, _ in rows:
        key = None if key_text == "" else str(key_text)
        if int(kind) == 0:
            groups[int(ord_)] = (WorkRow(key, int(a), float(b)), [], [], [])
            continue
        _, timers, outbox, spawns = groups[int(ord_)]
        if int(kind) == 1:
            seq = int(a)
            spawns.append(spawn_or_damaged(seq, key, _spawn, seq, str(key_text), b, c, d))
        elif int(kind) == 2:
            seq = int(a)
            outbox.append(outbox_or_damaged(seq, key, _outbox, seq, key, b))
        else:
            timers.append((str(a), float(b)))
    claims: list[Claim] = []
    budget = limit
    for _ord, (row, timers, outbox, spawns) in sorted(groups.items()):
        if not budget:
            break
        claim = take_units(row, budget, now, timers, outbox, spawns, owner, expires)
        if claim is not None:
            claims.append(claim)
            budget -= claim.units
    return claims


def _each(statements: Sequence[Statement]) -> SqlOp[list[Result]]:
    results = []
    for statement in statements:
        results.append((yield statement))
    return results


_SIDE_WRITES = slice(
    PreparedCommit._fields.index("emits"), PreparedCommit._fields.index("trace") + 1
)
_side_fields = itemgetter(_SIDE_WRITES)
_EXPECTED = PreparedCommit._fields.index("expected_version")
_BASE = PreparedCommit._fields.index("base")
_NO_SIDE_WRITES: tuple[Any, ...] = ((), None, (), (), None)
"""A :class:`PreparedCommit`'s side-write fields (``emits``, ``processed_event_id``,
``timers``, ``spawns``, ``trace``: adjacent fields) when it has none, as the envelope builds
them (anything else, such as an empty list, takes the general path)."""

_new_statement = tuple.__new__
"""``_new_statement(Statement, (sql, params))``: the named tuple built in C (every commit)."""

_COMMIT_FIELD = {
    "id": "execution_id",
    "definition_id": "definition_id",
    "status": "status",
    "outcome": "outcome",
    "active_path": "active_path",
    "parent_id": "parent_id",
    "version": "new_version",
    "data": "document",
    "updated_at": "committed_at",
    "expected": "expected_version",
    "receipt": "token",
    "base": "base",
    "event_id": "processed_event_id",
}
"""The :class:`PreparedCommit` field behind each slot of the commit statements (``token``
aside, the single-request owner token, which the narrow CAS does not name)."""


def _fields_of(form: Rendered) -> Callable[[PreparedCommit], tuple[Any, ...]]:
    """The parameters of ``form`` (a commit statement) read off a :class:`PreparedCommit`."""
    return attrgetter(*(_COMMIT_FIELD[slot] for slot in form.slots))


def _first_applied(casts: Iterable[Statement]) -> SqlOp[bool]:
    """Each CAS in turn until one changes its row.  Returns whether one applied."""
    for cas in casts:
        if (yield cas).rowcount == 1:
            return True
    return False


def _cas_then(casts: Iterable[Statement], effects: Sequence[Statement]) -> SqlOp[bool]:
    """The CAS (the first of ``casts`` that applies); the side writes only when one changed
    its row.  Returns whether one applied."""
    if not (yield from _first_applied(casts)):
        return False
    yield from _each(effects)
    return True


def _guarded(statements: Sequence[Statement]) -> SqlOp[list[Result]]:
    """Run the first statement; the rest only when it changed a row."""
    first: Result = yield statements[0]
    if first.rowcount != 1:
        return [first]
    return [first, *(yield from _each(statements[1:]))]


def _record(execution_id: str, rows: Sequence[Sequence[Any]], where: str) -> ExecutionRecord:
    """Build an :class:`ExecutionRecord` from the export statement's rows (see
    :data:`~harel.store.common.sql.statements._EXPORT` for their shape)."""
    of = f"of execution {execution_id!r}"
    parts: dict[int, list[Sequence[Any]]] = {kind: [] for kind in range(6)}
    for row in rows:
        parts[int(row[0])].append(row[1:])
    execution, updated_at = None, None
    for _key, data, updated, _ in parts[0]:
        execution = decode_execution(data, what=f"the stored document {of}")
        updated_at = None if updated is None else float(updated)
    for event_id, at, _, _ in parts[1]:
        if at is None:
            raise StoreCorrupted(
                f"the dedupe mark {event_id!r} {of} in {where} has no processed_at; set it "
                "(epoch seconds) or delete the mark"
            )
    return ExecutionRecord(
        execution_id=execution_id,
        execution=execution,
        updated_at=updated_at,
        processed=tuple((str(e), float(at)) for e, at, _, _ in parts[1]),
        timers=tuple((str(path), float(text)) for path, text, _, _ in parts[2]),
        outbox=tuple(
            OutboxEntry(int(seq), execution_id, decode_event(event, what=f"outbox entry {seq}"))
            for seq, event, _, _ in parts[3]
        ),
        spawns=tuple(
            SpawnEntry(
                int(seq), execution_id, child, root, decode_payload(ctx, what=f"spawn {seq}")
            )
            for seq, child, root, ctx in parts[4]
        ),
        trace=tuple(
            decode_trace_step(entry, int(idx), what=f"trace step {idx} {of}")
            for idx, entry, _, _ in parts[5]
        ),
    )


def bound_limit(limit: int | None) -> int:
    """A validated sweep ``limit`` as a bound ``LIMIT`` value (``-1`` = unbounded)."""
    checked = sweep_limit(limit)
    return -1 if checked is None else checked
