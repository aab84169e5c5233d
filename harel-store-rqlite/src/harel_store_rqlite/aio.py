"""``AsyncRqliteStore``: the asyncio twin of :class:`~harel_store_rqlite.sync.RqliteStore`
over ``httpx.AsyncClient``.

Cancellation (the contract's outcome rule): every write is one request whose effect is all or
nothing on the server, but a request that was sent may be applied although its caller is
cancelled.  So every writing operation runs in a task of its own and the caller awaits it
through :func:`asyncio.shield`:

* cancelled before that task started: the task is cancelled too, nothing was sent;
* cancelled once it started: the caller waits (ignoring further cancellations) until the
  request's reply arrived (at most the ``timeout`` knob), then decides from it: for a
  ``commit``, ``exe.version`` stays bumped if the CAS applied, or is restored if it did not
  (or the request failed); then ``CancelledError`` is re-raised.

A cancelled call therefore never leaves ``exe.version`` disagreeing with the store, and no
request keeps running behind the caller's back.  Reads are not shielded (cancelling one just
drops its connection).  ``close()`` waits for shielded writes still in flight.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Generator, Iterable, Sequence
from functools import partial
from typing import Any, ClassVar, Self, TypeVar, Unpack

import httpx
from harel.model import Execution, ExecutionPage, Status
from harel.store import contract
from harel.store.common import aconnect_with_retry, adrive, committing

from harel_store_rqlite import _options
from harel_store_rqlite._http import client_settings, live, reply_of, sending
from harel_store_rqlite._options import RqliteKnobs, RqliteOptions, from_url_args, make_options
from harel_store_rqlite._plan import PlanHolder, list_page, open_store
from harel_store_rqlite._plugin import CAPABILITIES
from harel_store_rqlite._wire import HttpCall, HttpReply, Request

T = TypeVar("T")
Operation = Generator[Request, Any, T]


class AsyncRqliteStore(PlanHolder):
    """A durable :class:`~harel.store.contract.AsyncExecutionStore` on an rqlite cluster.

    Build it with ``await AsyncRqliteStore.open(url, **knobs)`` (one attempt) or
    ``await AsyncRqliteStore.from_url(url)`` (retries until the node has a leader); the knobs
    are those of ``RqliteStore``.  Safe for any number of concurrent tasks of one event loop;
    close it with ``await store.close()`` (an unclosed store never keeps the interpreter from
    exiting).
    """

    capabilities: ClassVar[contract.Capabilities] = CAPABILITIES

    def __init__(self, options: RqliteOptions) -> None:
        """An unopened store over validated ``options``: use :meth:`open` or :meth:`from_url`."""
        self._hold(options)
        self._client: httpx.AsyncClient | None = httpx.AsyncClient(**client_settings(options))
        self._writes: set[asyncio.Task[Any]] = set()

    @classmethod
    async def open(cls, url: str = _options.DEFAULT_URL, **knobs: Unpack[RqliteKnobs]) -> Self:
        """Reach the node once and check (create, upgrade) the schema."""
        store = cls(make_options(url, **knobs))
        try:
            await store._run(open_store(store._plan, time.time()))
        except BaseException:
            await store.close()
            raise
        return store

    @classmethod
    async def from_url(cls, url: str, **knobs: Any) -> Self:
        """Open ``rqlite://host:4001`` / ``rqlites://...``, retrying while the node is
        unreachable or has no leader; knobs as for :meth:`RqliteStore.from_url`."""
        url, store_knobs, retry = from_url_args(url, knobs)
        return await aconnect_with_retry(lambda: cls.open(url, **store_knobs), **retry)

    def __repr__(self) -> str:
        return f"AsyncRqliteStore({self.options.base_url!r})"

    async def _run(self, operation: Operation[T], level: str | None = None) -> T:
        """Drive one plan operation, its reads at ``level`` (default: the ``level`` knob)."""
        send = partial(_send, live(self._client, operation, self.options), self.options)

        async def execute(request: Request) -> Any:
            return await adrive(self._wire.run(request, level), send)

        return await adrive(operation, execute)

    async def _settle(self, operation: Operation[T]) -> tuple[T, asyncio.CancelledError | None]:
        """Run a writing operation to its end even if the caller is cancelled meanwhile.

        Returns its value and, when the caller was cancelled after the request went out and
        the operation succeeded, the ``CancelledError`` to raise once the outcome is recorded.
        Raises the operation's error, or the ``CancelledError`` when it was withdrawn before it
        started or failed after the cancellation.
        """
        started = False

        async def run() -> T:
            nonlocal started
            started = True
            return await self._run(operation)

        task = asyncio.ensure_future(run())
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)
        try:
            return await asyncio.shield(task), None
        except asyncio.CancelledError as cancelled:
            if not started:
                task.cancel()
            await _finish(task)
            if task.cancelled() or task.exception() is not None:
                raise
            return task.result(), cancelled

    async def _write(self, operation: Operation[T]) -> T:
        value, cancelled = await self._settle(operation)
        if cancelled is not None:
            raise cancelled
        return value

    # -- the contract ---------------------------------------------------------------------------

    async def load(self, execution_id: str) -> Execution | None:
        """A fresh copy of the stored execution, or ``None`` (one read)."""
        return await self._run(self._plan.load(execution_id))

    async def load_for_event(
        self, execution_id: str, event_id: str
    ) -> tuple[Execution | None, bool]:
        """``load`` plus whether ``event_id`` was already processed, in one read."""
        return await self._run(self._plan.load_for_event(execution_id, event_id))

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
        """Write one step in ONE request: all of it, or nothing and ``exe.version`` restored
        (also when cancelled: see the module docstring)."""
        with committing(exe, emits, processed_event_id, timers, spawns, trace) as prepared:
            _, cancelled = await self._settle(self._plan.commit(prepared, self.trace_max))
        if cancelled is not None:
            raise cancelled  # the commit is stored and exe.version says so

    async def is_processed(self, execution_id: str, event_id: str) -> bool:
        """Whether that execution already processed that event."""
        return await self._run(self._plan.is_processed(execution_id, event_id))

    async def pending_outbox(self, *, limit: int | None = None) -> list[contract.OutboxEntry]:
        """Undelivered events, oldest first (at most ``limit``; read at ``sweep_level``)."""
        return await self._run(self._plan.pending_outbox(limit), self.options.sweep_level)

    async def ack_outbox(self, seq: int) -> None:
        """Forget a delivered event (unknown seq: no-op)."""
        await self._write(self._plan.ack_outbox(seq))

    async def pending_spawns(self, *, limit: int | None = None) -> list[contract.SpawnEntry]:
        """Uncreated children, oldest first (at most ``limit``; read at ``sweep_level``)."""
        return await self._run(self._plan.pending_spawns(limit), self.options.sweep_level)

    async def ack_spawn(self, seq: int) -> None:
        """Forget a created child's intent (unknown seq: no-op)."""
        await self._write(self._plan.ack_spawn(seq))

    async def due_timers(self, now: float, *, limit: int | None = None) -> list[contract.DueTimer]:
        """Armed timers with ``fire_at <= now``, ascending (read at ``sweep_level``)."""
        return await self._run(self._plan.due_timers(now, limit), self.options.sweep_level)

    async def delete_timer(self, execution_id: str, path: str, fire_at: float) -> None:
        """Disarm a timer only if it still holds exactly ``fire_at``."""
        await self._write(self._plan.delete_timer(execution_id, path, fire_at))

    async def read_trace(self, execution_id: str) -> list[dict[str, Any]]:
        """The retained trace steps, oldest first, each with its ``index``."""
        return await self._run(self._plan.read_trace(execution_id))

    async def append_trace(self, execution_id: str, entry: dict[str, Any]) -> None:
        """Append a step in one request; an unknown execution raises ``ExecutionNotFound``."""
        await self._write(self._plan.append_trace(execution_id, entry, self.trace_max))

    async def list_executions(
        self,
        *,
        limit: int = 100,
        cursor: str | None = None,
        status: Iterable[Status] | None = None,
        definition_id: str | None = None,
        roots_only: bool = False,
    ) -> ExecutionPage:
        """One page of summaries ordered by id, ``limit`` at most after ``cursor`` (filters
        as for ``RqliteStore.list_executions``)."""
        page = list_page(self._plan, status, definition_id, roots_only, limit, cursor)
        return await self._run(page, self.options.sweep_level)

    async def purge(self, execution_id: str, *, force: bool = False) -> bool:
        """Delete the execution and all it owns in one request (``ExecutionActive`` while it is
        not finished, unless ``force``); whether it existed."""
        return await self._write(self._plan.purge(execution_id, force))

    async def prune_processed(
        self, older_than: float, *, batch_size: int = contract.DEFAULT_PRUNE_BATCH
    ) -> int:
        """Drop dedupe marks recorded before ``older_than``, ``batch_size`` per request.

        Not shielded: each batch is atomic on the node, so a cancelled prune just stops (its
        current batch applied or not); a later prune drops what is left."""
        return await self._run(self._plan.prune_processed(older_than, batch_size))

    async def close(self) -> None:
        """Wait for writes in flight, then close the HTTP client (idempotent); later calls
        raise ``StoreError``."""
        client, self._client = self._client, None
        if client is None:
            return
        if self._writes:
            await _finish(*self._writes)
        await client.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


async def _finish(*tasks: asyncio.Task[Any]) -> None:
    """Wait until every task is done, whatever cancellations arrive meanwhile (each write is
    bounded by the request timeout)."""
    while not all(task.done() for task in tasks):
        try:
            await asyncio.wait(tasks)
        except asyncio.CancelledError:
            continue


async def _send(client: httpx.AsyncClient, options: RqliteOptions, call: HttpCall) -> HttpReply:
    """Send one call; an httpx failure becomes the typed error of ``_errors``."""
    with sending(options, call):
        return reply_of(await client.request(call.method, call.url, content=call.body))
