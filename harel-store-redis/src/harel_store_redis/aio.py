"""``AsyncRedisStore``: the asyncio twin of :class:`~harel_store_redis.sync.RedisStore`.

Its contract methods (written once in :class:`harel.store.author.AsyncPlanStore`) run the same
plan over ``redis.asyncio`` through :func:`harel.store.author.adrive`.

Cancellation: a read awaits each request through ``asyncio.shield``, so a cancelled read still
reads its reply (no connection is left with an unread reply, none is torn down), then raises
``CancelledError`` without sending anything further.  A write runs to its end first, in the
task ``AsyncPlanStore._settle`` creates for it (which nothing can cancel, so its requests need
no shield of their own).  A cancelled ``commit`` therefore either stored everything and left
``exe.version`` bumped, or stored nothing and restored it; a retry never duplicates the step.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, Self, TypeVar

import redis.asyncio as aioredis
import redis.asyncio.cluster
from harel.store.author import (
    AsyncPlanStore,
    AsyncWakeups,
    SyncHops,
    aconnect_with_retry,
    adrive,
    current_library,
    in_settled_write,
    wait_in_thread,
)
from harel.store.errors import UnsupportedEventLoop
from redis.asyncio.client import PubSub
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from harel_store_redis._base import RedisStoreBase
from harel_store_redis._errors import translate
from harel_store_redis._options import open_options
from harel_store_redis._plan import RedisPlan
from harel_store_redis._requests import Command, Plan
from harel_store_redis._wake import NextMessage, Subscribe, Subscription, channel, receive_plan

T = TypeVar("T")

AsyncClient = aioredis.Redis | redis.asyncio.cluster.RedisCluster
"""A plain asyncio client, or an asyncio cluster client (``?cluster=yes``)."""


async def _send(client: AsyncClient, request: Command, where: str, retried: bool) -> Any:
    send: Callable[..., Awaitable[Any]] = client.execute_command
    with translate(where, retried=retried):
        return await send(*request.wire)


async def _drain(reply: asyncio.Future[Any]) -> None:
    """Wait until ``reply`` is read, however often the caller is cancelled meanwhile (its
    outcome is then dropped: the caller's cancellation is what goes on)."""
    while not reply.done():
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait((reply,))
    if not reply.cancelled():
        reply.exception()  # retrieved, so asyncio does not log it


async def _step(pubsub: PubSub, request: Subscribe | NextMessage) -> Any:
    if isinstance(request, Subscribe):
        return await pubsub.subscribe(request.channel)
    return await pubsub.get_message(timeout=request.timeout)


class AsyncRedisWakeups(AsyncWakeups[PubSub]):
    """The asyncio store's waiter: :class:`~harel_store_redis.sync.RedisWakeups` on asyncio."""

    def __init__(self, line: Subscription[AsyncClient]) -> None:
        super().__init__(line.where)
        self._line = line

    async def _listen(self) -> PubSub:
        make: Callable[[], PubSub] = self._line.client.pubsub
        pubsub = make()
        try:
            with translate(self.where):
                await adrive(self._line.listen(), partial(_step, pubsub))
            return pubsub
        except BaseException:
            await asyncio.shield(self._hang_up(pubsub))
            raise

    async def _receive(self, handle: PubSub, seconds: float) -> bool:
        with translate(self.where):
            woken: bool = await adrive(receive_plan(seconds), partial(_step, handle))
        return woken

    async def _hang_up(self, handle: PubSub) -> None:
        with contextlib.suppress(aioredis.RedisError, OSError):
            close: Callable[[], Awaitable[None]] = handle.aclose
            await close()

    async def _poke(self) -> None:
        with translate(self.where):
            await self._line.client.publish(self._line.channel, b"close")


class AsyncRedisStore(RedisStoreBase[AsyncClient], AsyncPlanStore[RedisPlan]):
    """A durable :class:`~harel.store.contract.AsyncExecutionStore` in Redis (redis.asyncio).

    Build it with ``await AsyncRedisStore.from_url(url)`` or ``await AsyncRedisStore.open(client)``
    (a ``redis.asyncio.Redis`` made with ``decode_responses=False``); the constructor alone does
    no IO.  Safe for any number of concurrent tasks on one event loop.
    """

    @classmethod
    async def open(cls, client: AsyncClient, **knobs: Any) -> Self:
        """Wrap ``client`` (knobs as for the constructor), ping the server, cache the scripts
        and check the key layout; a failure closes a client the store was to own.

        asyncio only (a ``redis.asyncio`` client); under trio use :meth:`from_url`, or
        :meth:`in_threads` over a ``RedisStore``."""
        if current_library() != "asyncio":
            raise UnsupportedEventLoop(
                "a redis.asyncio client runs on asyncio only; under trio open the store with "
                "`await AsyncRedisStore.from_url(url)` or `await AsyncRedisStore.in_threads("
                "lambda: RedisStore(redis.Redis(...)))`"
            )
        try:
            store = cls(client, **knobs)
            await store._run(store._plan.open())
        except BaseException:
            if knobs.get("owns_client"):
                await client.aclose()
            raise
        return store

    @classmethod
    async def from_url(cls, url: str, **knobs: Any) -> Self:
        """Open ``redis://host:port/db``, ``rediss://…`` or ``unix:///path.sock`` (``?prefix=``).

        Knobs and the bounded connect retry as for ``RedisStore.from_url``.  Under trio
        (redis.asyncio runs on asyncio only) the store is :meth:`in_threads` over a
        ``RedisStore.from_url(url, **knobs)``.
        """
        if current_library() != "asyncio":
            from harel_store_redis.sync import RedisStore

            return await cls.in_threads(partial(RedisStore.from_url, url, **knobs))
        options, retry = open_options(url, knobs)

        async def connect() -> Self:
            client: Any
            if options.cluster:
                client = redis.asyncio.cluster.RedisCluster(
                    **options.client_kwargs(), retry=Retry(NoBackoff(), 0)
                )
            else:
                client = aioredis.Redis(**options.client_kwargs(), retry=Retry(NoBackoff(), 0))
            return await cls.open(client, **options.store_kwargs(), owns_client=True)

        return await aconnect_with_retry(connect, **retry)

    async def _execute(self, request: Command) -> Any:
        client = self._client
        if client is None:
            raise self._closed()
        if in_settled_write():  # a write in its own settled task: nothing cancels it
            return await _send(client, request, self.where, self._retried)
        reply = asyncio.ensure_future(_send(client, request, self.where, self._retried))
        try:
            return await asyncio.shield(reply)
        except asyncio.CancelledError:
            await _drain(reply)
            raise

    async def _run(self, operation: Plan[T]) -> T:
        """Drive one plan operation, each request shielded and through the error mapping."""
        return await adrive(operation, self._execute)

    _wakeups: AsyncRedisWakeups | None = None

    def _opened(self) -> None:
        client = self._client
        if client is not None:
            self._wakeups = AsyncRedisWakeups(Subscription(client, channel(self._keys), self.where))

    async def wait_for_work(self, timeout: float) -> bool:  # noqa: ASYNC109 - contract shape
        """``RedisStore.wait_for_work`` on the asyncio client: cancellation-safe (a cancelled
        wait hangs up; the next call subscribes again and returns ``True`` at once).  Under
        trio the sync store's wait runs in a thread of its own."""
        if isinstance(self, SyncHops):
            return await wait_in_thread(self.store._wakeups, timeout)
        if self._wakeups is None:
            raise self._closed()
        return await self._wakeups.wait(timeout)

    async def close(self) -> None:
        """End a wait in progress and close its connection, then release the client if this
        store owns it (idempotent); later calls raise."""
        if self._wakeups is not None:
            await self._wakeups.close()
        client, self._client = self._client, None
        if client is not None and self._owns_client:
            await client.aclose()
