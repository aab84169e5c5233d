"""Claims on DynamoDB (issue 16): the work rows' guards, the claim's repair race, the upgrade
from layout 3.  The kit's ClaimTests (test_conformance.py) cover the observable behaviour."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from harel.model import Event, Execution
from harel.store.common.claims import relay_due
from harel.store.common.commit import committing
from harel.store.common.drive import drive
from harel.store.contract import TimerOp
from harel_store_dynamodb import _table
from harel_store_dynamodb._plan import Operations
from harel_store_dynamodb._requests import Call, ConditionFailed, Pause, TransactionCancelled
from harel_store_dynamodb._schema import META_KEY, SCHEMA_VERSION
from harel_store_dynamodb._values import float_key
from harel_store_dynamodb._work import INLINE_TOUCHES
from harel_store_dynamodb.sync import open_client
from harel_store_dynamodb.testing import DynamoDBHarness

Plan = Any


def prepared(exe: Execution, **effects: Any) -> Any:
    return committing(exe, effects.pop("emits", []), **effects).__enter__()


def row_item(key: str, ready: str, wv: int, owner: str | None = None, pr: int = 0) -> Any:
    item = {
        "pk": {"S": "x:" + key},
        "sk": {"S": "w"},
        "pr": {"N": str(pr)},
        "fa": {"S": ready},
        "wv": {"N": str(wv)},
        "g1p": {"S": f"W{pr}.0"},
        "g1s": {"S": float_key(float(ready))},
    }
    if owner is not None:
        item["ow"] = {"S": owner}
    return item


def work_puts(call: Call) -> list[dict[str, Any]]:
    return [
        action["Put"]
        for action in call.params.get("TransactItems", [])
        if "Put" in action and action["Put"]["Item"]["sk"]["S"] == "w"
    ]


def test_a_moved_work_row_rebuilds_the_commit_from_the_stored_row() -> None:
    exe = Execution(id="kit-1", definition_id="d", version=1)
    plan = Operations("t").commit(prepared(exe, emits=[("t-1", Event(id="e", kind="K"))]), 200)
    first = next(plan)
    [guess] = work_puts(first)
    assert guess["ConditionExpression"].startswith("attribute_not_exists(")  # unknown: absent
    leased = row_item("t-1", "500.0", 7, owner="w9", pr=2)
    refused = TransactionCancelled(
        [{"Code": "None"}, {"Code": "ConditionalCheckFailed", "Item": leased}, {"Code": "None"}]
    )
    second = plan.throw(refused)  # rebuilt at once from the returned row, no backoff
    assert isinstance(second, Call) and second.operation == "transact_write_items"
    [put] = work_puts(second)
    item, values = put["Item"], put["ExpressionAttributeValues"]
    assert {"N": "7"} in values.values()  # guarded by the wv it was shown
    # a leased row keeps its lease (ready_at, owner) and priority; the write stamps a new wv
    assert (item["fa"], item["ow"], item["pr"]) == ({"S": "500.0"}, {"S": "w9"}, {"N": "2"})
    assert item["wv"] != {"N": "7"}
    with pytest.raises(StopIteration):
        plan.send({})


def test_a_touch_that_changes_nothing_only_checks_the_row() -> None:
    """Emitting to a free group that is ready earlier writes nothing to its row: the
    transaction only checks its ``wv`` (no write, no conflict between emitters)."""
    exe = Execution(id="kit-1", definition_id="d", version=1)
    plan = Operations("t").commit(prepared(exe, emits=[("t-1", Event(id="e", kind="K"))]), 200)
    next(plan)
    free = row_item("t-1", repr(relay_due(1000.0)), 7)  # relay work written long ago
    refused = TransactionCancelled(
        [{"Code": "None"}, {"Code": "ConditionalCheckFailed", "Item": free}, {"Code": "None"}]
    )
    second = plan.throw(refused)
    check = second.params["TransactItems"][1]["ConditionCheck"]
    assert check["Key"] == {"pk": {"S": "x:t-1"}, "sk": {"S": "w"}}
    assert {"N": "7"} in check["ExpressionAttributeValues"].values()
    with pytest.raises(StopIteration):
        plan.send({})


def test_a_commit_without_due_work_touches_no_work_row() -> None:
    exe = Execution(id="kit-1", definition_id="d", version=1)
    commit = prepared(exe, processed_event_id="in-1", timers=(TimerOp.cancel("/t"),))
    request = next(Operations("t").commit(commit, 200))
    assert request.operation == "transact_write_items" and work_puts(request) == []


def test_a_repair_raced_by_a_commit_reads_the_units_again() -> None:
    """A claim leases an early row, finds nothing due, and repairs it under the lease's wv; a
    commit that armed a timer meanwhile fails the repair, and the claim takes the timer."""
    sent: list[str] = []
    armed = {"yet": False}

    def answer(call: Call | Pause) -> Any:
        if isinstance(call, Pause):
            return None
        sent.append(call.operation)
        params = call.params
        if call.operation == "query" and params.get("IndexName"):
            partition = next(
                v["S"] for v in params["ExpressionAttributeValues"].values() if "." in v["S"]
            )
            return {"Items": [row_item("a", "5.0", 1)] if partition == "W0.0" else []}
        if call.operation == "update_item":  # the lease
            return {"Attributes": row_item("a", "40.0", 2, owner="w1")}
        if call.operation == "query":  # the timers of "a"
            timer = {"ph": {"S": "/t"}, "fa": {"S": "6.0"}}
            return {"Items": [timer] if armed["yet"] else []}
        if call.operation == "delete_item":  # the repair: a commit armed "/t" meanwhile
            armed["yet"] = True
            raise ConditionFailed(row_item("a", "40.0", 3, owner="w1"))
        raise AssertionError(f"unexpected {call}")

    claims = drive(Operations("t").claim("w1", 10.0, 30.0, 100), answer)
    assert [(c.execution_id, c.timers, c.expires_at) for c in claims] == [
        ("a", (("/t", 6.0),), 40.0)
    ]
    assert sent.count("delete_item") == 1 and sent.count("update_item") == 1


@pytest.fixture
def admin(harness: DynamoDBHarness) -> Iterator[Any]:
    client = open_client(harness.options, harness.options.endpoint_url)
    yield client
    client.close()


def as_layout_3(admin: Any, table: str) -> None:
    """Rewrite the table as layout 3 left it: no work rows, meta at 3."""
    item = admin.get_item(TableName=table, Key=META_KEY, ConsistentRead=True)["Item"]
    admin.put_item(TableName=table, Item={**item, "schema": {"N": "3"}})
    for row in admin.scan(TableName=table, ConsistentRead=True)["Items"]:
        if row["sk"]["S"] == "w":
            admin.delete_item(TableName=table, Key={"pk": row["pk"], "sk": row["sk"]})


def test_layout_3_is_upgraded_with_work_rows_for_existing_work(
    harness: DynamoDBHarness, admin: Any
) -> None:
    store = harness.open_sync()
    store.commit(
        Execution(id="up-a", definition_id="d", priority=3),
        [("up-b", Event(id="b1", kind="Go")), (None, Event(id="u1", kind="Go"))],
        timers=(TimerOp.schedule("/late", 50.0), TimerOp.schedule("/early", 20.0)),
        spawns=[("up-c", "/r", {})],
    )
    store.close()
    as_layout_3(admin, harness.table)
    _table._CHECKED.clear()  # a new process of this release opens the table
    upgraded = harness.open_sync()
    try:
        meta = admin.get_item(TableName=harness.table, Key=META_KEY, ConsistentRead=True)
        assert meta["Item"]["schema"] == {"N": str(SCHEMA_VERSION)}
        rows = {
            row["pk"]["S"]: row["fa"]["S"]
            for row in admin.scan(TableName=harness.table, ConsistentRead=True)["Items"]
            if row["sk"]["S"] == "w"
        }
        assert set(rows) == {"x:up-a", "x:up-b", "x:"}
        assert float(rows["x:up-a"]) <= time.time()  # the spawn intent is due at once
        claims = {c.execution_id: c for c in upgraded.claim("w1", time.time() + 100, limit=100)}
        assert set(claims) == {"up-a", "up-b", None}
        assert [s.child_id for s in claims["up-a"].spawns] == ["up-c"]
        assert claims["up-a"].timers == (("/early", 20.0), ("/late", 50.0))
        assert [e.event.id for e in claims["up-b"].outbox] == ["b1"]
        assert [e.event.id for e in claims[None].outbox] == ["u1"]
    finally:
        upgraded.close()


def test_a_fan_out_beyond_the_inline_touches_is_claimable(harness: DynamoDBHarness) -> None:
    """A commit emitting to more executions than it touches inline bundles the touches; the
    next claim applies the bundle and returns every target's entry, none lost or doubled."""
    store = harness.open_sync()
    try:
        targets = [f"fan-{n:02d}" for n in range(INLINE_TOUCHES + 2)]
        store.commit(
            Execution(id="fan-src", definition_id="d", priority=2),
            [(t, Event(id=f"e-{t}", kind="Go")) for t in targets],
        )
        bundles = [i for i in harness.scan() if i["sk"]["S"].startswith("W:")]
        assert len(bundles) == 1 and bundles[0]["g1p"]["S"].startswith("W2.")
        claims = store.claim("w1", time.time() + 100, limit=100)
        assert sorted((c.execution_id, c.outbox[0].event.id, c.priority) for c in claims) == [
            (t, f"e-{t}", 2) for t in targets
        ]
        assert [i for i in harness.scan() if i["sk"]["S"].startswith("W:")] == []
    finally:
        store.close()
