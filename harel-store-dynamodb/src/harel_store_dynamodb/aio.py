"""``AsyncDynamoDBStore``: the asyncio store over an aioboto3 (aiobotocore) DynamoDB client.

Every contract method is :class:`harel.store.author.AsyncPlanStore`'s, running the same plans
as the sync store through :func:`harel.store.author.adrive`.  Cancellation: a started write
runs to its end before ``CancelledError`` is re-raised (``AsyncPlanStore._settle``: a
``TransactWriteItems`` cannot be taken back once sent), so a cancelled ``commit`` either did not
start or finished, and ``exe.version`` says which; the wait is bounded by the client's
timeouts.  The client is bound to the event loop that opened the store.
"""

from __future__ import annotations

import asyncio
import threading
from contextlib import AsyncExitStack
from functools import partial
from typing import Any, ClassVar, Self

import aioboto3  # type: ignore[import-untyped, unused-ignore]
from harel.store.author import (
    AsyncFromUrl,
    AsyncPlanStore,
    BackendSpec,
    aconnect_with_retry,
    adrive,
    current_library,
)
from harel.store.errors import UnsupportedEventLoop

from harel_store_dynamodb._base import DynamoStoreBase, legacy_create_args
from harel_store_dynamodb._client import client_arguments, endpoint_of
from harel_store_dynamodb._options import DynamoOptions, make_options
from harel_store_dynamodb._plan import Operations, Plan
from harel_store_dynamodb._requests import Pause, Request
from harel_store_dynamodb._spec import SPEC

_SESSIONS: dict[str | None, Any] = {}
_SESSIONS_LOCK = threading.Lock()


def _session(profile: str | None) -> Any:
    with _SESSIONS_LOCK:
        session = _SESSIONS.get(profile)
        if session is None:
            session = aioboto3.Session(profile_name=profile)
            _SESSIONS[profile] = session
        return session


class AsyncDynamoDBStore(AsyncFromUrl, DynamoStoreBase, AsyncPlanStore[Operations]):
    """The asyncio twin of :class:`~harel_store_dynamodb.sync.DynamoDBStore`.

    Open it with ``await AsyncDynamoDBStore.open(table, ...)`` (same settings as the sync
    store) or ``await AsyncDynamoDBStore.from_url(url)`` (retrying while the endpoint is
    unreachable, as the sync store's); ``client`` injects an aiobotocore DynamoDB client that
    the caller owns.  ``await AsyncDynamoDBStore.create(...)`` is the reference
    implementation's factory (see :meth:`create`).
    """

    spec: ClassVar[BackendSpec] = SPEC

    def __init__(
        self,
        options: DynamoOptions,
        client: Any,
        *,
        owner: AsyncExitStack | None = None,
        endpoint: str | None = None,
    ) -> None:
        self._configure(options, client, endpoint, injected=owner is None)
        self._owner = owner

    @classmethod
    async def open(cls, table: str, *, client: Any = None, **knobs: Any) -> Self:
        """Open the store (creating the table first when ``create_table=True``).

        Under trio (aioboto3 runs on asyncio only) the store is :meth:`in_threads` over a
        ``DynamoDBStore(table, **knobs)``; an injected ``client`` is asyncio only."""
        if current_library() != "asyncio":
            if client is not None:
                raise UnsupportedEventLoop(
                    "an aiobotocore client runs on asyncio only; under trio open the store "
                    "without client= (it then uses boto3 in worker threads)"
                )
            from harel_store_dynamodb.sync import DynamoDBStore

            return await cls.in_threads(partial(DynamoDBStore, table, **knobs))
        options = make_options(table, **knobs)
        owner: AsyncExitStack | None = None
        endpoint: str | None = None
        if client is None:
            endpoint = endpoint_of(options)
            owner = AsyncExitStack()
            factory = _session(options.profile).client(
                "dynamodb", **client_arguments(options, endpoint)
            )
            client = await owner.enter_async_context(factory)
        store = cls(options, client, owner=owner, endpoint=endpoint)
        try:
            await store._run(store._open_plan())
        except BaseException:
            await store.close()
            raise
        return store

    @classmethod
    async def create(cls, table: str | None = None, **knobs: Any) -> Self:
        """The reference implementation's factory, ``await create(endpoint_url=None,
        region="us-east-1", prefix="harel", connect_retries=30, retry_delay=1.0)`` (the async
        twin of :meth:`DynamoDBStore.create <harel_store_dynamodb.sync.DynamoDBStore.create>`:
        :meth:`open` of the table ``prefix``, created when missing, with connect retries)."""
        name, store_knobs, retry = legacy_create_args(table, knobs)
        return await aconnect_with_retry(lambda: cls.open(name, **store_knobs), **retry)

    async def _execute(self, request: Request) -> Any:
        if isinstance(request, Pause):
            await asyncio.sleep(request.seconds)
            return None
        method = self._method(request)
        try:
            return await method(**request.params)
        except Exception as exc:
            raise self._translate(exc, request)  # noqa: B904 (chained by _translate)

    async def _run(self, operation: Plan) -> Any:
        """Drive one plan; every driver exception is mapped to :mod:`harel.store.errors`."""
        return await adrive(operation, self._execute)

    async def close(self) -> None:
        """Close the client if this store created it (idempotent)."""
        owner, self._owner = self._owner, None
        self._client = None
        if owner is not None:
            await owner.aclose()
