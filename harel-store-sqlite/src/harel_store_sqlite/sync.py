"""``SqliteStore``: the synchronous SQLite store over the stdlib ``sqlite3`` module.

One connection per store, in autocommit mode (``isolation_level=None``) so every transaction
is the plan's own ``BEGIN IMMEDIATE`` ... ``COMMIT``, rolled back on any failure.  A
``threading.Lock`` serialises all use of the connection, so threads sharing a store never see
or join each other's transactions.  Several processes (or several stores) may use one file:
SQLite's file lock admits one writer at a time and the version CAS detects lost updates.

This module owns only the connection's lifecycle; the drive loop and the contract methods are
the SQL family's (``harel.store.common.sql.SqlStore``), what each operation runs is the SQL
family's plan (``_plan.py``), and driver errors are mapped by ``_errors.py``.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from functools import partial
from typing import Any, ClassVar

from harel.store.author import BackendSpec, FromUrl, busy_waits, drive
from harel.store.author.sql import Batch, Result, SqlPlan, SqlStore, Statement, write_result
from harel.store.contract import Capabilities
from harel.store.errors import StoreError

from harel_store_sqlite._errors import closed_error, mapped, translate
from harel_store_sqlite._options import SqliteOptions, make_options
from harel_store_sqlite._plan import sqlite_plan
from harel_store_sqlite._schema import pragmas
from harel_store_sqlite._spec import CAPABILITIES, SPEC


def _run_statement(on: sqlite3.Connection | sqlite3.Cursor, request: Statement | Batch) -> Result:
    """Run one statement of a plan (on a connection, or on a cursor the caller reuses) and
    return its rows and rowcount."""
    if not isinstance(request, Statement):
        raise TypeError("the SQLite dialect runs statements, not batches")
    cursor = on.execute(request[0], request[1])  # sql, params
    if cursor.description is None:  # a write without RETURNING: nothing to fetch
        return write_result(cursor.rowcount)
    return Result(cursor.fetchall(), cursor.rowcount)


class SqliteStore(FromUrl, SqlStore[sqlite3.Connection]):
    """A durable, thread-safe :class:`~harel.store.contract.ExecutionStore` in one SQLite file.

    ``path`` is a file (created on first open) or ``":memory:"``; the knobs
    (``trace_max``, ``busy_timeout_ms``, ``synchronous``) are described
    in :data:`~harel_store_sqlite._spec.SPEC` (and the README).  Opening checks the schema version,
    creates the schema in an empty file and upgrades a version-1 file in place.
    """

    capabilities: ClassVar[Capabilities] = CAPABILITIES
    spec: ClassVar[BackendSpec] = SPEC

    def __init__(self, path: str = ":memory:", **knobs: Any) -> None:
        self.options: SqliteOptions = make_options(str(path), **knobs)
        self.trace_max = self.options.trace_max
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        with mapped(self.options):
            self._conn, self._plan = _open(self.options)
        self._cursor = self._conn.cursor()
        """The one cursor every statement runs on (``Connection.execute`` would build one per
        statement): the store runs one statement at a time, each result read whole first."""

    def __repr__(self) -> str:
        return f"SqliteStore({self.options.path!r})"

    def _execute(self, conn: sqlite3.Connection, request: Statement | Batch) -> Result:
        """Run one statement on the store's cursor (of ``conn``)."""
        return _run_statement(self._cursor, request)

    def _closed_error(self) -> StoreError:
        return closed_error(self.options)

    def _map_error(self, exc: Exception) -> Exception | None:
        return translate(exc, self.options)


def _apply_pragma(conn: sqlite3.Connection, pragma: str, busy_timeout_ms: int) -> None:
    """Run one PRAGMA, waiting up to ``busy_timeout_ms`` while the file is locked.

    Switching a file to WAL needs an exclusive lock, and SQLite answers "database is locked"
    at once, without its busy handler, when other connections are opening the same file at
    that moment (each holds a shared lock): several processes opening a rollback-journal file
    together would otherwise fail.  The wait is bounded like any other busy wait.
    """
    waits = busy_waits(busy_timeout_ms)
    while True:
        try:
            conn.execute(pragma).fetchall()
            return
        except sqlite3.OperationalError as exc:
            locked = exc.sqlite_errorcode & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
            if not (locked and next(waits, False)):
                raise


STATEMENT_CACHE = 512
"""Prepared statements kept per connection: every commit form (per receipt slot, fenced or
not, with or without a dedupe check) stays prepared (``sqlite3``'s default keeps 128)."""


def _open(options: SqliteOptions) -> tuple[sqlite3.Connection, SqlPlan]:
    """Connect, apply the PRAGMAs, and run the plan's schema check (create / upgrade)."""
    conn = sqlite3.connect(
        options.path,
        isolation_level=None,
        check_same_thread=False,
        timeout=options.busy_timeout_ms / 1000,
        uri=options.path.startswith("file:"),
        cached_statements=STATEMENT_CACHE,
    )
    try:
        for pragma in pragmas(options):
            _apply_pragma(conn, pragma, options.busy_timeout_ms)
        plan = sqlite_plan(options)
        drive(plan.open_schema(time.time()), partial(_run_statement, conn))
    except BaseException:
        conn.close()
        raise
    return conn, plan
