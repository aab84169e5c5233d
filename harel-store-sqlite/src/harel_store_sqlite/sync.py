"""``SqliteStore``: the synchronous SQLite store over the stdlib ``sqlite3`` module.

One connection per store, in autocommit mode (``isolation_level=None``) so every transaction
is explicit: each write is exactly one ``BEGIN IMMEDIATE`` ... ``COMMIT`` that rolls back
completely on any exception.  A ``threading.Lock`` serialises all use of the connection, so
threads sharing a store never see or join each other's transactions.  Several processes (or
several stores) may use one file: SQLite's file lock admits one writer at a time and the
version CAS detects lost updates.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar, Self

from harel.model import Execution, ExecutionPage, Status
from harel.store.common import committing, conflict, connect_with_retry
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
from harel.store.errors import ExecutionNotFound, StoreUnavailable

from harel_store_sqlite import _plan as plan
from harel_store_sqlite._capabilities import CAPABILITIES
from harel_store_sqlite._options import (
    DEFAULT_BUSY_TIMEOUT_MS,
    SqliteOptions,
    make_options,
    split_from_url_knobs,
)
from harel_store_sqlite._schema import (
    DDL,
    RECORD_VERSION,
    SCHEMA_VERSION,
    TABLES_PROBE,
    VERSION_PROBE,
    schema_action,
)


class SqliteStore:
    """A durable, thread-safe :class:`~harel.store.contract.ExecutionStore` in one SQLite file.

    ``path`` is a file (created on first open) or ``":memory:"``.  ``busy_timeout_ms`` is how
    long a write waits for another connection's write lock before raising
    :class:`~harel.store.errors.StoreUnavailable`.  ``synchronous`` is ``FULL`` (default: a
    returned commit survives power loss), ``NORMAL`` (with WAL: survives a process crash, the
    last commits may be lost on power loss or an OS crash, fewer fsyncs) or ``EXTRA``.
    """

    capabilities: ClassVar[Capabilities] = CAPABILITIES

    def __init__(
        self,
        path: str = ":memory:",
        *,
        trace_max: int | None = DEFAULT_TRACE_MAX,
        busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
        synchronous: str = "FULL",
    ) -> None:
        self.options: SqliteOptions = make_options(
            str(path), trace_max=trace_max, busy_timeout_ms=busy_timeout_ms, synchronous=synchronous
        )
        self.trace_max = self.options.trace_max
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = self._open()

    @classmethod
    def from_url(cls, url: str, **knobs: Any) -> Self:
        """Open ``sqlite:///relative.db``, ``sqlite:////abs/path.db`` or ``sqlite:///:memory:``.

        Knobs: ``busy_timeout_ms``, ``synchronous``, ``trace_max`` (URL query or keywords);
        ``connect_retries`` / ``retry_delay`` retry an open that finds the file locked.
        """
        path, store_knobs, connect = split_from_url_knobs(url, knobs)
        return connect_with_retry(
            lambda: cls(path, **store_knobs),
            retries=int(connect.get("connect_retries", 0)),
            delay=float(connect.get("retry_delay", 0.5)),
            retry_on=(StoreUnavailable,),
            what=f"SQLite database {path}",
        )

    def __repr__(self) -> str:
        return f"SqliteStore({self.options.path!r})"

    # -- connection and transactions ------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        opts = self.options
        try:
            conn = sqlite3.connect(
                opts.path,
                isolation_level=None,
                check_same_thread=False,
                timeout=opts.busy_timeout_ms / 1000,
                uri=opts.path.startswith("file:"),
            )
        except sqlite3.Error as exc:
            raise StoreUnavailable(
                f"cannot open SQLite database {opts.path!r}: {exc}; check that its directory "
                "exists and is writable"
            ) from exc
        try:
            for pragma in opts.pragmas():
                conn.execute(pragma).fetchall()
            self._ensure_schema(conn)
        except sqlite3.Error as exc:
            conn.close()
            if plan.is_busy(exc):
                raise plan.busy_error(exc, repr(opts.path), opts.busy_timeout_ms) from exc
            raise
        except BaseException:
            conn.close()
            raise
        return conn

    def _ensure_schema(self, conn: sqlite3.Connection) -> None:
        where = f"SQLite database {self.options.path!r}"
        if not schema_action(*_probe_schema(conn), where):
            return
        conn.execute(plan.BEGIN)
        try:
            if schema_action(*_probe_schema(conn), where):
                for ddl in DDL:
                    conn.execute(ddl)
                conn.execute(RECORD_VERSION, (SCHEMA_VERSION,))
            conn.execute(plan.COMMIT)
        except BaseException:
            _rollback_quietly(conn)
            raise

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        """The connection, held exclusively; SQLite lock errors become StoreUnavailable."""
        with self._lock:
            conn = self._conn
            if conn is None:
                raise plan.closed_error(repr(self.options.path))
            try:
                yield conn
            except sqlite3.OperationalError as exc:
                if plan.is_busy(exc):
                    raise plan.busy_error(
                        exc, repr(self.options.path), self.options.busy_timeout_ms
                    ) from exc
                raise

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction: committed on success, rolled back on anything."""
        with self._connection() as conn:
            conn.execute(plan.BEGIN)
            try:
                yield conn
                conn.execute(plan.COMMIT)
            except BaseException:
                _rollback_quietly(conn)
                raise

    def _write(self, statement: plan.Statement) -> None:
        with self._transaction() as conn:
            conn.execute(statement.sql, statement.params)

    def _fetchone(self, statement: plan.Statement) -> Any:
        with self._connection() as conn:
            return conn.execute(statement.sql, statement.params).fetchone()

    def _fetchall(self, statement: plan.Statement) -> list[Any]:
        with self._connection() as conn:
            return conn.execute(statement.sql, statement.params).fetchall()

    # -- the contract ---------------------------------------------------------------------------

    def load(self, execution_id: str) -> Execution | None:
        """A fresh copy of the stored execution, or ``None``."""
        return plan.execution_from_row(self._fetchone(plan.load_statement(execution_id)))

    def load_for_event(self, execution_id: str, event_id: str) -> tuple[Execution | None, bool]:
        """``load`` plus whether ``event_id`` was already processed, in one statement."""
        row = self._fetchone(plan.load_for_event_statement(execution_id, event_id))
        return plan.load_for_event_from_row(row)

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
        """Write one step in one transaction: all of it, or nothing and ``exe.version`` restored."""
        with committing(exe, emits, processed_event_id, timers, spawns, trace) as prepared:
            steps = plan.commit_plan(prepared, self.trace_max)
            with self._transaction() as conn:
                if conn.execute(steps.cas.sql, steps.cas.params).rowcount != 1:
                    row = conn.execute(steps.found.sql, steps.found.params).fetchone()
                    raise conflict(prepared, plan.found_version(row))
                for statement in steps.effects:
                    conn.execute(statement.sql, statement.params)

    def is_processed(self, execution_id: str, event_id: str) -> bool:
        """Whether that execution already processed that event."""
        return self._fetchone(plan.is_processed_statement(execution_id, event_id)) is not None

    def pending_outbox(self, *, limit: int | None = None) -> list[OutboxEntry]:
        """Undelivered events, oldest first (at most ``limit``)."""
        return plan.outbox_from_rows(self._fetchall(plan.pending_outbox_statement(limit)))

    def ack_outbox(self, seq: int) -> None:
        """Forget a delivered event (unknown seq: no-op)."""
        self._write(plan.ack_outbox_statement(seq))

    def pending_spawns(self, *, limit: int | None = None) -> list[SpawnEntry]:
        """Uncreated children, oldest first (at most ``limit``)."""
        return plan.spawns_from_rows(self._fetchall(plan.pending_spawns_statement(limit)))

    def ack_spawn(self, seq: int) -> None:
        """Forget a created child's intent (unknown seq: no-op)."""
        self._write(plan.ack_spawn_statement(seq))

    def due_timers(self, now: float, *, limit: int | None = None) -> list[DueTimer]:
        """Armed timers with ``fire_at <= now``, ascending by ``(fire_at, execution_id, path)``."""
        return plan.due_from_rows(self._fetchall(plan.due_timers_statement(now, limit)))

    def delete_timer(self, execution_id: str, path: str, fire_at: float) -> None:
        """Disarm a timer only if it still holds exactly ``fire_at``."""
        self._write(plan.delete_timer_statement(execution_id, path, fire_at))

    def read_trace(self, execution_id: str) -> list[dict[str, Any]]:
        """The retained trace steps, oldest first, each with its ``index``."""
        return plan.trace_from_rows(self._fetchall(plan.read_trace_statement(execution_id)))

    def append_trace(self, execution_id: str, entry: dict[str, Any]) -> None:
        """Append a step in its own transaction; unknown execution raises ``ExecutionNotFound``."""
        steps = plan.append_trace_plan(execution_id, entry, self.trace_max)
        with self._transaction() as conn:
            if conn.execute(steps.guard.sql, steps.guard.params).fetchone() is None:
                raise ExecutionNotFound(execution_id)
            for statement in steps.effects:
                conn.execute(statement.sql, statement.params)

    def list_executions(
        self,
        *,
        status: Iterable[Status] | None = None,
        definition_id: str | None = None,
        roots_only: bool = False,
        limit: int = 100,
        cursor: str | None = None,
    ) -> ExecutionPage:
        """One page of summaries ordered by id, served by an index with a keyset cursor."""
        query, statement = plan.listing_plan(
            status=status,
            definition_id=definition_id,
            roots_only=roots_only,
            limit=limit,
            cursor=cursor,
        )
        if statement is None:
            return ExecutionPage()
        return plan.page_from_rows(query, self._fetchall(statement))

    def close(self) -> None:
        """Close the connection (idempotent); later calls raise ``StoreError``."""
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _probe_schema(conn: sqlite3.Connection) -> tuple[set[str], int | None]:
    tables = {row[0] for row in conn.execute(TABLES_PROBE).fetchall()}
    version = None
    if "harel_schema" in tables:
        row = conn.execute(VERSION_PROBE).fetchone()
        version = None if row is None else int(row[0])
    return tables, version


def _rollback_quietly(conn: sqlite3.Connection) -> None:
    """Roll back if a transaction is open (SQLite may already have rolled back on its own)."""
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            conn.execute(plan.ROLLBACK)
