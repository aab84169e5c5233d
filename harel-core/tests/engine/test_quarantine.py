"""Poison never stops a worker (issue 7 §2, engine part): an outbox entry, a spawn entry or a
timer whose delivery keeps failing, an execution that cannot be loaded and a relay record
that cannot be decoded are set aside (dead letters), logged, and the rest is served.

Poison is made with the real engine and real stores: an action that leaves a value JSON
cannot hold (a set) makes every commit of that step fail with ``InvalidPayload``; damaged
records are written into the SQLite file with ``sqlite3`` as an outside hand would.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harel import DurableRunner, Event, Execution, Status, definition_from_dsl
from harel.cli import main
from harel.engine.deadletters import DEAD_LETTERS_ID, KEEP, DeadLetter, letters_of, with_letter
from harel.engine.worker import Worker
from harel.registry import open_store
from harel.store.contract import ExecutionStore

SINK = """
event Poke {}
event Bad {}
machine sink {
  initial Idle
  state Idle { timeout 5 }
  state Poked {}
  state Broken { on enter poison }
  final Late success {}
  from Idle to Poked on Poke
  from Idle to Broken on Bad
  from Idle to Late on Timeout
}
machine forker {
  initial Split
  orthogonal Split {
    state L { initial L1  state L1 { on enter poison } }
    state R { initial R1  state R1 {} }
  }
}
"""


def poison(stm: Any, event: Event | None, **_: Any) -> None:
    """Leave a value in the context that no store can encode: every commit of the step fails."""
    stm.execution_ctx["bad"] = {1, 2}


DEFS = {name: definition_from_dsl(SINK, name, actions={"poison": poison}) for name in ("sink",)}


@pytest.fixture(params=["memory", "sqlite"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "memory":
        return f"memory://quarantine-{id(request)}"
    pytest.importorskip("harel_store_sqlite")
    return f"sqlite:///{tmp_path / 'q.db'}"


@pytest.fixture
def store(url: str) -> Iterator[ExecutionStore]:
    opened = open_store(url)
    yield opened
    opened.close()


def _emit(store: ExecutionStore, *emits: tuple[str, Event]) -> None:
    """A real commit whose outbox holds ``emits`` (as an upstream execution's step would)."""
    store.commit(Execution(definition_id="upstream"), list(emits))


def _letters(store: ExecutionStore) -> list[DeadLetter]:
    return letters_of(store.load(DEAD_LETTERS_ID))[0]


def test_a_poisoned_outbox_entry_is_quarantined_and_the_rest_delivered(
    store: ExecutionStore, caplog: pytest.LogCaptureFixture
) -> None:
    clock = [0.0]  # each round one second later: a group left for later waits a second
    runner = DurableRunner(store, DEFS, clock=lambda: clock[0])
    for name in ("s1", "s2", "s3"):
        runner.create("sink", execution_id=name)
    _emit(
        store,
        ("s1", Event(id="p1", kind="Poke")),
        ("s2", Event(id="b2", kind="Bad", data={"why": "poison"})),
        ("s3", Event(id="p3", kind="Poke")),
    )
    worker = Worker(runner, poll=0)
    with caplog.at_level(logging.WARNING):
        worker.run_round()
        assert store.load("s1").active_path == "Poked"
        assert store.load("s3").active_path == "Poked"
        assert [entry.target_id for entry in store.pending_outbox()] == ["s2"]  # attempt 1
        assert worker.stats.quarantined == 0
        clock[0] += 1.0
        worker.run_round()
        clock[0] += 1.0
        worker.run_round()  # attempt 3: quarantined
    assert store.pending_outbox() == []
    assert worker.stats.quarantined == 1 and worker.stats.errors == 0
    s2 = store.load("s2")
    assert (s2.status, s2.active_path, s2.version) == (Status.RUNNING, "Idle", 1)  # untouched
    [letter] = _letters(store)
    assert letter.ref.startswith("outbox:") and letter.target_id == "s2"
    assert (letter.event_kind, letter.event_id, letter.attempts) == ("Bad", "b2", 3)
    assert letter.event_data == {"why": "poison"} and "InvalidPayload" in letter.error
    assert "retrying later" in caplog.text and "quarantined as a dead letter" in caplog.text
    record = store.load(DEAD_LETTERS_ID)
    assert record.status is Status.FAILED and "1 dead letter" in (record.error or "")


def test_process_and_create_are_not_blocked_by_poison_elsewhere(store: ExecutionStore) -> None:
    runner = DurableRunner(store, DEFS, clock=lambda: 0.0, quarantine_after=100)
    runner.create("sink", execution_id="victim")
    _emit(store, ("victim", Event(id="bad", kind="Bad")))
    # both relay inline: the poisoned entry is retried, never raised to unrelated callers
    created = runner.create("sink", execution_id="other")
    assert created.version == 1 and created.active_path == "Idle"
    assert runner.process("other", Event(kind="Poke")).active_path == "Poked"
    assert len(store.pending_outbox()) == 1


def test_a_poisoned_timer_is_quarantined_and_healthy_timers_fire(store: ExecutionStore) -> None:
    defs = {
        "sink": definition_from_dsl(
            SINK.replace("final Late success {}", "state Late { on enter poison }"),
            "sink",
            actions={"poison": poison},
        )
    }
    seeding = DurableRunner(store, DEFS, clock=lambda: 0.0)
    seeding.create("sink", execution_id="healthy")
    seeding.create("sink", execution_id="doomed")
    late = DurableRunner(store, defs, clock=lambda: 100.0, retry_after=0)
    healthy = DurableRunner(store, DEFS, clock=lambda: 100.0)
    # "doomed" times out under the poisoned definition; the healthy runner fires the other
    worker = Worker(late, poll=0)
    for _ in range(3):
        worker.run_round()
    assert worker.stats.quarantined == 2  # both timers fail under the poisoned definition
    assert store.due_timers(1e18) == []
    refs = sorted(letter.ref for letter in _letters(store))
    assert refs[0].startswith("timer:doomed:Idle@") and refs[1].startswith("timer:healthy:Idle@")
    assert store.load("doomed").active_path == "Idle"
    # a fresh timer on a healthy execution fires normally
    seeding.create("sink", execution_id="fresh")
    assert Worker(healthy, poll=0).run(once=True).fired == 1
    assert store.load("fresh").status is Status.DONE


def test_a_spawn_whose_child_cannot_start_is_quarantined(store: ExecutionStore) -> None:
    defs = {"forker": definition_from_dsl(SINK, "forker", actions={"poison": poison})}
    runner = DurableRunner(store, defs, quarantine_after=5)
    runner.create("forker", execution_id="f")  # the Left region's start keeps failing
    assert len(store.pending_spawns()) == 1
    for _ in range(5):
        runner.relay()
    assert store.pending_spawns() == []
    [letter] = _letters(store)
    assert letter.ref.startswith("spawn:") and letter.target_id == "f:Split.L:0"
    assert store.load("f:Split.R:0") is not None and store.load("f:Split.L:0") is None


def test_worker_survives_every_store_error_and_backs_off_when_unavailable(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("harel_store_sqlite")
    path = tmp_path / "w.db"
    store = open_store(f"sqlite:///{path}")
    runner = DurableRunner(store, DEFS, clock=lambda: 100.0)
    worker = Worker(runner, poll=0.01, max_backoff=0.08)
    store.close()  # every later call fails: the worker must keep going
    with caplog.at_level(logging.WARNING):
        for _ in range(5):
            assert worker.run_round() == 0
    assert worker.stats.rounds == 5
    assert worker.stats.unavailable + worker.stats.errors >= 5
    assert "is closed" in caplog.text and "Traceback" not in caplog.text


def test_backoff_doubles_up_to_the_cap() -> None:
    worker = Worker(DurableRunner(open_store("memory://"), DEFS), poll=0.5, max_backoff=3.0)
    assert worker.backoff() == 0.0
    pauses = []
    for streak in range(1, 6):
        worker._unavailable_streak = streak
        pauses.append(worker.backoff())
    for pause, expected in zip(pauses, [0.5, 1.0, 2.0, 3.0, 3.0], strict=True):
        assert expected * 0.75 <= pause <= expected * 1.25


def _damage(path: Path, sql: str, *params: object) -> None:
    with sqlite3.connect(path) as db:
        assert db.execute(sql, params).rowcount == 1


def test_unloadable_execution_and_undecodable_outbox_record(tmp_path: Path) -> None:
    pytest.importorskip("harel_store_sqlite")
    path = tmp_path / "damaged.db"
    store = open_store(f"sqlite:///{path}")
    runner = DurableRunner(store, DEFS, clock=lambda: 0.0)
    for name in ("broken", "fine"):
        runner.create("sink", execution_id=name)
    _emit(store, ("broken", Event(id="e1", kind="Poke")), ("fine", Event(id="e2", kind="Poke")))
    _damage(path, "UPDATE executions SET data = ? WHERE id = ?", '{"half', "broken")
    clock = [100.0]  # a group left for later is claimable a second later
    worker = Worker(DurableRunner(store, DEFS, clock=lambda: clock[0]), poll=0)
    for _ in range(3):
        worker.run_round()
        clock[0] += 1.0
    assert store.load("fine").status is Status.DONE  # its Poke, then its timer
    assert [letter.target_id for letter in _letters(store)] == ["broken", "broken"]
    assert {letter.ref.split(":")[0] for letter in _letters(store)} == {"outbox", "timer"}
    assert store.pending_outbox() == [] and store.due_timers(1e18) == []

    # an outbox record that cannot be decoded: a claim still serves every other group (the
    # timer fires) and the damaged entry fails like poison until it is quarantined
    runner.create("sink", execution_id="later")
    _emit(store, ("fine", Event(id="e3", kind="Poke")))
    _damage(path, "UPDATE outbox SET event = ? WHERE target_id = ?", "not json", "fine")
    later = Worker(DurableRunner(store, DEFS, clock=lambda: 200.0, retry_after=0), poll=0)
    stats = later.run(once=True)
    assert stats.fired == 1 and stats.quarantined == 1
    assert store.load("later").status is Status.DONE
    damaged = [letter for letter in _letters(store) if letter.target_id == "fine"]
    assert len(damaged) == 1 and "StoreCorrupted" in damaged[0].error
    assert store.pending_outbox() == []
    store.close()


def test_create_never_raises_after_its_commit(store: ExecutionStore) -> None:
    runner = DurableRunner(store, DEFS, clock=lambda: 0.0)
    # refused before anything is written: nothing stored, the error says what is wrong
    with pytest.raises(ValueError, match="bad"):
        DurableRunner(
            store,
            {
                "sink": definition_from_dsl(
                    SINK.replace("state Idle { timeout 5 }", "state Idle { on enter poison }"),
                    "sink",
                    actions={"poison": poison},
                )
            },
        ).create("sink", execution_id="refused")
    assert store.load("refused") is None
    # after the commit, a failing relay is logged and the committed copy returned
    _emit(store, ("nobody-known", Event(kind="Poke")))
    exe = runner.create("sink", execution_id="ok")
    assert (exe.id, exe.version) == ("ok", 1)


def test_dead_letter_record_keeps_the_newest() -> None:
    record = None
    for number in range(KEEP + 5):
        record = with_letter(record, DeadLetter(f"outbox:{number}", "t", "K", None, "E", 3, 1.0))
    letters, total = letters_of(record)
    assert total == KEEP + 5 and len(letters) == KEEP
    assert letters[0].ref == "outbox:5" and letters[-1].ref == f"outbox:{KEEP + 4}"
    json.dumps(record.context)  # plain JSON: any store holds it


def test_cli_lists_and_clears_dead_letters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("harel_store_sqlite")
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    store = open_store(url)
    runner = DurableRunner(store, DEFS, clock=lambda: 0.0, quarantine_after=1)
    runner.create("sink", execution_id="s")
    _emit(store, ("s", Event(id="b", kind="Bad", data={"n": 1})))
    runner.relay()
    assert main(["dead-letters", "--store", url]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["REF", "TARGET", "EVENT", "EVENT"]
    assert lines[1].split()[1:5] == ["s", "Bad", "b", "1"] and "InvalidPayload" in lines[1]
    assert main(["dead-letters", "--store", url, "--json"]) == 0
    [letter] = json.loads(capsys.readouterr().out)
    assert letter["event_data"] == {"n": 1}
    assert main(["list", "--store", url, "--status", "FAILED"]) == 0
    assert DEAD_LETTERS_ID in capsys.readouterr().out
    assert main(["dead-letters", "--store", url, "--clear"]) == 0
    assert capsys.readouterr().out.strip() == "cleared 1 dead letter(s)"
    assert main(["dead-letters", "--store", url]) == 0
    assert capsys.readouterr().out.strip() == "no dead letters"
    store.close()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_the_async_runner_quarantines_too() -> None:
    from harel import AsyncDurableRunner
    from harel.registry import open_async_store

    store = await open_async_store("memory://")
    runner = AsyncDurableRunner(store, DEFS, quarantine_after=2)
    await runner.create("sink", execution_id="a")
    await store.commit(Execution(definition_id="upstream"), [("a", Event(id="x", kind="Bad"))])
    assert await runner.relay() == 0  # attempt 1: left
    assert await runner.relay() == 1  # attempt 2: quarantined and acked
    assert await store.pending_outbox() == []
    [letter] = letters_of(await store.load(DEAD_LETTERS_ID))[0]
    assert (letter.target_id, letter.event_id, letter.attempts) == ("a", "x", 2)
