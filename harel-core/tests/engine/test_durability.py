"""Durability: the crash matrix (engine.md §2.8, §8 item 7), restarts over every installed
backend (a new store object; for SQLite also a new process), and two concurrent runners."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from harel import DurableRunner, Event, Status, StoreConflict, definition_from_dsl
from harel.conformance import backend_test_url_or_skip, usable_backend_names
from harel.engine.definition import Definition
from harel.engine.dsl import definition_from_dsl_file
from harel.examples import ORDER_STM
from harel.registry import harness_for_url
from harel.store.errors import StoreUnavailable

sqlite = pytest.importorskip("harel_store_sqlite", reason="harel-store-sqlite not installed")

MACHINES = """
event Go {}  event Done {}  event Add {}
machine fork {
  initial Split
  orthogonal Split {
    state Left  { initial L1  state L1 { on enter mark }  final L2 success {}
                  from L1 to L2 on Done }
    state Right { initial R1  state R1 {}  final R2 success {}  from R1 to R2 on Done }
  }
  final Joined success {}
  from Split to Joined
}
machine instant {
  initial Split
  orthogonal Split {
    state Left  { initial L  final L success {} }
    state Right { initial R  final R success {} }
  }
  final Joined success {}
  from Split to Joined
}
machine tally {
  initial Even
  state Even { on enter bump }
  state Odd  { on enter bump }
  from Even to Odd on Add
  from Odd to Even on Add
}
machine timed {
  initial Wait
  state Wait { timeout 10  on enter mark }
  final Late expired {}
  from Wait to Late on Timeout
}
machine sleepy {
  initial Wait
  state Wait { timeout 10 }
  final Woken success {}
  from Wait to Woken on Go
}
"""

KEYS: list[str] = []


def mark(stm: Any, event: Event | None, **_: Any) -> None:
    KEYS.append(stm.idempotency_key)


def bump(stm: Any, event: Event | None, **_: Any) -> None:
    if event is not None:
        stm.execution_ctx["n"] = stm.execution_ctx.get("n", 0) + 1


def defs() -> dict[str, Definition]:
    actions = {"mark": mark, "bump": bump}
    return {
        name: definition_from_dsl(MACHINES, name, actions=actions)
        for name in ("fork", "instant", "tally", "timed", "sleepy")
    }


class Crash(BaseException):
    """A simulated process death: not an ``Exception``, so nothing in the runner catches it."""


class CrashingStore:
    """Wraps a store; raises :class:`Crash` before (or after) the ``nth`` call of ``method``."""

    def __init__(self, inner: Any, method: str, *, after: bool = False, nth: int = 1) -> None:
        self.inner, self.method, self.after, self.left = inner, method, after, nth

    def __getattr__(self, name: str) -> Any:
        real = getattr(self.inner, name)
        if name != self.method:
            return real

        def call(*args: Any, **kwargs: Any) -> Any:
            self.left -= 1
            if self.left == 0 and not self.after:
                raise Crash(name)
            result = real(*args, **kwargs)
            if self.left == 0:
                raise Crash(name)
            return result

        return call


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Callable[[], Any]]:
    opened: list[Any] = []

    def open_store() -> Any:
        opened.append(sqlite.SqliteStore(str(tmp_path / "crash.db")))
        return opened[-1]

    yield open_store
    for store in opened:
        store.close()


def fresh(db: Callable[[], Any], **kwargs: Any) -> DurableRunner:
    return DurableRunner(db(), defs(), clock=lambda: 100.0, trace=True, **kwargs)


def crashing(db: Callable[[], Any], method: str, **kwargs: Any) -> DurableRunner:
    return DurableRunner(CrashingStore(db(), method, **kwargs), defs(), clock=lambda: 100.0)  # type: ignore[arg-type]


def assert_drained(store: Any) -> None:
    assert store.pending_outbox() == [] and store.pending_spawns() == []


def test_crash_while_actions_run_reuses_idempotency_keys(db: Callable[[], Any]) -> None:
    runner = fresh(db)
    exe = runner.create("tally", execution_id="t")
    add = Event(kind="Add")

    def dying(stm: Any, event: Event | None, **_: Any) -> None:
        KEYS.append(stm.idempotency_key)
        raise Crash

    dying_defs = {"tally": definition_from_dsl(MACHINES, "tally", actions={"bump": dying})}
    with pytest.raises(Crash):
        DurableRunner(db(), dying_defs).process(exe.id, add)
    assert db().load("t").version == 1 and not db().is_processed("t", add.id)
    KEYS.clear()
    done = fresh(db).process("t", add)
    assert done.context == {"n": 1} and done.version == 2


@pytest.mark.parametrize("after", [False, True], ids=["before-commit", "after-commit"])
def test_crash_around_commit_then_resend(db: Callable[[], Any], after: bool) -> None:
    fresh(db).create("tally", execution_id="t")
    add = Event(kind="Add")
    with pytest.raises(Crash):
        crashing(db, "commit", after=after).process("t", add)
    assert db().load("t").version == (2 if after else 1)
    runner = fresh(db)
    again = runner.process("t", add)
    assert again.version == 2 and again.context == {"n": 1}
    assert runner.process("t", add).version == 2  # caller re-sends after success: no-op


def test_crash_after_commit_before_relay(db: Callable[[], Any]) -> None:
    runner = fresh(db)
    runner.create("fork", execution_id="p", _relay=False)
    assert len(db().pending_spawns()) == 2 and db().load("p:Split.Left:0") is None
    restarted = fresh(db)
    restarted.recover()
    assert_drained(db())
    restarted.process("p", Event(kind="Done"), _relay=False)
    assert len(db().pending_outbox()) == 2  # both regions' Finished, not yet delivered
    fresh(db).recover()
    parent = db().load("p")
    assert (parent.status, parent.active_path, parent.version) == (Status.DONE, "Joined", 3)
    assert_drained(db())
    assert [s["event_kind"] for s in db().read_trace("p")] == ["Start", "Finished", "Finished"]


def test_process_runs_pending_spawns_before_broadcast(db: Callable[[], Any]) -> None:
    fresh(db).create("fork", execution_id="p", _relay=False)
    fresh(db).process("p", Event(kind="Done"))
    assert db().load("p").status is Status.DONE
    assert_drained(db())


def test_crash_after_child_created_before_ack(db: Callable[[], Any]) -> None:
    with pytest.raises(Crash):
        DurableRunner(CrashingStore(db(), "ack_spawn"), defs()).create("fork", execution_id="p")  # type: ignore[arg-type]
    left = db().load("p:Split.Left:0")
    assert left is not None and left.version == 1
    fresh(db).recover()
    assert db().load("p:Split.Left:0").version == 1  # acked only, not re-created
    assert db().load("p:Split.Right:0").version == 1
    assert_drained(db())
    listed = db().list_executions(limit=10).items
    assert sorted(s.id for s in listed) == ["p", "p:Split.Left:0", "p:Split.Right:0"]


def test_crash_after_outbox_delivery_before_ack(db: Callable[[], Any]) -> None:
    fresh(db).create("fork", execution_id="p")
    with pytest.raises(Crash):
        crashing(db, "ack_outbox").process("p", Event(kind="Done"))
    before = db().load("p")
    assert before.version == 2 and len(db().pending_outbox()) == 2
    fresh(db).recover()
    after = db().load("p")
    assert after.status is Status.DONE and after.version == 3  # the first Finished: not redone
    assert_drained(db())


def test_region_finished_on_start_then_crash(db: Callable[[], Any]) -> None:
    with pytest.raises(Crash):
        crashing(db, "ack_spawn", after=True).create("instant", execution_id="p")
    assert db().load("p").children["p:Split.Left:0"].finished is False
    assert db().load("p:Split.Left:0").status is Status.DONE
    assert len(db().pending_outbox()) == 1  # Left's Finished
    fresh(db).recover()
    parent = db().load("p")
    assert parent.status is Status.DONE and parent.active_path == "Joined"
    assert all(child.finished for child in parent.children.values())
    assert_drained(db())


def test_a_fired_timer_is_removed_by_the_steps_own_commit(db: Callable[[], Any]) -> None:
    # "sleepy" has no Timeout handler: the step changes nothing but the timer's row, and that
    # removal rides in the step's commit (one write per fired timer: no delete_timer call)
    fresh(db).create("sleepy", execution_id="w")
    runner = DurableRunner(CrashingStore(db(), "delete_timer"), defs(), clock=lambda: 200.0)  # type: ignore[arg-type]
    assert runner.fire_due_timers() == 1
    exe = db().load("w")
    assert exe.version == 2 and "Wait" not in exe.armed_timers
    assert db().due_timers(1e9) == []
    assert runner.fire_due_timers() == 0


def test_sweep_crash_then_next_sweep(db: Callable[[], Any]) -> None:
    fresh(db).create("sleepy", execution_id="w")
    late = DurableRunner(CrashingStore(db(), "commit"), defs(), clock=lambda: 200.0)  # type: ignore[arg-type]
    with pytest.raises(Crash):
        late.fire_due_timers()
    assert db().load("w").version == 1
    assert db().due_timers(1e9) == [("w", "Wait", 110.0)]
    sweeper = DurableRunner(db(), defs(), clock=lambda: 200.0, trace=True)
    assert sweeper.fire_due_timers() == 1
    assert db().load("w").version == 2  # delivered exactly once
    assert db().due_timers(1e9) == []
    assert sweeper.fire_due_timers() == 0


def test_timeout_sweep_on_sqlite(db: Callable[[], Any]) -> None:
    fresh(db).create("timed", execution_id="w")
    sweeper = DurableRunner(db(), defs(), clock=lambda: 200.0, trace=True)
    assert sweeper.fire_due_timers() == 1
    exe = db().load("w")
    assert (exe.status, exe.outcome, exe.version) == (Status.DONE, "expired", 2)
    assert db().due_timers(1e9) == []
    assert [s["event_kind"] for s in db().read_trace("w")] == ["Start", "Timeout"]


# -- restart over every backend -----------------------------------------------------------


def _harness(backend: str, tmp: Path) -> Any:
    return harness_for_url(backend_test_url_or_skip(backend, tmp), tmp)


STEPS: list[tuple[str, Any]] = [
    ("process", Event(id="c1", kind="Confirm")),
    ("process", Event(id="p1", kind="Pay", data={"amount": 9.5})),
    ("clock", 1300.0),
    ("sweep", None),
    ("process", Event(id="k1", kind="Pack")),
    ("clock", 9000.0),
    ("sweep", None),
]


def _run(
    open_store: Callable[[], Any],
    steps: list[tuple[str, Any]],
    clock: list[float],
    *,
    reopen: bool = True,
) -> None:
    """Apply ``steps``; with ``reopen`` each on a new store object, closed afterwards."""
    order = {"order": definition_from_dsl_file(ORDER_STM)}
    for op, arg in steps:
        if op == "clock":
            clock[0] = arg
            continue
        store = open_store()
        runner = DurableRunner(store, order, clock=lambda: clock[0], trace=True)
        if op == "create":
            runner.create("order", execution_id="o")
        elif op == "process":
            runner.process("o", arg)
        else:
            runner.recover()
            runner.fire_due_timers()
        if reopen:
            store.close()


def _snapshot(store: Any) -> dict[str, Any]:
    exe = store.load("o")
    out = {"o": (exe.model_dump(mode="json"), store.read_trace("o"))}
    for child_id in exe.children:
        out[child_id] = (store.load(child_id).model_dump(mode="json"), store.read_trace(child_id))
    out["pending"] = [store.pending_outbox(), store.pending_spawns(), store.due_timers(1e18)]
    return out


@pytest.mark.parametrize("backend", usable_backend_names())
def test_restart_equals_uninterrupted_run(backend: str, tmp_path: Path) -> None:
    straight, restarted = _harness(backend, tmp_path / "a"), _harness(backend, tmp_path / "b")
    try:
        steps = [("create", None), *STEPS]
        one = straight.open_sync()  # one store object for the whole run
        _run(lambda: one, steps, [1000.0], reopen=False)
        expected = _snapshot(one)
        one.close()
        _run(restarted.open_sync, steps, [1000.0])  # a new store object for every step
        check = restarted.open_sync()
        assert _snapshot(check) == expected
        check.close()
    finally:
        straight.destroy()
        restarted.destroy()
    root = expected["o"][0]
    assert (root["status"], root["outcome"], root["active_path"]) == (
        "DONE",
        "success",
        "Delivered",
    )
    assert root["context"]["region_results"]["Fulfilment.Payment"] == {
        "outcome": "success",
        "amount": 9.5,
    }
    assert expected["pending"] == [[], [], []]


CONTINUE = """
import json, sys
from harel import DurableRunner, Event, SqliteStore
from harel.engine.dsl import definition_from_dsl_file
from harel.examples import ORDER_STM
path, steps = sys.argv[1], json.loads(sys.argv[2])
clock = [1000.0]
order = {"order": definition_from_dsl_file(ORDER_STM)}
for op, arg in steps:
    if op == "clock":
        clock[0] = arg
        continue
    store = SqliteStore(path)
    runner = DurableRunner(store, order, clock=lambda: clock[0], trace=True)
    if op == "process":
        runner.process("o", Event(**arg))
    else:
        runner.recover()
        runner.fire_due_timers()
    store.close()
print("ok")
"""


@pytest.mark.slow
def test_sqlite_new_process_continues(tmp_path: Path) -> None:
    path = str(tmp_path / "two.db")
    reference = sqlite.SqliteStore(str(tmp_path / "ref.db"))
    steps = [("create", None), *STEPS]
    _run(lambda: reference, steps, [1000.0], reopen=False)
    first_half, second_half = steps[:3], steps[3:]
    _run(lambda: sqlite.SqliteStore(path), first_half, [1000.0])
    wire = [
        (op, arg.model_dump(mode="json") if isinstance(arg, Event) else arg)
        for op, arg in second_half
    ]
    done = subprocess.run(
        [sys.executable, "-c", CONTINUE, path, json.dumps([("clock", 1000.0), *wire])],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
    store = sqlite.SqliteStore(path)
    try:
        assert _snapshot(store) == _snapshot(reference)
        assert store.load("o").outcome == "success"
    finally:
        store.close()
        reference.close()


# -- two runners on one SQLite file ---------------------------------------------------------


def test_two_runners_in_threads_apply_each_event_once(tmp_path: Path) -> None:
    path = str(tmp_path / "race.db")
    setup = sqlite.SqliteStore(path)
    DurableRunner(setup, defs()).create("tally", execution_id="t")
    events = [Event(id=f"add-{i}", kind="Add") for i in range(40)]
    errors: list[BaseException] = []
    attempts = [0, 0]

    def deliver(worker: int) -> None:
        store = sqlite.SqliteStore(path)
        runner = DurableRunner(store, defs(), conflict_retries=2)
        try:
            order = events if worker == 0 else events[::-1]
            for event in order:
                while True:
                    attempts[worker] += 1
                    try:
                        runner.process("t", event)
                        break
                    except (StoreConflict, StoreUnavailable):
                        continue  # the documented caller contract: re-send the same event
        except BaseException as err:  # pragma: no cover - reported below
            errors.append(err)
        finally:
            store.close()

    threads = [threading.Thread(target=deliver, args=(i,)) for i in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors
    final = setup.load("t")
    assert final.context == {"n": 40} and final.version == 41
    assert final.processed_events == 40
    assert all(setup.is_processed("t", event.id) for event in events)
    setup.close()
