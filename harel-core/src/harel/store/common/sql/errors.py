"""SQLite's own failures as errors of :mod:`harel.store.errors`, for every SQL-family driver.

SQLite, libSQL and rqlite run the same engine, so they fail the same way; what differs is how a
driver reports it: a result code (stdlib ``sqlite3``'s ``sqlite_errorcode``) or only the
engine's message text (the ``libsql`` driver, rqlite's per-statement ``error``).  One table
classifies both, and :func:`engine_error` turns the class into the typed error:

====================================================  ========================================
engine failure                                        raised
====================================================  ========================================
busy / locked (past the busy timeout)                 ``StoreUnavailable`` (retryable)
"database or disk is full"                            ``StoreUnavailable`` (retryable once
                                                      space is freed)
I/O error, out of memory, cannot open, read-only      ``StoreUnavailable`` (retryable once the
                                                      file is fixed)
"file is not a database", "malformed"                 ``StoreCorrupted``
"string or blob too big"                              ``PayloadTooLarge``
====================================================  ========================================

Anything else is the driver's to map (closed connections, network errors, constraint
violations); :func:`engine_error` returns ``None`` for it.  A networked driver whose request
may have been applied although no answer came back (the connection failed after sending a
``COMMIT`` or an autocommit write) raises :class:`RequestOutcomeUnknown`, which the plan's
``commit`` turns into :class:`~harel.store.errors.CommitOutcomeUnknown`.
"""

from __future__ import annotations

from harel.store.errors import PayloadTooLarge, StoreCorrupted, StoreError, StoreUnavailable


class RequestOutcomeUnknown(StoreUnavailable):
    """A driver's request that may have been applied got no answer (the connection failed
    after it was sent).  Outside ``commit`` it is a plain ``StoreUnavailable`` (retryable);
    ``SqlPlan.commit`` raises it as ``CommitOutcomeUnknown`` naming the commit."""


# primary result codes (the low byte of an extended code)
BUSY, LOCKED, NOMEM, READONLY, IOERR, CORRUPT = 5, 6, 7, 8, 10, 11
"""SQLite's primary result codes (``BUSY``: another connection holds the lock; ``LOCKED``: a
conflict inside this connection): the two a driver may wait out."""
FULL, CANTOPEN, TOOBIG, NOTADB = 13, 14, 18, 26

_TEXTS = (
    ("database is locked", BUSY),
    ("database table is locked", LOCKED),
    ("disk is full", FULL),
    ("not a database", NOTADB),
    ("malformed", CORRUPT),
    ("too big", TOOBIG),
    ("unable to open", CANTOPEN),
    ("disk i/o error", IOERR),
    ("readonly database", READONLY),
    ("out of memory", NOMEM),
)
"""Message fragments of SQLite's errors and their primary codes (for drivers without codes)."""


def primary_code(code: object, message: str) -> int | None:
    """The primary result code of a failure: from ``code`` when the driver gave one (an
    extended code is reduced to its low byte), else guessed from SQLite's ``message``."""
    if isinstance(code, int) and not isinstance(code, bool):
        return code & 0xFF
    text = message.lower()
    for needle, guess in _TEXTS:
        if needle in text:
            return guess
    return None


def engine_error(
    code: object, message: str, *, where: str, busy_timeout_ms: int | None = None
) -> StoreError | None:
    """The typed error for one of SQLite's own failures, or ``None`` when it is none of them.

    ``where`` names the database (``"libSQL database '/srv/app.db'"``), ``message`` is the
    engine's text (already free of secrets) and ``busy_timeout_ms`` how long a locked database
    was waited for (said in the message).
    """
    kind = primary_code(code, message)
    if kind in (BUSY, LOCKED):
        waited = "" if busy_timeout_ms is None else f" for {busy_timeout_ms} ms"
        return StoreUnavailable(
            f"{where} stayed locked by another connection{waited} ({message}); retry the "
            "operation, raise busy_timeout_ms, or make sure no other process holds a long "
            "write transaction on this file"
        )
    if kind == FULL:
        return StoreUnavailable(
            f"{where}: the database or disk is full ({message}); free disk space (or raise the "
            "file size limit), then retry"
        )
    if kind in (NOTADB, CORRUPT):
        return StoreCorrupted(
            f"{where} is not a readable SQLite database ({message}); point the store at the "
            "right file, or restore this one from a backup"
        )
    if kind == TOOBIG:
        return PayloadTooLarge(
            f"a value is over {where}'s size limit ({message}); keep large data outside the "
            "execution and store a reference"
        )
    if kind in (CANTOPEN, READONLY, IOERR, NOMEM):
        return StoreUnavailable(
            f"{where} cannot be used ({message}); check that the file and its directory exist, "
            "are writable, and that the disk is healthy, then retry"
        )
    return None
