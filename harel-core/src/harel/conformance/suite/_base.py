"""The kit's machinery: one test body for both flavours, capability gates, races, snapshots.

Every kit test is an ``async def`` taking the ``kit`` fixture.  ``kit.store`` is an
:class:`~harel.store.contract.AsyncExecutionStore`: in the ``async`` flavour it *is* the
backend's async store, in the ``sync`` flavour it is :class:`SyncAsAsync`, which calls the
backend's sync store directly (no thread, no event loop work) so ``await`` simply returns the
sync result.  The two variants therefore run the very same assertions and cannot drift.

With trio installed the async flavour runs twice, under asyncio (``[async]``) and under trio
(``[async-trio]``, marked :data:`TRIO`, so ``-m harel_trio`` selects them and ``-m "not
harel_trio"`` leaves them out); an ``async def`` kit test without the ``flavour`` fixture runs
as ``[asyncio]`` and ``[trio]``.  A kit test marked :data:`NO_TRIO` (too slow to run twice)
runs under asyncio only.
"""

from __future__ import annotations

import importlib.util
import inspect
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Self, TypeVar

import anyio
import anyio.lowlevel
import pytest

from harel.conformance.harness import StoreHarness
from harel.model import Event, Execution, ExecutionPage, Status
from harel.store.contract import (
    DEFAULT_LEASE,
    DEFAULT_PRUNE_BATCH,
    AsyncExecutionStore,
    Capabilities,
    Claim,
    DueTimer,
    Emit,
    ExecutionRecord,
    ExecutionStore,
    Lease,
    OutboxEntry,
    Spawn,
    SpawnEntry,
    TimerOp,
)

Flavour = Literal["sync", "async"]
FLAVOURS: tuple[Flavour, ...] = ("sync", "async")
CAPABILITY_FLAGS = ("persistent", "multi_process", "ordered_listing", "exact_pages")
FAR_FUTURE = 1e18
"""A ``now`` for ``due_timers`` that every armed timer is due at."""
SMOKE = pytest.mark.harel_smoke
"""The kit's smoke subset: one test or so per concern (``pytest -m harel_smoke``), which the
all-backends and wheel runs use; ``make test`` runs the whole kit once per backend."""

TRIO = pytest.mark.harel_trio
"""Marks the kit's runs under trio (the ``[async-trio]`` / ``[trio]`` items)."""
NO_TRIO = pytest.mark.harel_no_trio
"""Marks a kit test that runs under asyncio only (over ~2 s per backend: ``make test``'s
budget)."""

T = TypeVar("T")


class SyncAsAsync:
    """A sync store seen through the async contract: each coroutine calls the sync method.

    The coroutines never suspend, so the sync store is always used from the calling thread.
    """

    def __init__(self, store: ExecutionStore) -> None:
        self.sync = store

    def __repr__(self) -> str:
        return f"SyncAsAsync({self.sync!r})"

    @property
    def trace_max(self) -> int | None:
        """The wrapped store's ring size."""
        return self.sync.trace_max

    @trace_max.setter
    def trace_max(self, value: int | None) -> None:
        self.sync.trace_max = value

    @property
    def capabilities(self) -> Any:
        """The wrapped store class's declared capabilities."""
        return getattr(self.sync, "capabilities", None)

    @classmethod
    async def from_url(cls, url: str, **knobs: Any) -> Self:
        """Not used by the kit: stores come from the harness."""
        raise TypeError("SyncAsAsync wraps an opened store; it is not built from a URL")

    async def load(self, execution_id: str) -> Execution | None:
        return self.sync.load(execution_id)

    async def load_for_event(
        self, execution_id: str, event_id: str
    ) -> tuple[Execution | None, bool]:
        return self.sync.load_for_event(execution_id, event_id)

    async def save(self, exe: Execution) -> None:
        self.sync.save(exe)

    async def commit(
        self,
        exe: Execution,
        emits: Sequence[Emit],
        processed_event_id: str | None = None,
        timers: Sequence[TimerOp] = (),
        spawns: Sequence[Spawn] = (),
        trace: dict[str, Any] | None = None,
    ) -> None:
        self.sync.commit(exe, emits, processed_event_id, timers, spawns, trace)

    async def is_processed(self, execution_id: str, event_id: str) -> bool:
        return self.sync.is_processed(execution_id, event_id)

    async def pending_outbox(self, *, limit: int | None = None) -> list[OutboxEntry]:
        return self.sync.pending_outbox(limit=limit)

    async def ack_outbox(self, seq: int) -> None:
        self.sync.ack_outbox(seq)

    async def pending_spawns(self, *, limit: int | None = None) -> list[SpawnEntry]:
        return self.sync.pending_spawns(limit=limit)

    async def ack_spawn(self, seq: int) -> None:
        self.sync.ack_spawn(seq)

    async def due_timers(self, now: float, *, limit: int | None = None) -> list[DueTimer]:
        return self.sync.due_timers(now, limit=limit)

    async def delete_timer(self, execution_id: str, path: str, fire_at: float) -> None:
        self.sync.delete_timer(execution_id, path, fire_at)

    async def claim(
        self, owner: str, now: float, *, lease: float = DEFAULT_LEASE, limit: int = 100
    ) -> list[Claim]:
        return self.sync.claim(owner, now, lease=lease, limit=limit)

    async def renew(
        self, owner: str, execution_id: str | None, now: float, *, lease: float = DEFAULT_LEASE
    ) -> float:
        return self.sync.renew(owner, execution_id, now, lease=lease)

    async def release(
        self, owner: str, execution_id: str | None, *, retry_at: float | None = None
    ) -> None:
        self.sync.release(owner, execution_id, retry_at=retry_at)

    async def list_leases(self, now: float, *, limit: int = 100) -> list[Lease]:
        return self.sync.list_leases(now, limit=limit)

    async def enqueue(self, target_id: str, event: Event, *, priority: int = 0) -> int:
        return self.sync.enqueue(target_id, event, priority=priority)

    async def read_trace(self, execution_id: str) -> list[dict[str, Any]]:
        return self.sync.read_trace(execution_id)

    async def append_trace(self, execution_id: str, entry: dict[str, Any]) -> None:
        self.sync.append_trace(execution_id, entry)

    async def list_executions(
        self,
        *,
        status: Iterable[Status] | None = None,
        definition_id: str | None = None,
        roots_only: bool = False,
        limit: int = 100,
        cursor: str | None = None,
    ) -> ExecutionPage:
        return self.sync.list_executions(
            status=status,
            definition_id=definition_id,
            roots_only=roots_only,
            limit=limit,
            cursor=cursor,
        )

    async def purge(self, execution_id: str, *, force: bool = False) -> bool:
        return self.sync.purge(execution_id, force=force)

    async def prune_processed(
        self, older_than: float, *, batch_size: int = DEFAULT_PRUNE_BATCH
    ) -> int:
        return self.sync.prune_processed(older_than, batch_size=batch_size)

    async def export_execution(self, execution_id: str) -> ExecutionRecord | None:
        return self.sync.export_execution(execution_id)

    async def import_execution(self, record: ExecutionRecord) -> None:
        self.sync.import_execution(record)

    async def close(self) -> None:
        self.sync.close()


def run_inline(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends (a sync-flavour test step) to completion."""
    try:
        coro.send(None)
    except StopIteration as done:
        result: T = done.value
        return result
    coro.close()
    raise RuntimeError("a sync-flavour step suspended; it may only await the kit's sync adapter")


def declared_capabilities(harness_type: type[StoreHarness]) -> Capabilities | None:
    """The capabilities a harness class (or a subclass of StoreHarness it derives from) sets.

    ``None`` when no class below :class:`StoreHarness` assigns ``capabilities`` explicitly.
    """
    for klass in harness_type.__mro__:
        if klass is StoreHarness:
            break
        if "capabilities" in vars(klass):
            value = vars(klass)["capabilities"]
            return value if isinstance(value, Capabilities) else None
    return None


@dataclass
class Kit:
    """What a kit test works with: the store under test, its flavour and its capabilities."""

    flavour: Flavour
    harness: StoreHarness
    strict: bool
    store: AsyncExecutionStore
    _opened: list[AsyncExecutionStore] = field(default_factory=list)
    _closed: list[AsyncExecutionStore] = field(default_factory=list)

    @property
    def capabilities(self) -> Capabilities:
        """The harness's declared capabilities (the kit refuses undeclared ones)."""
        caps = declared_capabilities(type(self.harness))
        if caps is None:
            pytest.fail(
                f"{type(self.harness).__name__} must set `capabilities = Capabilities(...)` "
                "as a ClassVar with every flag explicit"
            )
        return caps

    def require(self, flag: str) -> None:
        """Skip (fail with ``--harel-strict``) unless the harness declares capability ``flag``."""
        if flag not in CAPABILITY_FLAGS:
            raise ValueError(f"unknown capability {flag!r}; known: {', '.join(CAPABILITY_FLAGS)}")
        if getattr(self.capabilities, flag):
            return
        message = f"needs capability {flag!r}, which {type(self.harness).__name__} does not declare"
        if self.strict:
            pytest.fail(f"--harel-strict: {message}", pytrace=False)
        pytest.skip(message)

    async def open(self) -> AsyncExecutionStore:
        """Another store of this flavour over the same dataset (a restart or second writer).

        It is closed when the test ends.
        """
        store = await open_store(self.harness, self.flavour)
        self._opened.append(store)
        return store

    async def open_at(self, host: str, port: int) -> AsyncExecutionStore:
        """Another store of this flavour over the same dataset, connecting to ``host:port`` (a
        proxy in front of the harness's ``server_address()``); closed when the test ends."""
        if self.flavour == "sync":
            store: AsyncExecutionStore = SyncAsAsync(self.harness.open_sync_at(host, port))
        else:
            store = await self.harness.open_async_at(host, port)
        self._opened.append(store)
        return store

    async def race(self, steps: Sequence[Callable[[], Awaitable[T]]]) -> list[T | Exception]:
        """Run ``steps`` concurrently (threads for sync, tasks for async); outcomes in order.

        Each outcome is the step's result or the exception it raised.
        """
        outcomes: list[T | Exception] = [RuntimeError("step did not run")] * len(steps)
        if self.flavour == "sync":
            barrier = threading.Barrier(len(steps))

            def thread_main(index: int) -> None:
                try:
                    barrier.wait(timeout=30)
                    outcomes[index] = run_inline(_as_coroutine(steps[index]))
                except Exception as exc:
                    outcomes[index] = exc

            threads = [threading.Thread(target=thread_main, args=(i,)) for i in range(len(steps))]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            return outcomes

        start = anyio.Event()

        async def task_main(index: int) -> None:
            await start.wait()
            try:
                outcomes[index] = await steps[index]()
            except Exception as exc:
                outcomes[index] = exc

        async with anyio.create_task_group() as group:
            for index in range(len(steps)):
                group.start_soon(task_main, index)
            await anyio.lowlevel.checkpoint()
            start.set()
        return outcomes

    async def close(self, store: AsyncExecutionStore) -> None:
        """Close one store now (a restart); it is not closed again at teardown."""
        if not any(store is done for done in self._closed):
            self._closed.append(store)
            await store.close()

    async def aclose(self) -> None:
        """Close every store this kit opened (the main one included), each once."""
        for store in reversed(self._opened):
            await self.close(store)


async def _await(step: Callable[[], Awaitable[T]]) -> T:
    return await step()


def _as_coroutine(step: Callable[[], Awaitable[T]]) -> Coroutine[Any, Any, T]:
    return _await(step)


async def open_store(harness: StoreHarness, flavour: Flavour) -> AsyncExecutionStore:
    """Open a store of the given flavour over the harness's dataset."""
    if flavour == "sync":
        return SyncAsAsync(harness.open_sync())
    return await harness.open_async()


class KitBase:
    """Fixtures every kit test class shares; subclass a concern class or ConformanceSuite.

    The backend provides a function-scoped ``harel_harness`` fixture returning a fresh,
    EMPTY :class:`StoreHarness` (and destroying it afterwards).
    """

    pytestmark: ClassVar[list[pytest.MarkDecorator]] = [pytest.mark.anyio]
    expected_failures: ClassVar[dict[str, str]] = {}
    """``{test name: reason}``: known deviations, run as strict xfails and counted."""
    trio_excluded: ClassVar[dict[str, str]] = {}
    """``{test function name: reason}``: kit tests this backend runs under asyncio only (too
    slow to run twice on it: over ~2 s per test); like :data:`NO_TRIO` for one backend."""

    @pytest.fixture
    def anyio_backend(self) -> str:
        """The kit drives async stores on asyncio (and on trio: :meth:`pytest_generate_tests`)."""
        return "asyncio"

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        """Give every ``async def`` kit test its trio run too, when trio is installed: the
        async flavour under asyncio and under trio (see the module docstring)."""
        function = metafunc.function
        inner = getattr(getattr(function, "hypothesis", None), "inner_test", function)
        if not inspect.iscoroutinefunction(inner) or not _trio_installed():
            return
        if metafunc.definition.get_closest_marker(NO_TRIO.name) is not None:
            return
        if metafunc.function.__name__ in self.trio_excluded:
            return
        if "flavour" in metafunc.fixturenames:
            metafunc.parametrize(
                ("flavour", "anyio_backend"),
                [
                    pytest.param("sync", "asyncio", id="sync"),
                    pytest.param("async", "asyncio", id="async"),
                    pytest.param("async", "trio", id="async-trio", marks=TRIO),
                ],
            )
        else:
            metafunc.parametrize(
                "anyio_backend",
                [
                    pytest.param("asyncio", id="asyncio"),
                    pytest.param("trio", id="trio", marks=TRIO),
                ],
            )

    @pytest.fixture(params=FLAVOURS)
    def flavour(self, request: pytest.FixtureRequest) -> Flavour:
        """``sync`` or ``async``: which of the backend's two store classes is under test."""
        value: Flavour = request.param
        return value

    @pytest.fixture
    def harel_strict(self, request: pytest.FixtureRequest) -> bool:
        """Whether ``--harel-strict`` was given (capability skips fail)."""
        return bool(request.config.getoption("harel_strict", default=False))

    @pytest.fixture
    async def kit(
        self, harel_harness: StoreHarness, flavour: Flavour, harel_strict: bool
    ) -> AsyncIterator[Kit]:
        """A store of the requested flavour over the harness's fresh dataset."""
        store = await open_store(harel_harness, flavour)
        kit = Kit(flavour, harel_harness, harel_strict, store, [store])
        try:
            yield kit
        finally:
            await kit.aclose()


def _trio_installed() -> bool:
    return importlib.util.find_spec("trio") is not None


# -- value helpers -------------------------------------------------------------------------


def new_exe(execution_id: str, definition_id: str = "kit.flow", **fields: Any) -> Execution:
    """A never-stored execution (version 0)."""
    return Execution(id=execution_id, definition_id=definition_id, **fields)


def event(event_id: str, kind: str = "Go", **data: Any) -> Event:
    """An event with a fixed id (ids are dedupe keys, so tests choose them)."""
    return Event(id=event_id, kind=kind, data=data)


def step(kind: str, **extra: Any) -> dict[str, Any]:
    """A trace step shaped like the driver's."""
    body: dict[str, Any] = {
        "event_kind": kind,
        "event_data": {},
        "from_path": None,
        "to_path": None,
        "actions": [],
        "context_out": {},
        "timestamp": 0.0,
    }
    body.update(extra)
    return body


async def stored(store: AsyncExecutionStore, exe: Execution) -> Execution:
    """Insert ``exe`` (version 0) and return it at version 1."""
    await store.save(exe)
    return exe


@dataclass(frozen=True)
class Snapshot:
    """Everything observable about a set of executions, with seq numbers normalised away."""

    executions: dict[str, str | None]
    outbox: list[tuple[str | None, str]]
    spawns: list[tuple[str, str, str, str]]
    timers: list[DueTimer]
    traces: dict[str, list[dict[str, Any]]]
    processed: dict[tuple[str, str], bool]


async def snapshot(
    store: AsyncExecutionStore,
    ids: Iterable[str],
    event_ids: Iterable[str] = (),
) -> Snapshot:
    """Read every observable effect; ``event_ids`` are probed with ``is_processed`` per id."""
    id_list = list(ids)
    executions: dict[str, str | None] = {}
    traces: dict[str, list[dict[str, Any]]] = {}
    processed: dict[tuple[str, str], bool] = {}
    for execution_id in id_list:
        loaded = await store.load(execution_id)
        executions[execution_id] = None if loaded is None else loaded.model_dump_json()
        traces[execution_id] = await store.read_trace(execution_id)
        for event_id in event_ids:
            processed[(execution_id, event_id)] = await store.is_processed(execution_id, event_id)
    outbox = [
        (entry.target_id, entry.event.model_dump_json()) for entry in await store.pending_outbox()
    ]
    spawns = [
        (entry.parent_id, entry.child_id, entry.root_path, repr(sorted(entry.context.items())))
        for entry in await store.pending_spawns()
    ]
    timers = await store.due_timers(FAR_FUTURE)
    return Snapshot(executions, outbox, spawns, timers, traces, processed)


async def drain_listing(
    store: AsyncExecutionStore, *, limit: int, max_pages: int = 10_000, **filters: Any
) -> list[list[str]]:
    """Page through a listing until ``next_cursor is None``; the ids of each page.

    Fails when a page exceeds ``limit``, a non-first page is empty, or it never ends.
    """
    pages: list[list[str]] = []
    cursor: str | None = None
    for _ in range(max_pages):
        page = await store.list_executions(limit=limit, cursor=cursor, **filters)
        ids = [item.id for item in page.items]
        assert len(ids) <= limit, f"page of {len(ids)} items exceeds limit={limit}"
        if pages:
            assert ids, "an empty page followed a non-null cursor"
        pages.append(ids)
        cursor = page.next_cursor
        if cursor is None:
            return pages
    pytest.fail(f"listing did not end after {max_pages} pages (limit={limit}, {filters})")
