"""The contract methods of every plan-driven store, written once, sync and async.

A backend's ``_plan.py`` provides the operations of :class:`ContractPlan` (each a sans-IO
generator); its sync store subclasses :class:`PlanStore` and its async store
:class:`AsyncPlanStore`, and each provides only what touches the driver: opening the
connection (setting ``_plan`` and ``trace_max``), :meth:`PlanStore._run` (one drive loop with
the driver's exception mapping) and ``close``.  Every contract method below is one line over
``_run``; a backend overrides one only when its driver needs something different, and says why.

Cancellation (async): reads are plain ``await self._run(op)``.  Writes go through
:meth:`AsyncPlanStore._write`, which lets a started write finish before it re-raises
``CancelledError`` — so a cancelled ``commit`` leaves ``exe.version`` bumped exactly when the
step was stored.

Under trio (asyncio-only drivers): :meth:`AsyncPlanStore.in_threads` builds the same async
class over the backend's *sync* store, every contract call run whole through
:class:`~harel.store.common.offload.Offload` (anyio's worker threads, one store's calls at a
time); the backends' ``from_url``/``open`` choose it when the running library is not asyncio.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Generator, Iterable, Sequence
from contextvars import ContextVar
from typing import Any, ClassVar, Generic, Protocol, Self, TypeVar, cast

import anyio
import anyio.to_thread

from harel.model import Event, Execution, ExecutionPage, Status
from harel.store.common.claims import (
    check_claim,
    check_list_leases,
    check_release,
    check_renew,
)
from harel.store.common.commit import (
    PreparedCommit,
    committing,
)
from harel.store.common.enqueue import PreparedEnqueue, prepare_enqueue
from harel.store.common.limits import MAX_DOCUMENT_BYTES
from harel.store.common.listing import ListingQuery, listing_query
from harel.store.common.offload import Offload
from harel.store.common.records import PreparedImport, prepare_import
from harel.store.common.threaded import SyncHops
from harel.store.contract import (
    DEFAULT_LEASE,
    DEFAULT_PRUNE_BATCH,
    Capabilities,
    Claim,
    DueTimer,
    Emit,
    ExecutionRecord,
    Lease,
    OutboxEntry,
    Spawn,
    SpawnEntry,
    TimerOp,
)

T = TypeVar("T")
Op = Generator[Any, Any, T]
"""One sans-IO operation of a plan: yields requests, returns the value."""


class ContractPlan(Protocol):
    """The operations a backend's plan provides, one per contract method.

    Arguments arrive as the caller passed them (the plan validates them with
    :mod:`harel.store.common.validate`), except ``commit`` and ``import_execution``, which
    receive the envelope's validated, encoded form (``enqueue`` too).
    """

    max_document_bytes: int

    def load(self, execution_id: str) -> Op[Execution | None]: ...

    def load_for_event(
        self, execution_id: str, event_id: str
    ) -> Op[tuple[Execution | None, bool]]: ...

    def commit(self, prepared: PreparedCommit, trace_max: int | None) -> Op[None]: ...

    def is_processed(self, execution_id: str, event_id: str) -> Op[bool]: ...

    def pending_outbox(self, limit: int | None) -> Op[list[OutboxEntry]]: ...

    def ack_outbox(self, seq: int) -> Op[None]: ...

    def pending_spawns(self, limit: int | None) -> Op[list[SpawnEntry]]: ...

    def ack_spawn(self, seq: int) -> Op[None]: ...

    def due_timers(self, now: float, limit: int | None) -> Op[list[DueTimer]]: ...

    def delete_timer(self, execution_id: str, path: str, fire_at: float) -> Op[None]: ...

    def claim(self, owner: str, now: float, lease: float, limit: int) -> Op[list[Claim]]: ...

    def renew(self, owner: str, key: str | None, now: float, lease: float) -> Op[float]: ...

    def release(
        self, owner: str, key: str | None, retry_at: float | None, now: float
    ) -> Op[None]: ...

    def list_leases(self, now: float, limit: int) -> Op[list[Lease]]: ...

    def enqueue(self, prepared: PreparedEnqueue) -> Op[int]: ...

    def read_trace(self, execution_id: str) -> Op[list[dict[str, Any]]]: ...

    def append_trace(
        self, execution_id: str, entry: dict[str, Any], trace_max: int | None
    ) -> Op[None]: ...

    def list_executions(self, query: ListingQuery) -> Op[ExecutionPage]: ...

    def purge(self, execution_id: str, force: bool) -> Op[bool]: ...

    def prune_processed(self, older_than: float, batch_size: int) -> Op[int]: ...

    def export_execution(self, execution_id: str) -> Op[ExecutionRecord | None]: ...

    def import_execution(self, prepared: PreparedImport) -> Op[None]: ...


P = TypeVar("P", bound=ContractPlan)

_SETTLED_WRITE: ContextVar[bool] = ContextVar("harel_settled_write", default=False)


def in_settled_write() -> bool:
    """True inside the task :meth:`AsyncPlanStore._settle` runs a write in: nothing cancels
    that task, so a backend need not shield its requests there."""
    return _SETTLED_WRITE.get()


def _listing(
    status: Iterable[Status] | None,
    definition_id: str | None,
    roots_only: bool,
    limit: int,
    cursor: str | None,
) -> ListingQuery:
    return listing_query(
        status=status,
        definition_id=definition_id,
        roots_only=roots_only,
        limit=limit,
        cursor=cursor,
    )


class _PlanStoreBase(Generic[P]):
    """What both twins hold: the plan, the ring size, the capabilities."""

    capabilities: ClassVar[Capabilities]
    trace_max: int | None
    _plan: P

    def _document_limit(self) -> int:
        """The backend's per-document limit (its plan's ``max_document_bytes``)."""
        limit: int = getattr(self._plan, "max_document_bytes", MAX_DOCUMENT_BYTES)
        return limit

    def _prepare_enqueue(self, target_id: str, event: Event, priority: int) -> PreparedEnqueue:
        """Validate and encode one enqueue under this store's limits (nothing is written)."""
        return prepare_enqueue(
            target_id, event, priority, max_document_bytes=self._document_limit()
        )

    def _prepare_import(self, record: ExecutionRecord) -> PreparedImport:
        """Validate and encode ``record`` under this store's limits (nothing is written)."""
        return prepare_import(
            record,
            trace_max=self.trace_max,
            max_document_bytes=self._document_limit(),
            now=time.time(),
        )


class PlanStore(_PlanStoreBase[P]):
    """A synchronous :class:`~harel.store.contract.ExecutionStore` over a :class:`ContractPlan`.

    A subclass provides :meth:`_run` and :meth:`close`; it may override :meth:`_sweep` to
    read sweeps and listings differently (rqlite reads them at its ``sweep_level``).
    """

    def _run(self, operation: Op[T]) -> T:
        """Drive one plan operation to its value (or its typed error)."""
        raise NotImplementedError

    def _sweep(self, operation: Op[T]) -> T:
        """Drive a sweep or listing operation (by default like any other)."""
        return self._run(operation)

    def _commit(self, prepared: PreparedCommit) -> None:
        """Run the plan's commit of ``prepared`` (a backend may run its first request
        itself: :meth:`harel.store.common.sql.SqlStore._commit`)."""
        self._run(self._plan.commit(prepared, self.trace_max))

    def close(self) -> None:
        """Release the driver's resources (idempotent); later calls raise."""
        raise NotImplementedError

    def load(self, execution_id: str) -> Execution | None:
        """A fresh copy of the stored execution, or ``None``."""
        return self._run(self._plan.load(execution_id))

    def load_for_event(self, execution_id: str, event_id: str) -> tuple[Execution | None, bool]:
        """``load`` plus whether ``event_id`` was already processed by that execution."""
        return self._run(self._plan.load_for_event(execution_id, event_id))

    def save(self, exe: Execution) -> None:
        """CAS-write the snapshot alone (``commit(exe, [])``)."""
        self.commit(exe, [])

    def commit(
        self,
        exe: Execution,
        emits: Sequence[Emit],
        processed_event_id: str | None = None,
        timers: Sequence[TimerOp] = (),
        spawns: Sequence[Spawn] = (),
        trace: dict[str, Any] | None = None,
    ) -> None:
        """Write one step atomically: all of it, or nothing and ``exe.version`` restored."""
        limit = self._document_limit()
        with committing(
            exe, emits, processed_event_id, timers, spawns, trace, max_document_bytes=limit
        ) as prepared:
            self._commit(prepared)

    def is_processed(self, execution_id: str, event_id: str) -> bool:
        """Whether that execution already processed that event."""
        return self._run(self._plan.is_processed(execution_id, event_id))

    def pending_outbox(self, *, limit: int | None = None) -> list[OutboxEntry]:
        """Undelivered events, oldest first (at most ``limit``)."""
        return self._sweep(self._plan.pending_outbox(limit))

    def ack_outbox(self, seq: int) -> None:
        """Forget a delivered event (unknown seq: no-op)."""
        self._run(self._plan.ack_outbox(seq))

    def pending_spawns(self, *, limit: int | None = None) -> list[SpawnEntry]:
        """Uncreated children, oldest first (at most ``limit``)."""
        return self._sweep(self._plan.pending_spawns(limit))

    def ack_spawn(self, seq: int) -> None:
        """Forget a created child's intent (unknown seq: no-op)."""
        self._run(self._plan.ack_spawn(seq))

    def due_timers(self, now: float, *, limit: int | None = None) -> list[DueTimer]:
        """Armed timers with ``fire_at <= now``, ascending by ``(fire_at, execution_id, path)``."""
        return self._sweep(self._plan.due_timers(now, limit))

    def delete_timer(self, execution_id: str, path: str, fire_at: float) -> None:
        """Disarm a timer only if it still holds exactly ``fire_at``."""
        self._run(self._plan.delete_timer(execution_id, path, fire_at))

    def claim(
        self, owner: str, now: float, *, lease: float = DEFAULT_LEASE, limit: int = 100
    ) -> list[Claim]:
        """Lease up to ``limit`` units of due work, grouped by execution, to ``owner``."""
        return self._run(self._plan.claim(*check_claim(owner, now, lease, limit)))

    def renew(
        self, owner: str, execution_id: str | None, now: float, *, lease: float = DEFAULT_LEASE
    ) -> float:
        """Extend ``owner``'s unexpired lease to ``now + lease``; the new expiry."""
        return self._run(self._plan.renew(*check_renew(owner, execution_id, now, lease)))

    def release(
        self, owner: str, execution_id: str | None, *, retry_at: float | None = None
    ) -> None:
        """Give ``owner``'s lease back; what is left is claimable (not before ``retry_at``)."""
        checked = check_release(owner, execution_id, retry_at)
        self._run(self._plan.release(*checked, time.time()))

    def list_leases(self, now: float, *, limit: int = 100) -> list[Lease]:
        """The leases held at ``now``, by ``(expires_at, execution_id)``, at most ``limit``
        (read-only)."""
        return self._run(self._plan.list_leases(*check_list_leases(now, limit)))

    def enqueue(self, target_id: str, event: Event, *, priority: int = 0) -> int:
        """Write one outbox entry for ``target_id`` (relay work, due at once); its ``seq``."""
        return self._run(self._plan.enqueue(self._prepare_enqueue(target_id, event, priority)))

    def read_trace(self, execution_id: str) -> list[dict[str, Any]]:
        """The retained trace steps, oldest first, each with its ``index``."""
        return self._run(self._plan.read_trace(execution_id))

    def append_trace(self, execution_id: str, entry: dict[str, Any]) -> None:
        """Append a step outside a commit; unknown execution raises ``ExecutionNotFound``."""
        self._run(self._plan.append_trace(execution_id, entry, self.trace_max))

    def list_executions(
        self,
        *,
        status: Iterable[Status] | None = None,
        definition_id: str | None = None,
        roots_only: bool = False,
        limit: int = 100,
        cursor: str | None = None,
    ) -> ExecutionPage:
        """One page of summaries ordered by id, with a keyset cursor."""
        query = _listing(status, definition_id, roots_only, limit, cursor)
        return self._sweep(self._plan.list_executions(query))

    def purge(self, execution_id: str, *, force: bool = False) -> bool:
        """Delete the execution and all it owns in one atomic write (``ExecutionActive`` while
        it is not finished, unless ``force``); whether it was stored."""
        return self._run(self._plan.purge(execution_id, force))

    def prune_processed(self, older_than: float, *, batch_size: int = DEFAULT_PRUNE_BATCH) -> int:
        """Drop dedupe marks recorded before ``older_than``, ``batch_size`` per write."""
        return self._run(self._plan.prune_processed(older_than, batch_size))

    def export_execution(self, execution_id: str) -> ExecutionRecord | None:
        """Everything stored for the id, from one consistent read (``None``: nothing)."""
        return self._run(self._plan.export_execution(execution_id))

    def import_execution(self, record: ExecutionRecord) -> None:
        """Write an exported record in one atomic write (``ExecutionAlreadyExists``, nothing
        written, when the execution is already stored)."""
        self._run(self._plan.import_execution(self._prepare_import(record)))

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class AsyncPlanStore(_PlanStoreBase[P]):
    """An :class:`~harel.store.contract.AsyncExecutionStore` over a :class:`ContractPlan`.

    A subclass provides :meth:`_run` and :meth:`close`; :meth:`_write` (a started write
    finishes before ``CancelledError`` is re-raised) is built on :meth:`_run` and may be
    overridden when the driver settles writes another way.
    """

    @classmethod
    async def in_threads(cls, factory: Callable[[], PlanStore[Any]]) -> Self:
        """This async store over the sync store ``factory()`` builds (in a worker thread):
        what ``from_url``/``open`` return under trio, whose drivers run on asyncio only.

        Every contract call runs the sync store's method whole through
        :class:`~harel.store.common.offload.Offload` (anyio's worker threads, a limiter of one
        per store): one operation at a time, never abandoned once started, so a cancelled
        ``commit`` leaves ``exe.version`` telling whether it was stored.  The result is an
        instance of this class (a subclass made once per class) with the sync store's
        settings (``options``, ``where``, ``repr``); ``close`` closes the sync store.
        """
        offload = Offload()
        built: list[PlanStore[Any]] = []
        try:
            await offload.run(lambda: built.append(factory()))
        except BaseException:
            if built:  # built, then the caller was cancelled: do not leak the connection
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(built[0].close)
            raise
        klass = _in_threads_class(cls)
        store = klass.__new__(klass)
        vars(store).update(vars(built[0]))
        store._runner, store.store = offload, built[0]
        return cast(Self, store)

    async def _run(self, operation: Op[T]) -> T:
        """Drive one plan operation to its value (or its typed error)."""
        raise NotImplementedError

    async def _sweep(self, operation: Op[T]) -> T:
        """Drive a sweep or listing operation (by default like any other)."""
        return await self._run(operation)

    async def _settle(self, operation: Op[T]) -> tuple[T, bool]:
        """Run a write to its end even if the caller is cancelled meanwhile; its value and
        whether the caller was cancelled.  A write that failed after a cancel raises
        ``CancelledError`` (its own error is chained)."""
        marked = _SETTLED_WRITE.set(True)  # the task copies this context
        try:
            task = asyncio.ensure_future(self._run(operation))
        finally:
            _SETTLED_WRITE.reset(marked)
        cancelled = False
        while True:
            try:
                await asyncio.shield(task)
            except BaseException:
                if not task.done():  # the caller was cancelled: keep waiting for the write
                    cancelled = True
                    continue
            break
        if task.cancelled():
            raise asyncio.CancelledError
        error = task.exception()
        if error is not None:
            if cancelled:
                raise asyncio.CancelledError from error
            raise error
        return task.result(), cancelled

    async def _write(self, operation: Op[T]) -> T:
        """Run a write to its end, then re-raise a cancel that arrived meanwhile."""
        value, cancelled = await self._settle(operation)
        if cancelled:
            raise asyncio.CancelledError
        return value

    async def close(self) -> None:
        """Release the driver's resources (idempotent); later calls raise."""
        raise NotImplementedError

    async def load(self, execution_id: str) -> Execution | None:
        """A fresh copy of the stored execution, or ``None``."""
        return await self._run(self._plan.load(execution_id))

    async def load_for_event(
        self, execution_id: str, event_id: str
    ) -> tuple[Execution | None, bool]:
        """``load`` plus whether ``event_id`` was already processed by that execution."""
        return await self._run(self._plan.load_for_event(execution_id, event_id))

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
        """Write one step atomically.  Cancelled midway, it waits for the write's outcome,
        leaves ``exe.version`` saying whether the step was stored, then re-raises."""
        limit = self._document_limit()
        with committing(
            exe, emits, processed_event_id, timers, spawns, trace, max_document_bytes=limit
        ) as prepared:
            _, cancelled = await self._settle(self._plan.commit(prepared, self.trace_max))
        if cancelled:
            raise asyncio.CancelledError

    async def is_processed(self, execution_id: str, event_id: str) -> bool:
        """Whether that execution already processed that event."""
        return await self._run(self._plan.is_processed(execution_id, event_id))

    async def pending_outbox(self, *, limit: int | None = None) -> list[OutboxEntry]:
        """Undelivered events, oldest first (at most ``limit``)."""
        return await self._sweep(self._plan.pending_outbox(limit))

    async def ack_outbox(self, seq: int) -> None:
        """Forget a delivered event (unknown seq: no-op)."""
        await self._write(self._plan.ack_outbox(seq))

    async def pending_spawns(self, *, limit: int | None = None) -> list[SpawnEntry]:
        """Uncreated children, oldest first (at most ``limit``)."""
        return await self._sweep(self._plan.pending_spawns(limit))

    async def ack_spawn(self, seq: int) -> None:
        """Forget a created child's intent (unknown seq: no-op)."""
        await self._write(self._plan.ack_spawn(seq))

    async def due_timers(self, now: float, *, limit: int | None = None) -> list[DueTimer]:
        """Armed timers with ``fire_at <= now``, ascending by ``(fire_at, execution_id, path)``."""
        return await self._sweep(self._plan.due_timers(now, limit))

    async def delete_timer(self, execution_id: str, path: str, fire_at: float) -> None:
        """Disarm a timer only if it still holds exactly ``fire_at``."""
        await self._write(self._plan.delete_timer(execution_id, path, fire_at))

    async def claim(
        self, owner: str, now: float, *, lease: float = DEFAULT_LEASE, limit: int = 100
    ) -> list[Claim]:
        """Lease up to ``limit`` units of due work, grouped by execution, to ``owner``.

        Cancelled midway, it waits for the claim's outcome before re-raising (the leases it
        took expire by themselves)."""
        return await self._write(self._plan.claim(*check_claim(owner, now, lease, limit)))

    async def renew(
        self, owner: str, execution_id: str | None, now: float, *, lease: float = DEFAULT_LEASE
    ) -> float:
        """Extend ``owner``'s unexpired lease to ``now + lease``; the new expiry."""
        return await self._write(self._plan.renew(*check_renew(owner, execution_id, now, lease)))

    async def release(
        self, owner: str, execution_id: str | None, *, retry_at: float | None = None
    ) -> None:
        """Give ``owner``'s lease back; what is left is claimable (not before ``retry_at``)."""
        checked = check_release(owner, execution_id, retry_at)
        await self._write(self._plan.release(*checked, time.time()))

    async def list_leases(self, now: float, *, limit: int = 100) -> list[Lease]:
        """The leases held at ``now``, by ``(expires_at, execution_id)``, at most ``limit``
        (read-only)."""
        return await self._run(self._plan.list_leases(*check_list_leases(now, limit)))

    async def enqueue(self, target_id: str, event: Event, *, priority: int = 0) -> int:
        """Write one outbox entry for ``target_id``; its ``seq``.  Cancelled midway, it waits
        for the write's outcome, then re-raises."""
        prepared = self._prepare_enqueue(target_id, event, priority)
        return await self._write(self._plan.enqueue(prepared))

    async def read_trace(self, execution_id: str) -> list[dict[str, Any]]:
        """The retained trace steps, oldest first, each with its ``index``."""
        return await self._run(self._plan.read_trace(execution_id))

    async def append_trace(self, execution_id: str, entry: dict[str, Any]) -> None:
        """Append a step outside a commit; unknown execution raises ``ExecutionNotFound``."""
        await self._write(self._plan.append_trace(execution_id, entry, self.trace_max))

    async def list_executions(
        self,
        *,
        status: Iterable[Status] | None = None,
        definition_id: str | None = None,
        roots_only: bool = False,
        limit: int = 100,
        cursor: str | None = None,
    ) -> ExecutionPage:
        """One page of summaries ordered by id, with a keyset cursor."""
        query = _listing(status, definition_id, roots_only, limit, cursor)
        return await self._sweep(self._plan.list_executions(query))

    async def purge(self, execution_id: str, *, force: bool = False) -> bool:
        """Delete the execution and all it owns in one atomic write (``ExecutionActive`` while
        it is not finished, unless ``force``); whether it was stored."""
        return await self._write(self._plan.purge(execution_id, force))

    async def prune_processed(
        self, older_than: float, *, batch_size: int = DEFAULT_PRUNE_BATCH
    ) -> int:
        """Drop dedupe marks recorded before ``older_than``, ``batch_size`` per write."""
        return await self._write(self._plan.prune_processed(older_than, batch_size))

    async def export_execution(self, execution_id: str) -> ExecutionRecord | None:
        """Everything stored for the id, from one consistent read (``None``: nothing)."""
        return await self._run(self._plan.export_execution(execution_id))

    async def import_execution(self, record: ExecutionRecord) -> None:
        """Write an exported record in one atomic write (``ExecutionAlreadyExists``, nothing
        written, when the execution is already stored)."""
        await self._write(self._plan.import_execution(self._prepare_import(record)))

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


class _InThreads(SyncHops[Any]):
    """The contract of an :class:`AsyncPlanStore` in its :meth:`~AsyncPlanStore.in_threads`
    form: the sync store's methods, whole, through ``Offload`` (put first in the MRO)."""

    _runner: Offload

    async def _run(self, operation: Any) -> Any:
        """A plan operation driven whole by the sync store's driver (what a method missing
        from the hop table, such as a backend's own extra, reaches)."""
        return await self._runner.run(self.store._run, operation)

    async def _settle(self, operation: Any) -> tuple[Any, bool]:
        """A write, whole, in the sync store (the offload never abandons a started call)."""
        return await self._run(operation), False

    async def close(self) -> None:
        """Close the sync store (idempotent; later calls raise its "closed" error)."""
        await self._runner.run(self.store.close)


_IN_THREADS: dict[type[Any], type[_InThreads]] = {}


def _in_threads_class(cls: type[AsyncPlanStore[Any]]) -> type[_InThreads]:
    """``cls`` with :class:`_InThreads`'s methods first (made once per class); same name, so
    reprs and messages read alike."""
    klass = _IN_THREADS.get(cls)
    if klass is None:
        namespace = {"__module__": cls.__module__, "__qualname__": cls.__qualname__}
        klass = _IN_THREADS[cls] = type(cls.__name__, (_InThreads, cls), namespace)
    return klass
