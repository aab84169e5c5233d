"""The worker counts its wasted attempts: a delivery refused with ``StoreConflict`` and a
delivery whose dedupe mark was already set (what ``bench/fleet.py`` reports per unit)."""

from __future__ import annotations

from typing import Any

import anyio
from harel import DictStore, DurableRunner
from harel.conformance.attacks import worker_definitions
from harel.engine.aio import AsyncDurableRunner
from harel.engine.aio_worker import AsyncWorker
from harel.engine.worker import Worker
from harel.store.errors import StoreConflict
from harel.store.memory import AsyncDictStore

SEEN = ("job-0", "job-1", "job-2")
"""Executions whose Timeout another worker delivered already (their mark reads as set)."""


class Rivals:
    """Passes everything on, but a rival got there first: the first commit raises
    ``StoreConflict`` and the Timeouts of :data:`SEEN` read as already processed."""

    def __init__(self, inner: Any, *, conflict: bool) -> None:
        self.inner, self.conflict = inner, conflict

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def seen(self, execution_id: str, event_id: str, found: tuple[Any, bool]) -> tuple[Any, bool]:
        return found[0], found[1] or (execution_id in SEEN and event_id.startswith("timeout:"))

    def refuse(self, exe: Any) -> None:
        if self.conflict:
            self.conflict = False
            raise StoreConflict(exe.id, exe.version, None)


class SyncRivals(Rivals):
    def load_for_event(self, execution_id: str, event_id: str) -> tuple[Any, bool]:
        found = self.inner.load_for_event(execution_id, event_id)
        return self.seen(execution_id, event_id, found)

    def commit(self, exe: Any, *args: Any, **kwargs: Any) -> None:
        self.refuse(exe)
        self.inner.commit(exe, *args, **kwargs)


class AsyncRivals(Rivals):
    async def load_for_event(self, execution_id: str, event_id: str) -> tuple[Any, bool]:
        found = await self.inner.load_for_event(execution_id, event_id)
        return self.seen(execution_id, event_id, found)

    async def commit(self, exe: Any, *args: Any, **kwargs: Any) -> None:
        self.refuse(exe)
        await self.inner.commit(exe, *args, **kwargs)


def test_the_worker_counts_a_lost_race_and_each_timeout_already_delivered() -> None:
    store = DictStore()
    seeder = DurableRunner(store, worker_definitions(), clock=lambda: 0.0)
    for i in range(5):
        seeder.create("job", execution_id=f"job-{i}")
    seeder.create("counter", execution_id="counter")
    rivals = SyncRivals(store, conflict=True)
    runner = DurableRunner(rivals, worker_definitions(), clock=lambda: 100.0)  # type: ignore[arg-type]
    stats = Worker(runner, poll=0).run(once=True)
    assert (stats.repeats, stats.conflicts) == (3, 1)
    assert stats.fired == 4  # the seen ones are done too; the lost race waits retry_after
    (left,) = store.claim("probe", 100.0 + runner.plan.retry_after)
    assert left.timers and left.execution_id not in SEEN


def test_the_async_worker_counts_each_repeat_once_across_its_loops() -> None:
    async def main() -> tuple[int, int]:
        store = AsyncDictStore()
        seeder = AsyncDurableRunner(store, worker_definitions(), clock=lambda: 0.0)
        for i in range(8):
            await seeder.create("job", execution_id=f"job-{i}")
        await seeder.create("counter", execution_id="counter")
        rivals = AsyncRivals(store, conflict=False)
        runner = AsyncDurableRunner(rivals, worker_definitions(), clock=lambda: 100.0)  # type: ignore[arg-type]
        stats = await AsyncWorker(runner, concurrency=4, poll=0, batch=1).run(once=True)
        return stats.repeats, stats.conflicts

    assert anyio.run(main) == (3, 0)  # counted once each, though four loops share the plan
