"""``AsyncMongoStore``: the asyncio twin of :class:`~harel_store_mongo.sync.MongoStore`.

It runs the same plans through :func:`harel.store.common.adrive` over PyMongo's own async API
(``pymongo.AsyncMongoClient``, opened by :meth:`AsyncMongoStore.from_url`) or over an injected
motor ``AsyncIOMotorClient`` (motor reached end of life in May 2026; it keeps working here for
users who still run it, and mongomock-motor is the tests' stand-in).

Cancellation: every request is one server call, run as its own task and awaited through
``asyncio.shield``.  When the caller is cancelled mid-call, the call is still awaited to its
reply (so the outcome is known), no further request of that operation is sent, and
``CancelledError`` is raised once the operation has settled.  A cancelled ``commit`` therefore
either stored everything and left ``exe.version`` bumped (its single update was applied), or
stored nothing and restored it — ``exe.version`` tells which; a retry never duplicates a step.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import Iterable, Sequence
from functools import partial
from typing import Any, Self, TypeVar

from harel.model import Execution, ExecutionPage, Status
from harel.store import contract
from harel.store.common import aconnect_with_retry, adrive

from harel_store_mongo._base import MongoStoreBase
from harel_store_mongo._calls import issue
from harel_store_mongo._errors import translate
from harel_store_mongo._options import DEFAULT_DB, MongoOptions, describe_client, from_url_args
from harel_store_mongo._plan import Plan
from harel_store_mongo._requests import Request

T = TypeVar("T")


async def _call(database: Any, request: Request, where: str) -> Any:
    """One request to completion: await the driver's call, drain a cursor."""
    with translate(where):
        raw = issue(database, request)
        if inspect.isawaitable(raw):
            raw = await raw
        return await raw.to_list(None) if request.cursor else raw


async def _finish(task: asyncio.Future[Any]) -> Any:
    """``task``'s outcome once it is done, however often the caller is cancelled meanwhile."""
    while not task.done():
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait((task,))
    return task.result()


class _Shielded:
    """One contract call's requests: each runs to its reply; a cancellation is deferred until
    the operation has settled, and no request starts after it."""

    __slots__ = ("cancelled", "store")

    def __init__(self, store: AsyncMongoStore) -> None:
        self.store = store
        self.cancelled = False

    async def execute(self, request: Request) -> Any:
        if self.cancelled:
            raise asyncio.CancelledError
        database = self.store._database
        if database is None:
            raise self.store._closed()
        task = asyncio.ensure_future(_call(database, request, self.store.where))
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            self.cancelled = True
            return await _finish(task)

    def settle(self) -> None:
        """Raise the deferred ``CancelledError`` (the operation's outcome is known by now)."""
        if self.cancelled:
            raise asyncio.CancelledError


class AsyncMongoStore(MongoStoreBase):
    """A durable :class:`~harel.store.contract.AsyncExecutionStore` in MongoDB.

    Build it with ``await AsyncMongoStore.from_url(url)`` (a PyMongo ``AsyncMongoClient``) or
    ``await AsyncMongoStore.open(client)`` (a ``pymongo.AsyncMongoClient`` or a motor
    ``AsyncIOMotorClient``).  Safe for any number of concurrent tasks on one event loop.
    """

    def __init__(
        self,
        client: Any,
        *,
        db: str = DEFAULT_DB,
        trace_max: int | None = contract.DEFAULT_TRACE_MAX,
        owns_client: bool = False,
        where: str | None = None,
    ) -> None:
        """Wrap ``client`` without any IO (use :meth:`open`, which also checks the server)."""
        self._configure(db=db, trace_max=trace_max, where=where or describe_client(client, db))
        self._client: Any = client
        self._owns_client = owns_client
        self._database: Any = client.get_database(self.db)

    @classmethod
    async def open(cls, client: Any, **knobs: Any) -> Self:
        """Wrap ``client`` (knobs as for the constructor), reach the server, check the layout
        version and create the indexes; a failure closes a client the store was to own."""
        try:
            store = cls(client, **knobs)
            await store._run(store._open())
        except BaseException:
            if knobs.get("owns_client"):
                await _close_client(client)
            raise
        return store

    @classmethod
    async def from_url(cls, url: str, **knobs: Any) -> Self:
        """Open ``mongodb://host:27017/?db=harel`` or ``mongodb+srv://cluster/?db=harel``
        over a PyMongo ``AsyncMongoClient``; knobs and the bounded retry as for
        ``MongoStore.from_url``."""
        options, retry = from_url_args(url, knobs)
        return await aconnect_with_retry(partial(cls._connect, options), **retry)

    @classmethod
    async def _connect(cls, options: MongoOptions) -> Self:
        """One attempt of :meth:`from_url`: a new client and the open."""
        from pymongo import AsyncMongoClient

        with translate(options.where):
            client: Any = AsyncMongoClient(options.driver_uri, **options.client_kwargs())
        return await cls.open(
            client, **options.store_kwargs(), owns_client=True, where=options.where
        )

    async def _run(self, operation: Plan[T]) -> T:
        call = _Shielded(self)
        try:
            return await adrive(operation, call.execute)
        finally:
            call.settle()

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
        emits: Sequence[contract.Emit],
        processed_event_id: str | None = None,
        timers: Sequence[contract.TimerOp] = (),
        spawns: Sequence[contract.Spawn] = (),
        trace: dict[str, Any] | None = None,
    ) -> None:
        """Write one step with one ``update_one``: all of it, or nothing and ``exe.version``
        back.  Cancelled mid-call, it settles the update first, then raises ``CancelledError``
        (``exe.version`` tells whether the step was stored)."""
        call = _Shielded(self)
        try:
            with self._prepare(exe, emits, processed_event_id, timers, spawns, trace) as prepared:
                await adrive(self._commit(prepared), call.execute)
        finally:
            call.settle()

    async def is_processed(self, execution_id: str, event_id: str) -> bool:
        """Whether that execution already processed that event."""
        return await self._run(self._is_processed(execution_id, event_id))

    async def pending_outbox(self, *, limit: int | None = None) -> list[contract.OutboxEntry]:
        """Undelivered events, oldest first (at most ``limit``)."""
        return await self._run(self._pending_outbox(limit))

    async def ack_outbox(self, seq: int) -> None:
        """Forget a delivered event (unknown seq: no-op)."""
        await self._run(self._ack(seq, spawns=False))

    async def pending_spawns(self, *, limit: int | None = None) -> list[contract.SpawnEntry]:
        """Uncreated children, oldest first (at most ``limit``)."""
        return await self._run(self._pending_spawns(limit))

    async def ack_spawn(self, seq: int) -> None:
        """Forget a created child's intent (unknown seq: no-op)."""
        await self._run(self._ack(seq, spawns=True))

    async def due_timers(self, now: float, *, limit: int | None = None) -> list[contract.DueTimer]:
        """Armed timers with ``fire_at <= now``, ascending by ``(fire_at, execution_id, path)``."""
        return await self._run(self._due_timers(now, limit))

    async def delete_timer(self, execution_id: str, path: str, fire_at: float) -> None:
        """Disarm a timer only if it still holds exactly ``fire_at`` (one guarded update)."""
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
        """One page of summaries ordered by id (keyset cursor, indexed, no snapshot read)."""
        return await self._run(self._list(status, definition_id, roots_only, limit, cursor))

    async def purge(self, execution_id: str, *, force: bool = False) -> bool:
        """Remove the execution and all it owns; whether it was stored."""
        return await self._run(self._purge(execution_id, force))

    async def prune_processed(
        self, older_than: float, *, batch_size: int = contract.DEFAULT_PRUNE_BATCH
    ) -> int:
        """Drop dedupe marks recorded before ``older_than``, in short single-document writes."""
        return await self._run(self._prune(older_than, batch_size))

    async def close(self) -> None:
        """Release the client if this store owns it (idempotent); later calls raise."""
        client, self._client, self._database = self._client, None, None
        if client is not None and self._owns_client:
            await _close_client(client)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


async def _close_client(client: Any) -> None:
    """Close a PyMongo async client (a coroutine) or a motor one (a plain call)."""
    result = client.close()
    if inspect.isawaitable(result):
        await result
