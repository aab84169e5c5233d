"""Layout versions on MongoDB: layout-1 to -4 databases built by hand are upgraded in place
(indexes created, work rows backfilled, version and release recorded, data intact and
claimable; a layout-4 document that moved marks out before the moved-mark filter existed still
refuses them), idempotently and with several openers at once; a newer layout is refused before
anything is written, naming both versions and the release to install."""

from __future__ import annotations

import threading
import time
from collections.abc import Generator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from harel.model import Event, Execution
from harel.store.common.claims import relay_due
from harel.store.common.codec import encode_event, encode_execution
from harel.store.common.schema_version import release_of
from harel.store.contract import Claim
from harel.store.errors import AlreadyProcessed, SchemaVersionError
from harel_store_mongo import MongoStore
from harel_store_mongo._calls import index_models, issue
from harel_store_mongo._errors import translate
from harel_store_mongo._moved import may_hold, usable
from harel_store_mongo._plan import MongoPlan
from harel_store_mongo._requests import Request
from harel_store_mongo._schema import (
    EXECUTIONS,
    INDEXES,
    MARKS,
    MARKS_HIGH,
    META,
    SCHEMA_VERSION,
    WORK,
)
from harel_store_mongo.testing import MongomockHarness, MongoServerHarness

pytestmark = pytest.mark.anyio

Harness = MongomockHarness | MongoServerHarness
NEW_IN_2 = "list_definition_id"
NEW_IN_3 = frozenset({"marks_execution", "marks_at"})
NEW_IN_4 = "work_ready"
RELEASE = release_of("harel-store-mongo")


def build_layout_1(harness: Harness) -> Execution:
    """What harel-store-mongo 0.1 left in a database: its schema record (no ``written_by``),
    its indexes and one execution document holding every kind of data."""
    database = harness.database()
    database[META].insert_many([{"_id": "schema", "version": 1}, {"_id": "seq", "n": 2}])
    layout_1 = tuple(
        spec
        for spec in INDEXES
        if spec.collection == EXECUTIONS and spec.name != NEW_IN_2 and spec.name not in NEW_IN_3
    )
    database[EXECUTIONS].create_indexes(index_models(layout_1))
    exe = Execution(id="old", definition_id="flow", version=4, context={"n": 1})
    database[EXECUTIONS].insert_one(
        {
            "_id": "old",
            "version": 4,
            "token": "t",
            "data": encode_execution(exe),
            "definition_id": "flow",
            "status": "RUNNING",
            "parent_id": None,
            "outcome": None,
            "active_path": None,
            "updated_at": 100.0,
            "outbox": [{"seq": 1, "target": "old", "event": encode_event(Event(id="e", kind="k"))}],
            "outbox_next": 1,
            "spawns": [{"seq": 2, "child": "kid", "root": "/r", "context": "{}"}],
            "spawns_next": 2,
            "timers": [{"path": "/t", "at": 50.0}],
            "timers_next": 50.0,
            "processed": [{"event": "in", "at": 90.0}],
            "marks_since": 90.0,
            "trace": ['{"step":1}'],
            "trace_next": 3,
        }
    )
    return exe


def build_layout_2(harness: Harness) -> Execution:
    """What harel-store-mongo 0.2 left: layout 1 plus the ``list_definition_id`` index and the
    ``written_by`` field (documents still carry one ``token``, marks all inside)."""
    exe = build_layout_1(harness)
    database = harness.database()
    database[EXECUTIONS].create_indexes(
        index_models(tuple(spec for spec in INDEXES if spec.name == NEW_IN_2))
    )
    database[META].update_one(
        {"_id": "schema"}, {"$set": {"version": 2, "written_by": "harel-store-mongo 0.2.0"}}
    )
    return exe


def build_layout_3(harness: Harness) -> Execution:
    """What harel-store-mongo 0.3 left: layout 2 plus the ``marks`` indexes (no ``work``
    collection), and a second document emitting to a third id and untargeted."""
    exe = build_layout_2(harness)
    database = harness.database()
    database[MARKS].create_indexes(
        index_models(tuple(spec for spec in INDEXES if spec.collection == MARKS))
    )
    other = Execution(id="emitter", definition_id="flow", version=1)
    event = encode_event(Event(id="f", kind="k"))
    database[EXECUTIONS].insert_one(
        {
            "_id": "emitter",
            "version": 1,
            "data": encode_execution(other),
            "definition_id": "flow",
            "status": "RUNNING",
            "updated_at": 100.0,
            "outbox": [
                {"seq": 3, "target": "elsewhere", "event": event},
                {"seq": 4, "target": None, "event": event},
            ],
            "outbox_next": 3,
        }
    )
    database[META].update_one(
        {"_id": "schema"}, {"$set": {"version": 3, "written_by": "harel-store-mongo 0.3.0"}}
    )
    return exe


def build_layout_4(harness: Harness) -> Execution:
    """What harel-store-mongo 0.4 left: layout 3 plus the ``work`` collection with its index
    and rows, and a document that moved a mark out (``marks_out``, the mark in ``marks``)
    before the moved-mark filter existed (no ``mf``)."""
    exe = build_layout_3(harness)
    database = harness.database()
    database[WORK].create_indexes(
        index_models(tuple(spec for spec in INDEXES if spec.collection == WORK))
    )
    database[WORK].insert_one(
        {"_id": "old", "priority": 0, "ready_at": 1.0, "owner": None, "tn": 1}
    )
    database[MARKS].insert_one({"_id": {"e": "old", "ev": "moved"}, "e": "old", "at": 80.0})
    database[EXECUTIONS].update_one(
        {"_id": "old"}, {"$set": {"marks_out": True, "marks_n": 1, "r4": "t4"}}
    )
    database[META].update_one(
        {"_id": "schema"}, {"$set": {"version": 4, "written_by": "harel-store-mongo 0.4.0"}}
    )
    database[META].update_one({"_id": "seq"}, {"$set": {"n": 4}})  # seqs 1-4 handed out
    return exe


def schema_record(harness: Harness) -> dict[str, Any] | None:
    record: dict[str, Any] | None = harness.database()[META].find_one({"_id": "schema"})
    return record


def index_names(harness: Harness) -> set[str]:
    database = harness.database()
    return {
        name
        for collection in (EXECUTIONS, MARKS, WORK)
        for name in database[collection].index_information()
    }


def check_upgraded(harness: Harness, store: MongoStore, exe: Execution) -> dict[str | None, Claim]:
    """Everything stored before the upgrade reads back; returns what one claim took."""
    assert schema_record(harness) == {
        "_id": "schema",
        "version": SCHEMA_VERSION,
        "written_by": RELEASE,
    }
    assert {NEW_IN_2, *NEW_IN_3, NEW_IN_4} <= index_names(harness)
    assert store.load("old") == exe
    outbox = [(e.seq, e.event.id) for e in store.pending_outbox() if e.target_id == "old"]
    assert outbox == [(1, "e")]
    assert [(s.seq, s.child_id) for s in store.pending_spawns()] == [(2, "kid")]
    assert store.due_timers(60.0) == [("old", "/t", 50.0)]
    assert store.is_processed("old", "in")
    assert store.read_trace("old") == [{"step": 1, "index": 2}]
    page = store.list_executions(definition_id="flow")
    assert "old" in [s.id for s in page.items]
    groups = {c.execution_id: c for c in store.claim("w", time.time() + 1000)}
    claim = groups["old"]
    assert [s.child_id for s in claim.spawns] == ["kid"]  # the backfilled row found it all
    assert [e.event.id for e in claim.outbox] == ["e"]
    assert claim.timers == (("/t", 50.0),)
    return groups


def test_an_empty_database_gets_the_current_layout(harness: Harness) -> None:
    store = harness.open_sync()
    store.close()
    assert SCHEMA_VERSION == 5
    assert schema_record(harness) == {"_id": "schema", "version": 5, "written_by": RELEASE}
    assert {spec.name for spec in INDEXES} <= index_names(harness)


def test_layout_1_is_upgraded_in_place(harness: Harness) -> None:
    exe = build_layout_1(harness)
    assert NEW_IN_2 not in index_names(harness)
    store = harness.open_sync()
    try:
        check_upgraded(harness, store, exe)
        store.commit(exe, [], trace={"step": 2})  # and the store carries on
        assert [s["index"] for s in store.read_trace("old")] == [2, 3]
    finally:
        store.close()
    again = harness.open_sync()  # idempotent: opening the upgraded layout changes nothing
    again.close()
    assert schema_record(harness) == {"_id": "schema", "version": 5, "written_by": RELEASE}


def test_layout_2_is_upgraded_in_place(harness: Harness) -> None:
    """Layout 2 -> 3: the ``marks`` indexes appear, the data reads back, and the old
    document (a ``token``, no receipts, no mark count) takes receipts and moved marks from
    its next commits on."""
    exe = build_layout_2(harness)
    assert not NEW_IN_3 & index_names(harness)
    store = harness.open_sync()
    try:
        check_upgraded(harness, store, exe)
        exe.context = {"n": 2}
        args: dict[str, Any] = {"emits": [], "processed_event_id": "new-in"}
        store.commit(exe, **args)
        exe.version = 4  # re-sent (as after CommitOutcomeUnknown): recognised by its receipt
        store.commit(exe, **args)
        assert exe.version == 5
        doc = harness.database()[EXECUTIONS].find_one({"_id": "old"})
        assert doc is not None and doc["version"] == 5 and len(doc["r5"]) == 32
        assert doc["marks_n"] == 2
        assert store.is_processed("old", "in") and store.is_processed("old", "new-in")
    finally:
        store.close()


async def test_layout_1_is_upgraded_by_the_async_store_too(harness: Harness) -> None:
    build_layout_1(harness)
    store = await harness.open_async()
    try:
        (claim,) = await store.claim("w", time.time() + 1000)
        assert claim.execution_id == "old" and claim.units == 3
    finally:
        await store.close()
    assert schema_record(harness) == {"_id": "schema", "version": 5, "written_by": RELEASE}
    assert {NEW_IN_2, *NEW_IN_3, NEW_IN_4} <= index_names(harness)


def _driver(harness: Harness) -> Any:
    database = harness.sync_client().get_database(harness.db)  # answers buildInfo

    def execute(request: Request) -> Any:
        with translate("test"):
            raw = issue(database, request)
            return list(raw) if request.cursor else raw

    return execute


def _step(plan: Generator[Request, Any, None], reply: Any) -> Request | None:
    try:
        return plan.send(reply)
    except StopIteration:
        return None


def test_layout_3_is_upgraded_with_its_work_backfilled(harness: Harness) -> None:
    """Layout 3 -> 4: the ``work`` index appears and a work row per group with stored work
    (timers, spawn intents, outbox entries by target, the untargeted ones) is backfilled, so
    ``claim`` returns every unit stored before the upgrade; the store then carries on."""
    exe = build_layout_3(harness)
    assert NEW_IN_4 not in index_names(harness)
    before = time.time()
    store = harness.open_sync()
    try:
        rows = {row["_id"]: row for row in harness.database()[WORK].find()}
        assert set(rows) == {"old", "elsewhere", ""}
        # relay work (the spawn intent, the outbox entries) is due at once: relay_due(now)
        assert rows["old"]["ready_at"] == rows["elsewhere"]["ready_at"] == rows[""]["ready_at"]
        assert relay_due(before) <= rows["old"]["ready_at"] <= relay_due(time.time())
        assert {row["priority"] for row in rows.values()} == {0}
        assert {row["owner"] for row in rows.values()} == {None}
        groups = check_upgraded(harness, store, exe)
        assert set(groups) == {"old", "elsewhere", None}
        assert [e.seq for e in groups["elsewhere"].outbox] == [3]
        assert [e.seq for e in groups[None].outbox] == [4]
        exe.context = {"n": 3}
        store.commit(exe, [], timers=[])  # a commit with nothing to touch
        assert store.load("old") == exe
    finally:
        store.close()


def test_layout_4_is_upgraded_and_its_moved_marks_still_refuse(harness: Harness) -> None:
    """Layout 4 -> 5: nothing is backfilled (the work rows are there) and no document is
    rewritten; a document that moved marks out without a moved-mark filter refuses a moved
    mark (read on ``marks`` after its filter misses), commits a fresh one, and gains a filter
    with its next move, which holds the old moved mark too."""
    exe = build_layout_4(harness)
    before = list(harness.database()[WORK].find())
    store = harness.open_sync()
    try:
        assert list(harness.database()[WORK].find()) == before  # no backfill
        check_upgraded(harness, store, exe)
        doc = harness.database()[EXECUTIONS].find_one({"_id": "old"})
        with pytest.raises(AlreadyProcessed):
            store.commit(exe, [], processed_event_id="moved")
        assert harness.database()[EXECUTIONS].find_one({"_id": "old"}) == doc
        for n in range(MARKS_HIGH):
            store.commit(exe, [], processed_event_id=f"fresh-{n}")
        doc = harness.database()[EXECUTIONS].find_one({"_id": "old"})
        assert doc is not None and usable(doc["mf"]) and may_hold(doc["mf"], "moved")
        with harness.counting() as calls:
            store.commit(exe, [], processed_event_id="one-more")
        assert len(calls) == 1, calls  # the filter sees the moved marks: one write
        for event_id in ("moved", "in", "fresh-0"):
            with pytest.raises(AlreadyProcessed):
                store.commit(exe, [], processed_event_id=event_id)
    finally:
        store.close()


def test_layout_4_counter_seqs_stay_first_and_the_counter_is_left_alone(
    harness: Harness,
) -> None:
    """Layout 4 -> 5 also retires the store-wide seq counter: the entries it numbered keep
    their seqs (acks by them still work) and stay before every entry written after the
    upgrade, whose seqs come from the clock (above 2**53); the counter document is never
    read or written again, a document without ``seq_hi`` takes the new seqs in one write, and
    the only ``meta`` write is the store's writer registration, once."""
    build_layout_4(harness)
    database = harness.database()
    counter = database[META].find_one({"_id": "seq"})
    store = harness.open_sync()
    try:
        old = store.load("old")
        emitter = store.load("emitter")
        assert old is not None and emitter is not None
        store.commit(emitter, [("elsewhere", Event(id="new-1", kind="k"))])
        with harness.counting() as calls:
            store.commit(old, [("old", Event(id="new-2", kind="k"))], spawns=[("kid2", "/r", {})])
        assert [c for c in calls if c[0] == EXECUTIONS] == [(EXECUTIONS, "update_one")]
        assert META not in {collection for collection, _ in calls}
        entries = [(e.seq, e.event.id) for e in store.pending_outbox()]
        assert [event for _, event in entries] == ["e", "f", "f", "new-1", "new-2"]
        assert [seq for seq, _ in entries[:3]] == [1, 3, 4]  # the counter's, kept
        assert all(seq >= 2**53 for seq, _ in entries[3:])
        assert [seq for seq, _ in entries] == sorted(seq for seq, _ in entries)
        assert next((s.seq, s.child_id) for s in store.pending_spawns()) == (2, "kid")
        doc = database[EXECUTIONS].find_one({"_id": "old"})
        assert doc is not None and doc["seq_hi"] == max(s["seq"] for s in doc["spawns"])
        store.ack_outbox(1)
        store.ack_spawn(2)
        assert next(e.event.id for e in store.pending_outbox()) == "f"
        assert database[META].find_one({"_id": "seq"}) == counter  # never touched
        writers = database[META].find_one({"_id": "writers"})
        assert writers is not None and writers["n"] == 1  # one registration for two commits
    finally:
        store.close()


def test_interleaved_upgrades_both_succeed(harness: Harness) -> None:
    """Opener A has created the index and is about to record version 2 when opener B runs
    its whole upgrade: A's guarded update then matches nothing, and both opens succeed."""
    exe = build_layout_1(harness)
    execute = _driver(harness)
    first = MongoPlan("A").open()
    request: Request | None = next(first)
    while request is not None and (request.collection, request.method) != (META, "update_one"):
        request = _step(first, execute(request))
    assert request is not None  # A stands before its schema update
    second = MongoPlan("B").open()
    pending: Request | None = next(second)
    while pending is not None:
        pending = _step(second, execute(pending))
    assert schema_record(harness) == {"_id": "schema", "version": 5, "written_by": RELEASE}
    result = execute(request)
    assert result.matched_count == 0  # B recorded it already
    assert _step(first, result) is None
    store = harness.open_sync()
    try:
        check_upgraded(harness, store, exe)
    finally:
        store.close()


def test_concurrent_openers_of_layout_1(harness: Harness) -> None:
    exe = build_layout_1(harness)
    barrier = threading.Barrier(4)

    def open_one(_: int) -> MongoStore:
        barrier.wait()
        return harness.open_sync()

    with ThreadPoolExecutor(4) as pool:
        opened = list(pool.map(open_one, range(4)))  # any failure is raised here
    try:
        check_upgraded(harness, opened[0], exe)
    finally:
        for store in opened:
            store.close()


def test_a_newer_layout_is_refused_before_anything_is_written(harness: Harness) -> None:
    database = harness.database()
    database[META].insert_one(
        {"_id": "schema", "version": 6, "written_by": "harel-store-mongo 7.1.0", "future": 1}
    )
    database[EXECUTIONS].insert_one({"_id": "x", "version": 1, "shape": "from the future"})
    before = (list(database[META].find()), list(database[EXECUTIONS].find()))
    with pytest.raises(SchemaVersionError) as info:
        harness.open_sync()
    wanted = (
        "layout version 6",
        "reads version 5",
        "(written by harel-store-mongo 7.1.0)",
        "pip install 'harel-store-mongo>=7.1.0'",
    )
    assert [part for part in wanted if part not in str(info.value)] == []
    assert (list(database[META].find()), list(database[EXECUTIONS].find())) == before
    assert index_names(harness) <= {"_id_"}


def test_a_foreign_database_without_a_schema_record_is_refused(harness: Harness) -> None:
    """A database holding executions but no harel schema record (the reference implementation's,
    or another application's) is refused before anything is written, not adopted."""
    database = harness.database()
    database[EXECUTIONS].insert_one({"_id": "order-1", "state": "A", "version": 3})
    before = list(database[EXECUTIONS].find())
    with pytest.raises(SchemaVersionError, match="no harel schema record"):
        harness.open_sync()
    assert list(database[EXECUTIONS].find()) == before
    assert list(database[META].find()) == []
    assert index_names(harness) <= {"_id_"}


async def test_the_async_store_refuses_a_newer_layout_too(harness: Harness) -> None:
    harness.database()[META].insert_one({"_id": "schema", "version": 9})
    with pytest.raises(SchemaVersionError, match="layout version 9"):
        await harness.open_async()
    assert schema_record(harness) == {"_id": "schema", "version": 9}
