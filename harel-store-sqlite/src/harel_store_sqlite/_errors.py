"""Every ``sqlite3`` failure as an error of :mod:`harel.store.errors`.

SQLite's own failures are classified once for the SQL family
(:func:`harel.store.common.sql.errors.engine_error`, shared with libSQL and rqlite); this
module adds what is ``sqlite3``'s: its exception types, closed connections, Python values the
module cannot bind.

:func:`mapped` wraps every use of a connection; no driver exception leaves a contract method:

==================================================  ==========================================
driver error                                        raised
==================================================  ==========================================
busy / locked past ``busy_timeout_ms``              ``StoreUnavailable`` (retryable)
"database or disk is full", I/O error, out of       ``StoreUnavailable`` (retryable once space
memory, cannot open, read-only file                 / the file is fixed)
"file is not a database", "database disk image      ``StoreCorrupted`` naming the path
is malformed"
"string or blob too big"                            ``PayloadTooLarge``
an int beyond 64 bits (``OverflowError``)           ``InvalidPayload`` (a ``ValueError``)
a str with a lone surrogate (``UnicodeEncodeError``)  ``InvalidPayload`` (a ``ValueError``)
operation on a closed connection                    ``StoreError`` ("the store is closed")
anything else from ``sqlite3``                      ``StoreError`` naming the database
==================================================  ==========================================
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from harel.store.author.sql import engine_error
from harel.store.errors import InvalidPayload, StoreError

from harel_store_sqlite._options import SqliteOptions


@contextmanager
def mapped(options: SqliteOptions) -> Iterator[None]:
    """Translate driver failures raised inside the block (see the module table)."""
    try:
        yield
    except Exception as exc:
        error = translate(exc, options)
        if error is None:
            raise
        raise error from exc


def translate(exc: Exception, options: SqliteOptions) -> Exception | None:
    """The typed error for one driver failure (see the module table), or ``None`` when
    ``exc`` is not the driver's."""
    if isinstance(exc, sqlite3.Error):
        return driver_error(exc, options)
    if isinstance(exc, OverflowError):
        return InvalidPayload(
            f"a number is outside SQLite's range ({exc}); integers must fit in 64 bits"
        )
    if isinstance(exc, UnicodeEncodeError):
        return InvalidPayload(
            f"a text value holds a lone surrogate ({exc.object[exc.start : exc.end]!a} at "
            f"{exc.start}) and cannot be stored as UTF-8; pass well-formed str values"
        )
    return None


def closed_error(options: SqliteOptions) -> StoreError:
    """The error raised by any call on a closed store."""
    return StoreError(f"the SQLite store over {options.path!r} is closed; open a new store")


def driver_error(exc: sqlite3.Error, options: SqliteOptions) -> StoreError:
    """The :mod:`harel.store.errors` error for one ``sqlite3`` exception."""
    code = getattr(exc, "sqlite_errorcode", None)  # errors raised by the module have none
    error = engine_error(
        code, str(exc), where=options.where, busy_timeout_ms=options.busy_timeout_ms
    )
    if error is not None:
        return error
    if isinstance(exc, sqlite3.ProgrammingError) and "closed" in str(exc).lower():
        return closed_error(options)
    return StoreError(f"{options.where} failed: {exc}")
