"""``RedisStore``: the synchronous Redis store over redis-py.

Every contract method (written once in :class:`harel.store.common.PlanStore`) runs one
operation of :class:`~harel_store_redis._plan.RedisPlan` through :meth:`RedisStore._run`; each
request is one ``execute_command`` on the client's connection pool, so the store is safe to
share between threads.  The client makes no retries of its own (a blind re-send is not safe for
every script): the plan retries once what is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Self, TypeVar

import redis
from harel.store.common import PlanStore, connect_with_retry, drive
from redis.backoff import NoBackoff
from redis.retry import Retry

from harel_store_redis._base import RedisStoreBase
from harel_store_redis._errors import translate
from harel_store_redis._options import from_url_args
from harel_store_redis._plan import RedisPlan
from harel_store_redis._requests import Command, Plan

T = TypeVar("T")


class RedisStore(RedisStoreBase[redis.Redis], PlanStore[RedisPlan]):
    """A durable, thread-safe :class:`~harel.store.contract.ExecutionStore` in Redis.

    ``RedisStore(client, prefix=, trace_max=, max_payload_bytes=, owns_client=)`` wraps a
    ``redis.Redis`` and opens at once: pings the server, caches the scripts and checks
    (creates, upgrades) the key layout under ``prefix``.  Prefer :meth:`from_url`.
    """

    def _opened(self) -> None:
        self._run(self._plan.open())

    def _opening_failed(self) -> None:
        self.close()

    @classmethod
    def from_url(cls, url: str, **knobs: Any) -> Self:
        """Open ``redis://host:port/db``, ``rediss://…`` or ``unix:///path.sock`` (``?prefix=``).

        An unreachable server is retried ``connect_retries`` times (default 5, backoff from
        ``retry_delay`` seconds) and then raises ``StoreUnavailable``; each attempt builds a
        new client without client-side retries.  Other knobs: :mod:`harel_store_redis._options`.
        """
        options, retry = from_url_args(url, knobs)
        return connect_with_retry(
            lambda: cls(
                redis.Redis(**options.client_kwargs(), retry=Retry(NoBackoff(), 0)),
                **options.store_kwargs(),
                owns_client=True,
            ),
            **retry,
        )

    def _execute(self, request: Command) -> Any:
        client = self._client
        if client is None:
            raise self._closed()
        send: Callable[..., Any] = client.execute_command
        with translate(self.where, retried=self._retried):
            return send(*request.wire)

    def _run(self, operation: Plan[T]) -> T:
        """Drive one plan operation, each request through the error mapping."""
        return drive(operation, self._execute)

    def close(self) -> None:
        """Release the client if this store owns it (idempotent); later calls raise."""
        client, self._client = self._client, None
        if client is not None and self._owns_client:
            client.close()
