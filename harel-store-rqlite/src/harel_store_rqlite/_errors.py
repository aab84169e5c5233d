"""Every rqlite failure as an error of :mod:`harel.store.errors`, for both drivers.

No httpx exception leaves a contract method, and no message holds the password (the node is
named by its base URL, which carries no credentials; server texts are redacted and cut):

==============================================  ===========================================
failure                                         raised
==============================================  ===========================================
cannot connect, TLS handshake failed, no      ``StoreUnavailable`` (nothing was sent)
connection free in the pool
timeout, connection dropped mid-request         for a write: :class:`OutcomeUnknown` (it may
                                                have been applied; a commit raises
                                                ``CommitOutcomeUnknown``); for a read:
                                                ``StoreUnavailable``
HTTP 503 (no leader yet), 408, 429, 500         ``StoreUnavailable`` (retryable; rqlite answers
                                                them before applying anything)
HTTP 502, 504 (a gateway in front of the node)  for a write: ``OutcomeUnknown``; else
                                                ``StoreUnavailable``
HTTP 200 ``{"error": ...}`` (a Raft failure):   ``StoreUnavailable`` (certainly not applied)
"timed out enqueuing operation", "store not
ready", "not leader", "leader not found"
HTTP 200 ``{"error": ...}``: "leadership lost   for a write: ``OutcomeUnknown`` (the entry
while committing log", "snapshot restored       may still be committed, or be in the
while committing log", any other text           restored snapshot); for a read:
                                                ``StoreUnavailable``
a per-statement error saying "leader",          ``StoreUnavailable`` (retryable)
"locked", "busy", "timeout", "disk"
HTTP 401 / 403                                  ``StoreConfigError`` (check the URL's user
                                                and password, never shown)
HTTP 413; "string or blob too big"              ``PayloadTooLarge``
a host name that cannot be encoded              ``InvalidStoreURL``
"not a database", "malformed"; missing table    ``StoreCorrupted``
or column (the harel tables were altered), a
statement that no longer prepares at open
anything else (another status, a reply that     ``StoreError`` naming the node
is not rqlite's JSON, another SQL error)
a call on a closed store                        ``StoreError`` ("the store is closed")
==============================================  ===========================================
"""

from __future__ import annotations

from harel.store.author import redact_text
from harel.store.author.sql import RequestOutcomeUnknown
from harel.store.errors import (
    InvalidStoreURL,
    PayloadTooLarge,
    StoreConfigError,
    StoreCorrupted,
    StoreError,
    StoreUnavailable,
)

from harel_store_rqlite._options import RqliteOptions

_RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})
_GATEWAY_STATUS = frozenset({502, 504})
"""Statuses a gateway between the store and the node may answer after forwarding a write."""
_NOT_APPLIED_TEXT = (
    "timed out enqueuing operation",
    "store not ready",
    "not leader",
    "leader not found",
    "store not open",
)
"""Raft failures rqlite reports before the entry reached the log (nothing applied)."""
_UNAVAILABLE_TEXT = ("leader", "locked", "busy", "timeout", "deadline", "disk", "shutdown")
_CORRUPT_TEXT = ("not a database", "malformed", "no such table", "no such column", "no column")
_UNKNOWN_OUTCOME = (
    "; the write may or may not have been applied (a commit: re-send the same commit, its "
    "receipt settles it)"
)


OutcomeUnknown = RequestOutcomeUnknown
"""A write's request may have been applied, but no answer came back (a reply lost, a
connection cut after sending, a leadership lost while committing); the SQL plan's ``commit``
raises it as :class:`~harel.store.errors.CommitOutcomeUnknown`, anything else as the plain
``StoreUnavailable`` it is."""


def shown(text: str, limit: int = 300) -> str:
    """A server or driver text fit for a message: secrets redacted, cut at ``limit``."""
    text = redact_text(" ".join(text.split()))
    return text if len(text) <= limit else text[:limit] + "..."


def closed_error(options: RqliteOptions) -> StoreError:
    """The error raised by any call on a closed store."""
    return StoreError(f"the store over {options.where} is closed; open a new store")


def transport_error(exc: Exception, options: RqliteOptions, *, write: bool) -> StoreError:
    """The error for an exception the HTTP client raised while sending one request."""
    import httpx  # here, not at the top: the sans-IO modules use this module without httpx

    where, detail = options.where, shown(str(exc)) or type(exc).__name__
    if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout)):
        return StoreUnavailable(
            f"cannot connect to {where} ({detail}); check that the node runs and is reachable "
            "(and its TLS settings for rqlites://), then retry"
        )
    if isinstance(exc, httpx.PoolTimeout):
        return StoreUnavailable(f"no connection to {where} came free ({detail}); retry")
    unknown = _UNKNOWN_OUTCOME if write else ""
    message = None
    if isinstance(exc, httpx.TimeoutException):
        message = (
            f"{where} did not answer within {options.timeout:g} s ({detail}){unknown}; "
            "raise the timeout knob if the cluster is slow"
        )
    elif isinstance(exc, httpx.TransportError):
        message = f"the connection to {where} failed mid-request ({detail}){unknown}"
    if message is not None:
        if write:
            return OutcomeUnknown(message)
        return StoreUnavailable(message)
    if isinstance(exc, RuntimeError) and "closed" in str(exc).lower():
        return closed_error(options)
    if isinstance(exc, (httpx.InvalidURL, UnicodeError)):
        return InvalidStoreURL(
            f"{where} cannot be addressed ({detail}); check the host and path of the store URL"
        )
    return StoreError(f"a request to {where} failed ({type(exc).__name__}: {detail})")


def status_error(
    status: int, body: bytes, options: RqliteOptions, *, write: bool = False
) -> StoreError:
    """The error for an HTTP status other than 200 (redirects are followed before this)."""
    where, text = options.where, shown(body.decode("utf-8", "replace")) or "no details"
    if status in (401, 403):
        return StoreConfigError(
            f"{where} refused the request (HTTP {status}: {text}); check the user and "
            "password in the store URL (not shown) and that the user has the execute and "
            "query permissions"
        )
    if write and status in _GATEWAY_STATUS:
        return OutcomeUnknown(f"{where} answered HTTP {status} ({text}){_UNKNOWN_OUTCOME}")
    if status == 503:
        return StoreUnavailable(
            f"{where} cannot serve the request yet (HTTP 503: {text}): the cluster has no "
            "leader, or the node is not ready; retry in a moment"
        )
    if status == 413:
        return PayloadTooLarge(
            f"{where} refused a request as too large (HTTP 413); keep large data outside the "
            "execution and store a reference"
        )
    if status in _RETRYABLE_STATUS:
        return StoreUnavailable(f"{where} answered HTTP {status} ({text}); retry the operation")
    return StoreError(f"{where} answered HTTP {status} ({text}); is this an rqlite node?")


def statement_error(index: int, message: object, options: RqliteOptions) -> StoreError:
    """The error for a per-statement ``error`` in an HTTP 200 reply (``index`` 0-based)."""
    where, text = options.where, shown(str(message))
    lowered = text.lower()
    if "too big" in lowered:
        return PayloadTooLarge(
            f"{where}: statement {index + 1} holds a value over the size limit ({text}); keep "
            "large data outside the execution and store a reference"
        )
    if any(needle in lowered for needle in _CORRUPT_TEXT):
        return StoreCorrupted(
            f"{where}: statement {index + 1} failed on the stored data ({text}); the harel "
            "tables are damaged or were altered by something else: restore the database from "
            "a backup or point the store at a new one"
        )
    if any(needle in lowered for needle in _UNAVAILABLE_TEXT):
        return StoreUnavailable(f"{where}: statement {index + 1} failed ({text}); retry")
    return StoreError(f"{where} rejected statement {index + 1} ({text})")


def raft_error(message: object, options: RqliteOptions, *, write: bool) -> StoreError:
    """The error for a top-level ``error`` under HTTP 200: rqlite's report of a failure of the
    request as a whole (Raft: enqueue timeout, leadership lost, snapshot restored...)."""
    where, text = options.where, shown(str(message))
    lowered = text.lower()
    if "too big" in lowered:
        return PayloadTooLarge(f"{where} refused a request as too large ({text})")
    if not write or any(needle in lowered for needle in _NOT_APPLIED_TEXT):
        return StoreUnavailable(f"{where} could not serve the request ({text}); retry")
    return OutcomeUnknown(
        f"{where} failed the request after accepting it ({text}){_UNKNOWN_OUTCOME}"
    )


def verify_error(sql: str, message: object, options: RqliteOptions) -> StoreError:
    """The error for a statement that does not prepare on the node's database at open."""
    return StoreCorrupted(
        f"{options.where}: a statement of this store does not prepare on the database "
        f"({shown(str(message))}; {shown(sql, 120)}); the harel tables are damaged or were "
        "altered by something else (or the node's SQLite is too old): restore the database "
        "from a backup or point the store at a new one"
    )


def reply_error(problem: str, options: RqliteOptions) -> StoreError:
    """The error for an HTTP 200 reply that is not what rqlite sends."""
    return StoreError(
        f"{options.where} sent a reply this store cannot read ({problem}); is the URL an rqlite "
        "node (not a proxy or another service)?"
    )
