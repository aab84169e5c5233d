"""The synchronous store of a SQL-family backend whose driver holds one connection.

Such a store is a connection, a lock and a :class:`~harel.store.common.sql.SqlPlan`: every
contract method runs one plan operation with :func:`~harel.store.common.drive`, holding the
connection exclusively, and leaves no transaction open whatever happens.  :class:`SqlStore`
writes that once (the contract methods, the drive loop, ``close``); a backend subclass opens
its connection (setting ``_conn``, ``_plan``, ``trace_max``) and says how one request runs on
its driver (:meth:`SqlStore._execute`), which error a closed store raises and, optionally, how
driver errors are mapped around a whole operation.  ``harel_store_sqlite.sync.SqliteStore`` and
``harel_store_libsql.sync.LibsqlStore`` are the examples.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Sequence
from functools import partial
from typing import Any, ClassVar, Generic, Protocol, Self, TypeVar

from harel.model import Execution, ExecutionPage, Status
from harel.store.common.commit import committing
from harel.store.common.drive import drive
from harel.store.common.listing import listing_query
from harel.store.common.sql.plan import SqlOp, SqlPlan
from harel.store.common.sql.requests import Batch, Result, Statement
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
from harel.store.errors import StoreError

T = TypeVar("T")


class Connection(Protocol):
    """What :class:`SqlStore` needs of a driver connection (DB-API style)."""

    @property
    def in_transaction(self) -> bool:
        """Whether a transaction is open on the connection."""

    def rollback(self) -> None:
        """Roll back the open transaction."""

    def close(self) -> None:
        """Release the connection."""


C = TypeVar("C", bound=Connection)


class SqlContract:
    """The contract methods of every SQL-family store, written once over :meth:`_run`.

    A subclass provides ``_plan`` (the :class:`SqlPlan` of its dialect), ``trace_max``,
    :meth:`_run` (drive one plan operation on its driver) and :meth:`close`; it may override
    :meth:`_sweep` to read sweeps and listings differently (rqlite reads them at its
    ``sweep_level``).  :class:`SqlStore` is the subclass for one DB-API connection.
    """

    capabilities: ClassVar[Capabilities]
    trace_max: int | None
    _plan: SqlPlan

    def _run(self, operation: SqlOp[T]) -> T:
        """Drive one plan operation to its value (or its typed error)."""
        raise NotImplementedError

    def _sweep(self, operation: SqlOp[T]) -> T:
        """Drive a sweep or listing operation (by default like any other)."""
        return self._run(operation)

    def close(self) -> None:
        """Release the driver's resources (idempotent)."""
        raise NotImplementedError

    # -- the contract ---------------------------------------------------------------------------

    def load(self, execution_id: str) -> Execution | None:
        """A fresh copy of the stored execution, or ``None``."""
        return self._run(self._plan.load(execution_id))

    def load_for_event(self, execution_id: str, event_id: str) -> tuple[Execution | None, bool]:
        """``load`` plus whether ``event_id`` was already processed, in one statement."""
        return self._run(self._plan.load_for_event(execution_id, event_id))

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
            self._run(self._plan.commit(prepared, self.trace_max))

    def is_processed(self, execution_id: str, event_id: str) -> bool:
        """Whether that execution already processed that event."""
        return self._run(self._plan.is_processed(execution_id, event_id))

    def pending_outbox(self, *, limit: int | None = None) -> list[OutboxEntry]:
        """Undelivered events, oldest first (at most ``limit``)."""
        return self._sweep(self._plan.pending_outbox(limit))

    def ack_outbox(self, seq: int) -> None:
        """Forget a delivered event (unknown seq: no-op)."""
        self._run(self._plan.ack_outbox(seq))

    def pending_spawns(self, *, limit: int | None = None) -> list[SpawnEntry]:
        """Uncreated children, oldest first (at most ``limit``)."""
        return self._sweep(self._plan.pending_spawns(limit))

    def ack_spawn(self, seq: int) -> None:
        """Forget a created child's intent (unknown seq: no-op)."""
        self._run(self._plan.ack_spawn(seq))

    def due_timers(self, now: float, *, limit: int | None = None) -> list[DueTimer]:
        """Armed timers with ``fire_at <= now``, ascending by ``(fire_at, execution_id, path)``."""
        return self._sweep(self._plan.due_timers(now, limit))

    def delete_timer(self, execution_id: str, path: str, fire_at: float) -> None:
        """Disarm a timer only if it still holds exactly ``fire_at``."""
        self._run(self._plan.delete_timer(execution_id, path, fire_at))

    def read_trace(self, execution_id: str) -> list[dict[str, Any]]:
        """The retained trace steps, oldest first, each with its ``index``."""
        return self._run(self._plan.read_trace(execution_id))

    def append_trace(self, execution_id: str, entry: dict[str, Any]) -> None:
        """Append a step in its own transaction; unknown execution raises ``ExecutionNotFound``."""
        self._run(self._plan.append_trace(execution_id, entry, self.trace_max))

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
        query = listing_query(
            status=status,
            definition_id=definition_id,
            roots_only=roots_only,
            limit=limit,
            cursor=cursor,
        )
        return self._sweep(self._plan.list_executions(query))

    def purge(self, execution_id: str, *, force: bool = False) -> bool:
        """Delete the execution and all it owns in one transaction (``ExecutionActive`` while
        it is not finished, unless ``force``); whether it existed."""
        return self._run(self._plan.purge(execution_id, force))

    def prune_processed(self, older_than: float, *, batch_size: int = DEFAULT_PRUNE_BATCH) -> int:
        """Drop dedupe marks recorded before ``older_than``, ``batch_size`` per transaction."""
        return self._run(self._plan.prune_processed(older_than, batch_size))

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class SqlStore(SqlContract, Generic[C]):
    """A thread-safe :class:`~harel.store.contract.ExecutionStore` over one driver connection.

    Guarantees: one operation at a time on the connection (a ``threading.Lock``), so threads
    sharing a store never see or join each other's transactions; a transaction left open by a
    failed or interrupted operation (even by a ``KeyboardInterrupt``) is rolled back before the
    lock is released; after :meth:`close` every call raises the subclass's closed error.
    """

    _conn: C | None
    _lock: threading.Lock

    # -- what a backend provides ----------------------------------------------------------------

    def _execute(self, conn: C, request: Statement | Batch) -> Result:
        """Run one request of a plan on ``conn``: its rows and rowcount."""
        raise NotImplementedError

    def _closed_error(self) -> StoreError:
        """The error raised by any call on a closed store."""
        return StoreError(f"{self!r} is closed; open a new store")

    def _driver_errors(self) -> contextlib.AbstractContextManager[None]:
        """A context translating driver errors raised by a whole operation (none by default:
        a backend may map them in :meth:`_execute` instead)."""
        return contextlib.nullcontext()

    # -- the drive loop -------------------------------------------------------------------------

    def _run(self, operation: SqlOp[T]) -> T:
        """Drive one plan operation on the connection, held exclusively; no transaction is left
        open whatever happens."""
        with self._lock:
            conn = self._conn
            if conn is None:
                operation.close()
                raise self._closed_error()
            try:
                with self._driver_errors():
                    return drive(operation, partial(self._execute, conn))
            finally:
                if conn.in_transaction:
                    with contextlib.suppress(Exception):
                        conn.rollback()

    def close(self) -> None:
        """Close the connection (idempotent); later calls raise the closed error."""
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
