"""``AsyncMongoStore``: the asyncio twin of :class:`~harel_store_mongo.sync.MongoStore`.

Every contract method is :class:`harel.store.author.AsyncPlanStore`'s; it runs the same plans
through :func:`harel.store.author.adrive` over PyMongo's own async API
(``pymongo.AsyncMongoClient``, opened by :meth:`AsyncMongoStore.from_url`) or over an injected
motor ``AsyncIOMotorClient`` (motor reached end of life in May 2026; it keeps working here for
users who still run it, and mongomock-motor is the tests' stand-in).

Cancellation: every request is one server call, run as its own task and awaited through
``asyncio.shield``.  A read cancelled mid-call still awaits that call to its reply, sends no
further request and then raises ``CancelledError``.  A write (``AsyncPlanStore._write`` /
``_settle``) runs to its end, every request of it, before ``CancelledError`` is raised.  A
cancelled ``commit`` therefore either stored everything and left ``exe.version`` bumped (its
single update was applied), or stored nothing and restored it — ``exe.version`` tells which; a
retry never duplicates a step.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import Callable
from functools import partial
from typing import Any, Self, TypeVar, Unpack

from harel.store.author import (
    AsyncPlanStore,
    aconnect_with_retry,
    adrive,
    current_library,
    in_settled_write,
)
from harel.store.errors import UnsupportedEventLoop

from harel_store_mongo._base import MongoStoreBase, StoreKnobs
from harel_store_mongo._calls import issue
from harel_store_mongo._errors import translate
from harel_store_mongo._operations import Plan
from harel_store_mongo._options import MongoOptions
from harel_store_mongo._plan import MongoPlan
from harel_store_mongo._requests import Request
from harel_store_mongo._spec import SPEC

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
        task = asyncio.ensure_future(self.store._send(request))
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            self.cancelled = True
            return await _finish(task)

    def settle(self) -> None:
        """Raise the deferred ``CancelledError`` (the operation's outcome is known by now)."""
        if self.cancelled:
            raise asyncio.CancelledError


class AsyncMongoStore(MongoStoreBase, AsyncPlanStore[MongoPlan]):
    """A durable :class:`~harel.store.contract.AsyncExecutionStore` in MongoDB.

    Build it with ``await AsyncMongoStore.from_url(url)`` (a PyMongo ``AsyncMongoClient``) or
    ``await AsyncMongoStore.open(client)`` (a ``pymongo.AsyncMongoClient`` or a motor
    ``AsyncIOMotorClient``).  Safe for any number of concurrent tasks on one event loop.
    """

    @classmethod
    async def open(cls, client: Any, **knobs: Unpack[StoreKnobs]) -> Self:
        """Wrap ``client`` (knobs: :class:`~harel_store_mongo._base.StoreKnobs`; the
        constructor does no IO), reach the server and check the layout version (creating or
        upgrading the layout); a failure closes a client the store was to own.

        asyncio only (PyMongo's and motor's async clients); under trio use :meth:`from_url`,
        or :meth:`in_threads` over a ``MongoStore``."""
        if current_library() != "asyncio":
            raise UnsupportedEventLoop(
                "PyMongo's async client and motor run on asyncio only; under trio open the "
                "store with `await AsyncMongoStore.from_url(url)` or `await AsyncMongoStore."
                "in_threads(lambda: MongoStore(pymongo.MongoClient(...)))`"
            )
        return await cls._open(client, partial(cls, client, **knobs), knobs.get("owns_client"))

    @classmethod
    async def _open(cls, client: Any, make: Callable[[], Self], owned: bool | None) -> Self:
        """``make()`` a store over ``client``, then open it; a failure closes an ``owned``
        client."""
        try:
            store = make()
            await store._run(store._plan.open())
        except BaseException:
            if owned:
                await _close_client(client)
            raise
        return store

    @classmethod
    async def from_url(cls, url: str, **knobs: Any) -> Self:
        """Open ``mongodb://host:27017/?db=harel`` or ``mongodb+srv://cluster/?db=harel``
        over a PyMongo ``AsyncMongoClient``; knobs and the bounded retry as for
        ``MongoStore.from_url``.  Under trio the store is :meth:`in_threads` over a
        ``MongoStore.from_url(url, **knobs)``."""
        if current_library() != "asyncio":
            from harel_store_mongo.sync import MongoStore

            return await cls.in_threads(partial(MongoStore.from_url, url, **knobs))
        arguments, retry = SPEC.open_args(url, knobs)
        return await aconnect_with_retry(partial(cls._connect, MongoOptions(**arguments)), **retry)

    @classmethod
    async def _connect(cls, options: MongoOptions) -> Self:
        """One attempt of :meth:`from_url`: a new client and the open."""
        from pymongo import AsyncMongoClient

        with translate(options.where):
            client: Any = AsyncMongoClient(options.driver_uri, **options.client_kwargs())
        return await cls._open(client, partial(cls._adopted, client, options), True)

    async def _run(self, operation: Plan[T]) -> T:
        """Drive one plan, each request shielded (see the module docstring) unless the plan
        is a write already running in its own settled task; no driver exception escapes (see
        :mod:`harel_store_mongo._errors`)."""
        if in_settled_write():
            return await adrive(operation, self._send)
        call = _Shielded(self)
        try:
            return await adrive(operation, call.execute)
        finally:
            call.settle()

    async def _send(self, request: Request) -> Any:
        """One request to its reply (the store must be open)."""
        database = self._database
        if database is None:
            raise self._closed()
        return await _call(database, request, self.where)

    async def close(self) -> None:
        """Release the client if this store owns it (idempotent); later calls raise."""
        client = self._release()
        if client is not None:
            await _close_client(client)


async def _close_client(client: Any) -> None:
    """Close a PyMongo async client (a coroutine) or a motor one (a plain call)."""
    result = client.close()
    if inspect.isawaitable(result):
        await result
