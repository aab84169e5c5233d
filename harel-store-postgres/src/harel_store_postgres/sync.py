"""``PostgresStore``: the synchronous PostgreSQL store (psycopg 3, ``psycopg_pool``).

The store owns a :class:`psycopg_pool.ConnectionPool` of autocommit connections and runs the
plan of :mod:`harel_store_postgres._plan`: each statement checks a connection out, runs, and
returns it.  Every contract method is one statement (one round trip, its own transaction), so
an error can never leave a transaction open: the connection goes back to the pool clean, or
is discarded when it broke.  Safe for any number of threads.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any, ClassVar, Self, TypeVar

import psycopg
from harel.model import Execution, ExecutionPage, Status
from harel.store.common import committing, connect_with_retry, drive
from harel.store.common.sql.requests import Result, Statement
from harel.store.contract import (
    DEFAULT_PRUNE_BATCH,
    Capabilities,
    DueTimer,
    Emit,
    OutboxEntry,
    Spawn,
    SpawnEntry,
    TimerOp,
)
from harel.store.errors import StoreUnavailable
from psycopg_pool import ConnectionPool

from harel_store_postgres import _plan as plan
from harel_store_postgres._conn import Renderer, connect_kwargs, connection_alive, pool_kwargs
from harel_store_postgres._errors import DRIVER_ERRORS, connect_error, map_error
from harel_store_postgres._options import PostgresOptions, options_from_url
from harel_store_postgres._plugin import CAPABILITIES

Connection = psycopg.Connection[Any]
T = TypeVar("T")


def _run_statement(conn: Connection, render: Renderer, statement: Statement) -> Result:
    cursor = conn.execute(render(statement.sql), statement.params)
    rows = cursor.fetchall() if cursor.description is not None else ()
    return Result(rows, cursor.rowcount)


class PostgresStore:
    """A durable :class:`~harel.store.contract.ExecutionStore` in one PostgreSQL schema.

    Build it with ``PostgresStore.from_url("postgresql://user@host/db?schema=harel")`` (which
    waits for the server, bounded) or ``PostgresStore.open(options)``.  ``close()`` closes the
    pool.
    """

    capabilities: ClassVar[Capabilities] = CAPABILITIES

    def __init__(self, pool: ConnectionPool[Connection], options: PostgresOptions) -> None:
        """Wrap an opened pool over a schema that holds the current layout (use :meth:`open`)."""
        self.options = options
        self.trace_max = options.trace_max
        self._pool = pool
        self._render = Renderer(options.schema)

    @classmethod
    def from_url(cls, url: str, **knobs: Any) -> Self:
        """Open ``postgresql://user[:password]@host[:port]/dbname[?schema=harel&...]`` (also
        ``postgres://``), retrying until the server accepts connections: ``connect_retries``
        attempts with doubling pauses from ``retry_delay``, then :class:`StoreUnavailable`.
        Knobs: see :mod:`harel_store_postgres._options`."""
        return cls.open(options_from_url(url, **knobs))

    @classmethod
    def open(cls, options: PostgresOptions) -> Self:
        """Connect (with retries), create or check the schema, then open the pool."""
        conn = connect_with_retry(
            partial(_connect, options),
            retries=options.connect_retries,
            delay=options.retry_delay,
            retry_on=(StoreUnavailable,),
            what=options.where,
        )
        with conn:
            run = partial(_run_statement, conn, Renderer(options.schema))
            try:
                drive(plan.open_schema(options.schema, options.where), run)
            except DRIVER_ERRORS as exc:
                raise map_error(exc, options.where) from exc
        pool: ConnectionPool[Connection] = ConnectionPool(**pool_kwargs(options))
        try:
            pool.open(wait=True, timeout=max(options.pool_timeout, 1.0))
        except DRIVER_ERRORS as exc:
            pool.close()
            raise map_error(exc, options.where) from exc
        return cls(pool, options)

    def __repr__(self) -> str:
        return f"PostgresStore({self.options.where!r}, schema={self.options.schema!r})"

    # -- connections ----------------------------------------------------------------------------

    @contextmanager
    def _connection(self) -> Iterator[Connection]:
        """A live pooled connection; dead ones (server restarted) are dropped, not used."""
        for _ in range(self.options.pool_max + 1):
            with self._pool.connection() as conn:
                if connection_alive(conn):
                    yield conn
                    return
                conn.close()  # the pool replaces a closed connection
        raise StoreUnavailable(f"every pooled connection to {self.options.where} is dead")

    def _execute(self, statement: Statement) -> Result:
        try:
            with self._connection() as conn:
                return _run_statement(conn, self._render, statement)
        except DRIVER_ERRORS as exc:
            raise map_error(exc, self.options.where) from exc

    def _run(self, operation: plan.Plan[T]) -> T:
        return drive(operation, self._execute)

    # -- the contract ---------------------------------------------------------------------------

    def load(self, execution_id: str) -> Execution | None:
        """A fresh copy of the stored execution, or ``None``."""
        return self._run(plan.load(execution_id))

    def load_for_event(self, execution_id: str, event_id: str) -> tuple[Execution | None, bool]:
        """``load`` plus whether ``event_id`` was already processed, in one statement."""
        return self._run(plan.load_for_event(execution_id, event_id))

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
        """Write one step in one statement: all of it, or nothing and ``exe.version`` restored."""
        with committing(exe, emits, processed_event_id, timers, spawns, trace) as prepared:
            self._run(plan.commit(prepared, self.trace_max))

    def is_processed(self, execution_id: str, event_id: str) -> bool:
        """Whether that execution already processed that event."""
        return self._run(plan.is_processed(execution_id, event_id))

    def pending_outbox(self, *, limit: int | None = None) -> list[OutboxEntry]:
        """Undelivered events, oldest first (at most ``limit``)."""
        return self._run(plan.pending_outbox(limit))

    def ack_outbox(self, seq: int) -> None:
        """Forget a delivered event (unknown seq: no-op)."""
        self._run(plan.ack_outbox(seq))

    def pending_spawns(self, *, limit: int | None = None) -> list[SpawnEntry]:
        """Uncreated children, oldest first (at most ``limit``)."""
        return self._run(plan.pending_spawns(limit))

    def ack_spawn(self, seq: int) -> None:
        """Forget a created child's intent (unknown seq: no-op)."""
        self._run(plan.ack_spawn(seq))

    def due_timers(self, now: float, *, limit: int | None = None) -> list[DueTimer]:
        """Armed timers with ``fire_at <= now``, ascending by ``(fire_at, execution_id, path)``."""
        return self._run(plan.due_timers(now, limit))

    def delete_timer(self, execution_id: str, path: str, fire_at: float) -> None:
        """Disarm a timer only if it still holds exactly ``fire_at``."""
        self._run(plan.delete_timer(execution_id, path, fire_at))

    def read_trace(self, execution_id: str) -> list[dict[str, Any]]:
        """The retained trace steps, oldest first, each with its ``index``."""
        return self._run(plan.read_trace(execution_id))

    def append_trace(self, execution_id: str, entry: dict[str, Any]) -> None:
        """Append a step in its own transaction; unknown execution raises ``ExecutionNotFound``."""
        self._run(plan.append_trace(execution_id, entry, self.trace_max))

    def list_executions(
        self,
        *,
        status: Iterable[Status] | None = None,
        definition_id: str | None = None,
        roots_only: bool = False,
        limit: int = 100,
        cursor: str | None = None,
    ) -> ExecutionPage:
        """One page of summaries ordered by id (an index range, keyset cursor)."""
        return self._run(
            plan.list_executions(
                status=status,
                definition_id=definition_id,
                roots_only=roots_only,
                limit=limit,
                cursor=cursor,
            )
        )

    def purge(self, execution_id: str, *, force: bool = False) -> bool:
        """Remove a finished execution and everything it owns, atomically; whether it existed."""
        return self._run(plan.purge(execution_id, force))

    def prune_processed(self, older_than: float, *, batch_size: int = DEFAULT_PRUNE_BATCH) -> int:
        """Drop dedupe marks recorded before ``older_than``, in short batches; how many."""
        return self._run(plan.prune_processed(older_than, batch_size))

    def close(self) -> None:
        """Close the pool and its connections (idempotent)."""
        self._pool.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _connect(options: PostgresOptions) -> Connection:
    """One connection attempt; failures become StoreUnavailable (retried) or a config error."""
    try:
        return psycopg.connect(**connect_kwargs(options))
    except DRIVER_ERRORS as exc:
        raise connect_error(exc, options.where) from exc
