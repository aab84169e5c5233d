"""The DynamoDB plans without a server: the requests they yield, and how they read replies.

A plan is driven by hand here: each yielded request is inspected, and the reply (or the mapped
error a driver would throw in) is chosen by the test.
"""

from __future__ import annotations

import base64
import math
import os
import struct
import subprocess
import sys
from collections.abc import Callable, Generator
from typing import Any

import pytest
from botocore.exceptions import (
    ClientError,
    EndpointConnectionError,
    NoCredentialsError,
    ReadTimeoutError,
)
from harel.model import Event, Execution
from harel.store.common.claims import relay_due
from harel.store.common.commit import committing
from harel.store.common.enqueue import prepare_enqueue
from harel.store.contract import Lease, StoreConflict, TimerOp
from harel.store.errors import (
    AlreadyProcessed,
    CommitOutcomeUnknown,
    InvalidIdentifier,
    InvalidPayload,
    InvalidStoreURL,
    PayloadTooLarge,
    StoreConfigError,
    StoreError,
    StoreUnavailable,
)
from harel_store_dynamodb._commit import MAX_ACTIONS
from harel_store_dynamodb._cursor import TraceCursor
from harel_store_dynamodb._errors import map_error
from harel_store_dynamodb._legacy import legacy_url
from harel_store_dynamodb._options import make_options
from harel_store_dynamodb._plan import Operations
from harel_store_dynamodb._requests import (
    Call,
    ConditionFailed,
    ItemBusy,
    Pause,
    RequestInDoubt,
    TableNotFound,
    TransactionCancelled,
)
from harel_store_dynamodb._schema import DEFAULT_INDEX_SHARDS, index_kind
from harel_store_dynamodb._seq import BaseClock, locate, packed_seq, unpacked_seq
from harel_store_dynamodb._spec import SPEC
from harel_store_dynamodb._values import float_key
from hypothesis import given
from hypothesis import strategies as st

TABLE = "plan-table"
Plan = Generator[Any, Any, Any]


def first_request(plan: Plan) -> Any:
    return next(plan)


def finish(plan: Plan, reply: Any) -> Any:
    """Send ``reply`` and expect the plan to return; its value."""
    with pytest.raises(StopIteration) as done:
        plan.send(reply)
    return done.value.value


def ops() -> Operations:
    return Operations(TABLE)


def prepared(exe: Execution, **effects: Any) -> Any:
    """The PreparedCommit of ``exe`` (version bumped as a store's commit would)."""
    manager = committing(exe, effects.pop("emits", []), **effects)
    return manager.__enter__()


def all_strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in all_strings(v)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in all_strings(v)]
    return []


def expressions(params: dict[str, Any]) -> list[str]:
    """Every expression string of a request (transaction actions included)."""
    found = []
    for key, value in params.items():
        if key.endswith("Expression") and isinstance(value, str):
            found.append(value)
        elif isinstance(value, dict):
            found.extend(expressions(value))
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, dict):
                    found.extend(expressions(item))
    return found


# -- commit ---------------------------------------------------------------------------------


def test_insert_commit_is_one_transaction_with_every_effect() -> None:
    exe = Execution(id="id:{x}.$%'\"", definition_id="def", context={"a": 1})
    commit = prepared(
        exe,
        emits=[("t-1", Event(id="e1", kind="Go")), (None, Event(id="e2", kind="Go"))],
        processed_event_id="in-1",
        timers=(TimerOp.schedule("/a", 5.0), TimerOp.cancel("/b")),
        spawns=[("child", "/r", {"k": "v"})],
        trace={"event_kind": "Start"},
    )
    plan = ops().commit(commit, 200)
    request = first_request(plan)
    assert request == Call("transact_write_items", request.params)
    actions = request.params["TransactItems"]
    kinds = [next(iter(action)) for action in actions]
    # execution, mark, timer put, timer delete, trace step, 3 work rows (its own, t-1, the
    # untargeted group), 2 outbox items, 1 spawn item
    assert kinds == ["Update", "Put", "Put", "Delete", "Put"] + ["Put"] * 3 + ["Put"] * 3
    work = [actions[i]["Put"] for i in (5, 6, 7)]
    assert [put["Item"]["pk"]["S"] for put in work] == ["x:" + exe.id, "x:t-1", "x:"]
    assert all(put["Item"]["sk"]["S"] == "w" for put in work)
    assert all(put["ConditionExpression"].startswith("attribute_not_exists(") for put in work)
    update = actions[0]["Update"]
    assert update["ConditionExpression"].startswith("attribute_not_exists(")
    assert update["ReturnValuesOnConditionCheckFailure"] == "ALL_OLD"
    # user values only ever travel as placeholders
    for text in expressions(request.params):
        for value in ("id:{x}.$%'\"", "def", "in-1", "/a", "child", "t-1"):
            assert value not in text
    assert finish(plan, {}) is None


def test_cancel_and_rearm_of_one_path_touch_the_timer_item_once() -> None:
    exe = Execution(id="kit-1", definition_id="d", version=0)
    commit = prepared(exe, timers=(TimerOp.cancel("/retry"), TimerOp.schedule("/retry", 20.0)))
    actions = first_request(ops().commit(commit, 200)).params["TransactItems"]
    keys = [a[next(iter(a))].get("Key") or a[next(iter(a))].get("Item") for a in actions]
    sort_keys = [k["sk"]["S"] for k in keys]
    assert sort_keys.count("t:/retry") == 1
    assert len(set(sort_keys)) == len(sort_keys), "an item appears twice in one transaction"


def test_a_fan_out_of_150_spawns_is_packed_into_one_transaction() -> None:
    exe = Execution(id="parent", definition_id="d")
    spawns = [(f"child-{n:03d}", f"/fork/{n}", {"n": n}) for n in range(150)]
    commit = prepared(exe, emits=[(None, Event(id="forked", kind="F"))], spawns=spawns)
    actions = first_request(ops().commit(commit, 200)).params["TransactItems"]
    assert len(actions) <= MAX_ACTIONS
    items = [a["Put"]["Item"] for a in actions if "Put" in a]
    spawn_items = [i for i in items if index_kind(i.get("g1p", {}).get("S", "")) == "S"]
    assert len(spawn_items) == 1
    entries = spawn_items[0]["e"]["M"]
    seqs = sorted(int(entry["M"]["q"]["N"]) for entry in entries.values())
    assert len(seqs) == 150
    where = [locate(seq) for seq in seqs]
    assert all(w is not None and w.packed for w in where)
    assert [w.slot for w in where if w is not None] == list(range(150))


def test_oversized_document_is_refused_before_anything_is_sent() -> None:
    noise = base64.b64encode(os.urandom(600_000)).decode()
    exe = Execution(id="big", definition_id="d", context={"noise": noise})
    commit = prepared(exe)
    with pytest.raises(PayloadTooLarge, match="400 KB"):
        first_request(ops().commit(commit, 200))


def test_compressible_megabyte_fits_one_item() -> None:
    exe = Execution(id="big", definition_id="d", context={"blob": "x" * 1_000_000})
    update = first_request(ops().commit(prepared(exe), 200)).params  # one UpdateItem
    blobs = [v for v in update["ExpressionAttributeValues"].values() if "B" in v]
    assert len(blobs) == 1 and len(blobs[0]["B"]) < 50_000


def test_lost_cas_is_a_conflict_with_the_found_version_and_no_extra_read() -> None:
    exe = Execution(id="kit-1", definition_id="d", version=3)
    plan = ops().commit(prepared(exe), 200)
    first_request(plan)
    reasons = [
        {
            "Code": "ConditionalCheckFailed",
            "Item": {"v": {"N": "5"}, "tn": {"N": "0"}, "tl": {"N": "0"}},
        }
    ]
    with pytest.raises(StoreConflict) as info:
        plan.throw(TransactionCancelled(reasons))
    assert (info.value.expected, info.value.found) == (3, 5)


def test_absent_record_conflicts_with_found_none() -> None:
    exe = Execution(id="kit-1", definition_id="d", version=3)
    plan = ops().commit(prepared(exe), 200)
    first_request(plan)
    with pytest.raises(StoreConflict) as info:
        plan.throw(TransactionCancelled([{"Code": "ConditionalCheckFailed"}]))
    assert info.value.found is None


@pytest.mark.parametrize(
    ("code", "error"),
    [
        ("ValidationError", InvalidPayload),
        ("ItemCollectionSizeLimitExceeded", PayloadTooLarge),
        ("SomethingNew", StoreError),
    ],
)
def test_other_cancellation_reasons_are_typed_errors_not_conflicts(
    code: str, error: type[Exception]
) -> None:
    exe = Execution(id="kit-1", definition_id="d", version=1)
    plan = ops().commit(prepared(exe), 200)
    first_request(plan)
    with pytest.raises(error) as info:
        plan.throw(TransactionCancelled([{"Code": "None"}, {"Code": code, "Message": "m"}]))
    assert not isinstance(info.value, StoreConflict)


def test_transaction_conflicts_are_retried_then_unavailable() -> None:
    exe = Execution(id="kit-1", definition_id="d", version=1)
    plan = ops().commit(prepared(exe), 200)
    request = first_request(plan)
    busy = TransactionCancelled([{"Code": "TransactionConflict"}])
    attempts = 0
    with pytest.raises(StoreUnavailable):
        while True:
            if isinstance(request, Call):
                attempts += 1
                request = plan.throw(busy)
            else:
                assert isinstance(request, Pause)
                request = plan.send(None)
    assert attempts > 1


def test_a_relay_base_collision_retries_with_a_fresh_base() -> None:
    exe = Execution(id="kit-1", definition_id="d", version=1)
    plan = ops().commit(prepared(exe, emits=[(None, Event(id="e", kind="K"))]), 200)
    first = first_request(plan)
    # actions: the execution, the untargeted group's work row, the relay item
    collided = TransactionCancelled(
        [{"Code": "None"}, {"Code": "None"}, {"Code": "ConditionalCheckFailed"}]
    )
    assert isinstance(plan.throw(collided), Pause)
    second = plan.send(None)
    assert isinstance(second, Call) and second.operation == "transact_write_items"
    key = lambda r: r.params["TransactItems"][2]["Put"]["Item"]["pk"]["S"]  # noqa: E731
    assert key(first) != key(second)
    assert finish(plan, {}) is None


def test_an_answer_lost_in_transit_is_settled_by_resending_and_the_receipt() -> None:
    commit = prepared(Execution(id="kit-1", definition_id="d", version=1))
    plan = ops().commit(commit, 200)
    request = first_request(plan)
    assert request.operation == "update_item"  # no side items: one conditional UpdateItem
    token = request.params["ExpressionAttributeValues"]
    receipt = next(v["S"] for v in token.values() if "S" in v and len(v["S"]) == 32)
    assert receipt == commit.token  # the receipt is the core commit token
    assert isinstance(plan.throw(RequestInDoubt("lost")), Pause)
    assert plan.send(None) == request  # the very same request again
    # landed, and another writer committed on top since: the receipt of version 2 is ours
    on_top = {"v": {"N": "3"}, "tn": {"N": "0"}, "tl": {"N": "0"}, "k2": {"S": receipt}}
    with pytest.raises(StopIteration):
        plan.throw(ConditionFailed(on_top))

    theirs = {**on_top, "k2": {"S": "someone else"}}
    with pytest.raises(StoreConflict):
        resent_after_doubt().throw(ConditionFailed(theirs))
    overwritten = {**theirs, "v": {"N": "10"}}  # receipt of version 2 gone: cannot tell
    with pytest.raises(CommitOutcomeUnknown):
        resent_after_doubt().throw(ConditionFailed(overwritten))


def resent_after_doubt() -> Plan:
    """A state-only commit at version 1 whose first send got no answer, resent once."""
    plan = ops().commit(prepared(Execution(id="kit-1", definition_id="d", version=1)), 200)
    first_request(plan)
    plan.throw(RequestInDoubt("lost"))
    plan.send(None)
    return plan


# -- dedupe in the commit, and the fence ----------------------------------------------------

CCF = "ConditionalCheckFailed"


def cancelled(*codes: str, old: dict[str, Any] | None = None) -> TransactionCancelled:
    """A cancellation with these reason codes by action (``old``: action 0's ALL_OLD item)."""
    reasons: list[dict[str, Any]] = [{"Code": code} for code in codes]
    if old is not None:
        reasons[0]["Item"] = old
    return TransactionCancelled(reasons)


def stored_copy(exe: Execution) -> str:
    """Commit ``exe`` as a store would (version bumped, success recorded): the next commit of
    this very object is fenced by the token returned."""
    manager = committing(exe)
    token = manager.__enter__().token
    manager.__exit__(None, None, None)
    return token


def test_the_mark_is_guarded_and_a_recorded_event_id_is_already_processed() -> None:
    exe = Execution(id="kit-1", definition_id="d", version=1)
    plan = ops().commit(prepared(exe, processed_event_id="e-1"), 200)
    actions = first_request(plan).params["TransactItems"]
    mark = actions[1]["Put"]
    assert mark["Item"]["sk"]["S"] == "p:e-1"
    assert mark["ConditionExpression"] == "attribute_not_exists(#n0)"
    assert mark["ExpressionAttributeNames"] == {"#n0": "pk"}
    # the execution's condition held (reason None): refused by the mark alone, no extra read
    with pytest.raises(AlreadyProcessed) as info:
        plan.throw(cancelled("None", CCF, "None"))
    assert (info.value.event_id, info.value.expected, info.value.found) == ("e-1", 1, 1)


def test_a_stale_copy_with_a_recorded_event_id_is_already_processed() -> None:
    exe = Execution(id="kit-1", definition_id="d", version=1)
    plan = ops().commit(prepared(exe, processed_event_id="e-1"), 200)
    first_request(plan)
    theirs = {"v": {"N": "4"}, "tn": {"N": "0"}, "tl": {"N": "0"}, "k2": {"S": "theirs"}}
    with pytest.raises(AlreadyProcessed) as info:
        plan.throw(cancelled(CCF, CCF, "None", old=theirs))
    assert info.value.found == 4
    # the version alone failed: a plain conflict
    plan = ops().commit(prepared(exe, processed_event_id="e-1"), 200)
    first_request(plan)
    with pytest.raises(StoreConflict) as conflict:
        plan.throw(cancelled(CCF, "None", "None", old=theirs))
    assert not isinstance(conflict.value, AlreadyProcessed)


def test_a_resent_stored_commit_succeeds_although_its_mark_is_stored() -> None:
    commit = prepared(Execution(id="kit-1", definition_id="d", version=1), processed_event_id="e")
    plan = ops().commit(commit, 200)
    first_request(plan)
    ours = {"v": {"N": "2"}, "tn": {"N": "0"}, "tl": {"N": "0"}, "k2": {"S": commit.token}}
    assert finish_by_throwing(plan, cancelled(CCF, CCF, "None", old=ours)) is None


def finish_by_throwing(plan: Plan, error: BaseException) -> Any:
    with pytest.raises(StopIteration) as done:
        plan.throw(error)
    return done.value.value


def test_a_fenced_update_conditions_on_the_receipt_of_its_expected_version() -> None:
    exe = Execution(id="kit-1", definition_id="d", version=2)
    base = stored_copy(exe)  # this object stored version 3
    commit = prepared(exe)
    assert commit.base == base and commit.expected_version == 3
    request = first_request(ops().commit(commit, 200))
    assert request.operation == "update_item"  # the fence adds no request
    params = request.params
    condition = params["ConditionExpression"]
    names, values = params["ExpressionAttributeNames"], params["ExpressionAttributeValues"]
    terms = [term.split(" = ") for term in condition.split(" AND ")]
    assert [(names[n], values[v]) for n, v in terms] == [("v", {"N": "3"}), ("k3", {"S": base})]
    # a loaded copy carries no fence: the version alone
    loaded = first_request(ops().commit(prepared(Execution(id="kit-1", definition_id="d")), 200))
    assert "k" not in str(loaded.params.get("ConditionExpression"))


def test_a_fence_that_fails_at_the_same_version_is_a_conflict_never_a_cursor_retry() -> None:
    operations = ops()
    exe = Execution(id="kit-1", definition_id="d", version=0)
    stored_copy(exe)
    operations.cache.put("kit-1", TraceCursor(1, 0, 0))
    plan = operations.commit(prepared(exe, trace={"event_kind": "Go"}), 200)
    first_request(plan)
    recreated = {"v": {"N": "1"}, "tn": {"N": "0"}, "tl": {"N": "0"}, "k1": {"S": "another"}}
    with pytest.raises(StoreConflict) as info:
        plan.throw(cancelled(CCF, "None", old=recreated))
    assert not isinstance(info.value, AlreadyProcessed) and info.value.found == 1


def test_an_insert_over_a_stale_mark_of_an_absent_execution_overwrites_it() -> None:
    plan = ops().commit(
        prepared(Execution(id="kit-1", definition_id="d"), processed_event_id="e"), 200
    )
    first = first_request(plan)
    assert "ConditionExpression" in first.params["TransactItems"][1]["Put"]
    second = plan.throw(cancelled("None", CCF, "None"))  # no execution item, but a mark
    assert isinstance(second, Call) and second.operation == "transact_write_items"
    mark = second.params["TransactItems"][1]["Put"]
    assert mark["Item"]["sk"]["S"] == "p:e" and "ConditionExpression" not in mark
    assert finish(plan, {}) is None


def test_a_cold_traced_commit_on_a_moved_execution_reads_the_mark_to_classify() -> None:
    exe = Execution(id="kit-1", definition_id="d", version=2)
    plan = ops().commit(prepared(exe, processed_event_id="e", trace={"event_kind": "Go"}), 200)
    first_request(plan)  # the cursor read
    read = plan.send({"Item": {"v": {"N": "7"}, "tn": {"N": "1"}, "tl": {"N": "0"}}})
    assert read.operation == "get_item" and read.params["ConsistentRead"] is True
    assert read.params["Key"]["sk"]["S"] == "p:e"
    with pytest.raises(AlreadyProcessed) as info:
        plan.send({"Item": {"ev": {"S": "e"}}})
    assert info.value.found == 7


# -- enqueue --------------------------------------------------------------------------------


def enqueue_plan(target: str = "kit-t", priority: int = 3, **data: Any) -> tuple[Plan, Any]:
    """An enqueue's plan and its first request."""
    plan = ops().enqueue(prepare_enqueue(target, Event(id="q", kind="K", data=data), priority))
    return plan, first_request(plan)


def relay_seq(request: Call) -> int:
    """The seq of the one entry an enqueue's transaction writes."""
    (entry,) = request.params["TransactItems"][1]["Put"]["Item"]["e"]["M"].values()
    return int(entry["M"]["q"]["N"])


def test_an_enqueue_is_one_transaction_of_the_relay_item_and_the_work_row() -> None:
    """ONE ``TransactWriteItems``: the target's work row (absent to this store: a ``Put``
    under ``attribute_not_exists``, with the enqueue's priority, due at once) and the relay
    item a commit writes for one emit (guarded, returning the stored item when taken); the
    execution item is not touched; the seq is the relay item's."""
    plan, request = enqueue_plan()
    assert request.operation == "transact_write_items"
    work, relay = request.params["TransactItems"]
    assert work["Put"]["Item"]["pk"]["S"] == "x:kit-t" and work["Put"]["Item"]["sk"]["S"] == "w"
    assert work["Put"]["Item"]["pr"]["N"] == "3"
    assert float(work["Put"]["Item"]["fa"]["S"]) < relay_due(0.0) + 1e10  # due at once
    assert "attribute_not_exists" in work["Put"]["ConditionExpression"]
    item = relay["Put"]["Item"]
    assert item["pk"]["S"].startswith("q:") and item["sk"]["S"] == "o:0000"
    assert item["tg"] == {"SS": ["kit-t"]}
    assert "attribute_not_exists" in relay["Put"]["ConditionExpression"]
    assert relay["Put"]["ReturnValuesOnConditionCheckFailure"] == "ALL_OLD"
    (entry,) = item["e"]["M"].values()
    seq = relay_seq(request)
    assert entry["M"]["t"] == {"S": "kit-t"}
    location = locate(seq)
    assert location is not None and not location.packed
    assert finish(plan, {}) == seq


def test_a_second_enqueue_builds_its_touch_from_the_row_it_wrote() -> None:
    store = ops()
    first = store.enqueue(prepare_enqueue("kit-t", Event(id="a", kind="K"), 0))
    first_request(first)
    finish(first, {})
    second = store.enqueue(prepare_enqueue("kit-t", Event(id="b", kind="K"), 0))
    work, _relay = first_request(second).params["TransactItems"]
    assert "ConditionCheck" in work  # the row is already ready at once: checked, not written


def test_an_enqueue_whose_work_row_moved_is_rebuilt_from_the_stored_row() -> None:
    plan, _first = enqueue_plan()
    stored = {
        "pk": {"S": "x:kit-t"},
        "sk": {"S": "w"},
        "pr": {"N": "1"},
        "fa": {"S": repr(500.0)},
        "wv": {"N": "77"},
        "ow": {"S": "w1"},
    }
    moved = TransactionCancelled(
        [{"Code": "ConditionalCheckFailed", "Item": stored}, {"Code": "None"}]
    )
    again = plan.throw(moved)
    assert isinstance(again, Call) and again.operation == "transact_write_items"
    work = again.params["TransactItems"][0]["Put"]
    assert work["ExpressionAttributeValues"] == {":v0": {"N": "77"}}
    assert work["Item"]["ow"] == {"S": "w1"} and work["Item"]["pr"]["N"] == "1"  # leased: kept
    assert finish(plan, {}) == relay_seq(again)


def test_an_enqueue_whose_relay_key_is_taken_draws_a_fresh_base() -> None:
    plan, first = enqueue_plan()
    theirs = {"pk": first.params["TransactItems"][1]["Put"]["Item"]["pk"], "e": {"M": {}}}
    taken = TransactionCancelled(
        [{"Code": "None"}, {"Code": "ConditionalCheckFailed", "Item": theirs}]
    )
    second = plan.throw(taken)
    key = lambda r: r.params["TransactItems"][1]["Put"]["Item"]["pk"]["S"]  # noqa: E731
    assert isinstance(second, Call) and key(first) != key(second)
    finish(plan, {})


def test_an_unanswered_enqueue_is_resent_and_recognised_by_its_stored_entry() -> None:
    plan, request = enqueue_plan()
    assert isinstance(plan.throw(RequestInDoubt("lost")), Pause)
    assert plan.send(None) == request  # the very same request (and ClientRequestToken)
    relay = request.params["TransactItems"][1]["Put"]["Item"]
    ours = TransactionCancelled(
        [{"Code": "ConditionalCheckFailed"}, {"Code": "ConditionalCheckFailed", "Item": relay}]
    )
    with pytest.raises(StopIteration) as done:
        plan.throw(ours)
    assert done.value.value == relay_seq(request)


def test_an_enqueue_with_no_answer_at_all_is_in_doubt() -> None:
    plan, request = enqueue_plan()
    with pytest.raises(RequestInDoubt):  # a StoreUnavailable: the caller re-sends
        while True:
            request = plan.throw(RequestInDoubt("lost")) if isinstance(request, Call) else None
            assert isinstance(request, Pause)
            request = plan.send(None)


def test_a_busy_enqueue_is_resent_then_unavailable_and_a_missing_table_is_at_once() -> None:
    plan, request = enqueue_plan()
    busy = TransactionCancelled([{"Code": "None"}, {"Code": "TransactionConflict"}])
    sends = 0
    with pytest.raises(StoreUnavailable) as raised:
        while True:
            if isinstance(request, Call):
                sends += 1
                request = plan.throw(busy)
            else:
                request = plan.send(None)
    assert sends > 1 and not isinstance(raised.value, RequestInDoubt)
    plan, request = enqueue_plan()
    with pytest.raises(TableNotFound):
        plan.throw(TableNotFound("gone"))


def test_an_enqueued_event_too_big_for_an_item_is_refused_before_anything_is_sent() -> None:
    noise = base64.b64encode(os.urandom(450_000)).decode()
    with pytest.raises(PayloadTooLarge):
        enqueue_plan(blob=noise)


def test_a_stale_trace_cursor_is_corrected_from_the_old_item() -> None:
    operations = ops()
    operations.cache.put("kit-1", TraceCursor(1, 4, 0))
    exe = Execution(id="kit-1", definition_id="d", version=1)
    plan = operations.commit(prepared(exe, trace={"event_kind": "Go"}), 3)
    first = first_request(plan)
    step = first.params["TransactItems"][1]["Put"]["Item"]
    assert step["sk"]["S"] == f"x:{4:016x}"
    moved = {"v": {"N": "1"}, "tn": {"N": "6"}, "tl": {"N": "3"}}
    second = plan.throw(TransactionCancelled([{"Code": "ConditionalCheckFailed", "Item": moved}]))
    items = second.params["TransactItems"]
    assert items[1]["Put"]["Item"]["sk"]["S"] == f"x:{6:016x}"
    deleted = [a["Delete"]["Key"]["sk"]["S"] for a in items if "Delete" in a]
    assert deleted == [f"x:{3:016x}"]  # a ring of 3 after step 6 keeps 4, 5, 6
    assert finish(plan, {}) is None
    assert operations.cache.get("kit-1") == TraceCursor(2, 7, 4)


def test_traced_commit_without_a_cursor_reads_it_first() -> None:
    exe = Execution(id="kit-1", definition_id="d", version=2)
    plan = ops().commit(prepared(exe, trace={"event_kind": "Go"}), 200)
    read = first_request(plan)
    assert read.operation == "get_item" and read.params["ConsistentRead"] is True
    with pytest.raises(StoreConflict) as info:
        plan.send({"Item": {"v": {"N": "7"}, "tn": {"N": "1"}, "tl": {"N": "0"}}})
    assert info.value.found == 7


# -- reads and sweeps -------------------------------------------------------------------------


def test_load_for_event_is_one_consistent_batch_get() -> None:
    plan = ops().load_for_event("kit-1", "e-1")
    request = first_request(plan)
    assert request.operation == "batch_get_item"
    assert request.params["RequestItems"][TABLE]["ConsistentRead"] is True
    assert finish(plan, {"Responses": {TABLE: []}}) == (None, False)


def test_sweeps_query_the_sparse_index_never_scan() -> None:
    for plan in (
        ops().pending("O", None),
        ops().pending("S", 5),
        ops().due_timers(10.0, None),
        ops().prune_processed(10.0, 100),
        ops().list_leases(10.0, 5),
    ):
        request = first_request(plan)
        assert request.operation == "query" and request.params["IndexName"] == "harel-g1"


def test_list_leases_reads_index_pages_and_the_rows_behind_them_until_enough_are_held() -> None:
    def row(key: str, at: float, owner: str | None = None) -> dict[str, Any]:
        item = {"pk": {"S": f"x:{key}"}, "sk": {"S": "w"}, "pr": {"N": "0"}, "wv": {"N": "1"}}
        return {**item, "fa": {"S": repr(at)}, **({"ow": {"S": owner}} if owner else {})}

    plan = ops().list_leases(10.0, 1)  # one index shard: one partition per tier
    request = first_request(plan)
    for _tier in (4, 3, 2, 1):  # empty partitions
        assert request.operation == "query" and request.params["IndexName"] == "harel-g1"
        request = plan.send({"Items": []})
    assert request.params["ExpressionAttributeValues"][":v1"] == {"S": "W0.0"}
    get = plan.send({"Items": [row("idle", 12.5)], "LastEvaluatedKey": {"k": 1}})
    assert get.operation == "batch_get_item"
    assert get.params["RequestItems"][TABLE]["ConsistentRead"] is True
    again = plan.send({"Responses": {TABLE: [row("idle", 12.5)]}})  # free: read on
    assert again.operation == "query" and again.params["ExclusiveStartKey"] == {"k": 1}
    plan.send({"Items": [row("a", 15.0, "w1")], "LastEvaluatedKey": {"k": 2}})
    leases = finish(plan, {"Responses": {TABLE: [row("a", 15.0, "w1")]}})
    assert leases == [Lease(execution_id="a", owner="w1", expires_at=15.0)]


def test_due_timer_ties_at_the_limit_are_completed_and_sorted() -> None:
    def timer(xi: str, ph: str, at: float) -> dict[str, Any]:
        return {
            "xi": {"S": xi},
            "ph": {"S": ph},
            "fa": {"S": repr(at)},
            "g1s": {"S": float_key(at)},
        }

    plan = ops().due_timers(100.0, 2)
    first_request(plan)
    tie_query = plan.send(
        {"Items": [timer("b", "/z", 1.0), timer("b", "/y", 5.0)], "LastEvaluatedKey": {"k": 1}}
    )
    assert tie_query.params["ExclusiveStartKey"] == {"k": 1}
    result = finish(plan, {"Items": [timer("a", "/q", 5.0)]})
    assert result == [("b", "/z", 1.0), ("a", "/q", 5.0)]


def test_read_methods_refuse_unusable_ids_before_any_request() -> None:
    for bad in ("", "x" * 1025, "nul\x00", "lone\ud800"):
        with pytest.raises(InvalidIdentifier):
            first_request(ops().load(bad))
    with pytest.raises(TypeError):
        first_request(ops().load(5))  # type: ignore[arg-type]


def test_unknown_ack_never_creates_an_item() -> None:
    plan = ops().ack("O", packed_seq(12345, 1, 7))
    request = first_request(plan)
    assert request.operation == "update_item"
    assert request.params["ConditionExpression"].startswith("attribute_exists(")
    with pytest.raises(StopIteration):
        plan.throw(ConditionFailed())


# -- sequence numbers and keys ----------------------------------------------------------------


def test_seq_layout_round_trips() -> None:
    base = BaseClock().next()
    for j in (0, 1, 2**15 - 1):
        where = locate(unpacked_seq(base, j))
        assert where is not None and (where.base, where.packed, where.index) == (base, False, j)
    for chunk, slot in ((0, 0), (31, 1023), (3, 17)):
        where = locate(packed_seq(base, chunk, slot))
        assert where is not None and (where.packed, where.index, where.slot) == (True, chunk, slot)
    assert unpacked_seq(base, 5) < 2**63


def test_commit_bases_increase_within_a_process() -> None:
    clock = BaseClock()
    bases = [clock.next() for _ in range(2000)]
    assert bases == sorted(bases) and len(set(bases)) == len(bases)


@given(
    st.floats(allow_nan=False, allow_infinity=True), st.floats(allow_nan=False, allow_infinity=True)
)
def test_float_keys_sort_like_the_numbers(a: float, b: float) -> None:
    assert (float_key(a) < float_key(b)) == (a < b)
    assert (float_key(a) == float_key(b)) == (a == b)


def test_float_key_is_fixed_width() -> None:
    for value in (-math.inf, -1e308, -0.0, 0.0, 5e-324, 1.0, 1e308, math.inf):
        assert len(float_key(value)) == 16
    assert struct.pack(">d", 0.0) != struct.pack(">d", -0.0)
    assert float_key(0.0) == float_key(-0.0)


# -- errors and options ---------------------------------------------------------------------


def _client_error(code: str, **extra: Any) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": "msg size"}, **extra}, "Op")


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (
            lambda: _client_error(
                "TransactionCanceledException", CancellationReasons=[{"Code": "None"}]
            ),
            TransactionCancelled,
        ),
        (lambda: _client_error("ConditionalCheckFailedException"), ConditionFailed),
        (lambda: _client_error("ProvisionedThroughputExceededException"), ItemBusy),
        (lambda: _client_error("TransactionConflictException"), ItemBusy),
        (lambda: _client_error("TransactionInProgressException"), RequestInDoubt),
        (lambda: _client_error("InternalServerError"), RequestInDoubt),
        (lambda: _client_error("UnrecognizedClientException"), StoreConfigError),
        (lambda: _client_error("ValidationException"), PayloadTooLarge),
        (lambda: EndpointConnectionError(endpoint_url="http://127.0.0.1:1"), StoreUnavailable),
        (lambda: ReadTimeoutError(endpoint_url="http://127.0.0.1:1"), RequestInDoubt),
        (lambda: NoCredentialsError(), StoreConfigError),
    ],
)
def test_driver_errors_map_to_the_hierarchy(
    make: Callable[[], Exception], expected: type[Exception]
) -> None:
    mapped = map_error(make(), table=TABLE, operation="get_item")
    assert isinstance(mapped, expected) and isinstance(mapped, StoreError)
    if expected is StoreUnavailable:
        assert not isinstance(mapped, RequestInDoubt) or expected is RequestInDoubt


def test_urls_keep_the_table_case_and_never_show_the_secret() -> None:
    arguments = SPEC.open_args(
        "dynamodb://AKIDEXAMPLE:s3cr%2Fet@My_Table.v2?region=eu-west-1&create_table=true", {}
    ).arguments
    assert arguments["table"] == "My_Table.v2"
    assert arguments["aws_access_key_id"] == "AKIDEXAMPLE"
    assert arguments["aws_secret_access_key"] == "s3cr/et"
    assert arguments["create_table"] is True and arguments["local"] == "false"
    options = make_options(**arguments)
    assert "s3cr" not in repr(options) and "s3cr" not in options.describe()
    keyword = SPEC.open_args("dynamodb://AK:old@table", {"aws_secret_access_key": "new"})
    assert keyword.arguments["aws_secret_access_key"] == "new"  # keywords win
    for bad in (
        "dynamodb://t?nope=1",
        "dynamodb://tab:8000",
        "dynamodb://ab",
        "dynamodb://table/path",
        "dynamodb://table?endpoint_url=ftp://x",
        "dynamodb://AK@table",
        "dynamodb://AK:s3cret@table?aws_secret_access_key=s3cret",
    ):
        with pytest.raises(InvalidStoreURL) as refused:
            SPEC.open_args(bad, {})
        assert "s3cret" not in str(refused.value)
    with pytest.raises(InvalidStoreURL) as info:
        SPEC.open_args("dynamodb://AK:topsecret@table", {"bogus": 1})
    assert "topsecret" not in str(info.value)


@pytest.mark.parametrize(
    ("url", "keywords", "message"),
    [
        ("dynamodb://table?region=", {}, "option region='' must be a non-empty string"),
        ("dynamodb://table", {"profile": " "}, "option profile=' ' must be a non-empty string"),
        (
            "dynamodb://table?endpoint_url=ftp://u:pw@x",
            {},
            "option endpoint_url='ftp://u:***@x' must be an http:// or https:// URL",
        ),
        ("dynamodb://t1x?local=maybe", {}, "option local='maybe' must be one of false, true, moto"),
        ("dynamodb://t1x?request_timeout=0", {}, "option request_timeout=0.0 must be a number > 0"),
        ("dynamodb://table", {"max_attempts": 0}, "option max_attempts=0 must be an int >= 1"),
        (
            "dynamodb://table?index_shards=257",
            {},
            "option index_shards=257 must be an int >= 1 <= 256 or None",
        ),
        (
            "dynamodb://table",
            {"aws_access_key_id": "AK"},
            "give both aws_access_key_id and aws_secret_access_key, or neither",
        ),
        (
            "dynamodb://table",
            {"aws_secret_access_key": 5},
            "option aws_secret_access_key=*** must be a string or None",
        ),
        (
            "dynamodb://table",
            {"regoin": "x"},
            "unknown option(s) regoin for a DynamoDB store (did you mean region?); allowed: ",
        ),
        ("dynamodb://table", {"table": "x"}, "unknown option(s) table for a DynamoDB store"),
        (
            "dynamodb://ab",
            {},
            "'dynamodb://ab' does not name a valid table (3-255 of A-Z a-z 0-9 _ . -): "
            "dynamodb://TABLE?region=...",
        ),
    ],
)
def test_bad_knobs_are_refused_in_the_specs_words(
    url: str, keywords: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidStoreURL) as refused:
        SPEC.open_args(url, keywords)
    assert str(refused.value).startswith(message)


def test_keywords_of_the_constructor_go_through_the_same_knobs() -> None:
    assert make_options("T1_x", local=True).local == "true"
    assert make_options("T1_x", local="MOTO").local == "moto"
    assert make_options("T1_x", local=False).is_local is False
    assert make_options("T1_x", local=True).region_name == "us-east-1"
    assert make_options("T1_x", request_timeout=2).request_timeout == 2.0
    with pytest.raises(ValueError, match="option local='yes' must be one of false, true, moto"):
        make_options("T1_x", local="yes")
    with pytest.raises(ValueError, match="table='ab' does not name a valid table"):
        make_options("ab")
    with pytest.raises(TypeError, match="option trace_max=True must be an int >= 0 or None"):
        make_options("T1_x", trace_max=True)


def test_legacy_variables_name_one_table_created_on_first_use() -> None:
    assert legacy_url({}) is None
    assert legacy_url({"STM_AWS_REGION": " "}) is None
    assert legacy_url({"STM_AWS_REGION": "eu-west-1"}) == (
        "dynamodb://harel?region=eu-west-1&create_table=true"
    )
    local = legacy_url({"STM_DYNAMODB_ENDPOINT": "http://h:8000", "STM_DYNAMODB_TABLE": "Jobs"})
    assert local == (
        "dynamodb://Jobs?region=us-east-1&create_table=true"
        "&endpoint_url=http%3A%2F%2Fh%3A8000&local=true"
    )
    arguments = SPEC.open_args(local, {}).arguments
    assert (arguments["table"], arguments["endpoint_url"]) == ("Jobs", "http://h:8000")
    backend = SPEC.backend()
    assert backend.legacy_env == "harel_store_dynamodb._legacy:legacy_url"
    assert backend.legacy_vars == ("STM_DYNAMODB_ENDPOINT", "STM_AWS_REGION", "STM_DYNAMODB_TABLE")


def test_the_spec_imports_no_driver() -> None:
    code = (
        "import sys, harel_store_dynamodb._spec, harel_store_dynamodb._options\n"
        "loaded = [m for m in sys.modules if m.partition('.')[0] in ('boto3', 'botocore')]\n"
        "assert not loaded, loaded\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


# -- opening --------------------------------------------------------------------------------


def _described(status: str, index_status: str = "ACTIVE") -> dict[str, Any]:
    from harel_store_dynamodb._schema import table_definition

    definition = table_definition(TABLE)
    return {
        "Table": {
            "TableStatus": status,
            "KeySchema": definition["KeySchema"],
            "GlobalSecondaryIndexes": [
                {**gsi, "IndexStatus": index_status} for gsi in definition["GlobalSecondaryIndexes"]
            ],
        }
    }


def test_a_created_table_is_waited_for_until_it_and_its_indexes_are_active() -> None:
    from harel_store_dynamodb._requests import TableNotFound

    operations = ops()
    plan = operations.open(True, ("t", "plan-endpoint-1", "r", None), poll=0.25)
    assert first_request(plan).operation == "describe_table"
    create = plan.throw(TableNotFound("missing"))
    assert create.operation == "create_table"
    assert create.params["BillingMode"] == "PAY_PER_REQUEST"
    assert plan.send({}).operation == "describe_table"
    assert plan.send(_described("CREATING")) == Pause(0.25)
    assert plan.send(None).operation == "describe_table"
    assert plan.send(_described("ACTIVE", "CREATING")) == Pause(0.25)
    plan.send(None)
    meta = plan.send(_described("ACTIVE"))
    assert meta.operation == "get_item" and meta.params["ConsistentRead"] is True
    put = plan.send({})
    assert put.operation == "put_item" and put.params["Item"]["schema"] == {"N": "4"}
    assert put.params["Item"]["index_shards"] == {"N": str(DEFAULT_INDEX_SHARDS)}
    assert put.params["Item"]["written_by"]["S"].startswith("harel-store-dynamodb")
    assert finish(plan, {}) is None
    assert operations.shards == DEFAULT_INDEX_SHARDS  # a new table's count, now recorded
    # checked once per process: the next store over it sends nothing
    with pytest.raises(StopIteration):
        next(ops().open(True, ("t", "plan-endpoint-1", "r", None)))


def test_a_missing_table_without_create_table_is_a_config_error() -> None:
    from harel_store_dynamodb._requests import TableNotFound

    plan = ops().open(False, ("t", "plan-endpoint-2", "r", None))
    first_request(plan)
    with pytest.raises(StoreConfigError, match="create_table=true"):
        plan.throw(TableNotFound("missing"))
