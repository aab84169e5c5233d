"""The layout format: created, upgraded in place from the previous formats, or refused.

The previous-format directories are written by hand here, byte for byte as their releases wrote
them: format 2 (release 0.1: no ``written_by``, no quarantine, no receipts in ``state.json``),
format 3 (``written_by`` and the quarantine, no receipt rings) and format 4 (receipt rings, no
work rows: written before claims).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from harel import Event, Execution
from harel.store.common.claims import relay_due
from harel.store.common.codec import encode_event, encode_execution
from harel.store.errors import SchemaVersionError
from harel_example_jsondir import JsonDirStore, _schema


def _files(directory: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(directory)): path.read_bytes()
        for path in sorted(directory.rglob("*"))
        if path.is_file() and path.name != _schema.LOCK
    }


def _write(directory: Path, relative: str, data: object) -> None:
    path = directory / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, separators=(",", ":")), encoding="utf-8")


_Old = Callable[[Path], Path]
"""Writes an older-format directory at the path and returns it."""


def format_2_directory(directory: Path) -> Path:
    """A directory as format 2 left it: one execution with a mark, a timer, a pending outbox
    entry, a spawn intent and a trace step."""
    exe = Execution(id="old", definition_id="d", version=2, context={"n": 1})
    row = {
        "definition_id": "d",
        "status": "PENDING",
        "outcome": None,
        "active_path": None,
        "version": 2,
        "parent_id": None,
        "updated_at": 1000.5,
    }
    state = {
        "format": 2,
        "next_seq": 3,
        "executions": {"old": row},
        "outbox": [[1, "old", encode_event(Event(id="ev-1", kind="Go"))]],
        "spawns": [[2, "old", "old-kid", "M.R", "{}"]],
        "processed": {"old": {"in-1": 999.25}},
        "timers": [["old", "M.Wait", 2000.0]],
    }
    _write(directory, _schema.STATE, state)
    (directory / _schema.document_path("old")).parent.mkdir(parents=True, exist_ok=True)
    (directory / _schema.document_path("old")).write_text(encode_execution(exe), "utf-8")
    ring = {"format": 2, "id": "old", "last": 4, "steps": [[4, '{"event_kind":"Go"}']]}
    _write(directory, _schema.trace_path("old"), ring)
    return directory


def format_3_directory(directory: Path) -> Path:
    """The format-2 directory as format 3 left it: ``written_by`` and the quarantine in
    ``state.json``, format 3 in every file, no receipt rings."""
    format_2_directory(directory)
    state = json.loads((directory / _schema.STATE).read_text())
    state.update(format=3, written_by="harel-example-jsondir 0.2.0", quarantine=[])
    _write(directory, _schema.STATE, state)
    ring = json.loads((directory / _schema.trace_path("old")).read_text())
    _write(directory, _schema.trace_path("old"), {**ring, "format": 3})
    return directory


def format_4_directory(directory: Path) -> Path:
    """The format-3 directory as format 4 left it: a receipt ring for ``old`` (the token that
    wrote version 2 in slot 2), format 4 in every file, no work rows."""
    format_3_directory(directory)
    state = json.loads((directory / _schema.STATE).read_text())
    ring: list[str | None] = [None] * 8
    ring[2] = "f4" * 16
    state.update(format=4, written_by="harel-example-jsondir 0.3.0", receipts={"old": ring})
    _write(directory, _schema.STATE, state)
    trace = json.loads((directory / _schema.trace_path("old")).read_text())
    _write(directory, _schema.trace_path("old"), {**trace, "format": 4})
    return directory


OLD_FORMATS = pytest.mark.parametrize(
    "old",
    [format_2_directory, format_3_directory, format_4_directory],
    ids=["format-2", "format-3", "format-4"],
)


def _assert_served(store: JsonDirStore) -> None:
    exe = store.load("old")
    assert exe is not None and exe.version == 2 and exe.context == {"n": 1}
    assert store.is_processed("old", "in-1")
    assert store.due_timers(3000.0) == [("old", "M.Wait", 2000.0)]
    assert [entry.event.id for entry in store.pending_outbox()] == ["ev-1"]
    assert [entry.child_id for entry in store.pending_spawns()] == ["old-kid"]
    assert store.read_trace("old") == [{"event_kind": "Go", "index": 4}]
    record = store.export_execution("old")
    assert record is not None and record.updated_at == 1000.5
    assert record.processed == (("in-1", 999.25),)


@OLD_FORMATS
def test_opening_an_older_directory_upgrades_it_in_place(tmp_path: Path, old: _Old) -> None:
    directory = old(tmp_path / "data")
    store = JsonDirStore(directory)
    state = json.loads((directory / _schema.STATE).read_text())
    assert state["format"] == _schema.FORMAT == 5
    assert state["written_by"].startswith("harel-example-jsondir")
    kept = {"old": [None, None, "f4" * 16] + [None] * 5} if old is format_4_directory else {}
    assert state["quarantine"] == [] and state["receipts"] == kept
    _assert_served(store)
    exe = store.load("old")
    assert exe is not None
    store.commit(exe, [])  # still writes, and records its receipt
    state = json.loads((directory / _schema.STATE).read_text())
    assert state["format"] == 5 and state["receipts"]["old"][3] is not None


@OLD_FORMATS
def test_the_upgrade_backfills_the_work_rows_and_claim_returns_that_work(
    tmp_path: Path, old: _Old
) -> None:
    directory = old(tmp_path / "data")
    state = json.loads((directory / _schema.STATE).read_text())
    state["outbox"].append([3, None, encode_event(Event(id="ev-u", kind="Go"))])
    state["timers"].append(["sleeper", "M.Nap", 1e12])
    state["next_seq"] = 4
    _write(directory, _schema.STATE, state)
    before = time.time()
    store = JsonDirStore(directory)
    after = time.time()
    work = {row[0]: row[1:] for row in json.loads((directory / _schema.STATE).read_text())["work"]}
    [priority, ready_at, owner] = work.pop("old")  # relays: dated as written at the upgrade
    assert (priority, owner) == (0, None) and relay_due(before) <= ready_at <= relay_due(after)
    assert work.pop(None) == [0, ready_at, None]  # the untargeted outbox entry: the same
    assert work.pop("sleeper") == [0, 1e12, None]  # only a timer: its fire_at
    assert work == {}

    claims = store.claim("w1", 3000.0, lease=30.0, limit=10)
    by_group = {claim.execution_id: claim for claim in claims}
    assert sorted(by_group, key=str) == [None, "old"]
    mine = by_group["old"]
    assert mine.timers == (("M.Wait", 2000.0),)
    assert [entry.event.id for entry in mine.outbox] == ["ev-1"]
    assert [entry.child_id for entry in mine.spawns] == ["old-kid"]
    assert [entry.event.id for entry in by_group[None].outbox] == ["ev-u"]
    assert store.claim("w2", 3000.0, lease=30.0, limit=10) == []  # leased to w1


@OLD_FORMATS
def test_a_commit_resent_after_the_upgrade_is_recognised(tmp_path: Path, old: _Old) -> None:
    store = JsonDirStore(old(tmp_path / "data"))
    exe = store.load("old")
    assert exe is not None
    store.commit(exe, [(None, Event(id="once", kind="Go"))])
    exe.version = 2  # as after an unknown outcome: the same commit, sent again
    store.commit(exe, [(None, Event(id="once", kind="Go"))])
    assert exe.version == 3
    assert [entry.event.id for entry in store.pending_outbox()] == ["ev-1", "once"]


@OLD_FORMATS
def test_the_upgrade_is_idempotent(tmp_path: Path, old: _Old) -> None:
    directory = old(tmp_path / "data")
    JsonDirStore(directory)
    upgraded = _files(directory)
    JsonDirStore(directory)
    assert _files(directory) == upgraded


@OLD_FORMATS
def test_processes_opening_at_once_upgrade_once(tmp_path: Path, old: _Old) -> None:
    directory = old(tmp_path / "data")
    with ThreadPoolExecutor(max_workers=4) as pool:
        stores = list(pool.map(lambda _: JsonDirStore(directory), range(4)))
    for store in stores:
        _assert_served(store)
    assert json.loads((directory / _schema.STATE).read_text())["format"] == 5


def test_a_format_2_journal_left_by_a_crash_is_replayed_then_upgraded(tmp_path: Path) -> None:
    directory = format_2_directory(tmp_path / "data")
    state = json.loads((directory / _schema.STATE).read_text())
    state["timers"] = []  # the write the crash interrupted: the timer was disarmed
    journal = {"format": 2, "files": [[_schema.STATE, json.dumps(state)]]}
    _write(directory, _schema.JOURNAL, journal)
    store = JsonDirStore(directory)
    assert not (directory / _schema.JOURNAL).exists()
    assert store.due_timers(3000.0) == []
    state = json.loads((directory / _schema.STATE).read_text())
    assert state["format"] == 5
    assert [row[0] for row in state["work"]] == ["old"]  # backfilled after the replay: relays


def test_a_newer_format_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    directory = format_2_directory(tmp_path / "data")
    state = json.loads((directory / _schema.STATE).read_text())
    state.update(format=6, written_by="harel-example-jsondir 9.1.0")
    _write(directory, _schema.STATE, state)
    before = _files(directory)
    with pytest.raises(SchemaVersionError) as refused:
        JsonDirStore(directory)
    message = str(refused.value)
    assert "version 6" in message and "harel-example-jsondir 9.1.0" in message
    assert "pip install 'harel-example-jsondir>=9.1.0'" in message
    assert _files(directory) == before


def test_an_empty_directory_gets_the_current_layout_and_its_writer(tmp_path: Path) -> None:
    store = JsonDirStore(tmp_path / "data")
    state = json.loads((store.directory / _schema.STATE).read_text())
    assert state["format"] == 5 and state["written_by"].startswith("harel-example-jsondir")
    assert state["receipts"] == {} and state["work"] == []
    assert store.list_executions().items == []
