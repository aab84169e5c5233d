"""redis-py exceptions -> ``harel.store.errors``: the one mapping both drivers use.

No redis-py exception escapes a contract method.  ``NOSCRIPT`` becomes the plan's private
:class:`~harel_store_redis._requests.ScriptMissing` (the plan then re-sends the script's source).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import redis.exceptions as rex
from harel.store.errors import StoreConfigError, StoreCorrupted, StoreError, StoreUnavailable

from harel_store_redis._requests import ScriptMissing

_RETRYABLE_REPLIES = ("BUSY", "LOADING", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "READONLY")
_CLUSTER_REPLIES = ("CROSSSLOT", "MOVED", "ASK")


def map_error(exc: BaseException, where: str) -> BaseException:
    """The typed error for a redis-py (or socket) exception raised while talking to ``where``."""
    if isinstance(exc, rex.NoScriptError):
        return ScriptMissing(str(exc))
    if isinstance(exc, (rex.AuthenticationError, rex.AuthorizationError, rex.NoPermissionError)):
        return StoreConfigError(
            f"{where} refused the credentials or lacks a permission ({exc}); check the user "
            "name, the password and its ACL rules (EVALSHA, SCRIPT, and the data commands on "
            "the prefix's keys are needed)"
        )
    if isinstance(exc, (rex.ConnectionError, rex.TimeoutError, OSError)):
        return StoreUnavailable(
            f"{where} is not reachable ({type(exc).__name__}: {exc}); retry once it is back"
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
        if head in _CLUSTER_REPLIES:
            return StoreConfigError(
                f"{where} is a Redis Cluster and the keys of one operation live in different "
                f"slots ({message}); give the store a prefix with a hash tag, e.g. "
                "?prefix={harel}:, so that every key lands in one slot"
            )
        if "WRONGTYPE" in message:
            return StoreCorrupted(
                f"{where}: a key under the store's prefix holds a value of another type than "
                f"harel writes there ({message}); move the foreign key away or use another prefix"
            )
        return StoreError(f"{where} answered an error: {message}")
    if isinstance(exc, rex.RedisError):
        return StoreError(f"{where}: {type(exc).__name__}: {exc}")
    return exc


@contextmanager
def translate(where: str) -> Iterator[None]:
    """Re-raise any redis-py or socket exception inside the block as its typed error."""
    try:
        yield
    except (rex.RedisError, OSError) as exc:
        raise map_error(exc, where) from exc
