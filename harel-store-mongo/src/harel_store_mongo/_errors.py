"""PyMongo exceptions -> ``harel.store.errors``: the one mapping both drivers use.

No PyMongo (or BSON) exception escapes a contract method.  A duplicate key becomes the plan's
private :class:`~harel_store_mongo._operations.DuplicateKey` (the plan turns it into a conflict).

Whether a failed request may have reached the server decides what a commit reports:

* not sent, or refused whole (no server selected within ``serverSelectionTimeoutMS``, no free
  connection, a "not primary" answer, any error answer): ``StoreUnavailable`` / the typed
  error, nothing was written;
* maybe sent (the connection failed or timed out while the request or its reply was on the
  wire: ``AutoReconnect``, ``NetworkTimeout`` and other connection failures):
  :class:`~harel_store_mongo._operations.ReplyLost` (a ``StoreUnavailable``), which the commit plan
  settles by re-sending and reading the receipt, else reports as ``CommitOutcomeUnknown``;
* applied but not confirmed by the write concern (``WriteConcernError``, e.g. ``wtimeout``):
  :class:`~harel_store_mongo._operations.WriteUnconfirmed`, ``CommitOutcomeUnknown`` for a commit
  (it may still be rolled back).
Messages are redacted: a driver's text may name hosts, never a password.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import bson.errors
import pymongo.errors as perr
from harel.store.author import redact_text
from harel.store.errors import (
    InvalidPayload,
    PayloadTooLarge,
    StoreConfigError,
    StoreCorrupted,
    StoreError,
    StoreUnavailable,
)

from harel_store_mongo._operations import DuplicateKey, ReplyLost, WriteUnconfirmed

TOO_LARGE_CODES = frozenset({10334, 17419, 17420, 10329, 13548})
"""BSONObjectTooLarge, the document-too-large-after-update codes, and friends."""
RETRYABLE_CODES = frozenset(
    {
        6,  # HostUnreachable
        7,  # HostNotFound
        46,  # LockBusy
        50,  # MaxTimeMSExpired
        89,  # NetworkTimeout
        91,  # ShutdownInProgress
        112,  # WriteConflict
        189,  # PrimarySteppedDown
        262,  # ExceededTimeLimit
        9001,  # SocketException
        10107,  # NotWritablePrimary
        11600,  # InterruptedAtShutdown
        11602,  # InterruptedDueToReplStateChange
        13435,  # NotPrimaryNoSecondaryOk
        13436,  # NotPrimaryOrSecondary
    }
)
DENIED_CODES = frozenset({13, 18, 8000})
"""Unauthorized, AuthenticationFailed, Atlas' AtlasError (bad credentials)."""


def _text(exc: BaseException) -> str:
    return redact_text(str(exc))[:500] or type(exc).__name__


def map_error(exc: BaseException, where: str) -> BaseException:
    """The typed error for a PyMongo/BSON exception raised while talking to ``where``."""
    if isinstance(exc, perr.DuplicateKeyError):
        return DuplicateKey(_text(exc))
    if isinstance(exc, perr.BulkWriteError) and _only_duplicates(exc):
        return DuplicateKey(_text(exc))
    if isinstance(exc, perr.DocumentTooLarge):
        return PayloadTooLarge(
            f"{where}: the request is larger than MongoDB accepts ({_text(exc)}; documents hold "
            "16 MiB); nothing was written: keep large data outside the execution"
        )
    if isinstance(exc, perr.WriteConcernError):
        return WriteUnconfirmed(
            f"{where}: the write was applied but not acknowledged by the requested write "
            f"concern ({_text(exc)}); it may be rolled back: load the execution before retrying"
        )
    if isinstance(
        exc,
        (
            perr.ServerSelectionTimeoutError,
            perr.WaitQueueTimeoutError,
            perr.NotPrimaryError,
            perr.ExecutionTimeout,
        ),
    ):
        return StoreUnavailable(f"{where} is not reachable ({_text(exc)}); retry once it is back")
    if isinstance(exc, perr.ConnectionFailure):
        return ReplyLost(
            f"{where}: the connection failed while the request may have been on its way "
            f"({_text(exc)}); it may or may not have been applied"
        )
    if isinstance(exc, perr.OperationFailure):
        code = exc.code
        if code in TOO_LARGE_CODES or "too large" in str(exc).lower():
            return PayloadTooLarge(
                f"{where} refused a document over MongoDB's 16 MiB limit ({_text(exc)}); nothing "
                "was written: keep large data outside the execution, lower trace_max or prune "
                "old dedupe marks (prune_processed)"
            )
        if code in DENIED_CODES:
            return StoreConfigError(
                f"{where} refused the credentials or lacks a permission ({_text(exc)}); the "
                "user needs the readWrite role on the store's database"
            )
        if code in RETRYABLE_CODES:
            return StoreUnavailable(f"{where} is busy or failing over ({_text(exc)}); retry")
        return StoreError(f"{where} answered an error (code {code}): {_text(exc)}")
    if isinstance(exc, perr.ConfigurationError):
        return StoreConfigError(f"{where}: the MongoDB client is misconfigured ({_text(exc)})")
    if isinstance(exc, perr.InvalidOperation):
        return StoreError(f"{where}: {_text(exc)}; open a new store")
    if isinstance(exc, bson.errors.InvalidDocument):
        return InvalidPayload(f"{where}: a value cannot be stored as BSON ({_text(exc)})")
    if isinstance(exc, bson.errors.BSONError):
        return StoreCorrupted(f"{where}: a stored document cannot be read ({_text(exc)})")
    if isinstance(exc, perr.PyMongoError):
        return StoreError(f"{where}: {type(exc).__name__}: {_text(exc)}")
    return exc


def _only_duplicates(exc: perr.BulkWriteError) -> bool:
    """Whether an unordered bulk insert failed only on ids already present (the rest went in)."""
    details = exc.details if isinstance(exc.details, dict) else {}
    errors = details.get("writeErrors") or []
    return (
        bool(errors)
        and not details.get("writeConcernErrors")
        and all(isinstance(e, dict) and e.get("code") == 11000 for e in errors)
    )


@contextmanager
def translate(where: str) -> Iterator[None]:
    """Re-raise any PyMongo or BSON exception inside the block as its typed error."""
    try:
        yield
    except (perr.PyMongoError, bson.errors.BSONError) as exc:
        raise map_error(exc, where) from None
