"""The IO-free plan of the PostgreSQL store: what each operation sends, and what replies mean.

Every operation is a generator (see :func:`harel.store.common.drive`): it validates its
arguments first (so a refused call sends nothing), yields :class:`Statement` requests and is
sent each one's :class:`Result`.  ``sync.py`` and ``aio.py`` only execute the requests, so the
two stores cannot drift apart, and this module imports no driver.

Statement texts are templates: ``{schema}`` is filled by the driver with the schema name
quoted by ``psycopg.sql.Identifier``; every value travels as a bound parameter (``%s``).  The
only generated SQL is the choice among fixed listing clauses.

Round trips: every contract method is ONE statement (commit, append_trace and purge call a
server-side function), except ``prune_processed`` (one statement per batch) and opening a
store (schema probe, and the DDL the first time).
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Sequence
from typing import Any, TypeVar

from harel.model import Execution, ExecutionPage, ExecutionSummary, Status
from harel.store.common import (
    ListingQuery,
    PreparedCommit,
    check_event_ref,
    check_flag,
    check_id,
    check_limit,
    check_now,
    check_prune,
    check_seq,
    check_timer_ref,
    conflict,
    decode_event,
    decode_execution,
    decode_payload,
    decode_trace_step,
    encode_trace_step,
    listing_query,
    page_from_probe,
    trace_keep_from,
)
from harel.store.common.limits import MAX_INT
from harel.store.common.sql.requests import Result, Statement
from harel.store.contract import FINISHED, DueTimer, OutboxEntry, SpawnEntry
from harel.store.errors import ExecutionActive, ExecutionNotFound, StoreCorrupted

from harel_store_postgres import _schema

T = TypeVar("T")

Plan = Generator[Statement, Result, T]
"""An operation: yields statements, is sent their results, returns the value."""

_FINISHED = sorted(status.value for status in FINISHED)

# -- opening ------------------------------------------------------------------------------------


def open_schema(schema: str, where: str) -> Plan[None]:
    """Make sure the schema holds the current layout; create it under an advisory lock.

    A schema at the current version costs two probes.  Otherwise one transaction takes the
    schema's advisory lock (workers starting together wait here, one creates), probes again
    and runs the idempotent DDL and the version row.
    """
    if _schema.schema_action(*(yield from _probe(schema)), where) == "ready":
        return
    yield Statement(_schema.BEGIN)
    yield Statement(_schema.LOCK, (_schema.ADVISORY_LOCK_CLASS, schema))
    if _schema.schema_action(*(yield from _probe(schema)), where) == "create":
        for ddl in _schema.DDL:
            yield Statement(ddl)
        yield Statement(_schema.RECORD_VERSION, (_schema.SCHEMA_VERSION,))
    yield Statement(_schema.COMMIT)


def _probe(schema: str) -> Plan[tuple[bool, int | None]]:
    exists = bool(_first((yield Statement(_schema.EXISTS_PROBE, (schema,))))[0])
    if not exists:
        return False, None
    version = _first((yield Statement(_schema.VERSION_PROBE)))[0]
    return True, None if version is None else int(version)


# -- commit -------------------------------------------------------------------------------------

_COMMIT = (
    "SELECT o_applied, o_found FROM {schema}.harel_commit("
    "%s::text, %s::text, %s::text, %s::text, %s::text, %s::text, %s::text, %s::bigint, "
    "%s::float8, %s::text, %s::text[], %s::text[], %s::text[], %s::text[], %s::text[], "
    "%s::text[], %s::float8[], %s::text[], %s::text, %s::bigint)"
)


def _ring(trace_max: int | None) -> int:
    """``trace_max`` as the functions' ring size (0 = unbounded), validated first."""
    trace_keep_from(0, trace_max)
    return min(trace_max or 0, MAX_INT)


def commit(prepared: PreparedCommit, trace_max: int | None) -> Plan[None]:
    """The whole commit as one call of ``harel_commit``: CAS, outbox, dedupe mark, spawns,
    timers and trace in one statement; a lost CAS raises ``StoreConflict`` with the stored
    version the function read, having written nothing.  (``committing`` has already refused
    every id, path and payload a column could not hold.)"""
    p = prepared
    ring = _ring(trace_max)
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
    )
    applied, found = _first((yield Statement(_COMMIT, params)))
    if not applied:
        raise conflict(p, None if found is None else int(found))


def append_trace(execution_id: str, entry: dict[str, Any], trace_max: int | None) -> Plan[None]:
    """Append one step outside a commit (same index and ring rules); ``ExecutionNotFound``
    when the execution is not stored (nothing written)."""
    execution_id = check_id(execution_id)
    body = encode_trace_step(entry)
    ring = _ring(trace_max)
    sql = "SELECT {schema}.harel_append_trace(%s::text, %s::text, %s::bigint)"
    if not _first((yield Statement(sql, (execution_id, body, ring))))[0]:
        raise ExecutionNotFound(execution_id)


# -- reads --------------------------------------------------------------------------------------


def load(execution_id: str) -> Plan[Execution | None]:
    """A fresh copy of the stored execution, or ``None``."""
    execution_id = check_id(execution_id)
    sql = "SELECT data FROM {schema}.executions WHERE id = %s"
    result = yield Statement(sql, (execution_id,))
    if not result.rows:
        return None
    return decode_execution(result.rows[0][0], what=f"execution {execution_id!r}")


def load_for_event(execution_id: str, event_id: str) -> Plan[tuple[Execution | None, bool]]:
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


def is_processed(execution_id: str, event_id: str) -> Plan[bool]:
    """A primary-key probe of the dedupe marks."""
    execution_id, event_id = check_event_ref(execution_id, event_id)
    sql = "SELECT 1 FROM {schema}.processed_events WHERE execution_id = %s AND event_id = %s"
    return bool((yield Statement(sql, (execution_id, event_id))).rows)


def pending_outbox(limit: int | None) -> Plan[list[OutboxEntry]]:
    """Undelivered events, oldest first (an index range on the ``seq`` primary key)."""
    sql = "SELECT seq, target_id, event FROM {schema}.outbox ORDER BY seq LIMIT %s::bigint"
    result = yield Statement(sql, (check_limit(limit),))
    return [
        OutboxEntry(int(seq), target, decode_event(event, what=f"outbox entry {seq}"))
        for seq, target, event in result.rows
    ]


def pending_spawns(limit: int | None) -> Plan[list[SpawnEntry]]:
    """Uncreated children, oldest first (an index range on the ``seq`` primary key)."""
    sql = (
        "SELECT seq, parent_id, child_id, root_path, context FROM {schema}.spawns "
        "ORDER BY seq LIMIT %s::bigint"
    )
    result = yield Statement(sql, (check_limit(limit),))
    return [
        SpawnEntry(
            int(seq), parent, child, root, _context(decode_payload(context, what=f"spawn {seq}"))
        )
        for seq, parent, child, root, context in result.rows
    ]


def _context(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise StoreCorrupted("a stored spawn context is not a JSON object")
    return value


def due_timers(now: float, limit: int | None) -> Plan[list[DueTimer]]:
    """Armed timers with ``fire_at <= now`` ascending by ``(fire_at, execution_id, path)``:
    a range scan of ``timers_due`` that stops after ``limit`` rows."""
    sql = (
        "SELECT execution_id, path, fire_at FROM {schema}.timers WHERE fire_at <= %s::float8 "
        "ORDER BY fire_at, execution_id, path LIMIT %s::bigint"
    )
    result = yield Statement(sql, (check_now(now), check_limit(limit)))
    return [(execution_id, path, float(fire_at)) for execution_id, path, fire_at in result.rows]


def read_trace(execution_id: str) -> Plan[list[dict[str, Any]]]:
    """The retained steps of one execution, oldest first (a primary-key range)."""
    execution_id = check_id(execution_id)
    sql = "SELECT idx, entry FROM {schema}.trace WHERE execution_id = %s ORDER BY idx"
    result = yield Statement(sql, (execution_id,))
    return [
        decode_trace_step(entry, int(idx), what=f"trace step {idx} of {execution_id!r}")
        for idx, entry in result.rows
    ]


# -- single-statement writes --------------------------------------------------------------------


def ack_outbox(seq: int) -> Plan[None]:
    """Remove one delivered outbox entry (unknown seq: no row changes)."""
    yield Statement("DELETE FROM {schema}.outbox WHERE seq = %s::bigint", (check_seq(seq),))


def ack_spawn(seq: int) -> Plan[None]:
    """Remove one spawn intent (unknown seq: no row changes)."""
    yield Statement("DELETE FROM {schema}.spawns WHERE seq = %s::bigint", (check_seq(seq),))


def delete_timer(execution_id: str, path: str, fire_at: float) -> Plan[None]:
    """Disarm a timer only while it still holds exactly ``fire_at`` (a re-armed one survives)."""
    params = check_timer_ref(execution_id, path, fire_at)
    yield Statement(
        "DELETE FROM {schema}.timers "
        "WHERE execution_id = %s AND path = %s AND fire_at = %s::float8",
        params,
    )


# -- retention ----------------------------------------------------------------------------------


def purge(execution_id: str, force: bool) -> Plan[bool]:
    """Remove the execution and everything it owns in one statement (``harel_purge``);
    ``ExecutionActive`` (nothing removed) for an unfinished one unless ``force``."""
    execution_id = check_id(execution_id)
    sql = (
        "SELECT o_existed, o_purged, o_status FROM {schema}.harel_purge"
        "(%s::text, %s::boolean, %s::text[])"
    )
    params = (execution_id, check_flag(force, "force"), _FINISHED)
    existed, purged, status = _first((yield Statement(sql, params)))
    if not purged:
        raise ExecutionActive(execution_id, str(status))
    return bool(existed)


_PRUNE_BATCH = (
    "WITH doomed AS (SELECT execution_id, event_id FROM {schema}.processed_events "
    "WHERE processed_at < %s::float8 ORDER BY processed_at LIMIT %s::bigint "
    "FOR UPDATE SKIP LOCKED) "
    "DELETE FROM {schema}.processed_events AS p USING doomed AS d "
    "WHERE p.execution_id = d.execution_id AND p.event_id = d.event_id"
)


def prune_processed(older_than: float, batch_size: int) -> Plan[int]:
    """Drop marks recorded before ``older_than``: one short statement per batch of at most
    ``batch_size`` marks (an index range on ``processed_age``), until a batch comes up short."""
    before, size = check_prune(older_than, batch_size)
    dropped = 0
    while True:
        count = max((yield Statement(_PRUNE_BATCH, (before, size))).rowcount, 0)
        dropped += count
        if count < size:
            return dropped


# -- listing ------------------------------------------------------------------------------------

_SUMMARY_COLUMNS = "id, definition_id, status, outcome, active_path, version, parent_id, updated_at"


def list_executions(
    *,
    status: Iterable[Status] | None,
    definition_id: str | None,
    roots_only: bool,
    limit: int,
    cursor: str | None,
) -> Plan[ExecutionPage]:
    """One keyset page: ``limit + 1`` rows after the cursor's id, ordered by id, every filter
    a bound parameter on a broken-out column.  Several statuses become one index-ordered arm
    per status, merged by id, so a page costs ``O(limit)`` rows whatever the table holds."""
    query = listing_query(
        status=status,
        definition_id=definition_id,
        roots_only=roots_only,
        limit=limit,
        cursor=cursor,
    )
    if query.matches_nothing:
        return ExecutionPage()
    result = yield listing_statement(query)
    return page_from_probe(query, [_summary(row) for row in result.rows])


def listing_statement(query: ListingQuery) -> Statement:
    """The keyset probe of a validated listing query (also used by the EXPLAIN tests)."""
    clauses: list[str] = []
    params: list[Any] = []
    if query.after is not None:
        clauses.append("id > %s")
        params.append(query.after)
    if query.definition_id is not None:
        clauses.append("definition_id = %s")
        params.append(query.definition_id)
    if query.roots_only:
        clauses.append("parent_id IS NULL")
    probe = min(query.limit + 1, MAX_INT)
    statuses = query.status_values
    if statuses is None or len(statuses) == 1:
        if statuses is not None:
            clauses.append("status = %s")
            params.append(statuses[0])
        return Statement(_select_page(clauses), (*params, probe))
    arm = f"({_select_page([*clauses, 'status = %s'])})"
    sql = " UNION ALL ".join([arm] * len(statuses)) + " ORDER BY id LIMIT %s::bigint"
    arm_params = [value for status in statuses for value in (*params, status, probe)]
    return Statement(sql, (*arm_params, probe))


def _select_page(clauses: Sequence[str]) -> str:
    """One keyset probe over ``executions``; ``clauses`` are fixed texts with ``%s`` only."""
    where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
    return (
        f"SELECT {_SUMMARY_COLUMNS} FROM {{schema}}.executions{where} "  # noqa: S608
        "ORDER BY id LIMIT %s::bigint"
    )


def _summary(row: Sequence[Any]) -> ExecutionSummary:
    try:
        return ExecutionSummary(
            id=row[0],
            definition_id=row[1],
            status=Status(row[2]),
            outcome=row[3],
            active_path=row[4],
            version=int(row[5]),
            parent_id=row[6],
            updated_at=float(row[7]),
        )
    except ValueError as exc:
        raise StoreCorrupted(f"the summary columns of execution {row[0]!r} are damaged") from exc


# -- helpers ------------------------------------------------------------------------------------


def _first(result: Result) -> Sequence[Any]:
    row = result.first
    if row is None:
        raise StoreCorrupted("a harel function returned no row; the schema may be damaged")
    return row


__all__ = [
    "Plan",
    "ack_outbox",
    "ack_spawn",
    "append_trace",
    "commit",
    "delete_timer",
    "due_timers",
    "is_processed",
    "list_executions",
    "listing_statement",
    "load",
    "load_for_event",
    "open_schema",
    "pending_outbox",
    "pending_spawns",
    "prune_processed",
    "purge",
    "read_trace",
]
