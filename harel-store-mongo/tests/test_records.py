"""Execution records on MongoDB: what the kit's records law cannot see from outside — where
the entries live (the emitters' documents, relay-only documents), that an import is one write
that leaves the collection untouched when it loses, and that export → import → export keeps
the digest across two datasets."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from harel.model import Event, Execution, Status
from harel.store.common.records import record_digest
from harel.store.contract import ExecutionRecord, OutboxEntry, TimerOp
from harel.store.errors import ExecutionAlreadyExists, PayloadTooLarge, StoreCorrupted
from harel_store_mongo import MongoStore
from harel_store_mongo._schema import EXECUTIONS
from harel_store_mongo.testing import MongomockHarness, MongoServerHarness

pytestmark = pytest.mark.anyio

Harness = MongomockHarness | MongoServerHarness
IDS = ("a", "b", "c", "$where.d")


def exe(execution_id: str, **fields: Any) -> Execution:
    return Execution(id=execution_id, definition_id="flow", **fields)


def ev(event_id: str, **data: Any) -> Event:
    return Event(id=event_id, kind="Go", data=data)


def documents(harness: Harness) -> list[dict[str, Any]]:
    return list(harness.database()[EXECUTIONS].find({}, sort=[("_id", 1)]))


def populate(store: MongoStore) -> None:
    """``a`` emits to itself, to ``b`` (never stored) and to others, marks, arms, re-arms and
    cancels timers, spawns, traces beyond ``trace_max``; ``c`` emits to ``a`` and is purged
    (its entry then lives in a relay-only document); ``$where.d`` emits to ``a`` too."""
    a, c, d = exe("a", context={"n": 1}), exe("c"), exe("$where.d")
    store.commit(c, [("a", ev("c-to-a", k=1)), ("b", ev("c-to-b"))])
    store.commit(a, [("a", ev("a-to-a")), ("b", ev("a-to-b")), (None, ev("broadcast"))])
    for n in range(5):
        store.commit(
            a,
            [],
            processed_event_id=f"in-{n}",
            timers=(TimerOp.schedule("/t", 10.0 + n), TimerOp.schedule(f"/once{n % 2}", 1.5)),
            spawns=[(f"kid-{n}", "/r", {"n": n})] if n < 2 else [],
            trace={"step": n},
        )
    store.commit(a, [], timers=(TimerOp.cancel("/once0"),))
    store.append_trace("a", {"manual": True})
    store.commit(d, [("a", ev("d-to-a"))], trace={"d": 1})
    c.status = Status.DONE
    store.save(c)
    assert store.purge("c")


def test_export_import_export_keeps_every_digest(harness: Harness, other_harness: Harness) -> None:
    source, destination = harness.open_sync(), other_harness.open_sync()
    try:
        source.trace_max = destination.trace_max = 3
        populate(source)
        records = {key: source.export_execution(key) for key in IDS}
        assert records["c"] is None  # purged; its entry to a is in a's record
        a, b = records["a"], records["b"]
        assert a is not None and b is not None and b.execution is None
        assert [e.event.id for e in a.outbox] == ["c-to-a", "a-to-a", "d-to-a"]
        assert [e.event.id for e in b.outbox] == ["c-to-b", "a-to-b"]
        assert [s["index"] for s in a.trace] == [3, 4, 5]
        assert [m for m, _ in a.processed] == [f"in-{n}" for n in range(5)]
        assert a.timers == (("/once1", 1.5), ("/t", 14.0))
        assert [s.child_id for s in a.spawns] == ["kid-0", "kid-1"]
        for record in records.values():
            if record is not None:
                destination.import_execution(record)
        for key, record in records.items():
            copied = destination.export_execution(key)
            assert (copied is None) == (record is None), key
            if record is not None and copied is not None:
                assert record_digest(copied) == record_digest(record), key
                assert copied.updated_at == record.updated_at
                assert copied.execution == record.execution
        pending = destination.pending_outbox()  # each target's entries in their order
        assert [e.event.id for e in pending if e.target_id == "a"] == [
            "c-to-a", "a-to-a", "d-to-a"
        ]  # fmt: skip
        assert [e.event.id for e in pending if e.target_id == "b"] == ["c-to-b", "a-to-b"]
        assert all(e.target_id is not None for e in pending)  # broadcasts are not moved
        moved = destination.load("a")
        assert moved is not None
        destination.commit(moved, [], trace={"after": True})
        assert [s["index"] for s in destination.read_trace("a")] == [4, 5, 6]
    finally:
        source.close()
        destination.close()


def test_an_import_takes_over_a_relay_only_document(harness: Harness) -> None:
    """``x`` was purged with an entry it owes ``y``: its relay-only document keeps it when
    ``x`` is imported again, and the imported entries follow it."""
    store = harness.open_sync()
    try:
        x = exe("x", status=Status.DONE)
        store.commit(x, [("y", ev("x-to-y"))])
        assert store.purge("x")
        assert store.export_execution("x") is None
        record = ExecutionRecord(
            execution_id="x",
            execution=exe("x", version=7),
            updated_at=5.0,
            outbox=(OutboxEntry(1, "x", ev("to-x")),),
        )
        store.import_execution(record)
        assert [(e.target_id, e.event.id) for e in store.pending_outbox()] == [
            ("y", "x-to-y"),
            ("x", "to-x"),
        ]
        copied = store.export_execution("x")
        assert copied is not None and record_digest(copied) == record_digest(record)
    finally:
        store.close()


def test_a_losing_import_writes_nothing(harness: Harness) -> None:
    store = harness.open_sync()
    try:
        populate(store)
        record = store.export_execution("a")
        assert record is not None
        before = documents(harness)
        with pytest.raises(ExecutionAlreadyExists):
            store.import_execution(record)
        assert documents(harness) == before
    finally:
        store.close()


def test_relays_only_records_append_after_the_existing_entries(harness: Harness) -> None:
    store = harness.open_sync()
    try:
        store.commit(exe("p"), [("q", ev("first"))])
        relays = ExecutionRecord(
            execution_id="q",
            execution=None,
            outbox=(OutboxEntry(9, "q", ev("second")), OutboxEntry(2, "q", ev("earlier"))),
        )
        store.import_execution(relays)
        store.import_execution(relays)  # no condition: appended again
        assert [e.event.id for e in store.pending_outbox()] == [
            "first", "earlier", "second", "earlier", "second"
        ]  # fmt: skip
        assert store.load("q") is None
        doc = harness.database()[EXECUTIONS].find_one({"_id": "q"})
        assert doc is not None and doc["version"] == 0  # a relay-only document
        for entry in store.pending_outbox():
            store.ack_outbox(entry.seq)
        assert documents(harness) == [d for d in documents(harness) if d["_id"] == "p"]
    finally:
        store.close()


def test_racing_importers_one_wins(harness: Harness) -> None:
    record = ExecutionRecord(execution_id="r", execution=exe("r", version=3), updated_at=1.0)
    stores = [harness.open_sync() for _ in range(4)]
    barrier = threading.Barrier(len(stores))
    outcomes: list[str] = []

    def run(store: MongoStore) -> None:
        barrier.wait()
        try:
            store.import_execution(record)
            outcomes.append("won")
        except ExecutionAlreadyExists:
            outcomes.append("exists")

    threads = [threading.Thread(target=run, args=(store,)) for store in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for store in stores:
        store.close()
    assert sorted(outcomes) == ["exists", "exists", "exists", "won"]


async def test_async_export_and_import(harness: Harness, other_harness: Harness) -> None:
    source, destination = await harness.open_async(), await other_harness.open_async()
    try:
        await source.commit(exe("s"), [("s", ev("self"))], processed_event_id="m", trace={})
        record = await source.export_execution("s")
        assert record is not None
        results = await asyncio.gather(
            destination.import_execution(record),
            destination.import_execution(record),
            return_exceptions=True,
        )
        assert sorted(type(r).__name__ for r in results) == ["ExecutionAlreadyExists", "NoneType"]
        copied = await destination.export_execution("s")
        assert copied is not None and record_digest(copied) == record_digest(record)
    finally:
        await source.close()
        await destination.close()


def test_a_record_too_large_for_one_document_is_refused(harness: Harness) -> None:
    store = harness.open_sync()
    try:
        big = "x" * (5 * 1024 * 1024)
        record = ExecutionRecord(
            execution_id="big",
            execution=exe("big", version=1, context={"blob": big}),
            trace=tuple({"index": n, "blob": big} for n in range(3)),
        )
        with pytest.raises(PayloadTooLarge):
            store.import_execution(record)
        assert documents(harness) == []
    finally:
        store.close()


def test_a_damaged_entry_fails_the_export_instead_of_vanishing(harness: Harness) -> None:
    """The relay sweeps skip an unreadable entry; an export must not (a migration would lose
    it silently)."""
    store = harness.open_sync()
    try:
        store.commit(exe("emitter"), [("victim", ev("ok")), ("victim", ev("damaged"))])
        harness.database()[EXECUTIONS].update_one(
            {"_id": "emitter"}, {"$unset": {"outbox.1.event": ""}}
        )
        assert [e.event.id for e in store.pending_outbox()] == ["ok"]
        with pytest.raises(StoreCorrupted, match="outbox"):
            store.export_execution("victim")
    finally:
        store.close()
