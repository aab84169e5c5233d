"""``PostgresStore``: the synchronous PostgreSQL store (psycopg 3, ``psycopg_pool``).

The contract methods are :class:`harel.store.author.PlanStore`'s, over
:class:`~harel_store_postgres._plan.PostgresPlan`; this module only owns the connections.
The store holds a :class:`psycopg_pool.ConnectionPool` of autocommit connections: each
statement checks a connection out, runs, and returns it.  Every contract method is one
statement (one round trip, its own transaction), so an error can never leave a transaction
open: the connection goes back to the pool clean, or is discarded when it broke.  Safe for any
number of threads.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any, Self, TypeVar

import psycopg
from harel.store.author import PlanStore, connect_with_retry, drive
from harel.store.author.sql import Result, Statement
from harel.store.errors import StoreUnavailable
from psycopg_pool import ConnectionPool

from harel_store_postgres._base import PooledStore
from harel_store_postgres._conn import Renderer, connect_kwargs, connection_alive, pool_kwargs
from harel_store_postgres._errors import DRIVER_ERRORS, connect_error, map_error, map_sent_error
from harel_store_postgres._options import PostgresOptions, make_options
from harel_store_postgres._plan import Plan, PostgresPlan
from harel_store_postgres._schema import open_schema
from harel_store_postgres._wake import PostgresWakeups

Connection = psycopg.Connection[Any]
T = TypeVar("T")


def _run_statement(conn: Connection, render: Renderer, statement: Statement) -> Result:
    cursor = conn.execute(render(statement.sql), statement.params)
    rows = cursor.fetchall() if cursor.description is not None else ()
    return Result(rows, cursor.rowcount)


class PostgresStore(PooledStore[ConnectionPool[Connection]], PlanStore[PostgresPlan]):
    """A durable :class:`~harel.store.contract.ExecutionStore` in one PostgreSQL schema.

    Build it with ``PostgresStore.from_url("postgresql://user@host/db?schema=harel")`` (which
    waits for the server, bounded) or ``PostgresStore.open(options)``.  ``close()`` closes the
    pool.
    """

    def __init__(self, pool: ConnectionPool[Connection], options: PostgresOptions) -> None:
        """Wrap an opened pool over a schema that holds the current layout (use ``open``)."""
        super().__init__(pool, options)
        self._wakeups = PostgresWakeups(options, self._execute)

    @classmethod
    def from_url(cls, url: str, **knobs: Any) -> Self:
        """Open ``postgresql://user[:password]@host[:port]/dbname[?schema=harel&...]`` (also
        ``postgres://``), retrying until the server accepts connections: ``connect_retries``
        attempts with doubling pauses from ``retry_delay``, then :class:`StoreUnavailable`.
        Knobs: those :data:`~harel_store_postgres._spec.SPEC` declares (keywords win)."""
        return cls.open(make_options(url, **knobs))

    @classmethod
    def open(cls, options: PostgresOptions) -> Self:
        """Connect (with retries), create, upgrade or check the schema, then open the pool."""
        conn = connect_with_retry(partial(_connect, options), **options.retry_arguments())
        with conn:
            run = partial(_run_statement, conn, Renderer(options.schema))
            try:
                drive(open_schema(options.schema, options.where), run)
            except DRIVER_ERRORS as exc:
                raise map_error(exc, options.where) from exc
        pool: ConnectionPool[Connection] = ConnectionPool(**pool_kwargs(options))
        try:
            pool.open(wait=True, timeout=max(options.pool_timeout, 1.0))
        except DRIVER_ERRORS as exc:
            pool.close()
            raise map_error(exc, options.where) from exc
        return cls(pool, options)

    @contextmanager
    def _connection(self) -> Iterator[Connection]:
        """A live pooled connection within ``pool_timeout`` in all; dead ones (server
        restarted, connection cut) are dropped, not used."""
        deadline = time.monotonic() + self.options.pool_timeout
        for _ in range(self.options.pool_max + 1):
            with self._pool.connection(timeout=max(deadline - time.monotonic(), 0.0)) as conn:
                if connection_alive(conn):
                    yield conn
                    return
                conn.close()  # the pool replaces a closed connection
        raise StoreUnavailable(f"every pooled connection to {self.options.where} is dead")

    def _execute(self, statement: Statement) -> Result:
        """Run one statement.  Failing to get a connection sends nothing (plain
        ``StoreUnavailable``); a connection that breaks once the statement is handed to it
        raises :class:`RequestOutcomeUnknown` (the plan names the commit)."""
        try:
            with self._connection() as conn:
                try:
                    return _run_statement(conn, self._render, statement)
                except DRIVER_ERRORS as exc:
                    raise map_sent_error(exc, self.options.where, conn.broken) from exc
        except DRIVER_ERRORS as exc:
            raise map_error(exc, self.options.where) from exc

    def _run(self, operation: Plan[T]) -> T:
        """Drive one plan operation, each statement on a pooled connection."""
        return drive(operation, self._execute)

    def wait_for_work(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds (0-3600) until a write may have made work ready
        (``True``) or the time is up (``False``): ``LISTEN`` on the schema's channel over a
        dedicated connection (the first call listens and returns ``True`` at once); no
        signal sent after that is missed.  A lost connection: ``StoreUnavailable``, and the
        next call listens again.  See :mod:`harel.store.common.wakeups`."""
        return self._wakeups.wait(timeout)

    def close(self) -> None:
        """End a wait in progress, close the listening connection, then the pool and its
        connections (idempotent)."""
        self._wakeups.close()
        self._pool.close()


def _connect(options: PostgresOptions) -> Connection:
    """One connection attempt; failures become StoreUnavailable (retried) or a config error."""
    try:
        return psycopg.connect(**connect_kwargs(options))
    except DRIVER_ERRORS as exc:
        raise connect_error(exc, options.where) from exc
