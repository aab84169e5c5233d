"""``AsyncSqliteStore``: the asyncio twin of :class:`~harel_store_sqlite.sync.SqliteStore`.

It runs the same plan over one ``aiosqlite`` connection.  aiosqlite serialises single calls,
not transactions, so an ``asyncio.Lock`` is held around every transaction and every read:
concurrent tasks never add statements to each other's transactions, never see each other's
uncommitted rows, and a conflict's rollback never discards another task's work.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Any, ClassVar, Self

import aiosqlite
from harel.model import Execution, ExecutionPage, Status
from harel.store.common import aconnect_with_retry, committing, conflict
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


class AsyncSqliteStore:
    """A durable :class:`~harel.store.contract.AsyncExecutionStore` in one SQLite file.

    Build it with ``await AsyncSqliteStore.open(path, ...)`` or
    ``await AsyncSqliteStore.from_url(url)``; the knobs are those of ``SqliteStore``.
    Safe for any number of concurrent tasks on one event loop.
    """

    capabilities: ClassVar[Capabilities] = CAPABILITIES

    def __init__(self, conn: aiosqlite.Connection, options: SqliteOptions) -> None:
        """Wrap an already opened and initialised connection (use :meth:`open`)."""
        self.options = options
        self.trace_max = options.trace_max
        self._conn: aiosqlite.Connection | None = conn
        self._lock = asyncio.Lock()

    @classmethod
    async def open(
        cls,
        path: str = ":memory:",
        *,
        trace_max: int | None = DEFAULT_TRACE_MAX,
        busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
        synchronous: str = "FULL",
    ) -> Self:
        """Open (creating if needed) the database at ``path`` and check its schema version."""
        options = make_options(
            str(path), trace_max=trace_max, busy_timeout_ms=busy_timeout_ms, synchronous=synchronous
        )
        try:
            conn = await aiosqlite.connect(
                options.path,
                isolation_level=None,
                check_same_thread=False,
                timeout=options.busy_timeout_ms / 1000,
                uri=options.path.startswith("file:"),
            )
        except sqlite3.Error as exc:
            raise StoreUnavailable(
                f"cannot open SQLite database {options.path!r}: {exc}; check that its directory "
                "exists and is writable"
            ) from exc
        try:
            for pragma in options.pragmas():
                await conn.execute_fetchall(pragma)
            await _ensure_schema(conn, f"SQLite database {options.path!r}")
        except sqlite3.Error as exc:
            await conn.close()
            if plan.is_busy(exc):
                raise plan.busy_error(exc, repr(options.path), options.busy_timeout_ms) from exc
            raise
        except BaseException:
            await conn.close()
            raise
        return cls(conn, options)

    create = open
    """Upstream's name for :meth:`open`."""

    @classmethod
    async def from_url(cls, url: str, **knobs: Any) -> Self:
        """Open ``sqlite:///relative.db``, ``sqlite:////abs/path.db`` or ``sqlite:///:memory:``.

        Knobs as for ``SqliteStore.from_url``.
        """
        path, store_knobs, connect = split_from_url_knobs(url, knobs)
        return await aconnect_with_retry(
            lambda: cls.open(path, **store_knobs),
            retries=int(connect.get("connect_retries", 0)),
            delay=float(connect.get("retry_delay", 0.5)),
            retry_on=(StoreUnavailable,),
            what=f"SQLite database {path}",
        )

    def __repr__(self) -> str:
        return f"AsyncSqliteStore({self.options.path!r})"

    # -- connection and transactions ------------------------------------------------------------

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[aiosqlite.Connection]:
        """The connection, held exclusively; SQLite lock errors become StoreUnavailable."""
        async with self._lock:
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

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[aiosqlite.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction: committed on success, rolled back on anything.

        The rollback is shielded from cancellation, and aiosqlite runs calls in FIFO order, so
        it always executes before the next holder of the lock starts its transaction.
        """
        async with self._connection() as conn:
            await conn.execute(plan.BEGIN)
            try:
                yield conn
                await conn.execute(plan.COMMIT)
            except BaseException:
                await asyncio.shield(_rollback_quietly(conn))
                raise

    async def _write(self, statement: plan.Statement) -> None:
        async with self._transaction() as conn:
            await conn.execute(statement.sql, statement.params)

    async def _fetchone(self, statement: plan.Statement) -> Any:
        async with self._connection() as conn:
            rows = list(await conn.execute_fetchall(statement.sql, statement.params))
        return rows[0] if rows else None

    async def _fetchall(self, statement: plan.Statement) -> list[Any]:
        async with self._connection() as conn:
            return list(await conn.execute_fetchall(statement.sql, statement.params))

    # -- the contract ---------------------------------------------------------------------------

    async def load(self, execution_id: str) -> Execution | None:
        """A fresh copy of the stored execution, or ``None``."""
        return plan.execution_from_row(await self._fetchone(plan.load_statement(execution_id)))

    async def load_for_event(
        self, execution_id: str, event_id: str
    ) -> tuple[Execution | None, bool]:
        """``load`` plus whether ``event_id`` was already processed, in one statement."""
        row = await self._fetchone(plan.load_for_event_statement(execution_id, event_id))
        return plan.load_for_event_from_row(row)

    async def save(self, exe: Execution) -> None:
        """CAS-write the snapshot alone (``commit(exe, [])``)."""
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
        """Write one step in one transaction: all of it, or nothing and ``exe.version`` restored."""
        with committing(exe, emits, processed_event_id, timers, spawns, trace) as prepared:
            steps = plan.commit_plan(prepared, self.trace_max)
            async with self._transaction() as conn:
                cursor = await conn.execute(steps.cas.sql, steps.cas.params)
                if cursor.rowcount != 1:
                    rows = list(await conn.execute_fetchall(steps.found.sql, steps.found.params))
                    raise conflict(prepared, plan.found_version(rows[0] if rows else None))
                for statement in steps.effects:
                    await conn.execute(statement.sql, statement.params)

    async def is_processed(self, execution_id: str, event_id: str) -> bool:
        """Whether that execution already processed that event."""
        row = await self._fetchone(plan.is_processed_statement(execution_id, event_id))
        return row is not None

    async def pending_outbox(self, *, limit: int | None = None) -> list[OutboxEntry]:
        """Undelivered events, oldest first (at most ``limit``)."""
        return plan.outbox_from_rows(await self._fetchall(plan.pending_outbox_statement(limit)))

    async def ack_outbox(self, seq: int) -> None:
        """Forget a delivered event (unknown seq: no-op)."""
        await self._write(plan.ack_outbox_statement(seq))

    async def pending_spawns(self, *, limit: int | None = None) -> list[SpawnEntry]:
        """Uncreated children, oldest first (at most ``limit``)."""
        return plan.spawns_from_rows(await self._fetchall(plan.pending_spawns_statement(limit)))

    async def ack_spawn(self, seq: int) -> None:
        """Forget a created child's intent (unknown seq: no-op)."""
        await self._write(plan.ack_spawn_statement(seq))

    async def due_timers(self, now: float, *, limit: int | None = None) -> list[DueTimer]:
        """Armed timers with ``fire_at <= now``, ascending by ``(fire_at, execution_id, path)``."""
        return plan.due_from_rows(await self._fetchall(plan.due_timers_statement(now, limit)))

    async def delete_timer(self, execution_id: str, path: str, fire_at: float) -> None:
        """Disarm a timer only if it still holds exactly ``fire_at``."""
        await self._write(plan.delete_timer_statement(execution_id, path, fire_at))

    async def read_trace(self, execution_id: str) -> list[dict[str, Any]]:
        """The retained trace steps, oldest first, each with its ``index``."""
        return plan.trace_from_rows(await self._fetchall(plan.read_trace_statement(execution_id)))

    async def append_trace(self, execution_id: str, entry: dict[str, Any]) -> None:
        """Append a step in its own transaction; unknown execution raises ``ExecutionNotFound``."""
        steps = plan.append_trace_plan(execution_id, entry, self.trace_max)
        async with self._transaction() as conn:
            if not list(await conn.execute_fetchall(steps.guard.sql, steps.guard.params)):
                raise ExecutionNotFound(execution_id)
            for statement in steps.effects:
                await conn.execute(statement.sql, statement.params)

    async def list_executions(
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
        return plan.page_from_rows(query, await self._fetchall(statement))

    async def close(self) -> None:
        """Close the connection and stop its worker thread (idempotent)."""
        async with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()

    def abandon(self) -> None:
        """Close the connection and stop its worker thread without awaiting (idempotent).

        For synchronous teardown code only (a test harness releasing stores a test forgot to
        close: aiosqlite's worker thread would otherwise keep the process alive).  Prefer
        ``await close()``.  Must not race a running operation of this store.
        """
        conn, self._conn = self._conn, None
        if conn is None:
            return
        # aiosqlite's stop() reports back to the current event loop when there is one, and that
        # loop may be closed by the time the worker gets there; asking from a helper thread
        # (which has no event loop) makes the worker close and exit without reporting.
        helper = threading.Thread(target=conn.stop, name="harel-sqlite-abandon")
        helper.start()
        helper.join()
        worker = getattr(conn, "_thread", None)  # aiosqlite >= 0.20 keeps its worker here
        if isinstance(worker, threading.Thread) and worker.is_alive():
            worker.join(timeout=10)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


async def _probe_schema(conn: aiosqlite.Connection) -> tuple[set[str], int | None]:
    tables = {row[0] for row in await conn.execute_fetchall(TABLES_PROBE)}
    version = None
    if "harel_schema" in tables:
        rows = list(await conn.execute_fetchall(VERSION_PROBE))
        version = int(rows[0][0]) if rows else None
    return tables, version


async def _ensure_schema(conn: aiosqlite.Connection, where: str) -> None:
    if not schema_action(*await _probe_schema(conn), where):
        return
    await conn.execute(plan.BEGIN)
    try:
        if schema_action(*await _probe_schema(conn), where):
            for ddl in DDL:
                await conn.execute(ddl)
            await conn.execute(RECORD_VERSION, (SCHEMA_VERSION,))
        await conn.execute(plan.COMMIT)
    except BaseException:
        await _rollback_quietly(conn)
        raise


async def _rollback_quietly(conn: aiosqlite.Connection) -> None:
    """Roll back if a transaction is open (SQLite may already have rolled back on its own)."""
    with contextlib.suppress(sqlite3.Error, ValueError):
        await conn.execute(plan.ROLLBACK)
