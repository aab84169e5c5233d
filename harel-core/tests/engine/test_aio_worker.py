"""The async worker: N claim loops in one event loop drain the work exactly once, under
asyncio and trio, over the memory store and a SQLite file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from harel import DurableRunner
from harel.conformance.attacks import worker_definitions
from harel.engine.aio import AsyncDurableRunner
from harel.engine.aio_worker import AsyncWorker
from harel.engine.worker import StopSignal
from harel.registry import open_async_store, open_store

JOBS = 12


def _seed(url: str) -> None:
    store = open_store(url)
    runner = DurableRunner(store, worker_definitions(), clock=lambda: 0.0)
    runner.create("counter", execution_id="counter")
    for i in range(JOBS):
        runner.create("job", execution_id=f"job-{i:02d}")
    store.close()


async def _drain(url: str, concurrency: int) -> tuple[Any, dict[str, Any]]:
    store = await open_async_store(url)
    try:
        runner = AsyncDurableRunner(store, worker_definitions(), clock=lambda: 100.0)
        worker = AsyncWorker(runner, concurrency=concurrency, poll=0.01, batch=3)
        stats = await worker.run(once=True)
        counter = await store.load("counter")
        assert counter is not None
        return stats, counter.context
    finally:
        await store.close()


@pytest.mark.parametrize("library", ["asyncio", "trio"])
@pytest.mark.parametrize("concurrency", [1, 4])
def test_the_async_worker_drains_everything_once(
    tmp_path: Path, library: str, concurrency: int
) -> None:
    pytest.importorskip("harel_store_sqlite")
    url = f"sqlite:///{tmp_path / 'fleet.db'}"
    _seed(url)
    stats, context = anyio.run(_drain, url, concurrency, backend=library)
    assert stats.fired == JOBS
    assert context["n"] == JOBS
    assert len(context["seen"]) == len(set(context["seen"])) == JOBS, "a tick landed twice"
    leftover = open_store(url)
    assert leftover.claim("probe", 1e18, lease=30.0) == [], "work or a lease was left behind"
    leftover.close()


@pytest.mark.parametrize("library", ["asyncio", "trio"])
def test_a_stop_ends_every_loop(library: str) -> None:
    async def main() -> int:
        store = await open_async_store("memory://")
        stop = StopSignal()
        runner = AsyncDurableRunner(store, worker_definitions())
        worker = AsyncWorker(runner, concurrency=3, poll=5.0, stop=stop)
        async with anyio.create_task_group() as group:
            group.start_soon(worker.run)
            await anyio.sleep(0.1)  # every loop is idle, sleeping up to its poll
            stop.set()
        await store.close()
        return worker.stats.rounds

    rounds = anyio.run(main, backend=library)
    assert rounds >= 3


def test_knobs_are_checked() -> None:
    async def main() -> None:
        store = await open_async_store("memory://")
        runner = AsyncDurableRunner(store, {})
        for bad in ({"concurrency": 0}, {"lease": 0}, {"batch": 0}, {"poll": -1}):
            with pytest.raises(ValueError):
                AsyncWorker(runner, **bad)  # type: ignore[arg-type]
        await store.close()

    anyio.run(main)
