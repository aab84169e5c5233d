"""The one module that calls the ``libsql`` driver: connect, run one plan request, refresh a
replica.

What the driver needs that ``sqlite3`` does not (each verified against libsql 0.1.11 by
``tests/test_libsql_specific.py``):

* **Binding.** The driver binds a Python ``int`` outside the signed 32-bit range as a REAL
  (``2**53 + 1`` would come back as ``2**53``), and truncates text at a NUL.  So such ints
  travel as their decimal text, which SQLite converts back exactly wherever the plan uses
  them (INTEGER columns, comparisons with them, ``LIMIT``, arithmetic); a str holding NUL is
  refused (the shared validation refuses NUL in ids and summary fields first, and documents
  are JSON, which escapes it).
* **Lock waits.** The driver holds the GIL while a statement runs, including SQLite's own
  busy waits, which would freeze every other thread (and the async twin's event loop) for up
  to the busy timeout.  So the connection's busy timeout is 0 and :func:`execute` waits for a
  locked database itself, sleeping between attempts (``busy_timeout_ms`` in all).  Only a
  statement outside a transaction (``BEGIN IMMEDIATE`` included) is retried: it did nothing.
* **Errors.** Everything is a ``ValueError`` with SQLite's text; :mod:`._errors` maps it.  A
  server or primary that fails after a ``COMMIT`` or an autocommit write was sent may have
  applied it: that failure is :class:`~harel.store.common.sql.errors.RequestOutcomeUnknown`
  (a commit raises ``CommitOutcomeUnknown``); a local file never loses an answer.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from functools import partial
from typing import Any

import libsql  # type: ignore[import-untyped]
from harel.store.author import busy_waits, drive
from harel.store.author.sql import Batch, Result, SqlPlan, Statement, write_result
from harel.store.errors import InvalidPayload

from harel_store_libsql._errors import driver_error, is_locked, is_panic
from harel_store_libsql._options import LibsqlOptions
from harel_store_libsql._plan import libsql_plan
from harel_store_libsql._schema import pragmas

_INT32 = range(-(2**31), 2**31)


def bindable(value: Any) -> Any:
    """``value`` as the driver must receive it to store it exactly (see the module docstring)."""
    if type(value) is int and value not in _INT32:
        return str(value)
    if type(value) is str and "\x00" in value:
        raise InvalidPayload(
            f"a text value holds NUL (U+0000) at index {value.index(chr(0))}, which the libsql "
            "driver cannot store; remove it"
        )
    return value


def _needs_binding(params: tuple[Any, ...]) -> bool:
    """Whether a value of ``params`` must go through :func:`bindable` (every statement's path:
    one flat loop, no call per value)."""
    for value in params:
        kind = type(value)
        if kind is str:
            if "\x00" in value:
                return True
        elif kind is int and value not in _INT32:
            return True
    return False


def connect(options: LibsqlOptions) -> Any:
    """A new driver connection for ``options`` (the server's or primary's errors mapped)."""
    try:
        return libsql.connect(options.database, **options.connect_kwargs())
    except BaseException as exc:
        if _driver_failure(exc):
            raise driver_error(exc, options) from None
        raise


def open_database(options: LibsqlOptions) -> tuple[Any, SqlPlan]:
    """Connect, apply the PRAGMAs, and run the plan's schema check (create / upgrade)."""
    conn = connect(options)
    try:
        run = partial(execute, conn, options)
        for pragma in pragmas(options):
            run(Statement(pragma))
        plan = libsql_plan(options)
        drive(plan.open_schema(time.time()), run)
    except BaseException:
        conn.close()
        raise
    return conn, plan


def execute(conn: Any, options: LibsqlOptions, request: Statement | Batch) -> Result:
    """Run one statement of a plan and return its rows and rowcount (``-1`` for a query).

    A locked database is waited for (up to ``options.busy_timeout_ms``, sleeping without the
    GIL) when the statement runs outside a transaction; driver failures are raised as
    :mod:`harel.store.errors` errors.
    """
    if not isinstance(request, Statement):
        raise TypeError("the libSQL dialect runs statements, not batches")
    sql, params = request
    if _needs_binding(params):  # converted only when one needs it
        params = tuple(bindable(item) for item in params)
    waits: Iterator[bool] | None = None  # started at the first lock met
    while True:
        try:
            cursor = conn.execute(sql, params)
            if not cursor.description:  # () for a write: its changes are counted, no rows
                return write_result(cursor.rowcount)
            return Result(cursor.fetchall() or (), -1)
        except BaseException as exc:
            if not _driver_failure(exc):
                raise
            if not (options.local and is_locked(exc) and not conn.in_transaction):
                applies = options.mode != "file" and may_apply(request.sql, conn)
                raise driver_error(exc, options, may_apply=applies) from None
            if waits is None:
                waits = busy_waits(options.busy_timeout_ms)
            if not next(waits, False):
                raise driver_error(exc, options) from None


_WRITES = ("INSERT", "UPDATE", "DELETE")


def may_apply(sql: str, conn: Any) -> bool:
    """Whether ``sql``, once the server runs it, takes effect with no further request: a
    ``COMMIT``, or a write while no transaction is open (its own autocommit transaction).  A
    statement inside an open transaction does not (an uncommitted transaction is rolled back
    when its stream is lost); reads and ``BEGIN``/``ROLLBACK`` never write."""
    head = sql.lstrip()[:6].upper()
    if head == "COMMIT":
        return True
    try:
        in_transaction = bool(conn.in_transaction)
    except Exception:  # a broken connection cannot say: count the write as possibly applied
        in_transaction = False
    return head in _WRITES and not in_transaction


def refresh(conn: Any, options: LibsqlOptions) -> None:
    """Pull the primary's latest changes into an embedded replica (a no-op otherwise); a
    failure is ignored (the next refresh or the background sync catches up)."""
    if options.mode != "replica":
        return
    try:
        conn.sync()
    except BaseException as exc:
        if not _driver_failure(exc):
            raise


def _driver_failure(exc: BaseException) -> bool:
    """Whether ``exc`` was raised by the driver (not an interrupt or a bug of ours)."""
    return isinstance(exc, ValueError | libsql.Error) or is_panic(exc)
