"""What only the MongoDB backend has: driver calls per operation (counted), the document layout
and its indexes, what mongomock lets through that a server would refuse, retention inside the
document, failure modes (unreachable server, lost CAS) and hostile ids.

Runs on mongomock by default (driver calls counted by the harness), on a real server with
``HAREL_TEST_MONGO_URL`` (commands counted by PyMongo's command monitoring, query plans read
with ``explain``).
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from harel.model import Event, Execution, Status
from harel.registry import open_store
from harel.store.author import Knob
from harel.store.contract import ExecutionRecord, OutboxEntry, SpawnEntry, TimerOp
from harel.store.errors import (
    AlreadyProcessed,
    ExecutionNotFound,
    InvalidIdentifier,
    InvalidStoreOption,
    StoreConflict,
    StoreUnavailable,
)
from harel_store_mongo import AsyncMongoStore, MongoStore, _base
from harel_store_mongo._moved import may_hold
from harel_store_mongo._requests import Request
from harel_store_mongo._schema import EXECUTIONS, INDEXES, MARKS, MARKS_HIGH, WORK
from harel_store_mongo.testing import MongomockHarness, MongoServerHarness
from harel_testing.mongo import ELEMENT_FIELDS, FIELDS, violations

pytestmark = pytest.mark.anyio

Harness = MongomockHarness | MongoServerHarness
FAR = 1e18
ALLOWED = {
    "commit: state only (insert)": 1,
    "commit: state only (update)": 1,
    "commit: + mark, timers, trace": 3,
    "commit: + mark, cancel, trace": 1,
    "commit: + emits, store's 1st seq": 4,
    "commit: + emits": 3,
    "commit: everything": 3,
    "load": 1,
    "load_for_event": 1,
    "is_processed": 1,
    "read_trace": 1,
    "append_trace": 1,
    "pending_outbox": 1,
    "pending_spawns": 1,
    "due_timers": 1,
    "list_executions": 1,
    "ack_outbox": 1,
    "ack_spawn": 1,
    "delete_timer": 1,
    "prune_processed (nothing due)": 2,
    "purge": 4,
    "export_execution": 1,
    "import_execution (no relays)": 3,
    "import_execution (with relays)": 3,
    "claim (one group)": 7,
    "claim (nothing ready)": 5,
    "renew": 1,
    "release": 3,
    "enqueue": 3,
}
"""The most driver calls each operation may take (the issue: state-only commit 1; a commit
touching work rows: + 2, its rows upserted before its write and again after it; seqs: no
request, but the writer registration before a store's first seq, once)."""
MEASURED: dict[str, int] = {}


def moved(record: ExecutionRecord | None, execution_id: str) -> ExecutionRecord:
    """``record`` as the record of another id (no relays: they name the old id)."""
    assert record is not None and record.execution is not None
    exe = record.execution.model_copy(update={"id": execution_id})
    return replace(record, execution_id=execution_id, execution=exe, outbox=(), spawns=())


def new_exe(execution_id: str, **fields: Any) -> Execution:
    return Execution(id=execution_id, definition_id="flow", **fields)


def ev(event_id: str) -> Event:
    return Event(id=event_id, kind="Go")


def step(kind: str = "Go", **extra: Any) -> dict[str, Any]:
    return {"event_kind": kind, "actions": [], "context_out": {}, **extra}


@pytest.fixture
def harness(harel_harness: Harness) -> Harness:
    return harel_harness


@pytest.fixture
def store(harness: Harness) -> Iterator[MongoStore]:
    opened = harness.open_sync()
    yield opened
    opened.close()


def raw(harness: Harness, execution_id: str) -> dict[str, Any] | None:
    """The execution's document, read directly."""
    doc: dict[str, Any] | None = harness.database()[EXECUTIONS].find_one({"_id": execution_id})
    return doc


def everything(harness: Harness) -> list[dict[str, Any]]:
    return list(harness.database()[EXECUTIONS].find({}, sort=[("_id", 1)]))


# -- driver calls per operation ------------------------------------------------------------------


def test_driver_calls_per_operation(harness: Harness, store: MongoStore) -> None:
    """Count each operation's driver calls (mongomock: every collection call; a real server:
    every command, getMore included) and hold them to :data:`ALLOWED`."""

    def measure(name: str, action: Any) -> Any:
        with harness.counting() as calls:
            result = action()
        MEASURED[name] = len(calls)
        assert len(calls) <= ALLOWED[name], f"{name}: {calls}"
        return result

    exe = new_exe("rt-1")
    other = new_exe("rt-2")
    store.save(other)
    assert measure("claim (nothing ready)", lambda: store.claim("w", FAR)) == []
    measure("commit: state only (insert)", lambda: store.save(exe))
    measure("commit: state only (update)", lambda: store.save(exe))
    measure(
        "commit: + mark, timers, trace",
        lambda: store.commit(
            exe,
            [],
            processed_event_id="in-1",
            timers=(TimerOp.cancel("/a"), TimerOp.schedule("/a", 5.0)),
            trace=step(),
        ),
    )
    measure(
        "commit: + mark, cancel, trace",
        lambda: store.commit(exe, [], processed_event_id="in-0", timers=(TimerOp.cancel("/z"),)),
    )
    measure(
        "commit: + emits, store's 1st seq",
        lambda: store.commit(exe, [("rt-2", ev("out-0"))]),
    )
    measure("commit: + emits", lambda: store.commit(exe, [("rt-2", ev("out-1"))]))
    measure(
        "commit: everything",
        lambda: store.commit(
            exe,
            [(None, ev("out-2"))],
            processed_event_id="in-2",
            timers=(TimerOp.schedule("/b", 6.0),),
            spawns=[("child", "/r", {"k": 1})],
            trace=step(),
        ),
    )
    (claim,) = measure("claim (one group)", lambda: store.claim("w", 5.5, limit=1))
    assert claim.execution_id == "rt-2"
    assert [e.event.id for e in claim.outbox] == ["out-0"]  # limit=1: the oldest first
    measure("renew", lambda: store.renew("w", "rt-2", 5.5))
    measure("release", lambda: store.release("w", "rt-2"))
    measure("enqueue", lambda: store.enqueue("rt-2", ev("q-1"), priority=2))
    measure("load", lambda: store.load("rt-1"))
    measure("load_for_event", lambda: store.load_for_event("rt-1", "in-1"))
    measure("is_processed", lambda: store.is_processed("rt-1", "in-1"))
    measure("read_trace", lambda: store.read_trace("rt-1"))
    measure("append_trace", lambda: store.append_trace("rt-1", step("Manual")))
    outbox = measure("pending_outbox", lambda: store.pending_outbox())
    spawns = measure("pending_spawns", lambda: store.pending_spawns())
    measure("due_timers", lambda: store.due_timers(FAR))
    measure("list_executions", lambda: store.list_executions(limit=10))
    measure("ack_outbox", lambda: store.ack_outbox(outbox[0].seq))
    measure("ack_spawn", lambda: store.ack_spawn(spawns[0].seq))
    measure("delete_timer", lambda: store.delete_timer("rt-1", "/a", 5.0))
    measure("prune_processed (nothing due)", lambda: store.prune_processed(0.0))
    record = measure("export_execution", lambda: store.export_execution("rt-1"))
    copy = moved(record, "rt-3")
    measure("import_execution (no relays)", lambda: store.import_execution(copy))
    relays = replace(
        moved(record, "rt-4"),
        outbox=(OutboxEntry(1, "rt-4", ev("m-1")),),
        spawns=(SpawnEntry(1, "rt-4", "kid-4", "/r", {}),),
    )
    measure("import_execution (with relays)", lambda: store.import_execution(relays))
    exe.status = Status.DONE
    store.save(exe)
    measure("purge", lambda: store.purge("rt-1"))


def test_report_driver_calls(harness: Harness, capsys: pytest.CaptureFixture[str]) -> None:
    """Print the table measured above (``pytest -s`` or the captured output shows it)."""
    if not MEASURED:
        pytest.skip("run together with test_driver_calls_per_operation")
    with capsys.disabled():
        print(f"\ndriver calls per operation ({harness.describe()}):")
        for name, count in MEASURED.items():
            print(f"  {name:34} {count}  (allowed {ALLOWED[name]})")


async def test_async_commit_is_one_call_too(harness: Harness) -> None:
    store = await harness.open_async()
    try:
        exe = new_exe("rt-async")
        with harness.counting() as calls:
            await store.commit(exe, [], processed_event_id="e", trace=step())
        assert len(calls) == 1, calls
        with harness.counting() as calls:
            await store.commit(exe, [(None, ev("o"))], spawns=[("c", "/r", {})])
        # the writer registration (the store's first seq), the 2 work rows touched (one
        # bulk_write), the write, the rows touched again
        assert calls[0] == ("meta", "find_one_and_update") and len(calls) == 4, calls
        with harness.counting() as calls:
            await store.commit(exe, [(None, ev("o2"))], spawns=[("c2", "/r", {})])
        assert len(calls) == 3, calls  # no seq request: the rows, the write, the rows
        assert calls.count(("work", "bulk_write")) == 2
    finally:
        await store.close()


# -- what mongomock lets through -----------------------------------------------------------------


class RecordingStore(MongoStore):
    """A MongoStore keeping every request it sends (to check them against server rules)."""

    sent: list[Request]

    def _execute(self, request: Request) -> Any:
        self.__dict__.setdefault("sent", []).append(request)
        return super()._execute(request)


def test_every_request_of_a_workload_is_one_a_server_accepts(harness: Harness) -> None:
    """mongomock applies updates a server refuses (a field set and unset at once) and stores
    expressions a server would evaluate; every request sent here passes the server rules."""
    store = RecordingStore(harness.sync_client(), db=harness.db, owns_client=True)
    try:
        exe = new_exe("$where.a", status=Status.RUNNING)
        for n in range(3):
            store.commit(
                exe,
                [("$x.y", ev(f"$o{n}")), (None, ev(f"b{n}"))],
                processed_event_id=f"$in.{n}",
                timers=(TimerOp.cancel("$t.a"), TimerOp.schedule("$t.a", float(n))),
                spawns=[(f"$c.{n}", "$r", {"$k": "$v"})],
                trace=step("$Go"),
            )
        store.append_trace("$where.a", step())
        for entry in store.pending_outbox():
            store.ack_outbox(entry.seq)
        for spawn in store.pending_spawns():
            store.ack_spawn(spawn.seq)
        store.delete_timer("$where.a", "$t.a", 2.0)
        store.load_for_event("$where.a", "$in.1")
        store.list_executions(definition_id="flow", status=[Status.RUNNING], roots_only=True)
        store.prune_processed(FAR, batch_size=2)
        record = store.export_execution("$where.a")
        store.import_execution(moved(record, "$where.b"))
        store.enqueue("$x.y", ev("$q.1"), priority=4)
        store.enqueue("$where.a", ev("$q.2"))
        store.export_execution("$x.y")
        store.purge("$where.a", force=True)
        assert store.sent
        for request in store.sent:
            assert violations(request) == [], request
    finally:
        store.close()


def test_cancel_and_rearm_in_one_commit_keeps_the_new_timer(store: MongoStore) -> None:
    exe = new_exe("t-1")
    store.commit(exe, [], timers=(TimerOp.schedule("/a", 1.0),))
    store.commit(exe, [], timers=(TimerOp.cancel("/a"), TimerOp.schedule("/a", 7.0)))
    assert store.due_timers(FAR) == [("t-1", "/a", 7.0)]
    store.commit(exe, [], timers=(TimerOp.schedule("/a", 9.0), TimerOp.cancel("/a")))
    assert store.due_timers(FAR) == []


# -- the document layout ------------------------------------------------------------------------


def test_one_document_holds_the_whole_step(harness: Harness, store: MongoStore) -> None:
    exe = new_exe("doc-1", context={"n": 1})
    store.commit(
        exe,
        [("doc-2", ev("o-1"))],
        processed_event_id="in-1",
        timers=(TimerOp.schedule("/a", 3.5),),
        spawns=[("kid", "/r", {"k": [1, 2]})],
        trace=step(),
    )
    doc = raw(harness, "doc-1")
    assert doc is not None
    assert set(doc) == {
        "_id", "version", "r1", "data", "definition_id", "status", "parent_id", "outcome",
        "active_path", "updated_at", "outbox", "outbox_next", "spawns", "spawns_next", "timers",
        "timers_next", "processed", "marks_since", "marks_n", "trace", "trace_next", "seq_hi",
    }  # fmt: skip
    assert doc["seq_hi"] == doc["spawns"][0]["seq"] > doc["outbox"][0]["seq"]  # emits first
    assert doc["marks_n"] == 1 and len(doc["r1"]) == 32
    assert doc["version"] == 1 and isinstance(doc["data"], str)
    assert [(e["target"], e["seq"] == doc["outbox_next"]) for e in doc["outbox"]] == [
        ("doc-2", True)
    ]
    assert doc["spawns"][0]["context"] == '{"k":[1,2]}'  # JSON text, not BSON
    assert doc["timers"] == [{"path": "/a", "at": 3.5}] and doc["timers_next"] == 3.5
    assert [m["event"] for m in doc["processed"]] == ["in-1"]
    assert doc["marks_since"] == doc["processed"][0]["at"] == doc["updated_at"]
    assert doc["trace_next"] == 1 and isinstance(doc["trace"][0], str)
    store.save(exe)  # a state-only commit keeps everything else
    after = raw(harness, "doc-1")
    assert after is not None
    assert len(after["r2"]) == 32 and after["r2"] != after["r1"], "the receipt of version 2"
    replaced = ("version", "r2", "data", "updated_at")
    assert {k: v for k, v in after.items() if k not in replaced} == {
        k: v for k, v in doc.items() if k not in replaced
    }


def test_field_names_never_come_from_user_data(harness: Harness, store: MongoStore) -> None:
    hostile = "$set.a.b"
    store.commit(
        new_exe(hostile),
        [(hostile, ev(hostile))],
        processed_event_id=hostile,
        timers=(TimerOp.schedule(hostile, 1.0),),
        spawns=[(hostile, hostile, {hostile: hostile})],
        trace=step(hostile),
    )
    for doc in everything(harness):
        assert set(doc) <= FIELDS
        for array in ("outbox", "spawns", "timers", "processed"):
            for element in doc.get(array) or []:
                assert set(element) <= ELEMENT_FIELDS


def test_indexes_exist(harness: Harness, store: MongoStore) -> None:
    for spec in INDEXES:
        info = harness.database()[spec.collection].index_information()
        assert spec.name in info, spec.name
        assert list(info[spec.name]["key"]) == list(spec.keys)


def test_sweeps_use_their_index_on_a_real_server(harness: Harness, store: MongoStore) -> None:
    """``explain`` of each sweep names its index (needs a real server: mongomock plans
    nothing, so the check there is the plan-level one in test_plan.py)."""
    if isinstance(harness, MongomockHarness):
        pytest.skip("query plans need a real server (set HAREL_TEST_MONGO_URL)")
    for n in range(20):
        store.commit(new_exe(f"ix-{n}"), [])
    store.commit(
        new_exe("ix-busy"),
        [(None, ev("o"))],
        timers=(TimerOp.schedule("/a", 1.0),),
        spawns=[("c", "/r", {})],
        processed_event_id="m",
    )
    from harel_store_mongo import _requests as rq

    database = harness.database()
    for request, index in (
        (rq.pending_request(False, 10), "outbox_next"),
        (rq.pending_request(True, 10), "spawns_next"),
        (rq.due_request(FAR, 10), "timers_next"),
        (rq.listing_request(["DONE"], "flow", False, None, 11), "list_definition"),
        (rq.listing_request(None, "flow", False, None, 11), "list_definition_id"),
    ):
        query = request.args[0]
        plan = database.command(
            "explain",
            {"find": EXECUTIONS, "filter": query, "sort": dict(request.kwargs["sort"])},
            verbosity="queryPlanner",
        )
        assert index in str(plan["queryPlanner"]["winningPlan"]), (index, plan)


# -- retention inside the document ---------------------------------------------------------------


def test_prune_shrinks_the_dedupe_array(harness: Harness, store: MongoStore) -> None:
    exe = new_exe("marks")
    for n in range(5):
        store.commit(exe, [], processed_event_id=f"m{n}")
    doc = raw(harness, "marks")
    assert doc is not None and len(doc["processed"]) == 5
    ages = [m["at"] for m in doc["processed"]]
    assert store.prune_processed(ages[2], batch_size=1) == 2
    doc = raw(harness, "marks")
    assert doc is not None
    assert [m["event"] for m in doc["processed"]] == ["m2", "m3", "m4"]
    assert doc["marks_since"] == ages[2]
    assert store.prune_processed(FAR) == 3
    doc = raw(harness, "marks")
    assert doc is not None and doc["processed"] == [] and doc["marks_since"] is None


def collections(harness: Harness) -> list[list[dict[str, Any]]]:
    """The executions, the moved marks and the work rows, read directly."""
    database = harness.database()
    return [list(database[name].find({}, sort=[("_id", 1)])) for name in (EXECUTIONS, MARKS, WORK)]


SIDE = {
    "timers": (TimerOp.schedule("/t", 7.0),),
    "spawns": [("kid", "/r", {"k": 1})],
    "trace": step("Again"),
}


def test_a_recorded_event_id_is_refused_with_nothing_written(
    harness: Harness, store: MongoStore
) -> None:
    """The mark's filter clause refuses the write (no snapshot, emit, timer, spawn, trace,
    receipt; the mark keeps its first age) and the work rows its touch inserted before the
    write are dropped again: every collection reads as before."""
    exe = new_exe("again")
    store.commit(exe, [], processed_event_id="e")
    before = collections(harness)
    with pytest.raises(AlreadyProcessed):
        store.commit(exe, [("peer", ev("o1")), (None, ev("o2"))], processed_event_id="e", **SIDE)
    assert exe.version == 1
    assert collections(harness) == before


def test_a_stale_copy_redelivering_is_refused_with_nothing_written(
    harness: Harness, store: MongoStore
) -> None:
    exe = new_exe("stale")
    store.save(exe)
    rival = store.load("stale")
    assert rival is not None
    store.commit(rival, [], processed_event_id="e")
    before = collections(harness)
    with pytest.raises(AlreadyProcessed) as info:
        store.commit(exe, [("peer", ev("o1"))], processed_event_id="e", **SIDE)
    assert (info.value.expected, info.value.found) == (1, 2)
    assert collections(harness) == before


def test_a_fenced_commit_on_a_recreated_execution_writes_nothing(
    harness: Harness, store: MongoStore
) -> None:
    """The receipt clause: the stored version is the copy's, its receipt another commit's."""
    old = new_exe("re", status=Status.DONE)
    store.save(old)
    assert store.purge("re") is True
    store.save(new_exe("re", context={"who": "new"}))
    before = collections(harness)
    with pytest.raises(StoreConflict) as info:
        store.commit(old, [("peer", ev("o1"))], processed_event_id="e", **SIDE)
    assert not isinstance(info.value, AlreadyProcessed)
    assert (info.value.expected, info.value.found) == (1, 1)
    assert collections(harness) == before


def marked_past_the_move(store: MongoStore, execution_id: str) -> Execution:
    """An execution whose first marks were moved out to ``marks`` (``m-0`` … ``m-128``)."""
    exe = new_exe(execution_id)
    for n in range(MARKS_HIGH + 1):
        store.commit(exe, [], processed_event_id=f"m-{n}")
    return exe


def test_a_moved_mark_is_refused_with_nothing_written(harness: Harness, store: MongoStore) -> None:
    """The moved-mark filter lets the write's filter see marks moved out of the document: a
    fresh event is still one write, a moved one is refused (read on ``marks``)."""
    exe = marked_past_the_move(store, "mv")
    doc = raw(harness, "mv")
    assert doc is not None and doc["marks_out"] is True
    assert "m-0" not in [m["event"] for m in doc["processed"]]
    assert may_hold(doc["mf"], "m-0")
    before = collections(harness)
    with pytest.raises(AlreadyProcessed):
        store.commit(exe, [("peer", ev("o1"))], processed_event_id="m-0", **SIDE)
    assert collections(harness) == before
    with harness.counting() as calls:
        store.commit(exe, [], processed_event_id="fresh")
    assert len(calls) == 1, calls


def test_a_moved_mark_filter_false_positive_still_commits_once(
    harness: Harness, store: MongoStore
) -> None:
    """A filter with every bit set makes the write miss; ``marks`` does not hold the event,
    so the write goes again under the version and receipt just read: stored once."""
    exe = marked_past_the_move(store, "fp")
    harness.database()[EXECUTIONS].update_one({"_id": "fp"}, {"$set": {"mf": "f" * 4096}})
    with harness.counting() as calls:
        store.commit(exe, [("peer", ev("o1"))], processed_event_id="fresh")
    # the write (missed), the probe, the mark looked up in marks, the write again
    documents = [name for name, _ in calls if name in (EXECUTIONS, MARKS)]
    assert documents == [EXECUTIONS, EXECUTIONS, MARKS, EXECUTIONS], calls
    assert store.load("fp") == exe and store.is_processed("fp", "fresh")
    assert [e.event.id for e in store.pending_outbox()] == ["o1"]


def test_append_trace_never_creates_a_document(harness: Harness, store: MongoStore) -> None:
    with pytest.raises(ExecutionNotFound):
        store.append_trace("ghost", step())
    assert raw(harness, "ghost") is None
    store.commit(new_exe("ghost"), [])  # the first commit is not refused as a conflict
    assert store.load("ghost") is not None


def test_purge_keeps_what_it_owes_others_until_acked(harness: Harness, store: MongoStore) -> None:
    exe = new_exe("gone", status=Status.DONE)
    store.commit(
        exe,
        [("peer", ev("to-peer")), (None, ev("to-all")), ("gone", ev("to-self"))],
        processed_event_id="in",
        trace=step(),
    )
    assert store.purge("gone") is True
    doc = raw(harness, "gone")
    assert doc is not None and doc["version"] == 0
    assert set(doc) == {"_id", "version", "outbox", "outbox_next", "seq_hi"}  # seq_hi: kept
    assert doc["seq_hi"] == max(e["seq"] for e in doc["outbox"]) + 2**14  # "to-self" was last
    assert sorted(e["target"] or "" for e in doc["outbox"]) == ["", "peer"]
    assert harness.footprint("gone") == []
    assert store.load("gone") is None and store.list_executions().items == []
    assert store.purge("gone") is False
    pending = store.pending_outbox()
    assert sorted(e.event.id for e in pending) == ["to-all", "to-peer"]
    for entry in pending:
        store.ack_outbox(entry.seq)
    assert raw(harness, "gone") is None, "the last ack removes the relay-only document"


@pytest.mark.parametrize("state_only", [False, True])
def test_a_new_execution_takes_over_a_relay_only_document(
    harness: Harness, store: MongoStore, state_only: bool
) -> None:
    """Whether the insert is a pipeline (with a trace step) or a plain ``$set`` (state only)."""
    store.commit(new_exe("reuse", status=Status.DONE), [("peer", ev("owed"))], trace=step())
    assert store.purge("reuse") is True
    again = new_exe("reuse")
    store.commit(again, [], trace=None if state_only else step())
    assert again.version == 1
    assert [t["index"] for t in store.read_trace("reuse")] == ([] if state_only else [0])
    assert [e.event.id for e in store.pending_outbox()] == ["owed"]
    with pytest.raises(StoreConflict):
        store.save(new_exe("reuse"))  # the document now holds a stored execution


def test_an_enqueue_appends_to_the_targets_document_and_never_reads_it(
    harness: Harness, store: MongoStore
) -> None:
    """Nothing stored: a relay-only document holds the entry (every read ignores it) and the
    target's first commit takes it over; stored: the entry joins its document, which no
    other field of changes."""
    first = store.enqueue("later", ev("q-1"), priority=3)
    doc = raw(harness, "later")
    assert doc is not None and set(doc) == {"_id", "version", "outbox", "outbox_next"}
    assert (doc["version"], doc["outbox_next"]) == (0, first)
    assert [(e["seq"], e["target"]) for e in doc["outbox"]] == [(first, "later")]
    assert store.load("later") is None and store.list_executions().items == []
    row = harness.database()[WORK].find_one({"_id": "later"})
    assert row is not None and (row["priority"], row["owner"]) == (3, None)
    exe = new_exe("later")
    store.commit(exe, [("peer", ev("o-1"))], trace=step())
    assert exe.version == 1
    before = raw(harness, "later")
    second = store.enqueue("later", ev("q-2"))
    after = raw(harness, "later")
    assert before is not None and after is not None
    assert {k: v for k, v in after.items() if k != "outbox"} == {
        k: v for k, v in before.items() if k != "outbox"
    }
    assert [e["event"] for e in after["outbox"]][:-1] == [e["event"] for e in before["outbox"]]
    assert [e.event.id for e in store.pending_outbox()] == ["q-1", "o-1", "q-2"]
    assert second > first
    store.save(exe)  # a state-only commit keeps the entries
    assert [e.event.id for e in store.pending_outbox()] == ["q-1", "o-1", "q-2"]
    for entry in store.pending_outbox():
        store.ack_outbox(entry.seq)
    assert store.load("later") == exe


def test_acking_an_enqueue_to_a_missing_target_removes_its_document(
    harness: Harness, store: MongoStore
) -> None:
    seq = store.enqueue("nobody", ev("q"))
    store.ack_outbox(seq)
    assert raw(harness, "nobody") is None


# -- failure modes --------------------------------------------------------------------------------


def closed_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def unreachable_url() -> str:
    return (
        f"mongodb://harel:pw-s3cret@127.0.0.1:{closed_port()}/"
        "?serverSelectionTimeoutMS=200&connectTimeoutMS=200&db=x"
    )


def test_unreachable_server_bounded_retries_then_store_unavailable() -> None:
    started = time.monotonic()
    with pytest.raises(StoreUnavailable) as info:
        MongoStore.from_url(unreachable_url(), connect_retries=2, retry_delay=0.01)
    elapsed = time.monotonic() - started
    assert "3 attempt(s)" in str(info.value)
    assert "pw-s3cret" not in str(info.value) and "pw-s3cret" not in repr(info.value)
    assert (info.value.__cause__ is None and info.value.__context__ is None) or (
        "pw-s3cret" not in str(info.value.__context__)
    )
    assert elapsed < 15, elapsed


def test_unreachable_server_on_a_read_only_open_is_unavailable_not_missing() -> None:
    with pytest.raises(StoreUnavailable, match="1 attempt") as info:
        open_store(unreachable_url(), create=False, connect_retries=0)
    assert "pw-s3cret" not in str(info.value)


async def test_unreachable_server_async_uses_pymongo_async_client() -> None:
    with pytest.raises(StoreUnavailable) as info:
        await AsyncMongoStore.from_url(unreachable_url(), connect_retries=1, retry_delay=0.01)
    assert "2 attempt(s)" in str(info.value)
    assert "pw-s3cret" not in str(info.value)


async def test_from_url_checks_its_knobs_once_however_often_it_retries(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The spec checks the URL's knobs once and every attempt trusts its options; the
    constructors, which take a caller's values, still check every knob themselves."""
    checked: list[str] = []
    validate, check_w = Knob.validate, _base.check_w

    def counting(knob: Knob, value: object) -> Any:
        checked.append(knob.name)
        return validate(knob, value)

    def counting_w(w: object) -> object:
        checked.append("check_w")
        return check_w(w)

    monkeypatch.setattr(Knob, "validate", counting)
    monkeypatch.setattr(_base, "check_w", counting_w)
    url = unreachable_url().replace("&db=x", "")
    with pytest.raises(StoreUnavailable, match="3 attempt"):
        MongoStore.from_url(url, db="kw", connect_retries=2, retry_delay=0.01)
    with pytest.raises(StoreUnavailable, match="2 attempt"):
        await AsyncMongoStore.from_url(url, db="kw", connect_retries=1, retry_delay=0.01)
    assert checked == ["db", "db"]  # the keyword db, once per from_url
    checked.clear()
    with pytest.raises(InvalidStoreOption, match=r"option db='a\.b'"):
        MongoStore(harness.sync_client(), db="a.b")
    with pytest.raises(InvalidStoreOption, match="option w=0"):
        await AsyncMongoStore.open(harness.async_client(), db=harness.db, w=0)
    assert checked == ["db", "db", "trace_max", "check_w"]


def test_lost_cas_leaves_no_side_write(harness: Harness, store: MongoStore) -> None:
    exe = new_exe("cas")
    store.commit(exe, [], timers=(TimerOp.schedule("/a", 1.0),), trace=step())
    stale = store.load("cas")
    assert stale is not None
    store.save(exe)
    before = everything(harness)
    with pytest.raises(StoreConflict) as info:
        store.commit(
            stale,
            [(None, ev("lost")), ("cas", ev("lost-2"))],
            processed_event_id="lost-in",
            timers=(TimerOp.cancel("/a"), TimerOp.schedule("/b", 2.0)),
            spawns=[("lost-child", "/r", {})],
            trace=step("Lost"),
        )
    assert (info.value.expected, info.value.found) == (1, 2)
    assert stale.version == 1
    assert everything(harness) == before


HOSTILE_IDS = (
    "a:b",
    "{x}",
    "a.b.c",
    "$where",
    "$$ROOT",
    "100%_x",
    'it\'s "q" `b`',
    "\\back\\",
    "tab\tnewline\n",
    "\u00e9\u4e2d\U0001f600\U0002a6d6\U000e0020\U000f0001\U0010fffd",
    "\ufeff\u200b",
    "x" * 1024,
    "\U0010ffff" * 256,
)


@pytest.mark.parametrize("hostile", HOSTILE_IDS, ids=range(len(HOSTILE_IDS)))
def test_hostile_ids_round_trip_everywhere(store: MongoStore, hostile: str) -> None:
    exe = new_exe(hostile, parent_id=hostile, status=Status.RUNNING)
    store.commit(
        exe,
        [(hostile, Event(id=hostile, kind="k"))],
        processed_event_id=hostile,
        timers=(TimerOp.schedule(hostile, 1.5),),
        spawns=[(hostile, hostile, {hostile: hostile})],
        trace=step(hostile),
    )
    loaded = store.load(hostile)
    assert loaded is not None and loaded.id == hostile
    assert store.load_for_event(hostile, hostile)[1] is True
    assert store.is_processed(hostile, hostile) is True
    assert store.is_processed(hostile, "other") is False
    assert store.due_timers(FAR) == [(hostile, hostile, 1.5)]
    (entry,) = store.pending_outbox()
    assert (entry.target_id, entry.event.id) == (hostile, hostile)
    (spawn,) = store.pending_spawns()
    assert (spawn.parent_id, spawn.child_id, spawn.root_path, spawn.context) == (
        hostile,
        hostile,
        hostile,
        {hostile: hostile},
    )
    assert store.read_trace(hostile)[0]["event_kind"] == hostile
    assert [s.id for s in store.list_executions(status=[Status.RUNNING]).items] == [hostile]
    store.delete_timer(hostile, hostile, 1.5)
    assert store.due_timers(FAR) == []
    assert store.purge(hostile, force=True) is True
    assert store.load(hostile) is None and store.pending_outbox() == []


@pytest.mark.parametrize("bad", ["a\x00b", "\ud800", "x" * 1025, "\U0010ffff" * 257, ""])
def test_unstorable_ids_are_refused_before_anything_is_written(
    harness: Harness, store: MongoStore, bad: str
) -> None:
    before = everything(harness)
    with pytest.raises(InvalidIdentifier):
        store.commit(new_exe(bad), [])
    with pytest.raises(InvalidIdentifier):
        store.commit(new_exe("ok"), [(bad, ev("e"))])
    with pytest.raises(InvalidIdentifier):
        store.load(bad)
    with pytest.raises(InvalidIdentifier):
        store.purge(bad)
    assert everything(harness) == before


async def test_an_unknown_constructor_keyword_is_refused(harness: Harness) -> None:
    """The knobs are typed (``StoreKnobs``) and checked: a misspelt one is not ignored."""
    with pytest.raises(TypeError, match="'tracemax'"):
        MongoStore(harness.sync_client(), db=harness.db, tracemax=3)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="'dbname'"):
        await AsyncMongoStore.open(harness.async_client(), dbname="x")  # type: ignore[call-arg]


class GatedAsyncStore(AsyncMongoStore):
    """An AsyncMongoStore whose requests wait for ``gate`` (to cancel callers mid-request)."""

    gate: asyncio.Event
    waiting: asyncio.Event
    sent: list[str]

    async def _send(self, request: Request) -> Any:
        self.sent.append(request.method)
        self.waiting.set()
        await self.gate.wait()
        return await super()._send(request)


async def gated(harness: Harness) -> GatedAsyncStore:
    store = GatedAsyncStore(harness.async_client(), db=harness.db)
    store.gate, store.waiting, store.sent = asyncio.Event(), asyncio.Event(), []
    store.gate.set()
    await store._run(store._plan.open())
    store.gate, store.waiting, store.sent = asyncio.Event(), asyncio.Event(), []
    return store


async def cancel_midway(store: Any, call: Any) -> None:
    """Start ``call``, cancel it while its first request (a fresh store's writer registration,
    before its first seq) is held at the gate, release the gate: it must still send its write
    (and the work-row touches around it) and then raise ``CancelledError``."""
    task = asyncio.ensure_future(call)
    await store.waiting.wait()
    task.cancel()
    await asyncio.sleep(0)
    store.gate.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    # the writer registration, the work row touched, the write, the work row touched again
    assert store.sent == ["find_one_and_update", "update_one", "update_one", "update_one"]


async def test_a_cancelled_async_commit_finishes_its_write_first(harness: Harness) -> None:
    """Cancelled while its writer registration is in flight, a commit still sends its update
    (the write runs to its end), bumps ``exe.version``, then raises ``CancelledError``."""
    store = await gated(harness)
    try:
        exe = new_exe("cx")
        await cancel_midway(store, store.commit(exe, [("cx", ev("o"))]))
        assert exe.version == 1
        stored = await store.load("cx")
        assert stored is not None and stored.version == 1
        assert [e.event.id for e in await store.pending_outbox()] == ["o"]
    finally:
        await store.close()


async def test_a_cancelled_async_enqueue_finishes_its_write_first(harness: Harness) -> None:
    """Cancelled while its writer registration is in flight, an enqueue still writes its entry
    (and touches the row around it), then raises ``CancelledError``."""
    store = await gated(harness)
    try:
        await cancel_midway(store, store.enqueue("cq", ev("q")))
        assert [e.event.id for e in await store.pending_outbox()] == ["q"]
    finally:
        await store.close()


async def test_a_cancelled_async_read_waits_for_its_reply(harness: Harness) -> None:
    store = await gated(harness)
    try:
        task = asyncio.ensure_future(store.load("nobody"))
        await store.waiting.wait()
        task.cancel()
        for _ in range(5):
            await asyncio.sleep(0)
        assert not task.done(), "the read is still waiting for its reply"
        store.gate.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert store.sent == ["find_one"]
    finally:
        await store.close()
