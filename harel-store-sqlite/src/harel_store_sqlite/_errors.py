"""Every ``sqlite3`` failure as an error of :mod:`harel.store.errors`.

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

from harel.store.errors import (
    InvalidPayload,
    PayloadTooLarge,
    StoreCorrupted,
    StoreError,
    StoreUnavailable,
)

from harel_store_sqlite._options import SqliteOptions

# primary result codes (the low byte of an extended code)
_BUSY, _LOCKED, _NOMEM, _READONLY, _IOERR, _CORRUPT = 5, 6, 7, 8, 10, 11
_FULL, _CANTOPEN, _TOOBIG, _NOTADB = 13, 14, 18, 26


@contextmanager
def mapped(options: SqliteOptions) -> Iterator[None]:
    """Translate driver failures raised inside the block (see the module table)."""
    try:
        yield
    except sqlite3.Error as exc:
        raise driver_error(exc, options) from exc
    except OverflowError as exc:
        raise InvalidPayload(
            f"a number is outside SQLite's range ({exc}); integers must fit in 64 bits"
        ) from exc
    except UnicodeEncodeError as exc:
        raise InvalidPayload(
            f"a text value holds a lone surrogate ({exc.object[exc.start : exc.end]!a} at "
            f"{exc.start}) and cannot be stored as UTF-8; pass well-formed str values"
        ) from exc


def closed_error(options: SqliteOptions) -> StoreError:
    """The error raised by any call on a closed store."""
    return StoreError(f"the SQLite store over {options.path!r} is closed; open a new store")


def driver_error(exc: sqlite3.Error, options: SqliteOptions) -> StoreError:
    """The :mod:`harel.store.errors` error for one ``sqlite3`` exception."""
    where = options.where
    code = _primary_code(exc)
    if code in (_BUSY, _LOCKED):
        return StoreUnavailable(
            f"{where} stayed locked by another connection for {options.busy_timeout_ms} ms "
            f"({exc}); retry the operation, raise busy_timeout_ms, or make sure no other "
            "process holds a long write transaction on this file"
        )
    if code == _FULL:
        return StoreUnavailable(
            f"{where}: the database or disk is full ({exc}); free disk space (or raise the "
            "file size limit), then retry"
        )
    if code in (_NOTADB, _CORRUPT):
        return StoreCorrupted(
            f"{where} is not a readable SQLite database ({exc}); point the store at the right "
            "file, or restore this one from a backup"
        )
    if code == _TOOBIG:
        return PayloadTooLarge(
            f"a value is over {where}'s size limit ({exc}); keep large data outside the "
            "execution and store a reference"
        )
    if code in (_CANTOPEN, _READONLY, _IOERR, _NOMEM):
        return StoreUnavailable(
            f"{where} cannot be used ({exc}); check that the file and its directory exist, are "
            "writable, and that the disk is healthy, then retry"
        )
    if isinstance(exc, sqlite3.ProgrammingError) and "closed" in str(exc).lower():
        return closed_error(options)
    return StoreError(f"{where} failed: {exc}")


def _primary_code(exc: sqlite3.Error) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF
    text = str(exc).lower()  # errors raised by the module itself carry no code
    for needle, guess in (
        ("database is locked", _BUSY),
        ("database table is locked", _LOCKED),
        ("disk is full", _FULL),
        ("not a database", _NOTADB),
        ("malformed", _CORRUPT),
        ("too big", _TOOBIG),
        ("unable to open", _CANTOPEN),
    ):
        if needle in text:
            return guess
    return None
