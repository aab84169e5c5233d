"""Requeueing a dead letter: the pure rule, the operation, ``harel dead-letters --requeue``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harel import DurableRunner, Event, Execution, definition_from_dsl
from harel.cli import main
from harel.engine.deadletters import (
    DEAD_LETTERS_ID,
    DeadLetter,
    cleared,
    find_letter,
    letters_of,
    requeue_refusal,
    resend_of,
    with_letter,
    without_letter,
)
from harel.engine.requeue import LetterKept, LetterNotFound, NotRequeueable, requeue
from harel.registry import open_store
from harel.store.contract import ExecutionStore
from harel.store.errors import StoreConflict

SINK = """
event Poke { n: int }
machine sink {
  initial Idle
  state Idle {}
  state Poked {}
  from Idle to Poked on Poke
}
"""

DEFS = {"sink": definition_from_dsl(SINK, "sink")}


def _letter(ref: str, **fields: Any) -> DeadLetter:
    values: dict[str, Any] = {
        "ref": ref,
        "target_id": "s",
        "event_kind": "Poke",
        "event_id": "poke-1",
        "error": "ValueError: down",
        "attempts": 3,
        "at": 1.0,
        "event_data": {"n": 1},
    }
    values.update(fields)
    return DeadLetter(**values)


def _quarantine(store: ExecutionStore, *letters: DeadLetter) -> None:
    record = store.load(DEAD_LETTERS_ID)
    for letter in letters:
        record = with_letter(record, letter)
    assert record is not None
    store.commit(record, [])


def _refs(store: ExecutionStore) -> list[str]:
    return [letter.ref for letter in letters_of(store.load(DEAD_LETTERS_ID))[0]]


@pytest.fixture
def url(tmp_path: Path) -> str:
    pytest.importorskip("harel_store_sqlite")
    return f"sqlite:///{tmp_path / 'requeue.db'}"


@pytest.fixture
def store(url: str) -> Iterator[ExecutionStore]:
    opened = open_store(url)
    DurableRunner(opened, DEFS, clock=lambda: 0.0).create("sink", execution_id="s")
    yield opened
    opened.close()


# -- the pure rule -------------------------------------------------------------------------------


def test_without_letter_removes_one_ref_and_decrements_the_total() -> None:
    record = None
    for ref in ("outbox:1", "outbox:2", "outbox:3"):
        record = with_letter(record, _letter(ref))
    assert record is not None
    record = without_letter(record, "outbox:2")
    letters, total = letters_of(record)
    assert [letter.ref for letter in letters] == ["outbox:1", "outbox:3"] and total == 2
    assert record.error is not None and record.error.startswith("2 dead letter(s)")
    same = without_letter(record, "outbox:9")
    assert letters_of(same) == (letters, 2)
    assert find_letter(record, "outbox:3") == _letter("outbox:3")
    assert find_letter(record, "outbox:2") is None and find_letter(None, "outbox:1") is None


def test_which_letters_can_be_requeued() -> None:
    resend = resend_of(_letter("outbox:4"))
    assert not isinstance(resend, str)
    target, event = resend
    assert (target, event.kind, event.id, event.data) == ("s", "Poke", "poke-1", {"n": 1})
    timer = _letter(
        "timer:s:Idle@5.0",
        event_kind="Timeout",
        event_id="timeout:s:Idle:5.0",
        event_data={"path": "Idle", "fire_at": 5.0},
    )
    assert requeue_refusal(timer) is None
    dropped = _letter("outbox:5", event_data=None, note="event data dropped: 9000 characters")
    refusal = requeue_refusal(dropped)
    assert refusal is not None and "9000 characters" in refusal
    assert "harel send s Poke --data" in refusal and "--event-id poke-1" in refusal
    spawn = _letter(
        "spawn:6", target_id="p-1:Split.L:0", event_kind="Start", event_id=None, event_data={}
    )
    refusal = requeue_refusal(spawn)
    assert refusal is not None and "starts nothing" in refusal
    assert "harel purge --id p-1 --force" in refusal and "harel trace p-1" in refusal
    untargeted = requeue_refusal(_letter("outbox:7", target_id=None))
    assert untargeted is not None and "--clear" in untargeted


# -- the operation ---------------------------------------------------------------------------------


def test_requeue_enqueues_first_then_removes_the_letter(store: ExecutionStore) -> None:
    _quarantine(store, _letter("outbox:1"), _letter("outbox:2", event_id="poke-2"))
    done = requeue(store, "outbox:1")
    assert done.removed and done.letter.ref == "outbox:1"
    [entry] = store.pending_outbox()
    assert (entry.seq, entry.target_id, entry.event.id) == (done.seq, "s", "poke-1")
    assert (entry.event.kind, entry.event.data) == ("Poke", {"n": 1})
    assert _refs(store) == ["outbox:2"]
    assert letters_of(store.load(DEAD_LETTERS_ID))[1] == 1
    with pytest.raises(LetterNotFound, match="requeued or cleared already"):
        requeue(store, "outbox:1")
    DurableRunner(store, DEFS, clock=lambda: 0.0).relay()
    exe = store.load("s")
    assert exe is not None and exe.active_path == "Poked"


def test_a_double_requeue_is_delivered_once(store: ExecutionStore) -> None:
    """The requeued event keeps its id: the runner's dedupe marks deliver it once."""
    _quarantine(store, _letter("outbox:1"))
    requeue(store, "outbox:1")
    _quarantine(store, _letter("outbox:1"))  # say another worker recorded it again
    requeue(store, "outbox:1")
    assert [entry.event.id for entry in store.pending_outbox()] == ["poke-1", "poke-1"]
    runner = DurableRunner(store, DEFS, clock=lambda: 0.0)
    runner.relay()
    exe = store.load("s")
    assert exe is not None and (exe.active_path, exe.version) == ("Poked", 2)
    assert store.pending_outbox() == []


def test_refused_letters_are_left_alone(store: ExecutionStore) -> None:
    spawn = _letter("spawn:3", target_id="s:R:0", event_kind="Start", event_id=None)
    gone = _letter("outbox:4", target_id="nobody")
    _quarantine(store, spawn, gone, _letter("outbox:5", event_data=None))
    for ref, words in (("spawn:3", "spawn letter"), ("outbox:4", "no longer stored")):
        with pytest.raises(NotRequeueable, match=words):
            requeue(store, ref)
    with pytest.raises(NotRequeueable, match="harel send"):
        requeue(store, "outbox:5")
    assert store.pending_outbox() == []
    assert _refs(store) == ["spawn:3", "outbox:4", "outbox:5"]


class _Racing:
    """A store whose ``enqueue`` lets another operator act on the record right after it
    (``clear``: empty it; ``busy``: make every later commit of the record conflict)."""

    def __init__(self, store: ExecutionStore, race: str) -> None:
        self.store = store
        self.race = race
        self.conflicts = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def enqueue(self, target_id: str, event: Event, *, priority: int = 0) -> int:
        seq = self.store.enqueue(target_id, event, priority=priority)
        record = self.store.load(DEAD_LETTERS_ID)
        if self.race == "clear" and record is not None:
            self.store.commit(cleared(record), [])
        return seq

    def commit(self, exe: Execution, emits: list[Any], *rest: Any, **options: Any) -> Any:
        if self.race == "busy" and exe.id == DEAD_LETTERS_ID:
            self.conflicts += 1
            raise StoreConflict(exe.id, exe.version, exe.version + 1)
        return self.store.commit(exe, emits, *rest, **options)


def test_a_letter_cleared_meanwhile_is_reported_not_an_error(store: ExecutionStore) -> None:
    _quarantine(store, _letter("outbox:1"))
    done = requeue(_Racing(store, "clear"), "outbox:1")  # type: ignore[arg-type]
    assert not done.removed and "already gone" in done.describe()
    assert len(store.pending_outbox()) == 1


def test_a_record_that_stays_busy_says_the_event_was_requeued(store: ExecutionStore) -> None:
    _quarantine(store, _letter("outbox:1"))
    racing = _Racing(store, "busy")
    with pytest.raises(LetterKept, match=r"was requeued \(outbox entry \d+\).*again"):
        requeue(racing, "outbox:1")  # type: ignore[arg-type]
    assert racing.conflicts == 5 and _refs(store) == ["outbox:1"]
    assert len(store.pending_outbox()) == 1


# -- the command -----------------------------------------------------------------------------------


def test_cli_requeue(store: ExecutionStore, url: str, capsys: pytest.CaptureFixture[str]) -> None:
    spawn = _letter("spawn:2", target_id="s:R:0", event_kind="Start", event_id=None)
    _quarantine(store, _letter("outbox:1"), spawn)
    assert main(["dead-letters", "--store", url, "--requeue", "outbox:1"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("requeued outbox:1: event 'Poke' (id poke-1) for s is outbox entry ")
    assert "harel worker" in err
    assert [entry.event.id for entry in store.pending_outbox()] == ["poke-1"]
    assert main(["dead-letters", "--store", url, "--requeue", "outbox:1"]) == 2
    assert "no dead letter 'outbox:1'" in capsys.readouterr().err
    assert main(["dead-letters", "--store", url, "--requeue", "spawn:2"]) == 2
    assert "harel purge --id s --force" in capsys.readouterr().err
    assert main(["dead-letters", "--store", url, "--requeue", "x", "--clear"]) == 2
    assert "not allowed with" in capsys.readouterr().err
    assert _refs(store) == ["spawn:2"]


class _NoEnqueue:
    """A store written before the contract's ``enqueue``."""

    def __init__(self, store: ExecutionStore) -> None:
        self.load = store.load


def test_a_store_without_enqueue_is_refused_before_any_write(store: ExecutionStore) -> None:
    _quarantine(store, _letter("outbox:1"))
    with pytest.raises(NotRequeueable, match="no enqueue"):
        requeue(_NoEnqueue(store), "outbox:1")  # type: ignore[arg-type]
    assert _refs(store) == ["outbox:1"]
