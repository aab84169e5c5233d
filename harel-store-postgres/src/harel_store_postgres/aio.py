"""``AsyncPostgresStore``: the asyncio twin of :class:`~harel_store_postgres.sync.PostgresStore`.

Same plan, same layout, over a :class:`psycopg_pool.AsyncConnectionPool` of autocommit
connections; any number of tasks may share one store.

Cancellation: every operation runs as its own task that the caller's cancellation does not
interrupt.  Cancelled before the operation sent anything, it is withdrawn; cancelled later,
the caller waits (ignoring further cancellations) until the statement's outcome is known and
only then re-raises :class:`asyncio.CancelledError`.  A cancelled ``commit`` therefore leaves
``exe.version`` telling the truth — bumped when the step was stored, restored when it was
not — and never a connection mid-query: the pool gets each connection back idle, or discards
it when it broke.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, ClassVar, Self, TypeVar

import psycopg
from harel.model import Execution, ExecutionPage, Status
from harel.store import contract
from harel.store.common import aconnect_with_retry, adrive, committing
from harel.store.common.sql.requests import Result, Statement
from harel.store.errors import StoreUnavailable
from psycopg_pool import AsyncConnectionPool

from harel_store_postgres import _plan as plan
from harel_store_postgres._conn import Renderer, connect_kwargs, connection_alive, pool_kwargs
from harel_store_postgres._errors import DRIVER_ERRORS, connect_error, map_error
from harel_store_postgres._options import PostgresOptions, options_from_url
from harel_store_postgres._plugin import CAPABILITIES

AsyncConnection = psycopg.AsyncConnection[Any]
T = TypeVar("T")


async def _run_statement(conn: AsyncConnection, render: Renderer, statement: Statement) -> Result:
    cursor = await conn.execute(render(statement.sql), statement.params)
    rows = await cursor.fetchall() if cursor.description is not None else ()
    return Result(rows, cursor.rowcount)


class AsyncPostgresStore:
    """A durable :class:`~harel.store.contract.AsyncExecutionStore` in one PostgreSQL schema.

    Build it with ``await AsyncPostgresStore.from_url(url)`` (knobs as for ``PostgresStore``)
    or ``await AsyncPostgresStore.open(options)``; ``await close()`` closes the pool.
    """

    capabilities: ClassVar[contract.Capabilities] = CAPABILITIES

    def __init__(
        self, pool: AsyncConnectionPool[AsyncConnection], options: PostgresOptions
    ) -> None:
        """Wrap an opened pool over a schema that holds the current layout (use :meth:`open`)."""
        self.options = options
        self.trace_max = options.trace_max
        self._pool = pool
        self._render = Renderer(options.schema)

    @classmethod
    async def from_url(cls, url: str, **knobs: Any) -> Self:
        """Open a ``postgresql://`` / ``postgres://`` URL, waiting (bounded) for the server."""
        return await cls.open(options_from_url(url, **knobs))

    @classmethod
    async def open(cls, options: PostgresOptions) -> Self:
        """Connect (with retries), create or check the schema, then open the pool."""
        conn = await aconnect_with_retry(
            partial(_connect, options),
            retries=options.connect_retries,
            delay=options.retry_delay,
            retry_on=(StoreUnavailable,),
            what=options.where,
        )
        async with conn:
            run = partial(_run_statement, conn, Renderer(options.schema))
            try:
                await adrive(plan.open_schema(options.schema, options.where), run)
            except DRIVER_ERRORS as exc:
                raise map_error(exc, options.where) from exc
        pool: AsyncConnectionPool[AsyncConnection] = AsyncConnectionPool(**pool_kwargs(options))
        try:
            await pool.open(wait=True, timeout=max(options.pool_timeout, 1.0))
        except BaseException as exc:
            await asyncio.shield(pool.close())
            if isinstance(exc, DRIVER_ERRORS):
                raise map_error(exc, options.where) from exc
            raise
        return cls(pool, options)

    def __repr__(self) -> str:
        return f"AsyncPostgresStore({self.options.where!r}, schema={self.options.schema!r})"

    # -- connections and cancellation ----------------------------------------------------------

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[AsyncConnection]:
        """A live pooled connection; dead ones (server restarted) are dropped, not used."""
        attempts = self.options.pool_max + 1
        while attempts:
            attempts -= 1
            async with self._pool.connection() as conn:
                if not connection_alive(conn):
                    await conn.close()  # the pool replaces a closed connection
                    continue
                yield conn
                return
        raise StoreUnavailable(f"every pooled connection to {self.options.where} is dead")

    async def _execute(self, statement: Statement) -> Result:
        try:
            async with self._connection() as conn:
                return await _run_statement(conn, self._render, statement)
        except DRIVER_ERRORS as exc:
            raise map_error(exc, self.options.where) from exc

    async def _settle(self, operation: plan.Plan[T]) -> tuple[T, bool]:
        """Run ``operation`` to its end even if the caller is cancelled meanwhile.

        Returns the value and whether the caller was cancelled (the caller then re-raises
        ``CancelledError`` once it has recorded the outcome).  Cancelled before the operation
        started, it is withdrawn and ``CancelledError`` propagates at once; when the operation
        failed and the caller was cancelled, ``CancelledError`` is raised (chained).
        """
        started = cancelled = False

        async def execute(statement: Statement) -> Result:
            if cancelled:  # stop between statements (prune_processed's batches)
                raise asyncio.CancelledError
            return await self._execute(statement)

        async def run() -> T:
            nonlocal started
            started = True
            return await adrive(operation, execute)

        task = asyncio.ensure_future(run())
        while not task.done():
            try:
                await asyncio.shield(task)
            except asyncio.CancelledError:
                if task.cancelled():  # the operation itself stopped
                    break
                if not started:
                    task.cancel()
                    raise
                cancelled = True
            except BaseException:
                if not task.done():  # not the task's own error (that one is raised below)
                    raise
                break
        if task.cancelled():  # stopped between statements, or the event loop is closing
            raise asyncio.CancelledError
        error = task.exception()
        if error is not None:
            if cancelled:
                raise asyncio.CancelledError from error
            raise error
        return task.result(), cancelled

    async def _run(self, operation: plan.Plan[T]) -> T:
        value, cancelled = await self._settle(operation)
        if cancelled:
            raise asyncio.CancelledError
        return value

    # -- the contract ---------------------------------------------------------------------------

    async def load(self, execution_id: str) -> Execution | None:
        """A fresh copy of the stored execution, or ``None``."""
        return await self._run(plan.load(execution_id))

    async def load_for_event(
        self, execution_id: str, event_id: str
    ) -> tuple[Execution | None, bool]:
        """``load`` plus whether ``event_id`` was already processed, in one statement."""
        return await self._run(plan.load_for_event(execution_id, event_id))

    async def save(self, exe: Execution) -> None:
        """CAS-write the snapshot alone (``commit(exe, [])``)."""
        await self.commit(exe, [])

    async def commit(
        self,
        exe: Execution,
        emits: Sequence[contract.Emit],
        processed_event_id: str | None = None,
        timers: Sequence[contract.TimerOp] = (),
        spawns: Sequence[contract.Spawn] = (),
        trace: dict[str, Any] | None = None,
    ) -> None:
        """Write one step in one statement: all of it, or nothing and ``exe.version`` restored.

        Cancelled midway, it still waits for the statement's outcome, leaves ``exe.version``
        saying whether the step was stored, then raises ``CancelledError``.
        """
        with committing(exe, emits, processed_event_id, timers, spawns, trace) as prepared:
            _, cancelled = await self._settle(plan.commit(prepared, self.trace_max))
        if cancelled:
            raise asyncio.CancelledError

    async def is_processed(self, execution_id: str, event_id: str) -> bool:
        """Whether that execution already processed that event."""
        return await self._run(plan.is_processed(execution_id, event_id))

    async def pending_outbox(self, *, limit: int | None = None) -> list[contract.OutboxEntry]:
        """Undelivered events, oldest first (at most ``limit``)."""
        return await self._run(plan.pending_outbox(limit))

    async def ack_outbox(self, seq: int) -> None:
        """Forget a delivered event (unknown seq: no-op)."""
        await self._run(plan.ack_outbox(seq))

    async def pending_spawns(self, *, limit: int | None = None) -> list[contract.SpawnEntry]:
        """Uncreated children, oldest first (at most ``limit``)."""
        return await self._run(plan.pending_spawns(limit))

    async def ack_spawn(self, seq: int) -> None:
        """Forget a created child's intent (unknown seq: no-op)."""
        await self._run(plan.ack_spawn(seq))

    async def due_timers(self, now: float, *, limit: int | None = None) -> list[contract.DueTimer]:
        """Armed timers with ``fire_at <= now``, ascending by ``(fire_at, execution_id, path)``."""
        return await self._run(plan.due_timers(now, limit))

    async def delete_timer(self, execution_id: str, path: str, fire_at: float) -> None:
        """Disarm a timer only if it still holds exactly ``fire_at``."""
        await self._run(plan.delete_timer(execution_id, path, fire_at))

    async def read_trace(self, execution_id: str) -> list[dict[str, Any]]:
        """The retained trace steps, oldest first, each with its ``index``."""
        return await self._run(plan.read_trace(execution_id))

    async def append_trace(self, execution_id: str, entry: dict[str, Any]) -> None:
        """Append a step in its own transaction; unknown execution raises ``ExecutionNotFound``."""
        await self._run(plan.append_trace(execution_id, entry, self.trace_max))

    async def list_executions(
        self,
        *,
        limit: int = 100,
        cursor: str | None = None,
        status: Iterable[Status] | None = None,
        definition_id: str | None = None,
        roots_only: bool = False,
    ) -> ExecutionPage:
        """One page of summaries ordered by id (an index range, keyset cursor)."""
        listing = plan.list_executions(
            status=status,
            definition_id=definition_id,
            roots_only=roots_only,
            limit=limit,
            cursor=cursor,
        )
        return await self._run(listing)

    async def purge(self, execution_id: str, *, force: bool = False) -> bool:
        """Remove a finished execution and everything it owns, atomically; whether it existed."""
        return await self._run(plan.purge(execution_id, force))

    async def prune_processed(
        self, older_than: float, *, batch_size: int = contract.DEFAULT_PRUNE_BATCH
    ) -> int:
        """Drop dedupe marks recorded before ``older_than``, in short batches; how many."""
        return await self._run(plan.prune_processed(older_than, batch_size))

    async def close(self) -> None:
        """Close the pool and its connections (idempotent)."""
        await self._pool.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


async def _connect(options: PostgresOptions) -> AsyncConnection:
    """One connection attempt; failures become StoreUnavailable (retried) or a config error."""
    try:
        return await psycopg.AsyncConnection.connect(**connect_kwargs(options))
    except DRIVER_ERRORS as exc:
        raise connect_error(exc, options.where) from exc
