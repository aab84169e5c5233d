"""A stale due-timer entry never fires a re-armed timer early (issue 17 §5), memory and SQLite.

The sweep hands the runner a due entry read before the state was left and re-entered (a
lagging index, a sweep racing a commit): the state is active again, but with a later
``fire_at``.  The runner compares the armed ``fire_at`` and commits the stale ``Timeout`` as
a no-op; the re-armed timer fires at its own time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harel import (
    AsyncDictStore,
    AsyncDurableRunner,
    DictStore,
    DurableRunner,
    Event,
    Status,
    definition_from_dsl,
)
from harel.engine.definition import Definition

PAUSABLE = """
event Pause {}  event Resume {}
machine pausable {
  initial Open
  state Open { timeout 60 }
  state Paused {}
  final Expired expired {}
  from Open to Paused on Pause
  from Paused to Open on Resume
  from Open to Expired on Timeout
}
"""


class Clock:
    def __init__(self, now: float = 500.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class StaleSweep:
    """A store whose ``due_timers`` answers a snapshot taken earlier (every other call passes
    through to the real store)."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.snapshot: list[tuple[str, str, float]] | None = None

    def due_timers(self, now: float, limit: int | None = None) -> list[tuple[str, str, float]]:
        if self.snapshot is not None:
            stale, self.snapshot = self.snapshot, None
            return [entry for entry in stale if entry[2] <= now]
        found: list[tuple[str, str, float]] = self.store.due_timers(now, limit=limit)
        return found

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def definitions() -> dict[str, Definition]:
    defn = definition_from_dsl(PAUSABLE)
    return {defn.id: defn}


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "memory":
        real: Any = DictStore()
    else:
        sqlite = pytest.importorskip("harel_store_sqlite")
        real = sqlite.SqliteStore(str(tmp_path / "t.db"))
    yield real
    real.close()


@pytest.fixture
def clock() -> Clock:
    return Clock()


def rearm(runner: DurableRunner, clock: Clock, execution_id: str) -> None:
    """Leave ``Open`` and enter it again at 520: its timer moves from 560 to 580."""
    clock.now = 510.0
    runner.process(execution_id, Event(kind="Pause"))
    clock.now = 520.0
    runner.process(execution_id, Event(kind="Resume"))


def test_stale_due_entry_does_not_fire_the_rearmed_timer(store: Any, clock: Clock) -> None:
    sweep = StaleSweep(store)
    runner = DurableRunner(sweep, definitions(), clock=clock)  # type: ignore[arg-type]
    exe = runner.create("pausable", execution_id="p")
    assert exe.armed_timers == {"Open": 560.0}
    sweep.snapshot = store.due_timers(1e12)  # read before the re-arm
    rearm(runner, clock, exe.id)
    assert store.due_timers(1e12) == [("p", "Open", 580.0)]
    clock.now = 565.0
    runner.fire_due_timers()  # delivers the stale 560 entry
    now = store.load("p")
    assert (now.status, now.active_path) == (Status.RUNNING, "Open")
    assert now.armed_timers == {"Open": 580.0}
    assert store.is_processed("p", "timeout:p:Open:560.0")  # committed as a no-op
    assert store.due_timers(1e12) == [("p", "Open", 580.0)]  # the re-armed row stays
    clock.now = 579.0
    assert runner.fire_due_timers() == 0
    clock.now = 580.0
    assert runner.fire_due_timers() == 1
    done = store.load("p")
    assert (done.status, done.outcome, done.armed_timers) == (Status.DONE, "expired", {})


def test_stale_timeout_sent_by_hand_is_a_noop(store: Any, clock: Clock) -> None:
    runner = DurableRunner(store, definitions(), clock=clock)
    runner.create("pausable", execution_id="p")
    rearm(runner, clock, "p")
    early = Event(id="timeout:p:Open:560.0", kind="Timeout", data={"path": "Open", "fire_at": 560})
    after = runner.process("p", early)
    assert (after.status, after.active_path, after.processed_events) == (Status.RUNNING, "Open", 2)
    due = Event(id="timeout:p:Open:580.0", kind="Timeout", data={"path": "Open", "fire_at": 580.0})
    assert runner.process("p", due).outcome == "expired"


def test_record_without_armed_timers_still_fires(store: Any, clock: Clock) -> None:
    """An execution stored by an older release has no ``armed_timers``: the due timer fires."""
    runner = DurableRunner(store, definitions(), clock=clock)
    exe = runner.create("pausable", execution_id="p")
    exe.armed_timers = {}
    store.commit(exe, [])
    clock.now = 560.0
    assert runner.fire_due_timers() == 1
    assert store.load("p").outcome == "expired"


def test_a_failed_step_keeps_the_armed_record(store: Any, clock: Clock) -> None:
    def explode(stm: Any, event: Event | None, **_: Any) -> None:
        raise ValueError("boom")

    dsl = PAUSABLE.replace("state Paused {}", "state Paused { on enter explode }")
    defn = definition_from_dsl(dsl, actions={"explode": explode})
    runner = DurableRunner(store, {defn.id: defn}, clock=clock)
    runner.create("pausable", execution_id="p")
    failed = runner.process("p", Event(kind="Pause"))
    assert (failed.status, failed.armed_timers) == (Status.FAILED, {"Open": 560.0})


def test_async_runner_skips_the_stale_timeout_too() -> None:
    clock = Clock()

    async def main() -> None:
        store = AsyncDictStore()
        runner = AsyncDurableRunner(store, definitions(), clock=clock)
        await runner.create("pausable", execution_id="p")
        clock.now = 510.0
        await runner.process("p", Event(kind="Pause"))
        clock.now = 520.0
        after = await runner.process("p", Event(kind="Resume"))
        assert after.armed_timers == {"Open": 580.0}
        stale = Event(
            id="timeout:p:Open:560.0", kind="Timeout", data={"path": "Open", "fire_at": 560.0}
        )
        assert (await runner.process("p", stale)).active_path == "Open"
        clock.now = 580.0
        assert await runner.fire_due_timers() == 1
        done = await store.load("p")
        assert done is not None and done.outcome == "expired"

    asyncio.run(main())
