"""``RedisStore``: the synchronous Redis store over redis-py.

Every contract method (written once in :class:`harel.store.author.PlanStore`) runs one
operation of :class:`~harel_store_redis._plan.RedisPlan` through :meth:`RedisStore._run`; each
request is one ``execute_command`` on the client's connection pool, so the store is safe to
share between threads.  A store that built its own client (:meth:`RedisStore.from_url`) sends
its scripts on a connection it keeps (:mod:`harel_store_redis._lane`), one request at a time,
the others through the pool.  The client makes no retries of its own (a blind re-send is not
safe for every script): the plan retries once what is.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from functools import partial
from typing import Any, Self, TypeVar, cast

import redis
import redis.cluster
from harel.store.author import PlanStore, Wakeups, connect_with_retry, drive
from redis.backoff import NoBackoff
from redis.client import PubSub
from redis.retry import Retry

from harel_store_redis._base import RedisStoreBase
from harel_store_redis._errors import DRIVER_ERRORS, map_error, translate
from harel_store_redis._lane import BUSY, Lane
from harel_store_redis._options import open_options
from harel_store_redis._plan import RedisPlan
from harel_store_redis._requests import Command, Plan
from harel_store_redis._wake import NextMessage, Subscribe, Subscription, channel, receive_plan

T = TypeVar("T")

Client = redis.Redis | redis.cluster.RedisCluster
"""What the store talks through: a plain client, or a cluster client (``?cluster=yes``)."""


def _step(pubsub: PubSub, request: Subscribe | NextMessage) -> Any:
    if isinstance(request, Subscribe):
        return pubsub.subscribe(request.channel)
    return pubsub.get_message(timeout=request.timeout)


class RedisWakeups(Wakeups[PubSub]):
    """The sync store's waiter: a pub/sub connection of the client, ``SUBSCRIBE``-d once."""

    def __init__(self, line: Subscription[Client]) -> None:
        super().__init__(line.where)
        self._line = line

    def _listen(self) -> PubSub:
        make: Callable[[], PubSub] = self._line.client.pubsub
        pubsub = make()
        try:
            with translate(self.where):
                drive(self._line.listen(), partial(_step, pubsub))
            return pubsub
        except BaseException:
            self._hang_up(pubsub)
            raise

    def _receive(self, handle: PubSub, seconds: float) -> bool:
        with translate(self.where):
            woken: bool = drive(receive_plan(seconds), partial(_step, handle))
        return woken

    def _hang_up(self, handle: PubSub) -> None:
        with contextlib.suppress(redis.RedisError, OSError):
            handle.close()

    def _poke(self) -> None:
        with translate(self.where):
            self._line.client.publish(self._line.channel, b"close")


class RedisStore(RedisStoreBase[Client], PlanStore[RedisPlan]):
    """A durable, thread-safe :class:`~harel.store.contract.ExecutionStore` in Redis.

    ``RedisStore(client, prefix=, trace_max=, max_payload_bytes=, shards=, owns_client=)``
    wraps a ``redis.Redis`` (or a ``redis.cluster.RedisCluster``) and opens at once: pings the
    server, caches the scripts and checks (creates, upgrades) the key layout under ``prefix``.
    Prefer :meth:`from_url`.
    """

    _wakeups: RedisWakeups | None = None
    _lane: Lane | None = None

    def _opened(self) -> None:
        client = self._client
        if client is not None:
            self._wakeups = RedisWakeups(Subscription(client, channel(self._keys), self.where))
            if self._owns_client and isinstance(client, redis.Redis) and not self._retried:
                self._lane = Lane(client)
        self._run(self._plan.open())

    def _opening_failed(self) -> None:
        self.close()

    @classmethod
    def from_url(cls, url: str, **knobs: Any) -> Self:
        """Open ``redis://host:port/db``, ``rediss://…`` or ``unix:///path.sock`` (``?prefix=``;
        ``?cluster=yes``: the address is a node of a Redis Cluster).

        An unreachable server is retried ``connect_retries`` times (default 5, backoff from
        ``retry_delay`` seconds) and then raises ``StoreUnavailable``; each attempt builds a
        new client without client-side retries.  Other knobs: :data:`harel_store_redis._spec.SPEC`.
        """
        options, retry = open_options(url, knobs)

        def connect() -> RedisStore:
            client: Any
            if options.cluster:
                with translate(options.where):  # the cluster client connects at once
                    client = redis.cluster.RedisCluster(
                        **options.client_kwargs(), retry=Retry(NoBackoff(), 0)
                    )
            else:
                client = redis.Redis(**options.client_kwargs(), retry=Retry(NoBackoff(), 0))
            return cls(client, **options.store_kwargs(), owns_client=True)

        return cast(Self, connect_with_retry(connect, **retry))

    def _execute(self, request: Command) -> Any:
        client = self._client
        if client is None:
            raise self._closed()
        try:
            lane = self._lane
            if lane is not None:
                reply = lane.send(request.wire)
                if reply is not BUSY:
                    return reply
            send: Callable[..., Any] = client.execute_command
            return send(*request.wire)
        except DRIVER_ERRORS as exc:  # translate()'s mapping, without a context manager
            raise map_error(exc, self.where, retried=self._retried) from exc

    def _run(self, operation: Plan[T]) -> T:
        """Drive one plan operation, each request through the error mapping."""
        return drive(operation, self._execute)

    def wait_for_work(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds (0-3600) until a write may have made work ready
        (``True``) or the time is up (``False``): a pub/sub connection subscribed to
        ``<prefix>wake`` (the first call subscribes and returns ``True`` at once); no signal
        published after that is missed.  A lost connection: ``StoreUnavailable``, and the next
        call subscribes again.  See :mod:`harel.store.common.wakeups`."""
        if self._wakeups is None:
            raise self._closed()
        return self._wakeups.wait(timeout)

    def close(self) -> None:
        """End a wait in progress and close its connection, then release the client if this
        store owns it (idempotent); later calls raise."""
        if self._wakeups is not None:
            self._wakeups.close()
        lane, self._lane = self._lane, None
        if lane is not None:
            lane.close()
        client, self._client = self._client, None
        if client is not None and self._owns_client:
            client.close()
