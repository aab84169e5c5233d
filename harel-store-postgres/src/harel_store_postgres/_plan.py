"""The IO-free plan of the PostgreSQL store: what each operation sends, and what replies mean.

:class:`PostgresPlan` provides every operation of :class:`harel.store.common.ContractPlan`
as a generator: it validates its arguments first (so a refused call sends nothing), yields
:class:`Statement` requests and is sent each one's :class:`Result`.  ``sync.py`` and ``aio.py``
only execute the requests, so the two stores cannot drift apart, and this module imports no
driver.

Statement texts are templates: ``{schema}`` is filled by the driver with the schema name
quoted by ``psycopg.sql.Identifier``; every value travels as a bound parameter (``%s``).

Round trips: every contract method (``claim``, ``renew`` and ``release`` too:
:mod:`harel_store_postgres._claims`) is ONE statement, except ``prune_processed`` (one
statement per batch) and a state-only commit that lost its CAS (a second statement reads the
found version and receipt).  A commit with side writes (and every first commit) calls
``harel_commit``; a state-only commit of a stored execution is a plain CAS ``UPDATE``, which
skips the PL/pgSQL call.  Both store the commit token as the receipt of the version they write
(the same row write), which is how a re-sent commit is recognised, and both check the commit's
fence (``PreparedCommit.base``) in the CAS's WHERE; ``harel_commit`` also refuses an event id
whose dedupe mark is held there, so ``AlreadyProcessed`` costs the commit's one round trip.
Export is one statement, import one call of ``harel_import``
(:mod:`harel_store_postgres._records`); opening a store is
:func:`harel_store_postgres._schema.open_schema`.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, TypeVar

from harel.model import Execution, ExecutionPage
from harel.store.author import (
    MAX_DOCUMENT_BYTES,
    MAX_INT,
    ListingQuery,
    PreparedCommit,
    PreparedEnqueue,
    PreparedImport,
    check_event_ref,
    check_flag,
    check_id,
    check_limit,
    check_now,
    check_prune,
    check_seq,
    check_timer_ref,
    decode_event,
    decode_execution,
    decode_trace_step,
    encode_trace_step,
    page_from_probe,
    receipt_slot,
    refuse_lost,
    trace_keep_from,
    work_touches,
)
from harel.store.author.sql import Result, Statement
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
    CommitOutcomeUnknown,
    ExecutionActive,
    ExecutionNotFound,
    StoreUnavailable,
)

from harel_store_postgres import _claims, _records
from harel_store_postgres._claims import stored_key, work_arrays
from harel_store_postgres._listing import listing_statement, summary
from harel_store_postgres._outcome import RequestOutcomeUnknown
from harel_store_postgres._rows import first_row, spawn_context
from harel_store_postgres._schema import ENQUEUE

T = TypeVar("T")

Plan = Generator[Statement, Result, T]
"""An operation: yields statements, is sent their results, returns the value."""

_FINISHED = sorted(status.value for status in FINISHED)

_COMMIT = (
    "SELECT o_applied, o_found, o_receipt, o_marked FROM {schema}.harel_commit("
    "%s::text, %s::text, %s::text, %s::text, %s::text, %s::text, %s::text, %s::bigint, "
    "%s::float8, %s::text, %s::text[], %s::text[], %s::text[], %s::text[], %s::text[], "
    "%s::text[], %s::float8[], %s::text[], %s::text, %s::bigint, %s::text, %s::int, "
    "%s::text[], %s::float8[], %s::int[], %s::boolean[], %s::text, %s::int)"
)

# The state-only commit: the CAS UPDATE alone, one statement with no PL/pgSQL call, which also
# stores the commit token as the receipt of the new version (one array slot of the same row
# write).  It waits for a concurrent writer of the row and then re-checks the version, so a
# lost race changes nothing and returns no row.  Measured on this server, it costs ~75 us of
# server time against ~120 us for ``harel_commit``; reading the found version in the same
# statement (a CTE whose second arm reads it FOR SHARE) cost more to plan and run than the
# function did.
_CAS_UPDATE = (
    "UPDATE {schema}.executions SET definition_id = %s, status = %s, outcome = %s, "
    "active_path = %s, parent_id = %s, version = %s::bigint, updated_at = %s::float8, "
    "data = %s, receipts[%s::int] = %s WHERE id = %s AND version = %s::bigint RETURNING version"
)

# The fenced state-only commit (``PreparedCommit.base`` set): the same CAS, which applies only
# while the receipt of the expected version is still the fence.  The receipt is a column of the
# row the CAS locks, so after waiting for a concurrent writer the UPDATE re-checks it on the
# newest row version, as it does the version.
_CAS_UPDATE_FENCED = _CAS_UPDATE.replace(
    " RETURNING version", " AND receipts[%s::int] = %s RETURNING version"
)

# After a lost state-only CAS only: the stored version and the receipt of the version the
# commit writes.  A new statement has a new snapshot (READ COMMITTED), taken after the CAS
# returned, so it sees the winner's commit.
_FOUND = "SELECT version, receipts[%s::int] FROM {schema}.executions WHERE id = %s"

_PRUNE_BATCH = (
    "WITH doomed AS (SELECT execution_id, event_id FROM {schema}.processed_events "
    "WHERE processed_at < %s::float8 ORDER BY processed_at LIMIT %s::bigint "
    "FOR UPDATE SKIP LOCKED) "
    "DELETE FROM {schema}.processed_events AS p USING doomed AS d "
    "WHERE p.execution_id = d.execution_id AND p.event_id = d.event_id"
)


def _ring(trace_max: int | None) -> int:
    """``trace_max`` as the functions' ring size (0 = unbounded), validated first."""
    trace_keep_from(0, trace_max)
    return min(trace_max or 0, MAX_INT)


def _sent(prepared: PreparedCommit, statement: Statement) -> Plan[Result]:
    """Send a commit's write; a request that may have reached the server unanswered (the
    driver's :class:`RequestOutcomeUnknown`) becomes ``CommitOutcomeUnknown``."""
    try:
        return (yield statement)
    except RequestOutcomeUnknown as exc:
        raise CommitOutcomeUnknown(
            prepared.execution_id, prepared.expected_version, exc.detail
        ) from exc


def _base_slot(prepared: PreparedCommit) -> int:
    """The ``receipts`` subscript (1-based) of the receipt of ``expected_version``: where the
    fence is checked."""
    return receipt_slot(prepared.expected_version) + 1


def is_state_only(prepared: PreparedCommit) -> bool:
    """Whether a commit writes the execution row alone, over a stored version."""
    p = prepared
    return not (
        p.is_insert
        or p.emits
        or p.spawns
        or p.timers
        or p.processed_event_id is not None
        or p.trace is not None
    )


class PostgresPlan:
    """The operations of the PostgreSQL store (one instance serves every store: it holds no
    state but ``max_document_bytes``, the per-document limit ``append_trace`` applies)."""

    def __init__(self, *, max_document_bytes: int = MAX_DOCUMENT_BYTES) -> None:
        self.max_document_bytes = max_document_bytes

    # -- commit ---------------------------------------------------------------------------------

    def commit(self, prepared: PreparedCommit, trace_max: int | None) -> Plan[None]:
        """The whole commit in one statement, which stores ``prepared.token`` as the receipt
        of the new version.  The CAS applies only at ``expected_version``, while the fence holds
        (``prepared.base``: the stored receipt of that version is it) and, for a commit carrying
        ``processed_event_id``, while the execution does not hold that dedupe mark.  A lost CAS
        whose stored receipt is this commit's token means a re-send of a commit already stored:
        success, nothing written again.  Any other lost CAS has written nothing and raises
        ``AlreadyProcessed`` when the mark is held, else ``StoreConflict`` with the stored
        version (for a state-only commit, ``found`` and the receipt are read by a second
        statement after the CAS lost; ``harel_commit`` returns them and the mark's presence).
        A request that may have reached the server unanswered raises ``CommitOutcomeUnknown``
        (a re-send of such a commit that fails before reaching the server raises it again:
        core's ``outcome_error``).  (``committing`` has already refused every id, path and
        payload a column could not hold.)"""
        yield from self._commit(prepared, _ring(trace_max))

    def _commit(self, prepared: PreparedCommit, ring: int) -> Plan[None]:
        slot = receipt_slot(prepared.new_version) + 1
        if is_state_only(prepared):
            if (yield from _sent(prepared, self._cas_update(prepared, slot))).rows:
                return
            try:  # the CAS missed: this request wrote nothing, whatever happens to the read
                rows = (yield Statement(_FOUND, (slot, prepared.execution_id))).rows
            except RequestOutcomeUnknown as exc:
                raise StoreUnavailable(str(exc)) from exc
            found, receipt = (int(rows[0][0]), rows[0][1]) if rows else (None, None)
            marked = False  # a state-only commit carries no event id
        else:
            statement = self._commit_call(prepared, ring, slot)
            applied, stored, receipt, held = first_row((yield from _sent(prepared, statement)))
            if applied:
                return
            found, marked = (None if stored is None else int(stored)), bool(held)
        error = refuse_lost(prepared, found, receipt, marked)
        if error is not None:
            raise error

    @staticmethod
    def _cas_update(p: PreparedCommit, slot: int) -> Statement:
        """The state-only CAS ``UPDATE`` (fenced when ``p.base`` is set)."""
        params: tuple[Any, ...] = (
            p.definition_id,
            p.status,
            p.outcome,
            p.active_path,
            p.parent_id,
            p.new_version,
            p.committed_at,
            p.document,
            slot,
            p.token or None,
            p.execution_id,
            p.expected_version,
        )
        if p.base is None:
            return Statement(_CAS_UPDATE, params)
        return Statement(_CAS_UPDATE_FENCED, (*params, _base_slot(p), p.base))

    @staticmethod
    def _commit_call(p: PreparedCommit, ring: int, slot: int) -> Statement:
        """One call of ``harel_commit``: CAS (with the dedupe and the fence), outbox, dedupe
        mark, spawns, timers, trace, and the work rows the commit touches (empty arrays, and no
        work statement run, when it touches none)."""
        schedules, cancels = p.schedules, p.cancels
        params = (
            p.execution_id,
            p.definition_id,
            p.status,
            p.outcome,
            p.active_path,
            p.parent_id,
            p.document,
            p.expected_version,
            p.committed_at,
            p.processed_event_id,
            [emit.target_id for emit in p.emits],
            [emit.event_json for emit in p.emits],
            [spawn.child_id for spawn in p.spawns],
            [spawn.root_path for spawn in p.spawns],
            [spawn.context_json for spawn in p.spawns],
            [op.path for op in schedules],
            [op.fire_at for op in schedules],
            [op.path for op in cancels],
            p.trace,
            ring,
            p.token or None,
            slot,
            *work_arrays(work_touches(p)),
            p.base,
            _base_slot(p),
        )
        return Statement(_COMMIT, params)

    def enqueue(self, prepared: PreparedEnqueue) -> Plan[int]:
        """Write one outbox entry for ``prepared.target_id`` and touch the target's work row
        (``prepared.touch``), waking the schema's waiting workers, in ONE statement (one round
        trip, one transaction: all of it or nothing); the entry's ``seq``.  The target's
        execution row is never read.  A request lost on the wire raises ``StoreUnavailable``
        (the entry may be stored)."""
        result = yield self.enqueue_statement(prepared)
        return int(first_row(result)[0])

    @staticmethod
    def enqueue_statement(prepared: PreparedEnqueue) -> Statement:
        """The one statement of an enqueue (every value a bound parameter)."""
        emit, change = prepared.emit, prepared.touch
        params = (
            emit.target_id,
            emit.event_json,
            stored_key(change.key),
            change.priority,
            change.due,
            change.own,
        )
        return Statement(ENQUEUE, params)

    def append_trace(
        self, execution_id: str, entry: dict[str, Any], trace_max: int | None
    ) -> Plan[None]:
        """Append one step outside a commit (same index and ring rules); ``ExecutionNotFound``
        when the execution is not stored (nothing written)."""
        execution_id = check_id(execution_id)
        body = encode_trace_step(entry, max_document_bytes=self.max_document_bytes)
        ring = _ring(trace_max)
        sql = "SELECT {schema}.harel_append_trace(%s::text, %s::text, %s::bigint)"
        if not first_row((yield Statement(sql, (execution_id, body, ring))))[0]:
            raise ExecutionNotFound(execution_id)

    # -- reads ----------------------------------------------------------------------------------

    def load(self, execution_id: str) -> Plan[Execution | None]:
        """A fresh copy of the stored execution, or ``None``."""
        execution_id = check_id(execution_id)
        sql = "SELECT data FROM {schema}.executions WHERE id = %s"
        result = yield Statement(sql, (execution_id,))
        if not result.rows:
            return None
        return decode_execution(result.rows[0][0], what=f"execution {execution_id!r}")

    def load_for_event(
        self, execution_id: str, event_id: str
    ) -> Plan[tuple[Execution | None, bool]]:
        """The document plus whether ``event_id`` was processed, in one statement."""
        execution_id, event_id = check_event_ref(execution_id, event_id)
        sql = (
            "SELECT e.data, EXISTS (SELECT 1 FROM {schema}.processed_events AS p "
            "WHERE p.execution_id = e.id AND p.event_id = %s) "
            "FROM {schema}.executions AS e WHERE e.id = %s"
        )
        result = yield Statement(sql, (event_id, execution_id))
        if not result.rows:
            return None, False
        data, seen = result.rows[0]
        return decode_execution(data, what=f"execution {execution_id!r}"), bool(seen)

    def is_processed(self, execution_id: str, event_id: str) -> Plan[bool]:
        """A primary-key probe of the dedupe marks."""
        execution_id, event_id = check_event_ref(execution_id, event_id)
        sql = "SELECT 1 FROM {schema}.processed_events WHERE execution_id = %s AND event_id = %s"
        return bool((yield Statement(sql, (execution_id, event_id))).rows)

    def pending_outbox(self, limit: int | None) -> Plan[list[OutboxEntry]]:
        """Undelivered events, oldest first (an index range on the ``seq`` primary key)."""
        sql = "SELECT seq, target_id, event FROM {schema}.outbox ORDER BY seq LIMIT %s::bigint"
        result = yield Statement(sql, (check_limit(limit),))
        return [
            OutboxEntry(int(seq), target, decode_event(event, what=f"outbox entry {seq}"))
            for seq, target, event in result.rows
        ]

    def pending_spawns(self, limit: int | None) -> Plan[list[SpawnEntry]]:
        """Uncreated children, oldest first (an index range on the ``seq`` primary key)."""
        sql = (
            "SELECT seq, parent_id, child_id, root_path, context FROM {schema}.spawns "
            "ORDER BY seq LIMIT %s::bigint"
        )
        result = yield Statement(sql, (check_limit(limit),))
        return [
            SpawnEntry(int(seq), parent, child, root, spawn_context(context, seq))
            for seq, parent, child, root, context in result.rows
        ]

    def due_timers(self, now: float, limit: int | None) -> Plan[list[DueTimer]]:
        """Armed timers with ``fire_at <= now`` ascending by ``(fire_at, execution_id, path)``:
        a range scan of ``timers_due`` that stops after ``limit`` rows."""
        sql = (
            "SELECT execution_id, path, fire_at FROM {schema}.timers WHERE fire_at <= %s::float8 "
            "ORDER BY fire_at, execution_id, path LIMIT %s::bigint"
        )
        result = yield Statement(sql, (check_now(now), check_limit(limit)))
        return [(execution_id, path, float(fire_at)) for execution_id, path, fire_at in result.rows]

    def read_trace(self, execution_id: str) -> Plan[list[dict[str, Any]]]:
        """The retained steps of one execution, oldest first (a primary-key range)."""
        execution_id = check_id(execution_id)
        sql = "SELECT idx, entry FROM {schema}.trace WHERE execution_id = %s ORDER BY idx"
        result = yield Statement(sql, (execution_id,))
        return [
            decode_trace_step(entry, int(idx), what=f"trace step {idx} of {execution_id!r}")
            for idx, entry in result.rows
        ]

    def list_executions(self, query: ListingQuery) -> Plan[ExecutionPage]:
        """One keyset page (:func:`harel_store_postgres._listing.listing_statement`)."""
        if query.matches_nothing:
            return ExecutionPage()
        result = yield listing_statement(query)
        return page_from_probe(query, [summary(row) for row in result.rows])

    # -- single-statement writes ----------------------------------------------------------------

    def ack_outbox(self, seq: int) -> Plan[None]:
        """Remove one delivered outbox entry (unknown seq: no row changes)."""
        yield Statement("DELETE FROM {schema}.outbox WHERE seq = %s::bigint", (check_seq(seq),))

    def ack_spawn(self, seq: int) -> Plan[None]:
        """Remove one spawn intent (unknown seq: no row changes)."""
        yield Statement("DELETE FROM {schema}.spawns WHERE seq = %s::bigint", (check_seq(seq),))

    def delete_timer(self, execution_id: str, path: str, fire_at: float) -> Plan[None]:
        """Disarm a timer only while it still holds exactly ``fire_at`` (a re-armed one
        survives)."""
        params = check_timer_ref(execution_id, path, fire_at)
        yield Statement(
            "DELETE FROM {schema}.timers "
            "WHERE execution_id = %s AND path = %s AND fire_at = %s::float8",
            params,
        )

    # -- retention ------------------------------------------------------------------------------

    def purge(self, execution_id: str, force: bool) -> Plan[bool]:
        """Remove the execution and everything it owns in one statement (``harel_purge``);
        ``ExecutionActive`` (nothing removed) for an unfinished one unless ``force``."""
        execution_id = check_id(execution_id)
        sql = (
            "SELECT o_existed, o_purged, o_status FROM {schema}.harel_purge"
            "(%s::text, %s::boolean, %s::text[])"
        )
        params = (execution_id, check_flag(force, "force"), _FINISHED)
        existed, purged, status = first_row((yield Statement(sql, params)))
        if not purged:
            raise ExecutionActive(execution_id, str(status))
        return bool(existed)

    def prune_processed(self, older_than: float, batch_size: int) -> Plan[int]:
        """Drop marks recorded before ``older_than``: one short statement per batch of at most
        ``batch_size`` marks (an index range on ``processed_age``), until a batch comes up
        short."""
        before, size = check_prune(older_than, batch_size)
        dropped = 0
        while True:
            count = max((yield Statement(_PRUNE_BATCH, (before, size))).rowcount, 0)
            dropped += count
            if count < size:
                return dropped

    # -- records --------------------------------------------------------------------------------

    def export_execution(self, execution_id: str) -> Plan[ExecutionRecord | None]:
        """Everything stored for the id, read by one statement (one snapshot)."""
        statement = _records.export_statement(execution_id)
        return _records.record_from_row(statement.params[0], first_row((yield statement)))

    def import_execution(self, prepared: PreparedImport) -> Plan[None]:
        """Write a record in one call of ``harel_import``; ``ExecutionAlreadyExists``
        (nothing written) when its execution is already stored."""
        _records.check_imported(prepared, (yield _records.import_statement(prepared)))

    # -- claims ---------------------------------------------------------------------------------

    def claim(self, owner: str, now: float, lease: float, limit: int) -> Plan[list[Claim]]:
        """Lease up to ``limit`` due units, grouped, in one call of ``harel_claim`` (one
        statement: racing claimers skip each other's rows, never wait for them).  A request
        lost on the wire raises ``StoreUnavailable``: the leases it may have taken expire."""
        expires = now + lease
        result = yield _claims.claim_statement(owner, now, expires, limit)
        return _claims.claims_from(result, owner, now, expires)

    def renew(self, owner: str, key: str | None, now: float, lease: float) -> Plan[float]:
        """Extend ``owner``'s unexpired lease to ``now + lease`` in one call of
        ``harel_renew``; ``LeaseLost`` (nothing written) otherwise."""
        expires = now + lease
        result = yield _claims.renew_statement(owner, key, now, expires)
        _claims.check_lease(result, owner, key, now)
        return expires

    def release(
        self, owner: str, key: str | None, retry_at: float | None, now: float
    ) -> Plan[None]:
        """Free ``owner``'s lease (expired or not) in one call of ``harel_release``, re-dating
        the row from what is left; ``LeaseLost`` (nothing written) when another holds it or
        nobody does."""
        result = yield _claims.release_statement(owner, key, retry_at, now)
        _claims.check_lease(result, owner, key, None)

    def list_leases(self, now: float, limit: int) -> Plan[list[Lease]]:
        """The leases held at ``now``, by ``(expires_at, execution_id)``, at most ``limit``: one
        ``SELECT`` of the held work rows that locks nothing (arguments checked by the store)."""
        return _claims.leases_from((yield _claims.leases_statement(now, limit)))


PLAN = PostgresPlan()
"""The plan every PostgreSQL store uses."""
