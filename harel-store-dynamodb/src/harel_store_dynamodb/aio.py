"""``AsyncDynamoDBStore``: the asyncio store over an aioboto3 (aiobotocore) DynamoDB client.

Same plans as the sync store, driven by :func:`harel.store.common.adrive`.  Cancellation:
every writing call runs as its own task that a cancelled caller waits for (a single
``TransactWriteItems`` cannot be taken back once sent), then the ``CancelledError`` is
re-raised.  So a cancelled ``commit`` has either not started (nothing stored, ``exe.version``
unchanged) or finished (all stored and ``exe.version`` bumped, or a typed error and nothing
stored) — never a mismatch; the wait is bounded by the client's timeouts.  The client is
bound to the event loop that opened the store.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterable, Sequence
from contextlib import AsyncExitStack
from typing import Any, ClassVar, Self, TypeVar

import aioboto3  # type: ignore[import-untyped, unused-ignore]
from harel.model import Execution, ExecutionPage, Status
from harel.store.common import aconnect_with_retry, adrive, committing, listing_query
from harel.store.contract import (
    DEFAULT_PRUNE_BATCH,
    DEFAULT_TRACE_MAX,
    Capabilities,
    DueTimer,
    Emit,
    OutboxEntry,
    Spawn,
    SpawnEntry,
    TimerOp,
)
from harel.store.errors import StoreUnavailable

from harel_store_dynamodb._client import client_arguments, endpoint_of
from harel_store_dynamodb._errors import map_error
from harel_store_dynamodb._options import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_TIMEOUT,
    DynamoOptions,
    make_options,
    retry_settings,
    split_from_url_knobs,
)
from harel_store_dynamodb._plan import Operations, Plan
from harel_store_dynamodb._plugin import CAPABILITIES
from harel_store_dynamodb._requests import Pause, Request
from harel_store_dynamodb._schema import OUTBOX, SPAWNS

T = TypeVar("T")
_SESSIONS: dict[str | None, Any] = {}
_SESSIONS_LOCK = threading.Lock()


def _session(profile: str | None) -> Any:
    with _SESSIONS_LOCK:
        session = _SESSIONS.get(profile)
        if session is None:
            session = aioboto3.Session(profile_name=profile)
            _SESSIONS[profile] = session
        return session


async def run_to_completion(work: Coroutine[Any, Any, T]) -> T:
    """Await ``work`` as a task that runs to its end even when the caller is cancelled.

    The caller's ``CancelledError`` is re-raised once the task is done (its result is then
    visible in the state it changed, e.g. ``exe.version``).
    """
    task = asyncio.ensure_future(work)
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait((task,))
        except asyncio.CancelledError as exc:
            cancelled = exc
    if cancelled is not None:
        if not task.cancelled():
            task.exception()  # retrieved: the caller sees the cancellation instead
        raise cancelled
    return task.result()


class AsyncDynamoDBStore:
    """The asyncio twin of :class:`~harel_store_dynamodb.sync.DynamoDBStore`.

    Open it with ``await AsyncDynamoDBStore.open(table, ...)`` (same settings as the sync
    store) or ``await AsyncDynamoDBStore.from_url(url)``; ``client`` injects an aiobotocore
    DynamoDB client that the caller owns.
    """

    capabilities: ClassVar[Capabilities] = CAPABILITIES

    def __init__(
        self,
        options: DynamoOptions,
        client: Any,
        *,
        owner: AsyncExitStack | None = None,
        endpoint: str | None = None,
    ) -> None:
        self.options = options
        self.trace_max = options.trace_max
        self._ops = Operations(options.table)
        self._client: Any = client
        self._owner = owner
        self._endpoint = endpoint

    @classmethod
    async def open(
        cls,
        table: str,
        *,
        client: Any = None,
        region: str | None = None,
        endpoint_url: str | None = None,
        local: bool | str = False,
        create_table: bool = False,
        trace_max: int | None = DEFAULT_TRACE_MAX,
        request_timeout: float = DEFAULT_TIMEOUT,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        profile: str | None = None,
        aws_access_key_id: str | None = None,
        aws_secret_access_key: str | None = None,
    ) -> Self:
        """Open the store (creating the table first when ``create_table=True``)."""
        options = make_options(
            table,
            region=region,
            endpoint_url=endpoint_url,
            local=local,
            create_table=create_table,
            trace_max=trace_max,
            request_timeout=request_timeout,
            max_attempts=max_attempts,
            profile=profile,
            aws_access_key_id=aws_access_key_id,
            aws_secret_access_key=aws_secret_access_key,
        )
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
            await store._run(store._ops.open(options.create_table, options.describe(endpoint)))
        except BaseException:
            await store.close()
            raise
        return store

    @classmethod
    async def from_url(cls, url: str, **knobs: Any) -> Self:
        """Open ``dynamodb://TABLE?...`` with ``connect_retries`` while it is unreachable."""
        table, store_knobs, connect = split_from_url_knobs(url, knobs)
        retries, delay = retry_settings(connect)
        return await aconnect_with_retry(
            lambda: cls.open(table, **store_knobs),
            retries=retries,
            delay=delay,
            retry_on=(StoreUnavailable,),
            what=f"DynamoDB table {table!r}",
        )

    def __repr__(self) -> str:
        return f"AsyncDynamoDBStore({self.options.describe(self._endpoint)!r})"

    # -- the drive loop --------------------------------------------------------------------------

    async def _execute(self, request: Request) -> Any:
        if isinstance(request, Pause):
            await asyncio.sleep(request.seconds)
            return None
        client = self._client
        if client is None:
            raise StoreUnavailable(f"{self!r} is closed; open a new store")
        try:
            return await getattr(client, request.operation)(**request.params)
        except Exception as exc:
            mapped = map_error(exc, table=self.options.table, operation=request.operation)
            if mapped is exc:
                raise
            raise mapped from exc

    async def _run(self, plan: Plan) -> Any:
        return await adrive(plan, self._execute)

    async def _write(self, plan: Plan) -> Any:
        return await run_to_completion(self._run(plan))

    # -- the contract ----------------------------------------------------------------------------

    async def load(self, execution_id: str) -> Execution | None:
        """The stored execution (a strongly consistent read), or ``None``."""
        return await self._run(self._ops.load(execution_id))  # type: ignore[no-any-return]

    async def load_for_event(
        self, execution_id: str, event_id: str
    ) -> tuple[Execution | None, bool]:
        """``(execution, already processed?)`` in one consistent ``BatchGetItem``."""
        return await self._run(self._ops.load_for_event(execution_id, event_id))  # type: ignore[no-any-return]

    async def save(self, exe: Execution) -> None:
        """``await commit(exe, [])``."""
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
        """One ``TransactWriteItems`` with the CAS; cancellation waits for it (module doc)."""
        await run_to_completion(self._commit(exe, emits, processed_event_id, timers, spawns, trace))

    async def _commit(
        self,
        exe: Execution,
        emits: Sequence[Emit],
        processed_event_id: str | None,
        timers: Sequence[TimerOp],
        spawns: Sequence[Spawn],
        trace: dict[str, Any] | None,
    ) -> None:
        with committing(exe, emits, processed_event_id, timers, spawns, trace) as prepared:
            await self._run(self._ops.commit(prepared, self.trace_max))

    async def is_processed(self, execution_id: str, event_id: str) -> bool:
        """Whether the dedupe mark exists (consistent read)."""
        return await self._run(self._ops.is_processed(execution_id, event_id))  # type: ignore[no-any-return]

    async def pending_outbox(self, *, limit: int | None = None) -> list[OutboxEntry]:
        """Undelivered entries by ascending ``seq``."""
        return await self._run(self._ops.pending(OUTBOX, limit))  # type: ignore[no-any-return]

    async def ack_outbox(self, seq: int) -> None:
        """Remove outbox entry ``seq`` (no-op when unknown)."""
        await self._write(self._ops.ack(OUTBOX, seq))

    async def pending_spawns(self, *, limit: int | None = None) -> list[SpawnEntry]:
        """Undelivered spawn intents by ascending ``seq``."""
        return await self._run(self._ops.pending(SPAWNS, limit))  # type: ignore[no-any-return]

    async def ack_spawn(self, seq: int) -> None:
        """Remove spawn intent ``seq`` (no-op when unknown)."""
        await self._write(self._ops.ack(SPAWNS, seq))

    async def due_timers(self, now: float, *, limit: int | None = None) -> list[DueTimer]:
        """Armed timers with ``fire_at <= now``."""
        return await self._run(self._ops.due_timers(now, limit))  # type: ignore[no-any-return]

    async def delete_timer(self, execution_id: str, path: str, fire_at: float) -> None:
        """Remove the timer only while it still holds exactly ``fire_at``."""
        await self._write(self._ops.delete_timer(execution_id, path, fire_at))

    async def read_trace(self, execution_id: str) -> list[dict[str, Any]]:
        """The retained trace steps, oldest first."""
        return await self._run(self._ops.read_trace(execution_id))  # type: ignore[no-any-return]

    async def append_trace(self, execution_id: str, entry: dict[str, Any]) -> None:
        """Append one step outside a commit (``ExecutionNotFound`` for an unknown id)."""
        await self._write(self._ops.append_trace(execution_id, entry, self.trace_max))

    async def list_executions(
        self,
        *,
        status: Iterable[Status] | None = None,
        definition_id: str | None = None,
        roots_only: bool = False,
        limit: int = 100,
        cursor: str | None = None,
    ) -> ExecutionPage:
        """One page ordered by id, from a listing index (keyset cursor)."""
        query = listing_query(
            status=status,
            definition_id=definition_id,
            roots_only=roots_only,
            limit=limit,
            cursor=cursor,
        )
        return await self._run(self._ops.list_executions(query))  # type: ignore[no-any-return]

    async def purge(self, execution_id: str, *, force: bool = False) -> bool:
        """Remove the execution and all it owns; ``ExecutionActive`` unless finished or forced."""
        return await self._write(self._ops.purge(execution_id, force))  # type: ignore[no-any-return]

    async def prune_processed(
        self, older_than: float, *, batch_size: int = DEFAULT_PRUNE_BATCH
    ) -> int:
        """Drop dedupe marks recorded before ``older_than``; returns how many."""
        return await self._write(self._ops.prune_processed(older_than, batch_size))  # type: ignore[no-any-return]

    async def close(self) -> None:
        """Close the client if this store created it (idempotent)."""
        owner, self._owner = self._owner, None
        self._client = None
        if owner is not None:
            await owner.aclose()
