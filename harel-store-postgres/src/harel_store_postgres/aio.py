"""``AsyncPostgresStore``: the asyncio twin of :class:`~harel_store_postgres.sync.PostgresStore`.

The contract methods are :class:`harel.store.author.AsyncPlanStore`'s, over the same plan and
layout; this module only owns the connections: a :class:`psycopg_pool.AsyncConnectionPool` of
autocommit connections, shared by any number of tasks.

Cancellation is :class:`~harel.store.author.AsyncPlanStore`'s: a write runs as its own task
that the caller's cancellation does not interrupt, and the caller waits (ignoring further
cancellations) until its outcome is known before re-raising :class:`asyncio.CancelledError`.
A cancelled ``commit`` therefore leaves ``exe.version`` telling the truth — bumped when the
step was stored, restored when it was not.  A cancelled read is cancelled on the server by
psycopg, which waits for the connection to be idle again: the pool never gets a connection
back mid-query (a broken one is discarded).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, Self, TypeVar

import psycopg
from harel.store.author import (
    AsyncPlanStore,
    SyncHops,
    aconnect_with_retry,
    adrive,
    current_library,
    wait_in_thread,
)
from harel.store.author.sql import Result, Statement
from harel.store.errors import StoreUnavailable
from psycopg_pool import AsyncConnectionPool

from harel_store_postgres._base import PooledStore
from harel_store_postgres._conn import Renderer, connect_kwargs, connection_alive, pool_kwargs
from harel_store_postgres._errors import DRIVER_ERRORS, connect_error, map_error, map_sent_error
from harel_store_postgres._options import PostgresOptions, make_options
from harel_store_postgres._plan import Plan, PostgresPlan
from harel_store_postgres._schema import open_schema
from harel_store_postgres._wake import AsyncPostgresWakeups

AsyncConnection = psycopg.AsyncConnection[Any]
T = TypeVar("T")


async def _run_statement(conn: AsyncConnection, render: Renderer, statement: Statement) -> Result:
    cursor = await conn.execute(render(statement.sql), statement.params)
    rows = await cursor.fetchall() if cursor.description is not None else ()
    return Result(rows, cursor.rowcount)


class AsyncPostgresStore(
    PooledStore[AsyncConnectionPool[AsyncConnection]], AsyncPlanStore[PostgresPlan]
):
    """A durable :class:`~harel.store.contract.AsyncExecutionStore` in one PostgreSQL schema.

    Build it with ``await AsyncPostgresStore.from_url(url)`` (knobs as for ``PostgresStore``)
    or ``await AsyncPostgresStore.open(options)``; ``await close()`` closes the pool.
    """

    def __init__(
        self, pool: AsyncConnectionPool[AsyncConnection], options: PostgresOptions
    ) -> None:
        """Wrap an opened pool over a schema that holds the current layout (use ``open``)."""
        super().__init__(pool, options)
        self._wakeups = AsyncPostgresWakeups(options, self._execute)

    @classmethod
    async def from_url(cls, url: str, **knobs: Any) -> Self:
        """Open a ``postgresql://`` / ``postgres://`` URL, waiting (bounded) for the server."""
        return await cls.open(make_options(url, **knobs))

    @classmethod
    async def open(cls, options: PostgresOptions) -> Self:
        """Connect (with retries), create, upgrade or check the schema, then open the pool.

        Under trio (psycopg's async connections run on asyncio only) the store is
        :meth:`in_threads` over a ``PostgresStore`` with the same options."""
        if current_library() != "asyncio":
            from harel_store_postgres.sync import PostgresStore

            return await cls.in_threads(partial(PostgresStore.open, options))
        conn = await aconnect_with_retry(partial(_connect, options), **options.retry_arguments())
        async with conn:
            run = partial(_run_statement, conn, Renderer(options.schema))
            try:
                await adrive(open_schema(options.schema, options.where), run)
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

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[AsyncConnection]:
        """A live pooled connection within ``pool_timeout`` in all; dead ones (server
        restarted, connection cut) are dropped, not used."""
        deadline = time.monotonic() + self.options.pool_timeout
        attempts = self.options.pool_max + 1
        while attempts:
            attempts -= 1
            timeout = max(deadline - time.monotonic(), 0.0)
            async with self._pool.connection(timeout=timeout) as conn:
                if not connection_alive(conn):
                    await conn.close()  # the pool replaces a closed connection
                    continue
                yield conn
                return
        raise StoreUnavailable(f"every pooled connection to {self.options.where} is dead")

    async def _execute(self, statement: Statement) -> Result:
        """Run one statement.  Failing to get a connection sends nothing (plain
        ``StoreUnavailable``); a connection that breaks once the statement is handed to it
        raises :class:`RequestOutcomeUnknown` (the plan names the commit)."""
        try:
            async with self._connection() as conn:
                try:
                    return await _run_statement(conn, self._render, statement)
                except DRIVER_ERRORS as exc:
                    raise map_sent_error(exc, self.options.where, conn.broken) from exc
        except DRIVER_ERRORS as exc:
            raise map_error(exc, self.options.where) from exc

    async def _run(self, operation: Plan[T]) -> T:
        """Drive one plan operation, each statement on a pooled connection.  (Writes reach
        here through :meth:`AsyncPlanStore._write`, which settles them; a read cancelled
        mid-statement is cancelled on the server by psycopg, and its connection goes back to
        the pool idle.)"""
        return await adrive(operation, self._execute)

    async def wait_for_work(self, timeout: float) -> bool:  # noqa: ASYNC109 - contract shape
        """``PostgresStore.wait_for_work`` on the async connection: cancellation-safe (a
        cancelled wait hangs up; the next call listens again and returns ``True`` at once).
        Under trio the sync store's wait runs in a thread of its own."""
        if isinstance(self, SyncHops):
            return await wait_in_thread(self.store._wakeups, timeout)
        return await self._wakeups.wait(timeout)

    async def close(self) -> None:
        """End a wait in progress, close the listening connection, then the pool and its
        connections (idempotent)."""
        await self._wakeups.close()
        await self._pool.close()


async def _connect(options: PostgresOptions) -> AsyncConnection:
    """One connection attempt; failures become StoreUnavailable (retried) or a config error."""
    try:
        return await psycopg.AsyncConnection.connect(**connect_kwargs(options))
    except DRIVER_ERRORS as exc:
        raise connect_error(exc, options.where) from exc
