"""Issue 17 §4: the GSI1 partitions are sharded (``L.<n>``, ``T.<n>``, ``O.<n>``, ``S.<n>``,
``P.<n>``); sweeps and listing fan out over the shards and merge exactly; the shard count is
recorded with the table's layout; layout 2 (constant partitions) is upgraded in place."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from harel.model import Event, Execution
from harel.store.contract import TimerOp
from harel.store.errors import StoreConfigError
from harel_store_dynamodb import _table
from harel_store_dynamodb._schema import (
    DEFAULT_INDEX_SHARDS,
    INDEX_KINDS,
    META_KEY,
    SCHEMA_VERSION,
    index_kind,
    shard_of,
)
from harel_store_dynamodb._spec import SPEC
from harel_store_dynamodb.sync import DynamoDBStore, open_client
from harel_store_dynamodb.testing import DynamoDBHarness

SHARDS = 3
IDS = [f"exe-{n:02d}" for n in range(30)]


@pytest.fixture
def sharded(dynamodb_target: dict[str, Any]) -> Iterator[DynamoDBHarness]:
    harness = DynamoDBHarness(**dynamodb_target, index_shards=SHARDS)
    yield harness
    harness.destroy()


def fill(store: DynamoDBStore) -> list[tuple[str, str, float]]:
    """Thirty executions over every shard, each with an emit, a mark, a spawn and two timers
    whose fire times tie across shards; returns the timers."""
    timers = []
    for n, execution_id in enumerate(IDS):
        at, tie = float(n % 4), 100.0
        store.commit(
            Execution(id=execution_id, definition_id="d"),
            [(None, Event(id=f"out-{n:02d}", kind="Go"))],
            processed_event_id=f"in-{n:02d}",
            timers=(TimerOp.schedule("/a", at), TimerOp.schedule("/b", tie)),
            spawns=[(f"child-{n:02d}", "/r", {})],
        )
        timers += [(execution_id, "/a", at), (execution_id, "/b", tie)]
    return sorted(timers, key=lambda t: (t[2], t[0], t[1]))


def test_shards_come_from_a_stable_hash_and_spread() -> None:
    assert [shard_of(f"id-{n}", 4) for n in range(8)] == [shard_of(f"id-{n}", 4) for n in range(8)]
    assert shard_of("anything", 1) == 0
    counts = [0] * 8
    for n in range(4000):
        counts[shard_of(f"execution-{n}", 8)] += 1
    assert min(counts) > 400, counts  # ~500 each


def test_sweeps_and_listing_merge_the_shards_exactly(sharded: DynamoDBHarness) -> None:
    store = sharded.open_sync()
    timers = fill(store)
    g1p = indexed(sharded)
    assert {index_kind(p) for p in g1p} == set(INDEX_KINDS)
    assert len(g1p) == len(INDEX_KINDS) * SHARDS, f"entries not spread over the shards: {g1p}"

    for limit in (1, 2, 7, 8, 31, 59, 60, None):
        assert store.due_timers(1000.0, limit=limit) == timers[:limit]
    assert store.due_timers(1.0) == [t for t in timers if t[2] <= 1.0]

    outbox = store.pending_outbox()
    assert [e.event.id for e in outbox] == [f"out-{n:02d}" for n in range(30)], "commit order"
    for limit in (1, 4, 11, 30):
        assert store.pending_outbox(limit=limit) == outbox[:limit]
        assert store.pending_spawns(limit=limit) == store.pending_spawns()[:limit]

    for limit in (1, 4, 7, 30, 31):
        seen, cursor = [], None
        while True:
            page = store.list_executions(limit=limit, cursor=cursor)
            seen += [row.id for row in page.items]
            if page.next_cursor is None:
                break
            assert len(page.items) == limit, "every page but the last is full"
            cursor = page.next_cursor
        assert seen == IDS
    assert store.prune_processed(1e12) == len(IDS)
    assert store.purge("exe-07", force=True) is True
    assert "out-07" in [e.event.id for e in store.pending_outbox()]  # broadcast: not targeted


def test_the_shard_count_is_recorded_with_the_layout(
    sharded: DynamoDBHarness, dynamodb_target: dict[str, Any]
) -> None:
    sharded.open_sync().close()
    admin = open_client(sharded.options, sharded.options.endpoint_url)
    try:
        meta = admin.get_item(TableName=sharded.table, Key=META_KEY, ConsistentRead=True)
        assert meta["Item"]["index_shards"] == {"N": str(SHARDS)}
    finally:
        admin.close()
    knobs = {**sharded.store_knobs(), "index_shards": None}
    adopted = DynamoDBStore(sharded.table, **knobs)  # no knob: the table's count
    assert adopted._plan.shards == SHARDS
    adopted.close()
    for fresh_process in (False, True):
        if fresh_process:
            _table._CHECKED.clear()
        with pytest.raises(StoreConfigError, match="index_shards=3"):
            DynamoDBStore(sharded.table, **{**knobs, "index_shards": 5})
    assert SPEC.open_args("dynamodb://t-1?index_shards=8", {}).arguments["index_shards"] == 8


def indexed(harness: DynamoDBHarness) -> set[str]:
    """The GSI1 partitions in use, but the work rows' (layout 4, claims)."""
    return {i["g1p"]["S"] for i in harness.scan() if "g1p" in i and i["sk"]["S"] != "w"}


def as_layout_2(admin: Any, table: str) -> None:
    """Rewrite the table as layout 2 left it: constant GSI1 partitions, no shard count, no
    work rows."""
    admin.put_item(
        TableName=table,
        Item={**META_KEY, "schema": {"N": "2"}, "written_by": {"S": "harel-store-dynamodb 0.1"}},
    )
    params: dict[str, Any] = {"TableName": table, "ConsistentRead": True}
    while True:
        reply = admin.scan(**params)
        for item in reply["Items"]:
            if item["sk"]["S"] == "w":
                admin.delete_item(TableName=table, Key={"pk": item["pk"], "sk": item["sk"]})
            elif "g1p" in item:
                admin.update_item(
                    TableName=table,
                    Key={"pk": item["pk"], "sk": item["sk"]},
                    UpdateExpression="SET g1p = :k",
                    ExpressionAttributeValues={":k": {"S": index_kind(item["g1p"]["S"])}},
                )
        if not reply.get("LastEvaluatedKey"):
            return
        params["ExclusiveStartKey"] = reply["LastEvaluatedKey"]


def test_layout_2_is_upgraded_in_place_to_sharded_partitions(harness: DynamoDBHarness) -> None:
    store = harness.open_sync()
    timers = fill(store)
    before = (
        store.pending_outbox(),
        store.pending_spawns(),
        store.list_executions(limit=100).items,
    )
    store.close()
    admin = open_client(harness.options, harness.options.endpoint_url)
    try:
        as_layout_2(admin, harness.table)
        assert indexed(harness) == set(INDEX_KINDS)
        _table._CHECKED.clear()  # a new process of this release opens the table
        upgraded = DynamoDBStore(harness.table, **{**harness.store_knobs(), "index_shards": 2})
        meta = admin.get_item(TableName=harness.table, Key=META_KEY, ConsistentRead=True)["Item"]
        assert meta["schema"] == {"N": str(SCHEMA_VERSION)} and meta["index_shards"] == {"N": "2"}
        partitions = indexed(harness)
        assert partitions == {f"{kind}.{n}" for kind in INDEX_KINDS for n in range(2)}
        assert upgraded._plan.shards == 2
        after = (
            upgraded.pending_outbox(),
            upgraded.pending_spawns(),
            upgraded.list_executions(limit=100).items,
        )
        assert after == before
        assert upgraded.due_timers(1000.0) == timers
        assert upgraded.prune_processed(1e12) == len(IDS)
        upgraded.commit(Execution(id="new-1", definition_id="d"), [])
        assert "new-1" in [row.id for row in upgraded.list_executions(limit=100).items]
        upgraded.close()
        _table._CHECKED.clear()
        again = harness.open_sync()  # opening again is a no-op; the recorded count is kept
        assert again._plan.shards == 2 != DEFAULT_INDEX_SHARDS
        again.close()
    finally:
        admin.close()
