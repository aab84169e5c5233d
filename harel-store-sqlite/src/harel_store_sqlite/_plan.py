"""The IO-free plan of the SQLite store: which statements each operation runs, and how rows
become values.  ``sync.py`` (sqlite3) and ``aio.py`` (aiosqlite) only execute these plans, so the
two flavours cannot drift apart.

Every statement takes values as bound parameters; the only generated SQL text is the number of
``?`` placeholders of a ``status IN (...)`` filter.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from harel.model import Execution, ExecutionPage, ExecutionSummary, Status
from harel.store.common import (
    ListingQuery,
    PreparedCommit,
    decode_event,
    decode_execution,
    decode_trace_step,
    encode_trace_step,
    listing_query,
    loads,
    page_from_probe,
    sweep_limit,
    trace_keep_from,
)
from harel.store.contract import DueTimer, OutboxEntry, SpawnEntry
from harel.store.errors import StoreError, StoreUnavailable

Params = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Statement:
    """One SQL statement with its bound parameters."""

    sql: str
    params: Params = ()


@dataclass(frozen=True, slots=True)
class CommitPlan:
    """The statements of one ``commit``, all run inside one ``BEGIN IMMEDIATE`` transaction.

    ``cas`` must change exactly one row; when it changes none, ``found`` reads the stored
    version (``None`` row = absent), the transaction is rolled back and the commit raises
    ``conflict(prepared, found)``.  Otherwise every statement of ``effects`` runs in order.
    """

    prepared: PreparedCommit
    cas: Statement
    found: Statement
    effects: tuple[Statement, ...]


@dataclass(frozen=True, slots=True)
class AppendTracePlan:
    """``append_trace`` outside a commit: ``guard`` must return a row, then ``effects`` run."""

    execution_id: str
    guard: Statement
    effects: tuple[Statement, ...]


BEGIN = "BEGIN IMMEDIATE"
COMMIT = "COMMIT"
ROLLBACK = "ROLLBACK"

# -- commit -------------------------------------------------------------------------------------

_INSERT_EXECUTION = (
    "INSERT INTO executions "
    "(id, definition_id, status, outcome, active_path, parent_id, version, data) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING"
)
_UPDATE_EXECUTION = (
    "UPDATE executions SET definition_id = ?, status = ?, outcome = ?, active_path = ?, "
    "parent_id = ?, version = ?, data = ? WHERE id = ? AND version = ?"
)
_FOUND_VERSION = "SELECT version FROM executions WHERE id = ?"
_INSERT_OUTBOX = "INSERT INTO outbox (target_id, event) VALUES (?, ?)"
_MARK_PROCESSED = (
    "INSERT INTO processed_events (execution_id, event_id) VALUES (?, ?) "
    "ON CONFLICT (execution_id, event_id) DO NOTHING"
)
_INSERT_SPAWN = "INSERT INTO spawns (parent_id, child_id, root_path, context) VALUES (?, ?, ?, ?)"
_SCHEDULE_TIMER = (
    "INSERT INTO timers (execution_id, path, fire_at, fire_at_repr) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (execution_id, path) DO UPDATE "
    "SET fire_at = excluded.fire_at, fire_at_repr = excluded.fire_at_repr"
)
_CANCEL_TIMER = "DELETE FROM timers WHERE execution_id = ? AND path = ?"
# The new step's index is MAX(idx) + 1 of this execution's stored steps (0 for the first),
# computed inside the transaction that inserts it, so indices stay contiguous.
_APPEND_TRACE = (
    "INSERT INTO trace (execution_id, idx, entry) "
    "SELECT ?1, COALESCE(MAX(idx), -1) + 1, ?2 FROM trace WHERE execution_id = ?1"
)
# trace_keep_from(new, trace_max) == new - trace_max + 1, and ``new`` is now MAX(idx):
# delete idx < MAX(idx) - trace_max + 1, i.e. idx <= MAX(idx) - trace_max.
_TRIM_TRACE = (
    "DELETE FROM trace WHERE execution_id = ?1 "
    "AND idx <= (SELECT MAX(idx) FROM trace WHERE execution_id = ?1) - ?2"
)
_EXECUTION_EXISTS = "SELECT 1 FROM executions WHERE id = ?"


def _trace_statements(execution_id: str, body: str, trace_max: int | None) -> list[Statement]:
    trace_keep_from(0, trace_max)  # validates trace_max before anything runs
    statements = [Statement(_APPEND_TRACE, (execution_id, body))]
    if trace_max:
        statements.append(Statement(_TRIM_TRACE, (execution_id, trace_max)))
    return statements


def commit_plan(prepared: PreparedCommit, trace_max: int | None) -> CommitPlan:
    """The statements writing ``prepared``: CAS first, then outbox, dedupe, spawns, timers,
    trace (the upstream order; only the order inside one category matters)."""
    p = prepared
    if p.is_insert:
        cas = Statement(
            _INSERT_EXECUTION,
            (
                p.execution_id,
                p.definition_id,
                p.status,
                p.outcome,
                p.active_path,
                p.parent_id,
                p.new_version,
                p.document,
            ),
        )
    else:
        cas = Statement(
            _UPDATE_EXECUTION,
            (
                p.definition_id,
                p.status,
                p.outcome,
                p.active_path,
                p.parent_id,
                p.new_version,
                p.document,
                p.execution_id,
                p.expected_version,
            ),
        )
    effects: list[Statement] = [
        Statement(_INSERT_OUTBOX, (emit.target_id, emit.event_json)) for emit in p.emits
    ]
    if p.processed_event_id is not None:
        effects.append(Statement(_MARK_PROCESSED, (p.execution_id, p.processed_event_id)))
    effects.extend(
        Statement(
            _INSERT_SPAWN, (p.execution_id, spawn.child_id, spawn.root_path, spawn.context_json)
        )
        for spawn in p.spawns
    )
    for op in p.timers:
        if op.action == "schedule":
            effects.append(
                Statement(_SCHEDULE_TIMER, (p.execution_id, op.path, op.fire_at, repr(op.fire_at)))
            )
        else:
            effects.append(Statement(_CANCEL_TIMER, (p.execution_id, op.path)))
    if p.trace is not None:
        effects.extend(_trace_statements(p.execution_id, p.trace, trace_max))
    else:
        trace_keep_from(0, trace_max)
    return CommitPlan(p, cas, Statement(_FOUND_VERSION, (p.execution_id,)), tuple(effects))


def found_version(row: Sequence[Any] | None) -> int | None:
    """The stored version read by ``CommitPlan.found`` (``None`` = no record)."""
    return None if row is None else int(row[0])


def append_trace_plan(
    execution_id: str, entry: dict[str, Any], trace_max: int | None
) -> AppendTracePlan:
    """Append one step outside a commit (same index and ring rules as a commit's step)."""
    body = encode_trace_step(entry)
    return AppendTracePlan(
        execution_id,
        Statement(_EXECUTION_EXISTS, (execution_id,)),
        tuple(_trace_statements(execution_id, body, trace_max)),
    )


# -- single-statement writes --------------------------------------------------------------------


def ack_outbox_statement(seq: int) -> Statement:
    """Remove one delivered outbox entry (unknown seq: no row changes)."""
    return Statement("DELETE FROM outbox WHERE seq = ?", (_seq(seq),))


def ack_spawn_statement(seq: int) -> Statement:
    """Remove one spawn intent (unknown seq: no row changes)."""
    return Statement("DELETE FROM spawns WHERE seq = ?", (_seq(seq),))


def delete_timer_statement(execution_id: str, path: str, fire_at: float) -> Statement:
    """Disarm a timer only while it still holds exactly ``fire_at`` (a re-armed one survives)."""
    return Statement(
        "DELETE FROM timers WHERE execution_id = ? AND path = ? AND fire_at = ?",
        (execution_id, path, float(fire_at)),
    )


def _seq(seq: int) -> int:
    if isinstance(seq, bool) or not isinstance(seq, int):
        raise TypeError(f"seq must be an int from a pending entry, got {seq!r}")
    return seq


# -- reads --------------------------------------------------------------------------------------


def load_statement(execution_id: str) -> Statement:
    """The stored document of one execution."""
    return Statement("SELECT data FROM executions WHERE id = ?", (execution_id,))


def execution_from_row(row: Sequence[Any] | None) -> Execution | None:
    """Decode :func:`load_statement`'s row (a fresh object)."""
    return None if row is None else decode_execution(row[0])


def load_for_event_statement(execution_id: str, event_id: str) -> Statement:
    """The document plus whether ``event_id`` was processed, in one statement."""
    return Statement(
        "SELECT e.data, EXISTS (SELECT 1 FROM processed_events AS p "
        "WHERE p.execution_id = e.id AND p.event_id = ?) "
        "FROM executions AS e WHERE e.id = ?",
        (event_id, execution_id),
    )


def load_for_event_from_row(row: Sequence[Any] | None) -> tuple[Execution | None, bool]:
    """Decode :func:`load_for_event_statement`'s row; unknown execution = ``(None, False)``."""
    if row is None:
        return None, False
    return decode_execution(row[0]), bool(row[1])


def is_processed_statement(execution_id: str, event_id: str) -> Statement:
    """A primary-key probe of the dedupe ledger."""
    return Statement(
        "SELECT 1 FROM processed_events WHERE execution_id = ? AND event_id = ?",
        (execution_id, event_id),
    )


def check_limit(limit: int | None) -> int:
    """A relay/sweep ``limit`` as a bound ``LIMIT`` value (-1 = unbounded in SQLite)."""
    checked = sweep_limit(limit)
    return -1 if checked is None else checked


def pending_outbox_statement(limit: int | None) -> Statement:
    """Undelivered events, oldest first (served by the ``seq`` primary key)."""
    return Statement(
        "SELECT seq, target_id, event FROM outbox ORDER BY seq LIMIT ?", (check_limit(limit),)
    )


def outbox_from_rows(rows: Iterable[Sequence[Any]]) -> list[OutboxEntry]:
    """Decode :func:`pending_outbox_statement`'s rows."""
    return [OutboxEntry(int(seq), target, decode_event(event)) for seq, target, event in rows]


def pending_spawns_statement(limit: int | None) -> Statement:
    """Uncreated children, oldest first (served by the ``seq`` primary key)."""
    return Statement(
        "SELECT seq, parent_id, child_id, root_path, context FROM spawns ORDER BY seq LIMIT ?",
        (check_limit(limit),),
    )


def spawns_from_rows(rows: Iterable[Sequence[Any]]) -> list[SpawnEntry]:
    """Decode :func:`pending_spawns_statement`'s rows."""
    return [
        SpawnEntry(int(seq), parent, child, root, loads(context))
        for seq, parent, child, root, context in rows
    ]


def due_timers_statement(now: float, limit: int | None) -> Statement:
    """Armed timers with ``fire_at <= now``, ascending (a range scan of ``timers_due``)."""
    if isinstance(now, bool) or not isinstance(now, (int, float)):
        raise TypeError(f"now must be a number of epoch seconds, got {now!r}")
    return Statement(
        "SELECT execution_id, path, fire_at_repr FROM timers WHERE fire_at <= ? "
        "ORDER BY fire_at, execution_id, path LIMIT ?",
        (float(now), check_limit(limit)),
    )


def due_from_rows(rows: Iterable[Sequence[Any]]) -> list[DueTimer]:
    """Decode :func:`due_timers_statement`'s rows (``fire_at`` bit-exact, ``-0.0`` included)."""
    return [(execution_id, path, float(text)) for execution_id, path, text in rows]


def read_trace_statement(execution_id: str) -> Statement:
    """The retained steps of one execution, oldest first."""
    return Statement(
        "SELECT idx, entry FROM trace WHERE execution_id = ? ORDER BY idx", (execution_id,)
    )


def trace_from_rows(rows: Iterable[Sequence[Any]]) -> list[dict[str, Any]]:
    """Decode :func:`read_trace_statement`'s rows (the column's index wins)."""
    return [decode_trace_step(entry, int(idx)) for idx, entry in rows]


# -- listing ------------------------------------------------------------------------------------

_SUMMARY_COLUMNS = "id, definition_id, status, outcome, active_path, version, parent_id"


def listing_plan(
    *,
    status: Iterable[Status] | None,
    definition_id: str | None,
    roots_only: bool,
    limit: int,
    cursor: str | None,
) -> tuple[ListingQuery, Statement | None]:
    """The validated query and its keyset statement (``None`` when it matches nothing).

    The statement probes ``limit + 1`` rows after the cursor's id, ordered by id, with every
    filter as a bound parameter.
    """
    query = listing_query(
        status=status,
        definition_id=definition_id,
        roots_only=roots_only,
        limit=limit,
        cursor=cursor,
    )
    if query.matches_nothing:
        return query, None
    clauses: list[str] = []
    params: list[Any] = []
    if query.after is not None:
        clauses.append("id > ?")
        params.append(query.after)
    if query.definition_id is not None:
        clauses.append("definition_id = ?")
        params.append(query.definition_id)
    if query.roots_only:
        clauses.append("parent_id IS NULL")
    probe = query.limit + 1
    statuses = query.status_values
    if statuses is None or len(statuses) == 1:
        if statuses is not None:
            clauses.append("status = ?")
            params.append(statuses[0])
        return query, Statement(_select_page(clauses), (*params, probe))
    # Several statuses: one index-ordered arm per status, merged by id.  Each arm reads at most
    # ``probe`` rows, so the cost grows with the page, not with the matching rows.
    arm = f"SELECT * FROM ({_select_page([*clauses, 'status = ?'])})"  # noqa: S608
    arms = [arm] * len(statuses)
    arm_params = [value for status in statuses for value in (*params, status, probe)]
    sql = " UNION ALL ".join(arms) + " ORDER BY id LIMIT ?"
    return query, Statement(sql, (*arm_params, probe))


def _select_page(clauses: Sequence[str]) -> str:
    """One keyset probe over ``executions``; ``clauses`` are fixed texts with ``?`` only."""
    where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
    return f"SELECT {_SUMMARY_COLUMNS} FROM executions{where} ORDER BY id LIMIT ?"  # noqa: S608


def page_from_rows(query: ListingQuery, rows: Iterable[Sequence[Any]]) -> ExecutionPage:
    """Decode the probe rows into a page (a cursor only when another row exists)."""
    summaries = [
        ExecutionSummary(
            id=row[0],
            definition_id=row[1],
            status=Status(row[2]),
            outcome=row[3],
            active_path=row[4],
            version=int(row[5]),
            parent_id=row[6],
        )
        for row in rows
    ]
    return page_from_probe(query, summaries)


# -- errors -------------------------------------------------------------------------------------

_SQLITE_BUSY = 5
_SQLITE_LOCKED = 6


def is_busy(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite's "database is locked/busy" (another writer held the lock)."""
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int) and (code & 0xFF) in (_SQLITE_BUSY, _SQLITE_LOCKED):
        return True
    text = str(exc).lower()
    return "database is locked" in text or "database table is locked" in text


def busy_error(exc: BaseException, where: str, busy_timeout_ms: int) -> StoreUnavailable:
    """The retryable error raised when the write lock stayed taken past the busy timeout."""
    return StoreUnavailable(
        f"SQLite database {where} stayed locked by another connection for {busy_timeout_ms} ms "
        f"({exc}); retry the operation, raise busy_timeout_ms, or make sure no other process "
        "holds a long write transaction on this file"
    )


def closed_error(where: str) -> StoreError:
    """The error raised by any call on a closed store."""
    return StoreError(f"the SQLite store over {where} is closed; open a new store")
