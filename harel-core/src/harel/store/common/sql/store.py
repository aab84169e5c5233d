"""The synchronous store of a SQL-family backend whose driver holds one connection.

Such a store is a connection, a lock and a :class:`~harel.store.common.sql.SqlPlan`: every
contract method runs one plan operation with :func:`~harel.store.author.drive`, holding the
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
from functools import partial
from typing import Generic, Protocol, TypeVar

from harel.store.common.commit import PreparedCommit
from harel.store.common.drive import drive
from harel.store.common.plan_store import PlanStore
from harel.store.common.sql.plan import SqlOp, SqlPlan
from harel.store.common.sql.requests import Batch, Result, Statement
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


class SqlContract(PlanStore[SqlPlan]):
    """The contract methods of every SQL-family store: :class:`PlanStore` over a
    :class:`SqlPlan`.

    A subclass provides ``_plan`` (the :class:`SqlPlan` of its dialect), ``trace_max``,
    :meth:`_run` (drive one plan operation on its driver) and :meth:`close`; it may override
    :meth:`_sweep` to read sweeps and listings differently (rqlite reads them at its
    ``sweep_level``).  :class:`SqlStore` is the subclass for one DB-API connection.
    """


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

    def _map_error(self, exc: Exception) -> Exception | None:
        """The typed error for a driver exception that escaped a whole operation, or ``None``
        to let it propagate (the default: a backend may map errors in :meth:`_execute`)."""
        return None

    # -- the drive loop -------------------------------------------------------------------------

    def _run(self, operation: SqlOp[T]) -> T:
        """Drive one plan operation on the connection, held exclusively; no transaction is left
        open whatever happens."""
        with self._lock:
            conn = self._conn
            if conn is None:
                operation.close()
                raise self._closed_error()
            return self._drive(conn, operation)

    def _drive(self, conn: C, operation: SqlOp[T]) -> T:
        """:meth:`_run`'s body, the lock held: drive ``operation`` on ``conn``, map what escapes
        it, roll back a transaction it left open."""
        try:  # a plain try, not a context manager: this is every operation's path
            return drive(operation, partial(self._execute, conn))
        except Exception as exc:
            error = self._map_error(exc)
            if error is None:
                raise
            raise error from exc
        finally:
            _roll_back_open(conn)

    def _commit(self, prepared: PreparedCommit) -> None:
        """Write one prepared commit.  A state-only update's one statement
        (:meth:`SqlPlan.state_only_cas`) is run here without starting the plan's operation;
        only when it did not apply (it changed no row, or it raised) does
        :meth:`SqlPlan.commit` take over, handed that outcome, so every decision stays the
        plan's."""
        plan, trace_max = self._plan, self.trace_max
        first = plan.state_only_cas(prepared, trace_max)
        if first is None:
            self._run(plan.commit(prepared, trace_max))
            return
        with self._lock:
            conn = self._conn
            if conn is None:
                raise self._closed_error()
            ran: Result | Exception
            try:
                ran = self._execute(conn, first)
            except Exception as exc:
                ran = exc
            except BaseException:  # an interrupt: as _drive, leave no transaction open
                _roll_back_open(conn)
                raise
            else:
                if ran.rowcount == 1:  # the statement applied: that is the whole commit
                    return
            self._drive(conn, plan.commit(prepared, trace_max, ran))

    def close(self) -> None:
        """Close the connection (idempotent); later calls raise the closed error."""
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


def _roll_back_open(conn: Connection) -> None:
    """Roll back a transaction ``conn`` still has open (a failure of its own is ignored: the
    connection is left as the driver left it)."""
    if conn.in_transaction:
        with contextlib.suppress(Exception):
            conn.rollback()
