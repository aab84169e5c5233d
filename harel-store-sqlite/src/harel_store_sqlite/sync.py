"""``SqliteStore``: the synchronous SQLite store over the stdlib ``sqlite3`` module.

One connection per store, in autocommit mode (``isolation_level=None``) so every transaction
is the plan's own ``BEGIN IMMEDIATE`` ... ``COMMIT``, rolled back on any failure.  A
``threading.Lock`` serialises all use of the connection, so threads sharing a store never see
or join each other's transactions.  Several processes (or several stores) may use one file:
SQLite's file lock admits one writer at a time and the version CAS detects lost updates.

This module owns only the connection's lifecycle and the drive loop; what each operation
runs is the SQL family's plan (``_plan.py``), and driver errors are mapped by ``_errors.py``.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Iterable, Sequence
from functools import partial
from typing import Any, ClassVar, Self, TypeVar, Unpack

from harel.model import Execution, ExecutionPage, Status
from harel.store.common import committing, connect_with_retry, drive, listing_query
from harel.store.common.sql import Batch, Result, SqlOp, SqlPlan, Statement
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

from harel_store_sqlite._errors import closed_error, mapped
from harel_store_sqlite._options import SqliteKnobs, SqliteOptions, from_url_args, make_options
from harel_store_sqlite._plan import sqlite_plan
from harel_store_sqlite._plugin import CAPABILITIES
from harel_store_sqlite._schema import pragmas

T = TypeVar("T")


class SqliteStore:
    """A durable, thread-safe :class:`~harel.store.contract.ExecutionStore` in one SQLite file.

    ``path`` is a file (created on first open) or ``":memory:"``; the knobs
    (``trace_max``, ``busy_timeout_ms``, ``synchronous``) are described
    in :class:`~harel_store_sqlite._options.SqliteKnobs`.  Opening checks the schema version,
    creates the schema in an empty file and upgrades a version-1 file in place.
    """

    capabilities: ClassVar[Capabilities] = CAPABILITIES

    def __init__(self, path: str = ":memory:", **knobs: Unpack[SqliteKnobs]) -> None:
        self.options: SqliteOptions = make_options(str(path), **knobs)
        self.trace_max = self.options.trace_max
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        with mapped(self.options):
            self._conn, self._plan = _open(self.options)

    @classmethod
    def from_url(cls, url: str, **knobs: Any) -> Self:
        """Open ``sqlite:///relative.db``, ``sqlite:////abs/path.db`` or ``sqlite:///:memory:``.

        Knobs: those of the constructor (URL query or keywords; keywords win), and
        ``connect_retries`` / ``retry_delay`` to retry an open that finds the file locked.
        """
        path, store_knobs, retry = from_url_args(url, knobs)
        return connect_with_retry(lambda: cls(path, **store_knobs), **retry)

    def __repr__(self) -> str:
        return f"SqliteStore({self.options.path!r})"

    def _run(self, operation: SqlOp[T]) -> T:
        """Drive one plan operation on the connection, held exclusively; driver errors mapped,
        and no transaction left open whatever happens (even a ``KeyboardInterrupt``)."""
        with self._lock:
            conn = self._conn
            if conn is None:
                operation.close()
                raise closed_error(self.options)
            try:
                with mapped(self.options):
                    return drive(operation, partial(_execute, conn))
            finally:
                if conn.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        conn.rollback()

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
        return self._run(self._plan.pending_outbox(limit))

    def ack_outbox(self, seq: int) -> None:
        """Forget a delivered event (unknown seq: no-op)."""
        self._run(self._plan.ack_outbox(seq))

    def pending_spawns(self, *, limit: int | None = None) -> list[SpawnEntry]:
        """Uncreated children, oldest first (at most ``limit``)."""
        return self._run(self._plan.pending_spawns(limit))

    def ack_spawn(self, seq: int) -> None:
        """Forget a created child's intent (unknown seq: no-op)."""
        self._run(self._plan.ack_spawn(seq))

    def due_timers(self, now: float, *, limit: int | None = None) -> list[DueTimer]:
        """Armed timers with ``fire_at <= now``, ascending by ``(fire_at, execution_id, path)``."""
        return self._run(self._plan.due_timers(now, limit))

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
        return self._run(self._plan.list_executions(query))

    def purge(self, execution_id: str, *, force: bool = False) -> bool:
        """Delete the execution and all it owns in one transaction (``ExecutionActive`` while
        it is not finished, unless ``force``); whether it existed."""
        return self._run(self._plan.purge(execution_id, force))

    def prune_processed(self, older_than: float, *, batch_size: int = DEFAULT_PRUNE_BATCH) -> int:
        """Drop dedupe marks recorded before ``older_than``, ``batch_size`` per transaction."""
        return self._run(self._plan.prune_processed(older_than, batch_size))

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


def _open(options: SqliteOptions) -> tuple[sqlite3.Connection, SqlPlan]:
    """Connect, apply the PRAGMAs, and run the plan's schema check (create / upgrade)."""
    conn = sqlite3.connect(
        options.path,
        isolation_level=None,
        check_same_thread=False,
        timeout=options.busy_timeout_ms / 1000,
        uri=options.path.startswith("file:"),
    )
    try:
        for pragma in pragmas(options):
            conn.execute(pragma).fetchall()
        plan = sqlite_plan(options)
        drive(plan.open_schema(time.time()), partial(_execute, conn))
    except BaseException:
        conn.close()
        raise
    return conn, plan


def _execute(conn: sqlite3.Connection, request: Statement | Batch) -> Result:
    """Run one statement of a plan and return its rows and rowcount."""
    if not isinstance(request, Statement):
        raise TypeError("the SQLite dialect runs statements, not batches")
    cursor = conn.execute(request.sql, request.params)
    return Result(cursor.fetchall(), cursor.rowcount)
