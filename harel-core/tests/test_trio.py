"""Async stores under trio: the ThreadedRunner's trio path, the anyio offload, the library check.

Every test here failed before trio support with ``RuntimeError: no running event loop``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any, TypeVar

import anyio
import anyio.lowlevel
import pytest
from harel.model import Execution
from harel.store.common.codec import decode_execution
from harel.store.common.commit import PreparedCommit
from harel.store.common.drive import drive
from harel.store.common.limits import MAX_DOCUMENT_BYTES
from harel.store.common.offload import Offload, current_library
from harel.store.common.plan_store import AsyncPlanStore, Op, PlanStore
from harel.store.common.threaded import ThreadedAsyncStore, ThreadedRunner
from harel.store.errors import StoreError, UnsupportedEventLoop
from harel.store.memory import CAPABILITIES, AsyncDictStore, DictStore

pytest.importorskip("trio")

T = TypeVar("T")

pytestmark = [pytest.mark.anyio, pytest.mark.harel_trio]


@pytest.fixture
def anyio_backend() -> str:
    return "trio"


@pytest.fixture
def runner() -> Iterator[ThreadedRunner]:
    r = ThreadedRunner(name="trio-runner")
    yield r
    r.close()


class _DictThreaded(ThreadedAsyncStore[DictStore]):
    """A third-party style store: a sync store behind core's adapter."""


async def test_current_library_names_trio() -> None:
    assert current_library() == "trio"


def test_current_library_outside_any_loop_is_a_typed_error() -> None:
    with pytest.raises(UnsupportedEventLoop, match="outside any event loop"):
        current_library()


async def test_runner_serves_trio_in_its_own_thread(runner: ThreadedRunner) -> None:
    threads = {await runner.run(threading.get_ident) for _ in range(5)}
    assert threads == {runner.thread.ident}
    assert await runner.run(lambda a, b: a + b, 2, 3) == 5
    with pytest.raises(KeyError, match="nope"):
        await runner.run(dict().__getitem__, "nope")


async def test_runner_under_trio_withdraws_queued_and_finishes_started(
    runner: ThreadedRunner,
) -> None:
    """A cancel before the operation started withdraws it; after, it finishes first."""
    gate, started = threading.Event(), threading.Event()
    ran: list[str] = []

    def slow() -> None:
        started.set()
        gate.wait(10)
        ran.append("slow")

    withdrawn: list[bool] = []

    async def queued() -> None:
        try:
            await runner.run(ran.append, "queued")
        finally:
            withdrawn.append(True)

    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as group:
            group.start_soon(runner.run, slow)
            await anyio.to_thread.run_sync(started.wait, 10)
            group.start_soon(queued)
            while runner._jobs.qsize() < 1:  # "queued" is in the queue behind slow
                await anyio.lowlevel.checkpoint()
            scope.cancel()
            with anyio.CancelScope(shield=True):
                while not withdrawn:  # the queued call gave up before slow could end
                    await anyio.lowlevel.checkpoint()
            gate.set()
    assert scope.cancelled_caught
    await runner.run(ran.append, "after")
    assert ran == ["slow", "after"], "the started op finished, the queued one never ran"


async def test_threaded_store_commits_under_trio_and_a_cancel_keeps_the_rule() -> None:
    store = await _DictThreaded.start(DictStore)
    try:
        exe = Execution(id="t-1", definition_id="d")
        await store.commit(exe, [])
        for checkpoints in range(6):
            old = exe.version
            with anyio.CancelScope() as scope:
                async with anyio.create_task_group() as group:
                    group.start_soon(store.commit, exe, [])
                    for _ in range(checkpoints):
                        await anyio.lowlevel.checkpoint()
                    scope.cancel()
            loaded = await store.load("t-1")
            assert loaded is not None
            assert exe.version in (old, old + 1)
            assert loaded.version == exe.version, "exe.version says whether it was stored"
    finally:
        await store.close()
    with pytest.raises(StoreError, match="closed"):
        await store.load("t-1")


async def test_offload_serialises_and_withdraws_a_call_not_started() -> None:
    offload = Offload()
    gate, started = threading.Event(), threading.Event()
    running, overlap, ran = [0], [False], []

    def op(name: str) -> None:
        running[0] += 1
        overlap[0] = overlap[0] or running[0] > 1
        started.set()
        gate.wait(10)
        ran.append(name)
        running[0] -= 1

    withdrawn: list[bool] = []

    async def second() -> None:
        try:
            await offload.run(op, "second")
        finally:
            withdrawn.append(True)

    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as group:
            group.start_soon(offload.run, op, "first")
            await anyio.to_thread.run_sync(started.wait, 10)
            group.start_soon(second)
            await anyio.lowlevel.checkpoint()
            scope.cancel()
            with anyio.CancelScope(shield=True):
                while not withdrawn:
                    await anyio.lowlevel.checkpoint()
            gate.set()
    assert ran == ["first"] and not overlap[0]
    assert await offload.run(lambda: 7) == 7


class _TinyPlan:
    """Just enough of a plan (``load``, ``commit``) to drive the two plan stores: each
    request is a callable the driver calls."""

    max_document_bytes = MAX_DOCUMENT_BYTES

    def __init__(self) -> None:
        self.documents: dict[str, str] = {}

    def load(self, execution_id: str) -> Op[Execution | None]:
        document = yield lambda: self.documents.get(execution_id)
        return None if document is None else decode_execution(document)

    def commit(self, prepared: PreparedCommit, trace_max: int | None) -> Op[None]:
        yield lambda: self.documents.__setitem__(prepared.execution_id, prepared.document)


class _TinySync(PlanStore[Any]):
    capabilities = CAPABILITIES

    def __init__(self) -> None:
        self._plan, self.trace_max = _TinyPlan(), None

    def _run(self, operation: Op[T]) -> T:
        return drive(operation, lambda request: request())

    def close(self) -> None:
        pass


class _TinyAsync(AsyncPlanStore[Any]):
    capabilities = CAPABILITIES

    async def close(self) -> None:
        pass


async def test_plan_store_in_threads_is_the_same_class_over_the_sync_twin() -> None:
    store = await _TinyAsync.in_threads(_TinySync)
    assert isinstance(store, _TinyAsync) and type(store).__name__ == "_TinyAsync"
    exe = Execution(id="p-1", definition_id="d")
    await store.commit(exe, [])
    store.trace_max = 3
    assert store.store.trace_max == 3
    loaded = await store.load("p-1")
    assert loaded is not None and loaded.version == exe.version == 1
    await store.close()


async def test_memory_store_runs_under_trio() -> None:
    store = AsyncDictStore()
    exe = Execution(id="m-1", definition_id="d")
    await store.commit(exe, [])
    loaded = await store.load("m-1")
    assert loaded is not None and loaded.version == exe.version == 1
    await store.close()
