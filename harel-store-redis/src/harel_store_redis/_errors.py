"""redis-py exceptions -> ``harel.store.errors``: the one mapping both drivers use.

No redis-py exception escapes a contract method.  ``NOSCRIPT`` becomes the plan's private
:class:`~harel_store_redis._requests.ScriptMissing` (the plan then re-sends the script's source).

A connection failure or timeout is a plain ``StoreUnavailable`` only when the request cannot
have been executed: the connection was never made or its handshake failed (raised inside
redis-py's connect, or its ``Error ... connecting to ...`` / ``Timeout connecting to server``
messages, a full pool), or the server refused the command whole (``LOADING``).  Any other one
(the reply never read, the connection cut while writing or reading) may have come after the
server ran the request and becomes :class:`~harel_store_redis._requests.ReplyLost`, which the
commit plan settles by re-sending.  Unknown failures count as "may have run": the safe side.
So does every connection failure of a client that re-sends commands itself (a ``Retry`` with
retries): its last failure may follow an attempt that ran.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import redis.exceptions as rex
from harel.store.errors import StoreConfigError, StoreCorrupted, StoreError, StoreUnavailable

from harel_store_redis._requests import ReplyLost, ScriptMissing

_RETRYABLE_REPLIES = ("BUSY", "LOADING", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "READONLY")
_REDIRECTS = ("MOVED", "ASK")
_SAME_SLOT = ("same slot", "same key slot", "crossslot")
"""How redis-py's and the server's messages say that one request's keys span several slots."""
_NOT_CONNECTED = ("connecting to", "timeout connecting to server", "too many connections")
"""How redis-py's messages start or say that no connection was made (nothing was sent)."""
_NEVER_RAN: tuple[type[BaseException], ...] = (
    rex.BusyLoadingError,  # a server reply: the command was refused whole
    *((rex.MaxConnectionsError,) if hasattr(rex, "MaxConnectionsError") else ()),
)
"""Failures that are a refusal before anything ran (``MaxConnectionsError``: redis-py 6+)."""
_CONNECT_FRAMES = frozenset(
    {"get_connection", "connect", "connect_check_health", "on_connect", "on_connect_check_health"}
)
"""redis-py functions that make a connection ready (nothing of the command is sent there)."""


def _raised_while_connecting(exc: BaseException) -> bool:
    traceback = exc.__traceback__
    while traceback is not None:
        frame = traceback.tb_frame
        if frame.f_code.co_name in _CONNECT_FRAMES and str(
            frame.f_globals.get("__name__", "")
        ).startswith("redis."):
            return True
        traceback = traceback.tb_next
    return False


def never_sent(exc: BaseException) -> bool:
    """Whether a connection error or timeout certainly came before the request could run:
    no connection was made (or its handshake failed), or the server refused the command
    whole.  Meaningful for one attempt only: a client that retries by itself may have sent an
    earlier attempt (see :func:`map_error`'s ``retried``)."""
    if isinstance(exc, _NEVER_RAN):
        return True
    if isinstance(exc, ConnectionRefusedError):
        return True  # a raw socket error of the connect itself
    message = str(exc).lower()
    return any(phrase in message for phrase in _NOT_CONNECTED) or _raised_while_connecting(exc)


def client_retries(connection_kwargs: dict[str, Any]) -> bool:
    """Whether a client built with these connection settings re-sends a failed command by
    itself (a ``redis.retry.Retry`` with retries; the stores' own clients have none)."""
    retry = connection_kwargs.get("retry")
    if retry is None:
        return False
    count = getattr(retry, "get_retries", None)
    retries = count() if callable(count) else getattr(retry, "_retries", 1)
    return bool(retries)


def map_error(exc: BaseException, where: str, *, retried: bool = False) -> BaseException:
    """The typed error for a redis-py (or socket) exception raised while talking to ``where``
    (``retried``: the client re-sends failed commands itself, so no connection failure proves
    that nothing ran)."""
    if isinstance(exc, rex.NoScriptError):
        return ScriptMissing(str(exc))
    if isinstance(exc, rex.ClusterCrossSlotError) or (
        isinstance(exc, rex.RedisClusterException)
        and any(phrase in str(exc).lower() for phrase in _SAME_SLOT)
    ):
        return cross_slot(where, str(exc))
    if isinstance(exc, rex.RedisClusterException):
        # raised by the cluster client itself: no node reachable, a slot no node serves
        # (a master down), a topology refresh that failed after a connection error (which
        # decides whether the request may have run)
        cause = exc.__context__
        if isinstance(cause, (rex.ConnectionError, rex.TimeoutError, OSError)):
            return map_error(cause, where, retried=retried)
        return StoreUnavailable(f"{where}: {type(exc).__name__}: {exc}; retry once it is back")
    if isinstance(exc, (rex.ClusterError, rex.TryAgainError)):
        return StoreUnavailable(
            f"{where} refused the command ({type(exc).__name__}: {exc}): a master of the "
            "cluster is down or its slots are moving; retry later"
        )
    if isinstance(exc, rex.AskError):  # MOVED or ASK reaching a plain (non-cluster) client
        return StoreConfigError(
            f"{where} is a node of a Redis Cluster (it redirected a request: {exc}); open "
            "the store with ?cluster=yes so that requests are routed to the right node"
        )
    if isinstance(exc, (rex.AuthenticationError, rex.AuthorizationError, rex.NoPermissionError)):
        return StoreConfigError(
            f"{where} refused the credentials or lacks a permission ({exc}); check the user "
            "name, the password and its ACL rules (EVALSHA, SCRIPT, and the data commands on "
            "the prefix's keys are needed)"
        )
    if isinstance(exc, (rex.ConnectionError, rex.TimeoutError, OSError)):
        if not retried and never_sent(exc):
            return StoreUnavailable(
                f"{where} is not reachable ({type(exc).__name__}: {exc}); retry once it is back"
            )
        return ReplyLost(
            f"{where}: the connection failed once the request may have been sent "
            f"({type(exc).__name__}: {exc}); it may or may not have run"
        )
    if isinstance(exc, (rex.ReadOnlyError, rex.OutOfMemoryError)):
        return StoreUnavailable(
            f"{where} refused the write ({exc}): a replica during failover, or maxmemory "
            "reached; retry later or free memory"
        )
    if isinstance(exc, rex.ResponseError):
        message = str(exc)
        head = message.split(" ", 1)[0].upper()
        if head in _RETRYABLE_REPLIES:
            return StoreUnavailable(f"{where} is busy ({message}); retry later")
        if head in _REDIRECTS:
            return StoreConfigError(
                f"{where} is a node of a Redis Cluster (it redirected a request: {message}); "
                "open the store with ?cluster=yes so that requests are routed to the right node"
            )
        if head == "CROSSSLOT":
            return cross_slot(where, message)
        if "WRONGTYPE" in message:
            return StoreCorrupted(
                f"{where}: a key under the store's prefix holds a value of another type than "
                f"harel writes there ({message}); move the foreign key away or use another prefix"
            )
        return StoreError(f"{where} answered an error: {message}")
    if isinstance(exc, rex.RedisError):
        return StoreError(f"{where}: {type(exc).__name__}: {exc}")
    return exc


def cross_slot(where: str, message: str) -> StoreConfigError:
    """The error of a request whose keys live in several cluster slots (an untagged prefix in
    the single-slot layout): names the two fixes."""
    return StoreConfigError(
        f"{where} is a Redis Cluster and the keys of one operation live in different slots "
        f"({message}); give the store a prefix with a hash tag, e.g. ?prefix={{harel}}:, so "
        "that every key lands in one slot, or use the sharded layout (?shards=N, a prefix "
        "without braces), which spreads the store over N slots"
    )


DRIVER_ERRORS: tuple[type[BaseException], ...] = (
    rex.RedisError,
    rex.RedisClusterException,
    OSError,
)
"""What :func:`map_error` maps: every redis-py exception, and the socket's own."""


@contextmanager
def translate(where: str, *, retried: bool = False) -> Iterator[None]:
    """Re-raise any redis-py or socket exception inside the block as its typed error
    (``retried`` as for :func:`map_error`)."""
    try:
        yield
    except DRIVER_ERRORS as exc:
        raise map_error(exc, where, retried=retried) from exc
