"""``AsyncRedisStore``: the asyncio twin of :class:`~harel_store_redis.sync.RedisStore`.

It runs the same plans over ``redis.asyncio`` through :func:`harel.store.common.adrive`.

Cancellation: every request is one server call, awaited through ``asyncio.shield``.  When the
caller is cancelled mid-call, the call is still awaited to its reply (so no connection is left
with an unread reply and the outcome is known), no further request of that operation is sent,
and ``CancelledError`` is raised once the operation has settled.  A cancelled ``commit``
therefore either stored everything and left ``exe.version`` bumped, or stored nothing and
restored it — the caller can tell from ``exe.version``; a retry never duplicates the step.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from functools import partial
from typing import Any, Self, TypeVar

import redis.asyncio as aioredis
from harel.model import Execution, ExecutionPage, Status
from harel.store.common import aconnect_with_retry, adrive, committing
from harel.store.contract import (
    DEFAULT_PRUNE_BATCH,
    DEFAULT_TRACE_MAX,
    DueTimer,
    Emit,
    OutboxEntry,
    Spawn,
    SpawnEntry,
    TimerOp,
)
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from harel_store_redis._base import RedisStoreBase
from harel_store_redis._errors import translate
from harel_store_redis._options import DEFAULT_PREFIX, RedisOptions, from_url_args
from harel_store_redis._plan import DEFAULT_MAX_PAYLOAD_BYTES, Command, Plan

T = TypeVar("T")


async def _send(client: aioredis.Redis, request: Command, where: str) -> Any:
    send: Callable[..., Awaitable[Any]] = client.execute_command
    with translate(where):
        return await send(*request.wire)


async def _settle(task: asyncio.Future[Any]) -> Any:
    """The result of ``task`` once it is done, however often the caller is cancelled."""
    while not task.done():
        try:
            await asyncio.wait((task,))
        except asyncio.CancelledError:
            continue
    return task.result()


class _Call:
    """One contract call's requests: each shielded; a cancellation is deferred to the end."""

    __slots__ = ("cancelled", "store")

    def __init__(self, store: AsyncRedisStore) -> None:
        self.store = store
        self.cancelled = False

    async def execute(self, request: Command) -> Any:
        if self.cancelled:  # the caller is gone: start nothing new
            raise asyncio.CancelledError
        client = self.store._client
        if client is None:
            raise self.store._closed()
        task = asyncio.ensure_future(_send(client, request, self.store.where))
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            self.cancelled = True
            return await _settle(task)

    def checkpoint(self) -> None:
        """Raise the deferred ``CancelledError`` (after the operation's outcome is settled)."""
        if self.cancelled:
            raise asyncio.CancelledError


class AsyncRedisStore(RedisStoreBase):
    """A durable :class:`~harel.store.contract.AsyncExecutionStore` in Redis (redis.asyncio).

    Build it with ``await AsyncRedisStore.from_url(url)`` or ``await AsyncRedisStore.open(client)``
    (a ``redis.asyncio.Redis`` made with ``decode_responses=False``).  Safe for any number of
    concurrent tasks on one event loop.
    """

    def __init__(
        self,
        client: aioredis.Redis,
        *,
        prefix: str = DEFAULT_PREFIX,
        trace_max: int | None = DEFAULT_TRACE_MAX,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
        owns_client: bool = False,
    ) -> None:
        """Wrap ``client`` without any IO (use :meth:`open`, which also checks the server)."""
        settings: Callable[[], dict[str, Any]] = client.get_connection_kwargs
        self._configure(
            settings(), prefix=prefix, trace_max=trace_max, max_payload_bytes=max_payload_bytes
        )
        self._client: aioredis.Redis | None = client
        self._owns_client = owns_client

    @classmethod
    async def open(cls, client: aioredis.Redis, **knobs: Any) -> Self:
        """Wrap ``client`` (knobs as for the constructor), ping the server, cache the scripts
        and check the key layout; a failure closes a client the store was to own."""
        try:
            store = cls(client, **knobs)
            await store._run(store._open())
        except BaseException:
            if knobs.get("owns_client"):
                await client.aclose()
            raise
        return store

    @classmethod
    async def from_url(cls, url: str, **knobs: Any) -> Self:
        """Open ``redis://host:port/db``, ``rediss://…`` or ``unix:///path.sock`` (``?prefix=``).

        Knobs and the bounded connect retry as for ``RedisStore.from_url``.
        """
        options, retry = from_url_args(url, knobs)
        return await aconnect_with_retry(partial(cls._connect, options), **retry)

    @classmethod
    async def _connect(cls, options: RedisOptions) -> Self:
        """One attempt of :meth:`from_url`: a new client (no client-side retries) and the open."""
        client = aioredis.Redis(**options.client_kwargs(), retry=Retry(NoBackoff(), 0))
        return await cls.open(client, **options.store_kwargs(), owns_client=True)

    async def _run(self, operation: Plan[T]) -> T:
        call = _Call(self)
        try:
            return await adrive(operation, call.execute)
        finally:
            call.checkpoint()

    # -- the contract ---------------------------------------------------------------------------

    async def load(self, execution_id: str) -> Execution | None:
        """A fresh copy of the stored execution, or ``None`` (one round trip)."""
        return await self._run(self._load(execution_id))

    async def load_for_event(
        self, execution_id: str, event_id: str
    ) -> tuple[Execution | None, bool]:
        """``load`` plus whether ``event_id`` was already processed, in one round trip."""
        return await self._run(self._load_for_event(execution_id, event_id))

    async def save(self, exe: Execution) -> None:
        """CAS-write the snapshot alone (``commit(exe, [])``)."""
        await self.commit(exe, [])

    async def commit(
        self,
        exe: Execution,
        emits: Sequence[Emit],
        processed_event_id: str | None = None,
        timers: Sequence[TimerOp] = (),
        spawns: Sequence[Spawn] = (),
        trace: dict[str, Any] | None = None,
    ) -> None:
        """Write one step in one script call: all of it, or nothing and ``exe.version`` back.

        Cancelled mid-call, it still settles the call first, so ``exe.version`` tells whether
        the step was stored, and then raises ``CancelledError``.
        """
        call = _Call(self)
        try:
            with committing(exe, emits, processed_event_id, timers, spawns, trace) as prepared:
                await adrive(self._commit(prepared), call.execute)
        finally:
            call.checkpoint()

    async def is_processed(self, execution_id: str, event_id: str) -> bool:
        """Whether that execution already processed that event."""
        return await self._run(self._is_processed(execution_id, event_id))

    async def pending_outbox(self, *, limit: int | None = None) -> list[OutboxEntry]:
        """Undelivered events, oldest first (at most ``limit``)."""
        return await self._run(self._pending_outbox(limit))

    async def ack_outbox(self, seq: int) -> None:
        """Forget a delivered event (unknown seq: no-op)."""
        await self._run(self._ack(seq, spawns=False))

    async def pending_spawns(self, *, limit: int | None = None) -> list[SpawnEntry]:
        """Uncreated children, oldest first (at most ``limit``)."""
        return await self._run(self._pending_spawns(limit))

    async def ack_spawn(self, seq: int) -> None:
        """Forget a created child's intent (unknown seq: no-op)."""
        await self._run(self._ack(seq, spawns=True))

    async def due_timers(self, now: float, *, limit: int | None = None) -> list[DueTimer]:
        """Armed timers with ``fire_at <= now``, ascending by ``(fire_at, execution_id, path)``."""
        return await self._run(self._due_timers(now, limit))

    async def delete_timer(self, execution_id: str, path: str, fire_at: float) -> None:
        """Disarm a timer only if it still holds exactly ``fire_at`` (one atomic script)."""
        await self._run(self._delete_timer(execution_id, path, fire_at))

    async def read_trace(self, execution_id: str) -> list[dict[str, Any]]:
        """The retained trace steps, oldest first, each with its ``index``."""
        return await self._run(self._read_trace(execution_id))

    async def append_trace(self, execution_id: str, entry: dict[str, Any]) -> None:
        """Append a step atomically; unknown execution raises ``ExecutionNotFound``."""
        await self._run(self._append_trace(execution_id, entry))

    async def list_executions(
        self,
        *,
        status: Iterable[Status] | None = None,
        definition_id: str | None = None,
        roots_only: bool = False,
        limit: int = 100,
        cursor: str | None = None,
    ) -> ExecutionPage:
        """One page of summaries ordered by id, from lexicographic indexes (keyset cursor)."""
        return await self._run(self._list(status, definition_id, roots_only, limit, cursor))

    async def purge(self, execution_id: str, *, force: bool = False) -> bool:
        """Remove the execution and all it owns in one script; whether it was stored."""
        return await self._run(self._purge(execution_id, force))

    async def prune_processed(
        self, older_than: float, *, batch_size: int = DEFAULT_PRUNE_BATCH
    ) -> int:
        """Drop dedupe marks recorded before ``older_than``, one short script per batch."""
        return await self._run(self._prune(older_than, batch_size))

    async def close(self) -> None:
        """Release the client if this store owns it (idempotent); later calls raise."""
        client, self._client = self._client, None
        if client is not None and self._owns_client:
            await client.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
