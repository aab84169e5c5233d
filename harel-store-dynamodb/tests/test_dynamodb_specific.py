"""What the kit cannot state about the DynamoDB store: requests per operation, the data model,
the 100-action cap, item limits, failure modes, hostile ids.  Against the moto server of
conftest.py (or ``HAREL_TEST_DYNAMODB_URL``), over real HTTP.
"""

from __future__ import annotations

import base64
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aioboto3
import pytest
from harel.model import Event, Execution, Status
from harel.store.contract import StoreConflict, TimerOp
from harel.store.errors import (
    AlreadyProcessed,
    InvalidIdentifier,
    PayloadTooLarge,
    SchemaVersionError,
    StoreConfigError,
    StoreUnavailable,
)
from harel_store_dynamodb import AsyncDynamoDBStore, DynamoDBStore
from harel_store_dynamodb._client import client_arguments
from harel_store_dynamodb._items import mark_item
from harel_store_dynamodb._options import make_options
from harel_store_dynamodb._schema import DEFAULT_INDEX_SHARDS, META_KEY, shard_of
from harel_store_dynamodb.sync import open_client
from harel_store_dynamodb.testing import DynamoDBHarness, new_table_name
from harel_testing.dynamodb import MotoServer

MOTO_ONLY = pytest.mark.skipif(
    bool(os.environ.get("HAREL_TEST_DYNAMODB_URL")),
    reason="restarts the test's own moto server",
)


class Requests:
    """Counts the HTTP requests a botocore client sends (``before-send``: retries included)."""

    def __init__(self, client: Any) -> None:
        self.sent: list[str] = []
        client.meta.events.register("before-send.dynamodb", self._record)

    def _record(self, event_name: str, **_: Any) -> None:
        self.sent.append(event_name.rsplit(".", 1)[-1])

    def take(self) -> list[str]:
        """The operations sent since the last call."""
        sent, self.sent = self.sent, []
        return sent


@pytest.fixture
def counted(harness: DynamoDBHarness) -> Iterator[tuple[DynamoDBStore, Requests]]:
    """A sync store over an injected client whose requests are counted."""
    client = open_client(harness.options, harness.options.endpoint_url)
    store = DynamoDBStore(harness.table, client=client, create_table=True)
    requests = Requests(client)
    yield store, requests
    store.close()
    client.close()


def exe(execution_id: str = "kit-1", **fields: Any) -> Execution:
    return Execution(id=execution_id, definition_id="flow", **fields)


def step(kind: str = "Go", **extra: Any) -> dict[str, Any]:
    return {"event_kind": kind, **extra}


# -- requests per operation ---------------------------------------------------------------------


def test_requests_per_operation(counted: tuple[DynamoDBStore, Requests]) -> None:
    """Every commit shape is ONE request; the figures in the README come from here."""
    store, requests = counted
    measured: dict[str, list[str]] = {}

    def measure(label: str, call: Any) -> Any:
        requests.take()
        result = call()
        measured[label] = requests.take()
        return result

    parent = exe("parent")
    measure(
        "commit (insert, every effect)",
        lambda: store.commit(
            parent,
            [("child-0", Event(id="e0", kind="Go")), (None, Event(id="e1", kind="Go"))],
            processed_event_id="in-0",
            timers=(TimerOp.schedule("/a", 5.0), TimerOp.cancel("/b")),
            spawns=[("child-0", "/r", {"n": 0})],
            trace=step("Start"),
        ),
    )
    measure("commit (state only)", lambda: store.commit(parent, []))
    measure(
        "commit (emits+mark+timers+spawn+trace)",
        lambda: store.commit(
            parent,
            [(None, Event(id="e2", kind="Go"))],
            processed_event_id="in-1",
            timers=(TimerOp.cancel("/a"), TimerOp.schedule("/a", 9.0)),
            spawns=[("child-1", "/r", {})],
            trace=step(),
        ),
    )
    fan_out = [(f"c{n:03d}", f"/fork/{n}", {"n": n}) for n in range(150)]
    measure("commit (150 spawns)", lambda: store.commit(parent, [], spawns=fan_out, trace=step()))
    loaded = measure("load", lambda: store.load("parent"))
    measure("commit (traced, after load)", lambda: store.commit(loaded, [], trace=step()))
    other = DynamoDBStore(store.options.table, client=store._client)
    cold = other.load("parent")
    assert cold is not None
    measure("load_for_event", lambda: store.load_for_event("parent", "in-0"))
    measure("is_processed", lambda: store.is_processed("parent", "in-0"))
    outbox = measure("pending_outbox", lambda: store.pending_outbox())
    measure("ack_outbox", lambda: store.ack_outbox(outbox[0].seq))
    spawns = measure("pending_spawns", lambda: store.pending_spawns())
    measure("ack_spawn (own item)", lambda: store.ack_spawn(spawns[0].seq))
    measure("ack_spawn (packed slot)", lambda: store.ack_spawn(spawns[5].seq))
    measure("due_timers", lambda: store.due_timers(100.0))
    measure("delete_timer", lambda: store.delete_timer("parent", "/a", 9.0))
    measure("read_trace", lambda: store.read_trace("parent"))
    measure("append_trace (cursor known)", lambda: store.append_trace("parent", step("M")))
    fresh = DynamoDBStore(store.options.table, client=store._client)
    measure("append_trace (cursor unknown)", lambda: fresh.append_trace("parent", step("M")))
    measure("list_executions", lambda: store.list_executions(limit=10))
    measure("enqueue", lambda: store.enqueue("parent", Event(id="q0", kind="Go"), priority=2))
    measure("enqueue (again)", lambda: store.enqueue("nobody", Event(id="q1", kind="Go")))
    measure("prune_processed (nothing old)", lambda: store.prune_processed(1.0))
    record = measure("export_execution", lambda: store.export_execution("parent"))
    assert record is not None and record.execution is not None
    loaded.status = Status.DONE
    store.commit(loaded, [])
    measure("purge", lambda: store.purge("parent"))

    counts = {label: len(sent) for label, sent in measured.items()}
    report = "\n".join(
        f"  {label:40s} {n}  {' '.join(measured[label])}" for label, n in counts.items()
    )
    print("\nrequests per operation (moto):\n" + report)
    for label, n in counts.items():
        if label.startswith("commit"):
            assert n == 1, f"{label} sent {measured[label]}"
    assert measured["commit (150 spawns)"] == ["TransactWriteItems"]
    assert measured["commit (state only)"] == ["UpdateItem"]  # no side items: no transaction
    # the relay item and the target's work row: one transaction, nothing read first
    assert measured["enqueue"] == measured["enqueue (again)"] == ["TransactWriteItems"]
    shards = store._plan.shards
    assert shards == DEFAULT_INDEX_SHARDS
    # the execution's partition, every outbox shard (targets), its own spawn shard, the check
    assert measured["export_execution"] == ["Query"] * (2 + shards) + ["GetItem"]
    for label in ("pending_outbox", "pending_spawns", "due_timers", "list_executions"):
        assert measured[label] == ["Query"] * shards, (label, measured[label])
    for label in ("load", "load_for_event", "is_processed", "read_trace", "delete_timer"):
        assert counts[label] == 1, (label, measured[label])
    assert measured["load_for_event"] == ["BatchGetItem"]
    assert counts["append_trace (cursor known)"] == 1
    assert counts["append_trace (cursor unknown)"] == 2
    assert counts["ack_outbox"] == 1 and counts["ack_spawn (own item)"] == 1
    assert counts["ack_spawn (packed slot)"] == 1
    assert all("Scan" not in sent for sent in measured.values())


def test_a_traced_commit_from_a_cold_store_reads_its_cursor_once(
    counted: tuple[DynamoDBStore, Requests],
) -> None:
    store, requests = counted
    first = exe()
    store.commit(first, [], trace=step("Start"))
    cold = DynamoDBStore(store.options.table, client=store._client)
    requests.take()
    cold.commit(first, [], trace=step())
    assert requests.take() == ["GetItem", "TransactWriteItems"]
    cold.commit(first, [], trace=step())
    assert requests.take() == ["TransactWriteItems"]
    assert [t["index"] for t in cold.read_trace("kit-1")] == [0, 1, 2]


def test_a_lost_cas_costs_one_request_and_writes_nothing(
    counted: tuple[DynamoDBStore, Requests], harness: DynamoDBHarness
) -> None:
    store, requests = counted
    store.commit(exe(), [])
    stale, winner = store.load("kit-1"), store.load("kit-1")
    assert stale is not None and winner is not None
    store.commit(winner, [])
    before = harness.scan()
    requests.take()
    with pytest.raises(StoreConflict) as info:
        store.commit(
            stale,
            [("kit-1", Event(id="lost", kind="Go")), (None, Event(id="lost2", kind="Go"))],
            processed_event_id="lost-in",
            timers=(TimerOp.schedule("/lost", 1.0),),
            spawns=[("lost-child", "/r", {})],
            trace=step("Lost"),
        )
    assert (info.value.expected, info.value.found) == (1, 2)
    assert requests.take() == ["TransactWriteItems"], "found must come from ALL_OLD, not a read"
    assert stale.version == 1
    assert _sorted(harness.scan()) == _sorted(before), "a lost CAS left a side write"


SIDE_EFFECTS: dict[str, Any] = {
    "timers": (TimerOp.schedule("/again", 1.0),),
    "spawns": [("again-child", "/r", {})],
    "trace": step("Again"),
}
"""Every side write a refused commit must not leave behind (next to its emits and mark)."""


def test_an_already_processed_commit_is_one_transaction_and_writes_nothing(
    counted: tuple[DynamoDBStore, Requests], harness: DynamoDBHarness
) -> None:
    """The mark's guard refuses the commit inside its own TransactWriteItems: no read before,
    none after, nothing written — from the copy that recorded the event and from a stale one."""
    store, requests = counted
    first = exe(context={"n": 1})
    store.commit(first, [], processed_event_id="e-1")
    stale = store.load("kit-1")
    assert stale is not None
    before = harness.scan()
    emits = [("kit-2", Event(id="out", kind="Go")), (None, Event(id="out2", kind="Go"))]
    requests.take()
    first.context["n"] = 2
    with pytest.raises(AlreadyProcessed) as info:
        store.commit(first, emits, processed_event_id="e-1", **SIDE_EFFECTS)
    assert (info.value.event_id, info.value.found, first.version) == ("e-1", 1, 1)
    assert requests.take() == ["TransactWriteItems"]
    assert _sorted(harness.scan()) == _sorted(before), "a refused commit left a write"

    store.commit(first, [], processed_event_id="e-2")  # the live copy moves on
    before = harness.scan()
    requests.take()
    with pytest.raises(AlreadyProcessed) as info:  # version AND mark fail: still dedupe
        store.commit(stale, emits, processed_event_id="e-2", **SIDE_EFFECTS)
    assert (info.value.expected, info.value.found) == (1, 2)
    assert requests.take() == ["TransactWriteItems"], "found and the mark come from one answer"
    assert _sorted(harness.scan()) == _sorted(before)


def test_a_fenced_copy_is_refused_in_its_one_request_after_purge_and_recreate(
    counted: tuple[DynamoDBStore, Requests], harness: DynamoDBHarness
) -> None:
    store, requests = counted
    old = exe(status=Status.DONE)
    store.commit(old, [])
    assert store.purge("kit-1") is True
    new = exe(context={"who": "new"})
    store.commit(new, [])
    before = harness.scan()
    requests.take()
    with pytest.raises(StoreConflict) as info:  # same version 1, another commit's receipt
        store.commit(old, [])
    assert not isinstance(info.value, AlreadyProcessed) and info.value.found == 1
    assert requests.take() == ["UpdateItem"]
    with pytest.raises(StoreConflict):
        store.commit(old, [], processed_event_id="e-9", **SIDE_EFFECTS)
    assert requests.take() == ["TransactWriteItems"]  # a traced one is refused, not retried
    assert _sorted(harness.scan()) == _sorted(before)
    store.commit(new, [])
    assert requests.take() == ["UpdateItem"]  # the live copy: fenced, still one request


def test_an_insert_overwrites_a_mark_an_absent_execution_left(
    counted: tuple[DynamoDBStore, Requests], harness: DynamoDBHarness
) -> None:
    """A purge or big import that died midway may leave marks of an execution that is not
    stored; no execution holds them, so an insert with that event id commits (it overwrites
    the mark on a second attempt)."""
    store, requests = counted
    mark = mark_item("kit-1", "e-1", 1.0, shard_of("kit-1", store._plan.shards))
    store._client.put_item(TableName=harness.table, Item=mark)
    requests.take()
    created = exe()
    store.commit(created, [], processed_event_id="e-1")
    assert created.version == 1
    assert requests.take() == ["TransactWriteItems", "TransactWriteItems"]
    assert store.is_processed("kit-1", "e-1") is True
    with pytest.raises(AlreadyProcessed):
        store.commit(created, [], processed_event_id="e-1")


@pytest.mark.anyio
async def test_async_commit_is_one_request(harness: DynamoDBHarness) -> None:
    session = aioboto3.Session()
    async with session.client(
        "dynamodb", **client_arguments(harness.options, harness.options.endpoint_url)
    ) as client:
        store = await AsyncDynamoDBStore.open(harness.table, client=client, create_table=True)
        requests = Requests(client)
        first = exe()
        await store.commit(first, [(None, Event(id="e", kind="Go"))], trace=step("Start"))
        await store.commit(first, [], processed_event_id="p", timers=(TimerOp.schedule("/t", 1.0),))
        assert requests.take() == ["TransactWriteItems", "TransactWriteItems"]
        assert (await store.load_for_event("kit-1", "p"))[1] is True
        assert requests.take() == ["BatchGetItem"]
        await store.close()


def _sorted(items: list[dict[str, Any]]) -> list[str]:
    return sorted(repr(sorted(item.items())) for item in items)


# -- data model ---------------------------------------------------------------------------------


def test_items_follow_the_documented_layout(harness: DynamoDBHarness) -> None:
    store = harness.open_sync()
    store.commit(
        exe("a:b"),
        [("t", Event(id="e1", kind="Go"))],
        processed_event_id="in-1",
        timers=(TimerOp.schedule("/wait", 1700000000.123456789),),
        spawns=[("c", "/r", {})],
        trace=step("Start"),
    )
    keys = sorted((i["pk"]["S"], i["sk"]["S"], i.get("g1p", {}).get("S")) for i in harness.scan())
    exe_pk = "x:a:b"
    shard = shard_of("a:b", store._plan.shards)  # every index entry of a:b: one shard
    assert (exe_pk, "x", f"L.{shard}") in keys
    assert (exe_pk, "p:in-1", f"P.{shard}") in keys
    assert (exe_pk, "t:/wait", f"T.{shard}") in keys
    assert (exe_pk, f"x:{0:016x}", None) in keys
    relay = [k for k in keys if k[0].startswith("q:")]
    assert sorted((k[1][:2], k[2]) for k in relay) == [("o:", f"O.{shard}"), ("s:", f"S.{shard}")]
    assert ("meta", "schema", None) in keys
    timer = next(i for i in harness.scan() if i["sk"]["S"] == "t:/wait")
    assert timer["fa"]["S"] == repr(1700000000.123456789), "fire_at is kept as its exact repr"
    store.close()


def test_an_enqueue_writes_a_relay_item_and_the_work_row_only(harness: DynamoDBHarness) -> None:
    """The outbox item a commit writes for one emit (in the target's shard, ``tg`` naming it)
    and the target's work row; no execution item, nothing in the target's partition else."""
    store = harness.open_sync()
    before = {(i["pk"]["S"], i["sk"]["S"]) for i in harness.scan()}
    seq = store.enqueue("a:b", Event(id="q1", kind="Go"), priority=3)
    items = [i for i in harness.scan() if (i["pk"]["S"], i["sk"]["S"]) not in before]
    shard = shard_of("a:b", store._plan.shards)
    keys = sorted((i["pk"]["S"], i["sk"]["S"], i.get("g1p", {}).get("S")) for i in items)
    relay = [k for k in keys if k[0].startswith("q:")]
    assert [(k[1], k[2]) for k in relay] == [("o:0000", f"O.{shard}")]
    assert ("x:a:b", "w", f"W3.{shard}") in keys and len(keys) == 2
    (item,) = (i for i in items if i["pk"]["S"].startswith("q:"))
    assert item["tg"] == {"SS": ["a:b"]}
    (entry,) = item["e"]["M"].values()
    assert int(entry["M"]["q"]["N"]) == seq
    store.ack_outbox(seq)
    assert not any(i["pk"]["S"].startswith("q:") for i in harness.scan())
    store.close()


def test_fan_out_packs_and_acks_empty_the_partition(harness: DynamoDBHarness) -> None:
    store = harness.open_sync()
    spawns = [(f"child-{n:03d}", f"/fork/{n}", {"n": n}) for n in range(150)]
    emits = [(f"child-{n:03d}", Event(id=f"hello-{n}", kind="Hi")) for n in range(120)]
    parent = exe("parent")
    store.commit(parent, emits, spawns=spawns, trace=step("Fork"))
    pending = store.pending_spawns()
    assert [(s.child_id, s.root_path, s.context) for s in pending] == spawns
    outbox = store.pending_outbox()
    assert [(e.target_id, e.event.id) for e in outbox] == [(t, e.id) for t, e in emits]
    assert store.pending_spawns(limit=3) == pending[:3]
    for entry in pending:
        store.ack_spawn(entry.seq)
    for entry in outbox:
        store.ack_outbox(entry.seq)
    assert store.pending_spawns() == [] and store.pending_outbox() == []
    assert [i for i in harness.scan() if i["pk"]["S"].startswith("q:")] == []
    store.close()


def test_purge_takes_its_entries_out_of_packed_items(harness: DynamoDBHarness) -> None:
    store = harness.open_sync()
    store.commit(exe("A", status=Status.DONE), [])
    targets = ["A" if n % 2 else "B" for n in range(120)]
    emits = [(t, Event(id=f"e{n}", kind="Hi")) for n, t in enumerate(targets)]
    store.commit(exe("sender"), emits)  # 121 actions: the outbox entries are packed
    assert store.purge("A") is True
    assert harness.footprint("A") == []
    left = store.pending_outbox()
    assert [(e.target_id, e.event.id) for e in left] == [
        (t, f"e{n}") for n, t in enumerate(targets) if t == "B"
    ]
    for entry in left:
        store.ack_outbox(entry.seq)
    assert [i for i in harness.scan() if i["pk"]["S"].startswith("q:")] == []
    store.close()


def test_a_large_but_compressible_context_and_an_oversized_one(harness: DynamoDBHarness) -> None:
    store = harness.open_sync()
    big = exe("big", context={"blob": "y" * 3_000_000})
    store.commit(big, [])
    loaded = store.load("big")
    assert loaded is not None and loaded.context == big.context
    noise = base64.b64encode(os.urandom(600_000)).decode()
    refused = exe("noise", context={"noise": noise})
    with pytest.raises(PayloadTooLarge, match="400 KB"):
        store.commit(refused, [(None, Event(id="x", kind="X"))])
    assert refused.version == 0
    assert store.load("noise") is None and store.pending_outbox() == []
    store.close()


def test_lowering_trace_max_far_trims_beyond_the_transaction(harness: DynamoDBHarness) -> None:
    store = harness.open_sync()
    store.trace_max = 0  # unbounded
    e = exe()
    for n in range(130):
        store.commit(e, [], trace=step(n=n))
    store.trace_max = 2
    store.commit(e, [], trace=step(n=130))
    assert [t["n"] for t in store.read_trace("kit-1")] == [129, 130]
    steps = [i for i in harness.scan() if i["sk"]["S"].startswith("x:")]
    assert len(steps) == 2, "the trims beyond the transaction were deleted right after it"
    store.close()


def test_hostile_ids_round_trip_or_are_refused_before_writing(harness: DynamoDBHarness) -> None:
    store = harness.open_sync()
    planes = "".join(chr(plane * 0x10000 + 0x100) for plane in range(17))
    ids = [f"id{c}" for c in ":{.$%'\""] + [planes, "é" * 512, "x" * 1024]
    for n, odd in enumerate(ids):
        e = Execution(id=odd, definition_id=odd, parent_id=odd)
        store.commit(
            e,
            [(odd, Event(id=odd, kind="Go"))],
            processed_event_id=odd,
            timers=(TimerOp.schedule(odd, float(n)),),
            spawns=[(odd, odd, {})],
            trace=step(odd),
        )
        loaded, seen = store.load_for_event(odd, odd)
        assert loaded is not None and loaded.id == odd and seen
        assert [t["event_kind"] for t in store.read_trace(odd)] == [odd]
        assert (odd, odd, float(n)) in store.due_timers(1e9)
        assert [i.id for i in store.list_executions(definition_id=odd).items] == [odd]
    listed = [i.id for i in store.list_executions(limit=100).items]
    assert listed == sorted(ids)
    before = harness.scan()
    for bad in ("nul\x00id", "x" * 1025, "🙂" * 16384, "x" * 65536):
        with pytest.raises(InvalidIdentifier):
            store.commit(exe(bad), [(None, Event(id="e", kind="Go"))])
        with pytest.raises(InvalidIdentifier):
            store.load(bad)
    assert _sorted(harness.scan()) == _sorted(before)
    store.close()


# -- the table ----------------------------------------------------------------------------------


def test_missing_table_without_create_table_is_a_config_error(harness: DynamoDBHarness) -> None:
    knobs = harness.store_knobs()
    knobs["create_table"] = False
    with pytest.raises(StoreConfigError, match="create_table=true"):
        DynamoDBStore(new_table_name(), **knobs)


def test_foreign_tables_are_refused(harness: DynamoDBHarness) -> None:
    admin = open_client(harness.options, harness.options.endpoint_url)
    name = new_table_name("harel-foreign")
    admin.create_table(
        TableName=name,
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )
    try:
        with pytest.raises(StoreConfigError, match="not laid out for harel"):
            DynamoDBStore(name, **harness.store_knobs())
    finally:
        admin.delete_table(TableName=name)
    store = harness.open_sync()
    store.close()
    admin.put_item(TableName=harness.table, Item={**META_KEY, "schema": {"N": "99"}})
    other = DynamoDBHarness(**{**_target_of(harness), "table": harness.table})
    from harel_store_dynamodb import _table

    _table._CHECKED.clear()  # a new process would check the table again
    with pytest.raises(SchemaVersionError):
        other.open_sync()
    admin.close()


def _target_of(harness: DynamoDBHarness) -> dict[str, Any]:
    o = harness.options
    return {"endpoint_url": o.endpoint_url, "region": o.region, "local": o.local != "false"}


# -- failure modes ------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_unreachable_endpoint_at_start_retries_then_is_unavailable() -> None:
    url = (
        f"dynamodb://AKID:hunter2-secret@{new_table_name()}?local=true&max_attempts=1"
        f"&endpoint_url=http://127.0.0.1:{_free_port()}"
    )
    started = time.monotonic()
    with pytest.raises(StoreUnavailable) as info:
        DynamoDBStore.from_url(url, connect_retries=2, retry_delay=0.05)
    assert time.monotonic() - started < 20
    assert "3 attempt(s)" in str(info.value)
    assert "hunter2" not in str(info.value) and "hunter2" not in repr(info.value.__cause__)


def test_unreachable_endpoint_on_a_read_only_open_is_unavailable_not_missing() -> None:
    from harel.registry import open_store

    url = (
        f"dynamodb://{new_table_name()}?local=true&max_attempts=1&create_table=true"
        f"&endpoint_url=http://127.0.0.1:{_free_port()}"
    )
    with pytest.raises(StoreUnavailable, match="1 attempt") as info:
        open_store(url, create=False, connect_retries=0)
    assert "describe_table" in str(info.value)


@pytest.mark.anyio
async def test_unreachable_endpoint_at_start_retries_then_is_unavailable_async() -> None:
    url = (
        f"dynamodb://{new_table_name()}?local=true&max_attempts=1"
        f"&endpoint_url=http://127.0.0.1:{_free_port()}"
    )
    with pytest.raises(StoreUnavailable, match="3 attempt"):
        await AsyncDynamoDBStore.from_url(url, connect_retries=2, retry_delay=0.05)


@pytest.fixture
def own_server() -> Iterator[MotoServer]:
    server = MotoServer()
    yield server
    server.stop()


def _restart(server: MotoServer) -> MotoServer:
    server.stop()
    return MotoServer(server.port)


@MOTO_ONLY
def test_server_stopped_mid_run_is_retryable_and_the_same_store_recovers(
    own_server: MotoServer,
) -> None:
    table = new_table_name()
    store = DynamoDBStore(
        table,
        endpoint_url=own_server.endpoint,
        local=True,
        create_table=True,
        request_timeout=2.0,
        max_attempts=1,
    )
    first = exe()
    store.commit(first, [(None, Event(id="before", kind="Go"))])
    own_server.stop()
    with pytest.raises(StoreUnavailable) as info:
        store.commit(first, [(None, Event(id="during", kind="Go"))], trace=step())
    assert info.value.retryable is True
    assert first.version == 1
    with pytest.raises(StoreUnavailable):
        store.load("kit-1")
    server = MotoServer(own_server.port)
    try:
        loaded = store.load("kit-1")
        assert loaded is not None and loaded.version == 1
        assert [e.event.id for e in store.pending_outbox()] == ["before"], "no partial commit"
        store.commit(first, [(None, Event(id="after", kind="Go"))], trace=step())
        assert first.version == 2
        assert [e.event.id for e in store.pending_outbox()] == ["before", "after"]
    finally:
        store.close()
        server.stop()


@MOTO_ONLY
@pytest.mark.anyio
async def test_server_stopped_mid_run_async(own_server: MotoServer) -> None:
    store = await AsyncDynamoDBStore.open(
        new_table_name(),
        endpoint_url=own_server.endpoint,
        local=True,
        create_table=True,
        request_timeout=2.0,
        max_attempts=1,
    )
    first = exe()
    await store.commit(first, [])
    own_server.stop()
    with pytest.raises(StoreUnavailable):
        await store.commit(first, [(None, Event(id="during", kind="Go"))])
    assert first.version == 1
    server = MotoServer(own_server.port)
    try:
        await store.commit(first, [(None, Event(id="after", kind="Go"))])
        assert first.version == 2
        assert [e.event.id for e in await store.pending_outbox()] == ["after"]
    finally:
        await store.close()
        server.stop()


def test_credentials_never_show(harness: DynamoDBHarness, tmp_path: Path) -> None:
    url = f"dynamodb://AKIDEXAMPLE:sup3r-secret@{harness.table}?local=true"
    knobs = _target_of(harness)
    store = DynamoDBStore.from_url(url, endpoint_url=knobs["endpoint_url"], create_table=True)
    assert "sup3r" not in repr(store) and "sup3r" not in repr(store.options)
    store.close()
    options = make_options("tbl", aws_access_key_id="AKID", aws_secret_access_key="sup3r-secret")
    assert "sup3r" not in repr(options) and "sup3r" not in options.describe()


@pytest.mark.anyio
async def test_async_close_is_idempotent_and_final(harness: DynamoDBHarness) -> None:
    store = await harness.open_async()
    await store.commit(exe(), [])
    await store.close()
    await store.close()
    with pytest.raises(StoreUnavailable, match="closed"):
        await store.load("kit-1")
