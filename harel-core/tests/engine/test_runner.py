"""DurableRunner behaviour (engine.md §2, §8 items 1, 4, 5, 6, 8, 9, 10) on memory and SQLite."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from harel import (
    DictStore,
    DurableRunner,
    Event,
    ExecutionAlreadyExists,
    ExecutionNotFound,
    Status,
    StoreConflict,
    definition_from_dsl,
)
from harel.engine import UnknownDefinition
from harel.engine.definition import Definition
from harel.store.contract import ExecutionStore

SNIPPET = (
    "event Go {} machine m { initial A  state A {}  final Done success {}  from A to Done on Go }"
)

INVOICE = """
event Paid {}
machine invoice {
  initial Open
  state Open { timeout 60 }
  final Settled success {}
  final Expired expired {}
  from Open to Settled on Paid
  from Open to Expired on Timeout
}
"""

ONBOARDING = """
event IdOk {}  event IdBad {}  event ScoreReady { score: int }  event Retry {}
machine onboarding {
  initial Checks
  orthogonal Checks {
    state Identity { initial Pending  state Pending {}  final Verified success {}
                     final Refused refused {}
                     from Pending to Verified on IdOk
                     from Pending to Refused on IdBad }
    state Credit   { carry score  initial Waiting  state Waiting {}
                     final Scored success { on enter keep_score }
                     from Waiting to Scored on ScoreReady }
  }
  final Accepted success {}
  state Rejected {}
  from Checks join all to Accepted else to Rejected
  from Rejected to Checks on Retry
}
"""

COUNTER = """
event Tick {}  event Boom {}  event Ping {}
machine counter {
  initial Idle
  state Idle {}
  state Busy { on enter bump  timeout 30 }
  state Broken { on enter explode }
  from Idle to Busy on Tick
  from Busy to Idle on Tick
  from Idle to Broken on Boom
  from Idle to Idle on Ping
}
"""


def keep_score(stm: Any, event: Event | None, **_: Any) -> None:
    assert event is not None
    stm.execution_ctx["score"] = event.data["score"]


def bump(stm: Any, event: Event | None, **_: Any) -> None:
    stm.execution_ctx["n"] = stm.execution_ctx.get("n", 0) + 1
    stm.execution_ctx.setdefault("keys", []).append(stm.idempotency_key)


def explode(stm: Any, event: Event | None, **_: Any) -> None:
    stm.send("somewhere", Event(kind="Never"))
    raise ValueError("card declined")


def defs() -> dict[str, Definition]:
    made = [
        definition_from_dsl(SNIPPET, "m"),
        definition_from_dsl(INVOICE),
        definition_from_dsl(ONBOARDING, actions={"keep_score": keep_score}),
        definition_from_dsl(COUNTER, actions={"bump": bump, "explode": explode}),
    ]
    return {d.id: d for d in made}


class Clock:
    def __init__(self, now: float = 500.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _sqlite(path: Path) -> ExecutionStore:
    sqlite = pytest.importorskip("harel_store_sqlite", reason="harel-store-sqlite not installed")
    store: ExecutionStore = sqlite.SqliteStore(str(path))
    return store


@pytest.fixture(params=["memory", "sqlite"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], Any]]:
    """A factory of stores over ONE dataset (call it again = reopen)."""
    opened: list[Any] = []
    memory = DictStore()

    def make() -> Any:
        store = memory.reopen() if request.param == "memory" else _sqlite(tmp_path / "r.db")
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def runner(make_store: Callable[[], Any], clock: Clock) -> DurableRunner:
    return DurableRunner(make_store(), defs(), clock=clock, trace=True)


def test_snippet_steps(runner: DurableRunner) -> None:
    exe = runner.create("m")
    assert exe.version == 1 and exe.status is Status.RUNNING
    done = runner.process(exe.id, Event(kind="Go"))
    assert (done.status, done.outcome, done.active_path, done.version) == (
        Status.DONE,
        "success",
        "Done",
        2,
    )
    steps = runner.store.read_trace(exe.id)
    assert [(s["index"], s["event_kind"], s["from_path"], s["to_path"]) for s in steps] == [
        (0, "Start", None, "A"),
        (1, "Go", "A", "Done"),
    ]
    assert steps[0]["actions"] == [] and steps[0]["context_out"] == {}
    assert steps[0]["event_data"] == {} and steps[0]["timestamp"] == 500.0


def test_create_rules(runner: DurableRunner) -> None:
    exe = runner.create("m", context={"a": [1]}, execution_id="x1", priority=3)
    assert (exe.id, exe.context, exe.priority) == ("x1", {"a": [1]}, 3)
    with pytest.raises(ExecutionAlreadyExists):
        runner.create("m", execution_id="x1")
    with pytest.raises(UnknownDefinition, match=r"'nope'.*'counter', 'invoice', 'm'"):
        runner.create("nope")
    with pytest.raises(ExecutionNotFound) as info:
        runner.process("missing", Event(kind="Go"))
    assert isinstance(info.value, KeyError)


def test_dedupe_same_event_twice(runner: DurableRunner) -> None:
    exe = runner.create("counter")
    tick = Event(kind="Tick")
    first = runner.process(exe.id, tick)
    again = runner.process(exe.id, tick)
    assert again.version == first.version == 2
    assert again.context == first.context == {"n": 1, "keys": [f"{exe.id}:1:0"]}
    assert len(runner.store.read_trace(exe.id)) == 2


def test_ignored_event_still_commits(runner: DurableRunner) -> None:
    exe = runner.create("m")
    after = runner.process(exe.id, Event(kind="Unknown", data={"x": 1}))
    assert after.version == 2 and after.active_path == "A"
    step = runner.store.read_trace(exe.id)[-1]
    assert (step["event_kind"], step["from_path"], step["to_path"]) == ("Unknown", "A", "A")
    assert step["event_data"] == {"x": 1}
    done = runner.process(exe.id, Event(kind="Go"))
    late = runner.process(exe.id, Event(kind="Go"))
    assert late.version == done.version + 1 and late.status is Status.DONE


def test_invoice_timer_sweep(runner: DurableRunner, clock: Clock) -> None:
    store = runner.store
    exe = runner.create("invoice", execution_id="inv")
    assert store.due_timers(1e12) == [("inv", "Open", 560.0)]
    clock.now = 559.0
    assert runner.fire_due_timers() == 0
    clock.now = 560.0
    assert runner.fire_due_timers() == 1
    done = store.load("inv")
    assert (done.status, done.outcome, done.active_path) == (Status.DONE, "expired", "Expired")
    assert store.is_processed("inv", "timeout:inv:Open:560.0")
    assert runner.fire_due_timers() == 0
    assert store.due_timers(1e12) == []
    # a late Timeout for a state already left changes nothing but still commits
    late = runner.process(exe.id, Event(kind="Timeout", data={"path": "Open"}))
    assert (late.active_path, late.outcome, late.version) == ("Expired", "expired", 3)


def test_paid_cancels_timer(runner: DurableRunner, clock: Clock) -> None:
    runner.create("invoice", execution_id="inv")
    runner.process("inv", Event(kind="Paid"))
    assert runner.store.due_timers(1e12) == []
    clock.now = 10_000.0
    assert runner.fire_due_timers() == 0
    assert runner.store.load("inv").outcome == "success"


def test_sweep_leaves_timers_of_unknown_definitions(
    make_store: Callable[[], Any], clock: Clock
) -> None:
    full = DurableRunner(make_store(), defs(), clock=clock)
    full.create("invoice", execution_id="inv")
    partial = DurableRunner(make_store(), {"m": defs()["m"]}, clock=clock)
    clock.now = 1000.0
    assert partial.fire_due_timers() == 0
    assert partial.store.due_timers(1e12) == [("inv", "Open", 560.0)]
    assert full.fire_due_timers() == 1


def test_onboarding_end_to_end(runner: DurableRunner) -> None:
    store = runner.store
    exe = runner.create("onboarding", execution_id="p")
    ids = ["p:Checks.Identity:0", "p:Checks.Credit:0"]
    assert list(exe.children) == ids and exe.active_path == "Checks"
    for child_id in ids:
        child = store.load(child_id)
        assert (child.parent_id, child.child_id, child.context) == ("p", child_id, {})
    assert store.pending_spawns() == [] and store.pending_outbox() == []
    runner.process("p", Event(kind="IdOk"))
    identity = store.load(ids[0])
    credit = store.load(ids[1])
    assert identity.status is Status.DONE and credit.active_path == "Checks.Credit.Waiting"
    assert credit.version == 2  # the broadcast reached it too
    assert store.load("p").children[ids[0]].finished
    done = runner.process("p", Event(kind="ScoreReady", data={"score": 700}))
    assert done.context["region_results"] == {
        "Checks.Identity": {"outcome": "success"},
        "Checks.Credit": {"outcome": "success", "score": 700},
    }
    assert (done.status, done.outcome, done.active_path) == (Status.DONE, "success", "Accepted")
    last = store.read_trace("p")[-1]
    assert (last["event_kind"], last["from_path"], last["to_path"], last["actions"]) == (
        "Finished",
        "Checks",
        "Accepted",
        ["join all"],
    )
    assert [s["event_kind"] for s in store.read_trace("p")] == ["Start", "Finished", "Finished"]


def test_onboarding_rejected_then_reentered(runner: DurableRunner) -> None:
    runner.create("onboarding", execution_id="p")
    runner.process("p", Event(kind="IdBad"))
    rejected = runner.process("p", Event(kind="ScoreReady", data={"score": 1}))
    assert rejected.active_path == "Rejected" and rejected.status is Status.RUNNING
    again = runner.process("p", Event(kind="Retry"))
    assert list(again.children) == ["p:Checks.Identity:1", "p:Checks.Credit:1"]
    assert runner.store.load("p:Checks.Identity:1").active_path == "Checks.Identity.Pending"


def test_trace_ring_and_trace_off(make_store: Callable[[], Any], clock: Clock) -> None:
    runner = DurableRunner(make_store(), defs(), clock=clock, trace=True, trace_max=3)
    assert runner.store.trace_max == 3
    exe = runner.create("m")
    for _ in range(5):
        runner.process(exe.id, Event(kind="Noise"))
    assert [s["index"] for s in runner.store.read_trace(exe.id)] == [3, 4, 5]
    quiet = DurableRunner(make_store(), defs(), clock=clock)
    other = quiet.create("m")
    quiet.process(other.id, Event(kind="Go"))
    assert quiet.store.read_trace(other.id) == []


def test_context_out_is_a_deep_copy(runner: DurableRunner) -> None:
    exe = runner.create("counter")
    runner.process(exe.id, Event(kind="Tick"))
    runner.process(exe.id, Event(kind="Tick"))
    runner.process(exe.id, Event(kind="Tick"))
    outs = [s["context_out"].get("keys") for s in runner.store.read_trace(exe.id)]
    assert outs == [None, [f"{exe.id}:1:0"], [f"{exe.id}:1:0"], [f"{exe.id}:1:0", f"{exe.id}:3:0"]]
    assert [s["actions"] for s in runner.store.read_trace(exe.id)] == [[], ["bump"], [], ["bump"]]


def test_timer_restart_in_one_event_is_armed_at_new_time(
    runner: DurableRunner, clock: Clock
) -> None:
    exe = runner.create("counter", execution_id="c")
    runner.process(exe.id, Event(kind="Tick"))
    assert runner.store.due_timers(1e12) == [("c", "Busy", 530.0)]
    clock.now = 510.0
    runner.process(exe.id, Event(kind="Tick"))
    assert runner.store.due_timers(1e12) == []
    clock.now = 520.0
    runner.process(exe.id, Event(kind="Tick"))
    assert runner.store.due_timers(1e12) == [("c", "Busy", 550.0)]


def test_action_error_marks_failed_and_commits(runner: DurableRunner) -> None:
    exe = runner.create("counter")
    boom = Event(kind="Boom")
    failed = runner.process(exe.id, boom)
    assert failed.status is Status.FAILED
    assert failed.error == "ValueError: card declined"
    assert failed.version == 2
    assert runner.store.is_processed(exe.id, boom.id)
    assert runner.store.pending_outbox() == [] and runner.store.due_timers(1e12) == []
    step = runner.store.read_trace(exe.id)[-1]
    assert (step["event_kind"], step["actions"]) == ("Boom", ["explode"])
    assert runner.process(exe.id, boom).version == 2


def test_stm_send_and_async_action(make_store: Callable[[], Any], clock: Clock) -> None:
    async def notify(stm: Any, event: Event | None, **inputs: Any) -> None:
        await asyncio.sleep(0)
        stm.send(inputs["to"], Event(id=f"ping-{stm.idempotency_key}", kind="Ping"))

    sender = definition_from_dsl(
        "event Go {} machine s { initial A  state A {} "
        ' final B success { on enter notify(to: "c") }  from A to B on Go }',
        actions={"notify": notify},
    )
    registry = {**defs(), "s": sender}
    runner = DurableRunner(make_store(), registry, clock=clock, trace=True)
    runner.create("counter", execution_id="c")
    exe = runner.create("s")
    runner.process(exe.id, Event(kind="Go"))
    assert runner.store.is_processed("c", f"ping-{exe.id}:1:0")
    assert runner.store.read_trace("c")[-1]["event_kind"] == "Ping"
    assert runner.store.pending_outbox() == []


def test_emit_to_missing_target_is_dropped(make_store: Callable[[], Any], clock: Clock) -> None:
    def lost(stm: Any, event: Event | None, **_: Any) -> None:
        stm.send("ghost", Event(kind="Ping"))

    defn = definition_from_dsl(
        "event Go {} machine s { initial A  state A {}  final B success { on enter lost } "
        " from A to B on Go }",
        actions={"lost": lost},
    )
    runner = DurableRunner(make_store(), {"s": defn}, clock=clock)
    exe = runner.create("s")
    assert runner.process(exe.id, Event(kind="Go")).status is Status.DONE
    assert runner.store.pending_outbox() == []


def test_stale_commit_conflicts_and_process_retries(
    make_store: Callable[[], Any], clock: Clock
) -> None:
    first, second = make_store(), make_store()
    runner = DurableRunner(first, defs(), clock=clock)
    exe = runner.create("counter", execution_id="c")
    stale = second.load("c")
    runner.process("c", Event(kind="Tick"))
    with pytest.raises(StoreConflict):
        second.commit(stale, [])
    assert stale.version == exe.version

    class Racing:
        """Delivers a rival event through another store right before our first commit."""

        def __init__(self, inner: Any) -> None:
            self.inner = inner
            self.raced = False

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

        def commit(self, exe: Any, *args: Any, **kwargs: Any) -> None:
            if not self.raced:
                self.raced = True
                DurableRunner(second, defs(), clock=clock).process("c", Event(kind="Tick"))
            self.inner.commit(exe, *args, **kwargs)

    racing = DurableRunner(Racing(first), defs(), clock=clock)  # type: ignore[arg-type]
    after = racing.process("c", Event(kind="Tick"))
    assert after.version == 4 and after.context["n"] == 2  # v3 = rival, v4 = ours
    with pytest.raises(ExecutionAlreadyExists):
        racing.create("counter", execution_id="c")


def test_process_gives_up_after_conflict_retries(
    make_store: Callable[[], Any], clock: Clock
) -> None:
    class AlwaysLosing:
        def __init__(self, inner: Any) -> None:
            self.inner = inner
            self.commits = 0

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

        def commit(self, exe: Any, *args: Any, **kwargs: Any) -> None:
            self.commits += 1
            raise StoreConflict(exe.id, exe.version, exe.version + 1)

    store = make_store()
    DurableRunner(store, defs(), clock=clock).create("m", execution_id="x")
    losing = AlwaysLosing(store)
    runner = DurableRunner(losing, defs(), clock=clock, conflict_retries=2)  # type: ignore[arg-type]
    with pytest.raises(StoreConflict):
        runner.process("x", Event(kind="Go"))
    assert losing.commits == 3


def test_run_until_idle(runner: DurableRunner, clock: Clock) -> None:
    runner.create("invoice", execution_id="a")
    clock.now = 600.0
    runner.create("invoice", execution_id="b")
    clock.now = 10_000.0
    assert runner.run_until_idle() == 2
    assert runner.run_until_idle() == 0
    assert {runner.store.load(i).outcome for i in "ab"} == {"expired"}


def test_run_until_idle_reports_undeliverable_entries(
    make_store: Callable[[], Any], clock: Clock
) -> None:
    full = DurableRunner(make_store(), defs(), clock=clock)
    full.create("onboarding", execution_id="p", _relay=False)
    partial = DurableRunner(make_store(), {"m": defs()["m"]}, clock=clock)
    with pytest.raises(RuntimeError, match="definition registered"):
        partial.run_until_idle()
    assert len(partial.store.pending_spawns()) == 2  # left for a runner that knows them
    assert full.run_until_idle() == 0
    assert full.store.load("p:Checks.Credit:0") is not None


EARLY_EXIT = """
event Go {}  event Poke {}
machine early {
  initial Fork
  orthogonal Fork {
    timeout 5
    state Left  { initial L  state L {}  final LDone success {}  from L to LDone on Go }
    state Right { initial R  state R {}  final RDone success {}  from R to RDone on Go }
  }
  state Escaped {}
  final Poked success {}
  from Fork to Escaped on Timeout
  from Escaped to Poked on Poke
}
"""

RESEND = """
event Go {}
machine resend {
  initial Fork
  orthogonal Fork {
    state Only { initial A  state A {}  final B success {}  from A to B on Go }
  }
  state Joined {}
  final Wrong failed {}
  from Fork to Joined
  from Joined to Wrong on Go
}
"""


def test_resent_broadcast_never_falls_through_to_the_parent(make_store: Any, clock: Clock) -> None:
    runner = DurableRunner(make_store(), {"resend": definition_from_dsl(RESEND)}, clock=clock)
    runner.create("resend", execution_id="p")
    go = Event(kind="Go")
    joined = runner.process("p", go)
    assert joined.active_path == "Joined"
    again = runner.process("p", go)  # the caller retries the same event after the join
    assert again.active_path == "Joined" and again.version == joined.version
    fresh = runner.process("p", Event(kind="Go"))  # a new event does reach the parent now
    assert fresh.active_path == "Wrong"


def test_parent_that_left_its_fork_early_gets_its_own_events(make_store: Any, clock: Clock) -> None:
    runner = DurableRunner(make_store(), {"early": definition_from_dsl(EARLY_EXIT)}, clock=clock)
    runner.create("early", execution_id="p")
    clock.now += 5
    assert runner.fire_due_timers() == 1
    parent = runner.store.load("p")
    assert parent.active_path == "Escaped"
    assert not any(child.finished for child in parent.children.values())  # regions still run
    poked = runner.process("p", Event(kind="Poke"))
    assert (poked.active_path, poked.status) == ("Poked", Status.DONE)
    for child_id in parent.children:
        assert runner.store.load(child_id).version == 1  # Poke was not broadcast to them


def test_engine_error_marks_the_execution_failed(make_store: Any, clock: Clock) -> None:
    text = """event Go {} machine t { initial A  state A {}
              state B { timeout context delay }  from A to B on Go }"""
    runner = DurableRunner(make_store(), {"t": definition_from_dsl(text)}, clock=clock)
    runner.create("t", execution_id="x", context={"delay": "soon"})
    go = Event(kind="Go")
    failed = runner.process("x", go)
    assert failed.status is Status.FAILED
    assert failed.error is not None and "delay" in failed.error
    assert runner.store.is_processed("x", go.id)
    assert runner.store.due_timers(1e12) == []
