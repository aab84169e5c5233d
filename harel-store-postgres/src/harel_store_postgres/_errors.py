"""psycopg and psycopg_pool exceptions -> :mod:`harel.store.errors`, for both drivers.

No driver exception leaves a contract method: each is mapped here by its SQLSTATE class (or,
for errors without one, by its type).  Messages name the store by its redacted URL and say
what to do; libpq's own messages never contain the password.
"""

from __future__ import annotations

import psycopg
import psycopg_pool
from harel.store.errors import (
    InvalidPayload,
    PayloadTooLarge,
    StoreConfigError,
    StoreCorrupted,
    StoreError,
    StoreUnavailable,
)

from harel_store_postgres._outcome import RequestOutcomeUnknown

DRIVER_ERRORS: tuple[type[BaseException], ...] = (psycopg.Error,)
"""What a driver call may raise that :func:`map_error` turns into a store error (the pool's
errors are ``psycopg.OperationalError`` subclasses)."""

_RETRYABLE_CLASSES = ("08", "53", "57P", "58", "40", "55P03", "57014", "25006", "HV")
"""SQLSTATE prefixes of transient conditions: connection trouble, resources, shutdown,
I/O, serialisation/deadlock, lock timeout, statement timeout, a read-only standby."""

_MISSING_LAYOUT = ("42P01", "42883", "3F000", "42704")
"""Undefined table / function / schema / object: the schema was dropped or altered."""

_NOT_RETRYABLE_AT_CONNECT = (
    "authentication failed",
    "does not exist",
    "pg_hba.conf",
    "no password supplied",
    "permission denied",
    "invalid connection option",
    "sslmode value",
)
"""libpq connect messages that waiting will not fix (credentials, names, configuration)."""


def map_error(exc: BaseException, where: str) -> StoreError:
    """The store error for a driver exception raised while talking to ``where``."""
    if isinstance(exc, StoreError):
        return exc
    if isinstance(exc, psycopg_pool.PoolClosed):
        return StoreError(f"the PostgreSQL store over {where} is closed; open a new store")
    if isinstance(exc, psycopg_pool.PoolTimeout):
        return StoreUnavailable(
            f"no connection to {where} within pool_timeout ({exc}); the server is down or "
            "every pooled connection is busy: retry, or raise pool_max / pool_timeout"
        )
    state = getattr(exc, "sqlstate", None) or ""
    if isinstance(exc, psycopg.errors.ProgramLimitExceeded) or state.startswith("54"):
        return PayloadTooLarge(f"PostgreSQL at {where} refused a value as too large: {exc}")
    if state.startswith("22"):
        return InvalidPayload(f"PostgreSQL at {where} refused a value: {exc}")
    if state in _MISSING_LAYOUT:
        return StoreCorrupted(
            f"the harel layout in {where} is missing a table or function ({exc}); the schema "
            "was dropped or altered while the store was open: reopen the store to recreate it"
        )
    if state.startswith(_RETRYABLE_CLASSES) or (
        not state and isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError))
    ):
        return StoreUnavailable(
            f"PostgreSQL at {where} is unavailable ({exc}); nothing was written: retry the "
            "operation once the server is reachable"
        )
    return StoreError(f"PostgreSQL at {where} failed: {type(exc).__name__}: {exc}")


_LOST_AFTER_SEND = ("08", "57P01", "57P02")
"""SQLSTATEs of a connection lost or a server shutting down while a statement ran: the
statement may have committed before the connection went (the answer is what was lost)."""


def map_sent_error(exc: BaseException, where: str, broken: bool) -> StoreError:
    """The store error for a driver exception raised while a statement was being sent or run.

    When the connection broke (``broken``) or the server went away, the statement may have
    been applied and its answer lost: :class:`RequestOutcomeUnknown`.  An error the server
    answered on a live connection means the statement's transaction rolled back, so it maps
    as :func:`map_error` does (``StoreUnavailable`` then means nothing was written).
    """
    if isinstance(exc, StoreError):
        return exc
    state = getattr(exc, "sqlstate", None) or ""
    if broken or state.startswith(_LOST_AFTER_SEND):
        detail = str(exc).strip() or type(exc).__name__
        return RequestOutcomeUnknown(where, detail)
    return map_error(exc, where)


def connect_error(exc: BaseException, where: str) -> StoreError:
    """The error of a failed connection attempt: :class:`StoreUnavailable` when retrying may
    help (server down or starting), :class:`StoreConfigError` when it cannot (credentials,
    unknown database or role, bad connection options)."""
    text = str(exc)
    if any(marker in text for marker in _NOT_RETRYABLE_AT_CONNECT):
        return StoreConfigError(
            f"cannot connect to {where}: {text.strip()}; check the URL's user, password, "
            "database and options"
        )
    return StoreUnavailable(f"cannot connect to {where}: {text.strip()}")
