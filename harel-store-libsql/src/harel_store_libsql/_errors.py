"""Every ``libsql`` driver failure as an error of :mod:`harel.store.errors`.

The driver reports everything, engine errors included, as a ``ValueError`` (sometimes
``libsql.Error``) carrying only SQLite's message text, and a Rust panic as
``pyo3_runtime.PanicException`` (a ``BaseException``).  SQLite's own failures are classified
once for the SQL family (:func:`harel.store.common.sql.errors.engine_error`); this module adds
the driver's and the network's:

==================================================  ==========================================
driver error                                        raised
==================================================  ==========================================
busy / locked past ``busy_timeout_ms``              ``StoreUnavailable`` (retryable)
"database or disk is full", I/O error, cannot       ``StoreUnavailable`` (retryable once fixed)
open (a missing directory), read-only file
"file is not a database", "malformed"               ``StoreCorrupted`` naming the file
"string or blob too big"                            ``PayloadTooLarge``
"Unsupported parameter type" (a value the driver    ``InvalidPayload`` (a ``ValueError``)
cannot bind: a lone surrogate)
server or primary unreachable (HTTP, Hrana, sync)   ``StoreUnavailable`` (retryable): the
                                                    request did not take effect
the same, on a ``COMMIT`` or an autocommit write    ``RequestOutcomeUnknown`` (a
sent to a server or primary                         ``StoreUnavailable``): it may have been
                                                    applied; a commit raises it as
                                                    ``CommitOutcomeUnknown``
a panic inside the driver                           ``StoreError`` naming the database
anything else                                       ``StoreError`` naming the database
==================================================  ==========================================

Messages are scrubbed (every URL redacted, the auth token replaced by ``***``) and the
driver's exception is not chained, so no secret can reach a log through them.
"""

from __future__ import annotations

from harel.store.author import scrub_secrets
from harel.store.author.sql import BUSY, LOCKED, RequestOutcomeUnknown, engine_error, primary_code
from harel.store.errors import InvalidPayload, StoreError, StoreUnavailable

from harel_store_libsql._options import LibsqlOptions

_NETWORK = (
    "hrana",
    "http",
    "sync error",
    "tcp",
    "connect",
    "connection",
    "timed out",
    "dns",
    "tls",
    "replication",
)
"""Fragments of the driver's messages for a server or primary that cannot be reached."""


def is_panic(exc: BaseException) -> bool:
    """Whether ``exc`` is a Rust panic surfaced by PyO3 (``pyo3_runtime.PanicException``)."""
    return type(exc).__name__ == "PanicException"


def is_locked(exc: BaseException) -> bool:
    """Whether ``exc`` says the database is locked by another connection (worth waiting)."""
    return primary_code(None, str(exc)) in (BUSY, LOCKED)


def closed_error(options: LibsqlOptions) -> StoreError:
    """The error raised by any call on a closed store."""
    return StoreError(f"the libSQL store over {options.where} is closed; open a new store")


def driver_error(
    exc: BaseException, options: LibsqlOptions, *, may_apply: bool = False
) -> StoreError:
    """The :mod:`harel.store.errors` error for one failure of the ``libsql`` driver.

    ``may_apply``: the failed statement takes effect on its own once the server runs it (a
    ``COMMIT``, or a write outside a transaction), so a network failure after sending it leaves
    its outcome unknown (:class:`RequestOutcomeUnknown`); any other network failure is a plain
    ``StoreUnavailable`` (a transaction the server never committed is rolled back)."""
    where = options.where
    message = scrub_secrets(str(exc) or type(exc).__name__, list(options.secrets))[:2000]
    if is_panic(exc):
        return StoreError(
            f"the libsql driver failed internally on {where} ({message}); the operation was not "
            "completed: retry it, and report the message if it persists"
        )
    busy_timeout_ms = options.busy_timeout_ms if options.local else None
    error = engine_error(None, message, where=where, busy_timeout_ms=busy_timeout_ms)
    if error is not None:
        return error
    text = message.lower()
    if "unsupported parameter type" in text:
        return InvalidPayload(
            f"the libsql driver cannot bind a value ({message[:200]}); pass well-formed str "
            "values (no lone surrogates)"
        )
    if options.mode != "file" and any(fragment in text for fragment in _NETWORK):
        if may_apply:
            return RequestOutcomeUnknown(
                f"{where} did not answer a write it may have applied ({message}); check the "
                "network, then re-send the same request"
            )
        return StoreUnavailable(
            f"{where} cannot be reached ({message}); check the URL, the network and the "
            "auth token, then retry"
        )
    return StoreError(f"{where} failed: {message}")
