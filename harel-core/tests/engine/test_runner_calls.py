"""What the runner asks of the store per event (bench figure 4, engine.md §2.3, §2.5).

A step that wrote no relay work (no outbox entry, no spawn intent) is answered with one
``commit`` when the runner committed the execution last (it steps from its kept copy; the
commit checks the dedupe mark and the version), with ``load_for_event`` + ``commit``
otherwise, and returns a copy of what it stored: no relay sweep, no reload.  Relay work other
steps left pending is still delivered: by the next step that relays, by ``recover()`` and by
the worker's rounds.
"""

from __future__ import annotations

from typing import Any
from unittest import mock

import anyio
import pytest
from harel import AsyncDurableRunner, DictStore, DurableRunner, Event, definition_from_dsl
from harel.engine.definition import Definition
from harel.engine.worker import Worker
from harel.store.errors import ExecutionAlreadyExists
from harel.store.memory import AsyncDictStore

TOGGLE = (
    "event Go {} machine toggle { initial A  state A {}  state B {}"
    "  from A to B on Go  from B to A on Go }"
)

SENDER = """
event Go {}  event Ping {}
machine sender {
  initial A
  state A {}
  state B { on enter ping }
  from A to B on Go
  from B to A on Go
  from A to A on Ping
  from B to B on Ping
}
"""


def ping(stm: Any, event: Event | None, **_: Any) -> None:
    stm.send("peer", Event(kind="Ping"))


def defs() -> dict[str, Definition]:
    made = [definition_from_dsl(TOGGLE), definition_from_dsl(SENDER, actions={"ping": ping})]
    return {d.id: d for d in made}


def counting(store: Any) -> Any:
    """``store`` behind a mock that records every method called on it (``calls(...)``)."""
    return mock.Mock(wraps=store, store=store)


def calls(store: Any) -> list[str]:
    """The names of the methods called on a :func:`counting` store, in call order."""
    return [name for name, _, _ in store.mock_calls]


def test_a_step_from_the_kept_copy_is_one_store_call_and_returns_the_stored_copy() -> None:
    store = counting(DictStore())
    runner = DurableRunner(store, defs())  # type: ignore[arg-type]
    runner.create("toggle", execution_id="t")
    store.reset_mock()
    got = runner.process("t", Event(kind="Go"))
    assert calls(store) == ["commit"]
    assert got == store.store.load("t")
    assert (got.active_path, got.version) == ("B", 2)
    store.reset_mock()
    assert runner.process("t", Event(kind="Go")).active_path == "A"
    assert calls(store) == ["commit"]


def test_a_step_on_an_execution_the_runner_has_not_stored_loads_it_first() -> None:
    store = counting(DictStore())
    DurableRunner(store, defs()).create("toggle", execution_id="t")  # type: ignore[arg-type]
    runner = DurableRunner(store, defs())  # type: ignore[arg-type]
    store.reset_mock()
    assert runner.process("t", Event(kind="Go")).version == 2
    assert calls(store) == ["load_for_event", "commit"]


def test_without_kept_copies_every_step_loads_first() -> None:
    store = counting(DictStore())
    runner = DurableRunner(store, defs(), keep_copies=0)  # type: ignore[arg-type]
    runner.create("toggle", execution_id="t")
    store.reset_mock()
    runner.process("t", Event(kind="Go"))
    assert calls(store) == ["load_for_event", "commit"]
    assert len(runner.plan.copies) == 0


def test_a_stale_kept_copy_is_refused_by_the_commit_and_reloaded() -> None:
    """Another writer stepped since: the CAS refuses the kept copy, the runner reloads it and
    steps the stored state (no conflict counted: it is a stale copy, not a race)."""
    store = counting(DictStore())
    runner = DurableRunner(store, defs())  # type: ignore[arg-type]
    runner.create("toggle", execution_id="t")
    DurableRunner(store.store, defs()).process("t", Event(kind="Go"))  # now B, version 2
    store.reset_mock()
    got = runner.process("t", Event(kind="Go"))
    assert calls(store) == ["commit", "load_for_event", "commit"]
    assert (got.active_path, got.version) == ("A", 3)
    assert runner.plan.conflicts == 0


def test_a_redelivered_event_is_refused_by_the_commit_with_nothing_written() -> None:
    store = counting(DictStore())
    runner = DurableRunner(store, defs())  # type: ignore[arg-type]
    runner.create("toggle", execution_id="t")
    go = Event(kind="Go")
    runner.process("t", go)
    store.reset_mock()
    again = runner.process("t", go)  # from the kept copy: the commit finds the dedupe mark
    assert calls(store) == ["commit", "load"]
    assert (again.active_path, again.version) == ("B", 2)
    assert runner.plan.repeats == 1
    store.reset_mock()
    assert runner.process("t", go).version == 2  # no copy kept now: the load sees the mark
    assert calls(store) == ["load_for_event"]


def test_mutating_a_result_never_changes_the_next_step() -> None:
    store = DictStore()
    runner = DurableRunner(store, defs())
    created = runner.create("toggle", execution_id="t", context={"n": [1]})
    created.context["n"].append(2)
    created.active_path = "B"
    stepped = runner.process("t", Event(kind="Go"))
    assert (stepped.active_path, stepped.context) == ("B", {"n": [1]})
    stepped.context["n"].append(3)
    assert runner.process("t", Event(kind="Go")).context == {"n": [1]}
    assert store.load("t").context == {"n": [1]}  # type: ignore[union-attr]


def test_a_kept_copy_never_overwrites_a_purged_and_recreated_execution() -> None:
    """Purge + re-create to the same version elsewhere: the kept copy's commit is fenced
    (the version matches, the commit that wrote it does not), so the runner reloads."""
    store = DictStore()
    runner = DurableRunner(store, defs())
    runner.create("toggle", execution_id="t", context={"who": "old"})
    other = DurableRunner(store, defs())
    store.purge("t", force=True)
    other.create("toggle", execution_id="t", context={"who": "new"})  # version 1 again
    got = runner.process("t", Event(kind="Go"))
    assert (got.context, got.version, got.active_path) == ({"who": "new"}, 2, "B")


def test_create_with_an_id_is_one_store_call() -> None:
    store = counting(DictStore())
    runner = DurableRunner(store, defs())  # type: ignore[arg-type]
    runner.create("toggle", execution_id="t")
    assert calls(store) == ["commit"]
    with pytest.raises(ExecutionAlreadyExists):
        runner.create("toggle", execution_id="t")
    assert calls(store) == ["commit", "commit"]


def test_create_without_relay_work_returns_the_stored_copy() -> None:
    store = counting(DictStore())
    runner = DurableRunner(store, defs())  # type: ignore[arg-type]
    got = runner.create("toggle")
    assert calls(store) == ["commit"]
    assert got == store.store.load(got.id) and got.version == 1


def test_a_step_that_emits_relays_and_returns_the_reloaded_copy() -> None:
    store = counting(DictStore())
    runner = DurableRunner(store, defs())  # type: ignore[arg-type]
    runner.create("toggle", execution_id="peer")
    runner.create("sender", execution_id="s")
    store.reset_mock()
    got = runner.process("s", Event(kind="Go"))
    assert {"pending_spawns", "pending_outbox", "ack_outbox", "load"} <= set(calls(store))
    assert got == store.store.load("s")
    assert store.store.pending_outbox() == []
    assert _version(store.store, "peer") == 2  # the Ping was delivered


def _version(store: DictStore, execution_id: str) -> int:
    exe = store.load(execution_id)
    assert exe is not None
    return exe.version


def _left_pending(store: DictStore) -> DurableRunner:
    """A runner over ``store`` and one Ping a crashed step left in the outbox."""
    runner = DurableRunner(store, defs())
    runner.create("toggle", execution_id="peer")
    runner.create("sender", execution_id="s")
    runner.process("s", Event(kind="Go"), _relay=False)  # as if it crashed before relaying
    assert len(store.pending_outbox()) == 1
    return runner


def test_relay_work_of_other_steps_waits_for_recover() -> None:
    store = DictStore()
    runner = _left_pending(store)
    runner.create("toggle", execution_id="other")
    runner.process("other", Event(kind="Go"))  # wrote no relay work: no sweep
    assert len(store.pending_outbox()) == 1
    runner.recover()
    assert store.pending_outbox() == []
    assert _version(store, "peer") == 2


def test_relay_work_of_other_steps_is_delivered_by_the_worker() -> None:
    store = DictStore()
    runner = _left_pending(store)
    Worker(runner, poll=0).run(once=True)
    assert store.pending_outbox() == []
    assert _version(store, "peer") == 2


def test_a_step_that_relays_also_drains_what_other_steps_left() -> None:
    store = DictStore()
    runner = _left_pending(store)
    runner.process("s", Event(kind="Go"))  # B -> A: no ping
    assert len(store.pending_outbox()) == 1
    runner.process("s", Event(kind="Go"))  # A -> B: pings, so relays everything pending
    assert store.pending_outbox() == []
    assert _version(store, "peer") == 3


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_async_step_from_the_kept_copy_is_one_store_call() -> None:
    store = counting(AsyncDictStore())
    runner = AsyncDurableRunner(store, defs())  # type: ignore[arg-type]
    await runner.create("toggle", execution_id="t")
    store.reset_mock()
    got = await runner.process("t", Event(kind="Go"))
    assert calls(store) == ["commit"]
    assert got == await store.store.load("t")


@pytest.mark.anyio
async def test_async_concurrent_steps_of_one_execution_never_share_a_copy() -> None:
    """Two deliveries at once: one takes the kept copy, the other loads its own; the CAS
    orders them and both events are applied once."""
    store = AsyncDictStore()
    runner = AsyncDurableRunner(store, defs())
    await runner.create("toggle", execution_id="t")
    async with anyio.create_task_group() as group:
        for _ in range(2):
            group.start_soon(runner.process, "t", Event(kind="Go"))
    stored = await store.load("t")
    assert stored is not None and (stored.version, stored.active_path) == (3, "A")


TIMERS = """
event Go {}
machine timers {
  initial Idle
  state Idle { timeout 10 }
  state Quiet { timeout 10 }
  state Done {}
  from Idle to Done on Timeout
  from Idle to Quiet on Go
  from Quiet to Done on Go
}
"""


def timer_defs() -> dict[str, Definition]:
    defn = definition_from_dsl(TIMERS)
    return {defn.id: defn}


@pytest.mark.parametrize("how", ["sweep", "claim"])
@pytest.mark.parametrize("state", ["Idle", "Quiet"])
def test_a_fired_timer_costs_one_write_its_steps_commit(how: str, state: str) -> None:
    """Idle's Timeout leaves the state (the exit disarms it); Quiet has no Timeout transition
    (the runner disarms it in the commit).  Either way no separate ``delete_timer``."""
    inner = DictStore()
    clock = [100.0]
    runner = DurableRunner(counting(inner), timer_defs(), clock=lambda: clock[0])  # type: ignore[arg-type]
    runner.create("timers", execution_id="t")
    if state == "Quiet":
        runner.process("t", Event(kind="Go"))
    clock[0] = 200.0
    runner.store.reset_mock()
    if how == "sweep":
        assert runner.fire_due_timers() == 1
    else:
        assert runner.work("w1").fired == 1
    writes = [name for name in calls(runner.store) if name in ("commit", "delete_timer")]
    assert writes == ["commit"], calls(runner.store)
    assert inner.due_timers(1e9) == []
    exe = inner.load("t")
    assert exe is not None and exe.armed_timers == {}
    assert exe.active_path == ("Done" if state == "Idle" else "Quiet")
    assert inner.claim("w2", 1e9) == []


def test_enqueue_is_one_write_and_a_worker_delivers_it_once() -> None:
    inner = DictStore()
    runner = DurableRunner(counting(inner), defs())  # type: ignore[arg-type]
    runner.create("toggle", execution_id="t")
    runner.store.reset_mock()
    first = runner.enqueue("t", Event(id="go-1", kind="Go"), priority=3)
    second = runner.enqueue("t", Event(id="go-1", kind="Go"))  # a re-send after an outage
    assert calls(runner.store) == ["enqueue", "enqueue"] and second > first
    exe = inner.load("t")
    assert exe is not None and exe.active_path == "A", "enqueue ran the step"
    (claim,) = inner.claim("peek", 0.0, lease=1.0)
    assert claim.priority == 3 and [e.seq for e in claim.outbox] == [first, second]
    inner.release("peek", "t")
    done = runner.work("w1")
    assert done.relayed == 2
    exe = inner.load("t")
    assert exe is not None and (exe.active_path, exe.version) == ("B", 2)  # delivered once
    assert inner.pending_outbox() == []


@pytest.mark.anyio
async def test_async_enqueue_and_a_store_without_enqueue() -> None:
    inner = AsyncDictStore()
    runner = AsyncDurableRunner(inner, defs())
    await runner.create("toggle", execution_id="t")
    seq = await runner.enqueue("t", Event(id="go-1", kind="Go"))
    assert [e.seq for e in await inner.pending_outbox()] == [seq]
    assert (await runner.work("w1")).relayed == 1

    class Old:
        """A third-party store written before enqueue joined the contract."""

    from harel.store.errors import StoreConfigError

    with pytest.raises(StoreConfigError, match="no enqueue"):
        DurableRunner(Old(), defs()).enqueue("t", Event(kind="Go"))  # type: ignore[arg-type]
