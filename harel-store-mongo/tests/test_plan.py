"""The MongoDB store's plan without a server: the requests each operation sends, that a real
server accepts them (what mongomock does not check), how replies are decided, and the URL
options."""

from __future__ import annotations

import itertools
import json
import random
import re
import time
from collections.abc import Callable, Generator
from typing import Any

import pytest
from harel.model import Event, Execution
from harel.store.common.claims import relay_due
from harel.store.common.commit import collapse_timer_ops, committing
from harel.store.common.enqueue import prepare_enqueue
from harel.store.common.listing import listing_query
from harel.store.common.records import prepare_import
from harel.store.contract import ExecutionRecord, Lease, OutboxEntry, SpawnEntry, TimerOp
from harel.store.errors import (
    AlreadyProcessed,
    CommitOutcomeUnknown,
    ExecutionNotFound,
    InvalidStoreURL,
    PayloadTooLarge,
    SchemaVersionError,
    StoreConfigError,
    StoreConflict,
    StoreCorrupted,
    StoreUnavailable,
)
from harel_store_mongo import _claims, _operations, _records, _requests
from harel_store_mongo import _moved as moved
from harel_store_mongo._legacy import url_from_env, with_db
from harel_store_mongo._moved import surely_absent
from harel_store_mongo._operations import DuplicateKey, ReplyLost, WriteUnconfirmed
from harel_store_mongo._options import make_options
from harel_store_mongo._requests import Request
from harel_store_mongo._schema import EXECUTIONS, INDEXES, MARKS, WORK, schema_decision
from harel_store_mongo._seq import HybridClock, SeqSource, seq_of
from harel_store_mongo._spec import SPEC
from harel_store_mongo.testing import CannedResult, run_plan
from harel_testing.mongo import violations

HOSTILE = (
    "$where",
    "$$ROOT",
    "a.b",
    "$a.$b",
    "x:y",
    "{tag}",
    "100%",
    'it\'s "quoted"',
    "\U0001f600\U000e0001\U0010fffd",
    "$" * 1024,
)


INDEXING = ["list_indexes", "create_indexes"] * 3
BACKFILL = ["find", "update_one"]
"""Upgrading: read the stored work (none here), then record the version."""
SERVER_7 = {"version": "7.0.0", "versionArray": [7, 0, 0, 0]}


WALL = 1_800_000_000.0
"""The wall clock of the plans' seqs here (2027-01-15): their ticks are known."""


def source(writer: int | None = 3, wall: float = WALL) -> SeqSource:
    """A store's seqs on a frozen wall clock, its writer id already registered (``None``: not
    yet, so its first seq sends the registration)."""
    seqs = SeqSource(HybridClock(lambda: wall), monotonic=lambda: 0.0)
    if writer is not None:
        seqs.registered({"n": writer}, 0.0, "test")
    return seqs


def commit(
    exe: Execution,
    answer: Callable[[Request], Any] = lambda r: CannedResult(),
    seqs: SeqSource | None = None,
    **effects: Any,
):
    emits = effects.pop("emits", [])
    with committing(exe, emits, **effects) as prepared:
        return run_plan(_operations.commit_plan(prepared, 200, "test", seqs or source()), answer)


def counter(reply: Any = None) -> Callable[[Request], Any]:
    """Replies: ``find_one_and_update`` (a writer registration, a marked write) answers
    ``reply`` (default: n=100), updates succeed."""

    def answer(request: Request) -> Any:
        if request.method == "find_one_and_update":
            return {"n": 100} if reply is None else reply
        return CannedResult()

    return answer


def touched_ids(request: Request) -> list[str]:
    """The work rows one touch request upserts (an ``update_one``, or a ``bulk_write``)."""
    if request.method == "bulk_write":
        assert request.kwargs == {"ordered": False}
        return [query["_id"] for query, _ in request.args[0]]
    assert request.method == "update_one" and request.kwargs == {"upsert": True}
    return [request.args[0]["_id"]]


def without_work(sent: list[Request]) -> list[Request]:
    """The requests of a commit but its work-row touches (checked by their own tests)."""
    return [request for request in sent if request.collection != WORK]


def exe(execution_id: str = "x", version: int = 0) -> Execution:
    return Execution(id=execution_id, definition_id="d", version=version)


# -- round trips per commit --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("effects", "requests", "touched"),
    [
        ({}, ["update_one"], []),
        ({"processed_event_id": "e"}, ["find_one_and_update"], []),
        ({"timers": [TimerOp.schedule("/a", 1.0), TimerOp.cancel("/b")]}, ["update_one"], ["x"]),
        ({"timers": [TimerOp.cancel("/b")]}, ["update_one"], []),
        ({"trace": {"k": 1}}, ["update_one"], []),
        ({"emits": [(None, Event(id="e", kind="k"))]}, ["update_one"], [""]),
        ({"spawns": [("c", "/r", {})]}, ["update_one"], ["x"]),
        (
            {"emits": [("t", Event(id="e", kind="k"))], "timers": [TimerOp.schedule("/a", 1.0)]},
            ["update_one"],
            ["x", "t"],
        ),
    ],
)
@pytest.mark.parametrize("version", [0, 3])
def test_requests_per_commit(
    effects: dict[str, Any], requests: list[str], touched: list[str], version: int
) -> None:
    """ONE write whatever the commit holds (emits and spawns take their seqs from the clock,
    no request, and require them above the document's ``seq_hi``); a marked commit's write
    returns the mark count; each work row a commit touches is one upsert before the write and
    one after it.  Nothing goes to ``meta``: no store-wide document."""
    _, sent = commit(exe(version=version), counter({"n": 100, "marks_n": 1}), **effects)
    assert {r.collection for r in sent} <= {EXECUTIONS, WORK}
    assert [r.method for r in without_work(sent)] == requests
    write = next(i for i, r in enumerate(sent) if r.collection == EXECUTIONS)
    before = [touched_ids(r) for r in sent[:write] if r.collection == WORK]
    after = [touched_ids(r) for r in sent[write:] if r.collection == WORK]
    assert before == after == ([touched] if touched else [])  # one request each time
    update = sent[write]
    query: dict[str, Any] = {"_id": "x", "version": version}
    first = seq_of(source().clock.physical(), 3)  # the first tick of a fresh clock, writer 3
    if "emits" in effects or "spawns" in effects:
        query["$nor"] = [{"seq_hi": {"$gte": first}}]
        assert update.args[1][0]["$set"]["seq_hi"] == {"$literal": first}
    if version and "processed_event_id" in effects:  # not marked, in the document or moved out
        query["processed.event"] = {"$ne": "e"}
        query["$or"] = [{"marks_out": {"$ne": True}}, {"mf": {"$regex": surely_absent("e")}}]
    assert update.args[0] == query
    upsert = {"upsert": True} if version == 0 else {}
    if "processed_event_id" in effects:
        assert update.kwargs == {**upsert, "projection": {"marks_n": 1}, "return_document": True}
    else:
        assert update.kwargs == upsert
    if effects:  # side data: an update pipeline
        assert isinstance(update.args[1], list)
    else:  # state only: a plain $set of values, nothing for the server to evaluate
        assert list(update.args[1]) == ["$set"]
        assert update.args[1]["$set"]["version"] == version + 1
        assert not any(isinstance(v, dict) for v in update.args[1]["$set"].values())


def enqueue(
    target: str = "t", priority: int = 3, answer: Callable[[Request], Any] | None = None
) -> tuple[Any, list[Request]]:
    prepared = prepare_enqueue(target, Event(id="q", kind="k", data={"n": 1}), priority)
    return run_plan(_operations.enqueue_plan(prepared, "test", source(41)), answer or counter())


def test_an_enqueue_is_one_upsert_and_the_targets_row_touched_around_it() -> None:
    """The seq from the clock (no request), the target's work row upserted (priority only
    when created, relay work due at once), ONE unconditional upsert appending the entry to the
    target's own document (never read), the row upserted again: 3 requests, like a commit
    that emits."""
    seq, sent = enqueue()
    assert seq == seq_of(source().clock.physical(), 41)
    assert [(r.collection, r.method) for r in sent] == [
        (WORK, "update_one"),
        (EXECUTIONS, "update_one"),
        (WORK, "update_one"),
    ]
    before, write, after = sent
    assert before == after and touched_ids(before) == ["t"]
    stage = before.args[1][0]["$set"]
    assert stage["priority"] == {"$ifNull": ["$priority", {"$literal": 3}]}  # not the row's own
    due = stage["ready_at"]["$cond"][1]["$literal"]
    assert due < relay_due(time.time()) + 1 < 0  # relay work: due at once
    assert write.args[0] == {"_id": "t"} and write.kwargs == {"upsert": True}
    (entry,) = write.args[1][0]["$set"]["outbox"]["$concatArrays"][1]["$literal"]
    assert entry["seq"] == seq and entry["target"] == "t"
    assert json.loads(entry["event"])["id"] == "q"
    assert write.args[1][0]["$set"]["version"] == {"$ifNull": ["$version", {"$literal": 0}]}
    assert set(write.args[1][1]["$set"]) == {"outbox_next"}


def test_an_enqueue_racing_a_document_insert_is_sent_again() -> None:
    failed: list[Request] = []

    def answer(request: Request) -> Any:
        if request.collection == EXECUTIONS and not failed:
            failed.append(request)
            raise DuplicateKey("E11000")
        return counter()(request)

    seq, sent = enqueue(answer=answer)
    assert seq % 2**14 == 41
    assert [r.collection for r in sent].count(EXECUTIONS) == 2


@pytest.mark.parametrize("error", [WriteUnconfirmed("wtimeout"), ReplyLost("cut")])
def test_an_enqueue_write_with_no_answer_is_unavailable_and_not_retouched(
    error: Exception,
) -> None:
    """Its outcome is open (the caller re-sends); nothing is sent after the write."""

    def answer(request: Request) -> Any:
        if request.collection == EXECUTIONS:
            raise error
        return counter()(request)

    with pytest.raises(StoreUnavailable):
        enqueue(answer=answer)


def test_the_first_seq_of_a_store_registers_its_writer_id_once() -> None:
    """A store without a writer id sends the registration (one ``$inc`` on ``meta``) before
    its first seq — a failure there writes nothing — then never again until the rotation."""
    seqs = source(writer=None)
    plan = _operations.enqueue_plan(prepare_enqueue("t", Event(id="q", kind="k"), 0), "test", seqs)
    register = next(plan)
    assert (register.collection, register.method) == ("meta", "find_one_and_update")
    assert register.args == ({"_id": "writers"}, {"$inc": {"n": 1}})
    with pytest.raises(StoreUnavailable):
        plan.throw(StoreUnavailable("no server"))
    assert seqs.writer is None
    seq, sent = run_plan(
        _operations.enqueue_plan(prepare_enqueue("t", Event(id="q", kind="k"), 0), "test", seqs),
        counter({"n": 16384 + 7}),
    )
    assert seqs.writer == 7 and seq % 2**14 == 7  # the count modulo 2**14
    assert [r.collection for r in sent] == ["meta", WORK, EXECUTIONS, WORK]
    _, sent = commit(exe(), seqs=seqs, spawns=[("c", "/r", {})])
    assert "meta" not in {r.collection for r in sent}


def test_a_whole_step_is_one_request_and_one_update() -> None:
    _, sent = commit(
        exe(),
        counter({"n": 7}),
        emits=[(None, Event(id="e1", kind="k")), ("t", Event(id="e2", kind="k"))],
        processed_event_id="in",
        timers=[TimerOp.schedule("/a", 2.0)],
        spawns=[("c1", "/r", {"k": 1})],
        trace={"step": 1},
    )
    (update,) = without_work(sent)
    stage = update.args[1][0]["$set"]
    outbox = stage["outbox"]["$concatArrays"][1]["$literal"]
    tick = source().clock.physical()
    seqs = [seq_of(tick + n, 3) for n in range(3)]  # consecutive ticks, emits first
    assert [(e["seq"], e["target"]) for e in outbox] == [(seqs[0], None), (seqs[1], "t")]
    assert [s["seq"] for s in stage["spawns"]["$concatArrays"][1]["$literal"]] == [seqs[2]]
    assert stage["seq_hi"] == {"$literal": seqs[2]}
    assert update.args[0]["$nor"] == [{"seq_hi": {"$gte": seqs[0]}}]
    assert set(update.args[1][1]["$set"]) == {
        "outbox_next",
        "spawns_next",
        "timers_next",
        "marks_since",
        "marks_n",
    }


def test_cancel_and_rearm_of_one_timer_is_one_assignment_a_server_accepts() -> None:
    """Real MongoDB refuses an update that both sets and unsets a field (mongomock applies it
    and loses the timer): the timers array is rebuilt in one expression instead."""
    for ops in (
        [TimerOp.cancel("/a"), TimerOp.schedule("/a", 5.0)],
        [TimerOp.schedule("/a", 5.0), TimerOp.cancel("/a")],
        [TimerOp.schedule("/a", 1.0), TimerOp.schedule("/a", 5.0), TimerOp.cancel("/b")],
    ):
        _, sent = commit(exe(version=1), timers=ops)
        (update,) = without_work(sent)
        stage = update.args[1][0]["$set"]
        kept, added = stage["timers"]["$concatArrays"]
        collapsed = collapse_timer_ops(ops)
        assert kept["$filter"]["cond"]["$eq"][0]["$in"][1] == {
            "$literal": [op.path for op in collapsed]
        }
        expected = [
            {"path": op.path, "at": op.fire_at} for op in collapsed if op.action == "schedule"
        ]
        assert added == {"$literal": expected}
        assert len([name for name in stage if name.startswith("timers")]) == 1


def test_the_classic_validator_catches_a_set_and_unset_of_one_field() -> None:
    bad = Request(
        "executions",
        "update_one",
        ({"_id": "x"}, {"$set": {"timers.a": 1.0}, "$unset": {"timers.a": ""}}),
    )
    assert any("conflict" in problem for problem in violations(bad))
    nested = Request("executions", "update_one", ({"_id": "x"}, {"$set": {"a": 1, "a.b": 2}}))
    assert violations(nested)


def test_the_pipeline_validator_catches_unwrapped_data() -> None:
    unwrapped = Request("executions", "update_one", ({"_id": "x"}, [{"$set": {"data": "$x"}}]))
    assert violations(unwrapped)
    computed = Request(
        "executions",
        "update_one",
        ({"_id": "x"}, [{"$set": {"trace": [{"i": "$trace_next"}]}}]),
    )
    assert violations(computed)
    negation = Request(
        "executions",
        "update_one",
        ({"_id": "x"}, [{"$set": {"trace": {"$not": [{"$eq": [1, 1]}]}}}]),
    )
    assert violations(negation)


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_values_are_only_values(hostile: str) -> None:
    """Ids, paths, event ids and targets holding ``$``, ``.``, quotes or any plane travel as
    values (filters) or inside ``$literal`` (pipelines) in every request of every plan."""
    e = exe(hostile)
    _, sent = commit(
        e,
        counter(),
        emits=[(hostile, Event(id=hostile, kind="k"))],
        processed_event_id=hostile,
        timers=[TimerOp.cancel(hostile), TimerOp.schedule(hostile, 1.0)],
        spawns=[(hostile, hostile, {})],
        trace={"k": hostile},
    )
    answers: dict[str, Any] = {
        "find_one": None,
        "find": [],
        "aggregate": [],
        "find_one_and_update": {"n": 9},
        "update_one": CannedResult(),
        "update_many": CannedResult(),
        "delete_many": None,
        "delete_one": None,
    }
    plans = [
        _operations.load_plan(hostile, source()),
        _operations.load_for_event_plan(hostile, hostile, source()),
        _operations.is_processed_plan(hostile, hostile),
        _operations.delete_timer_plan(hostile, hostile, 1.0),
        _operations.read_trace_plan(hostile),
        _operations.append_trace_plan(hostile, {"k": hostile}, 3),
        _operations.purge_plan(hostile, False),
        _operations.purge_plan(hostile, True),
        _operations.listing_plan(
            listing_query(status=None, definition_id=hostile, roots_only=True, limit=5, cursor=None)
        ),
        _records.export_plan(hostile, source()),
        _operations.enqueue_plan(
            prepare_enqueue(hostile, Event(id=hostile, kind="k"), 1), "test", source(None)
        ),
        _records.import_plan(prepare_import(_record(hostile), trace_max=3), "test", source()),
        _records.import_plan(
            prepare_import(
                ExecutionRecord(
                    execution_id=hostile, execution=None, outbox=_record(hostile).outbox
                ),
                trace_max=3,
            ),
            "test",
            source(),
        ),
    ]
    for plan in plans:
        sent += run_plan(plan, lambda r: answers[r.method])[1]
    row = {"_id": hostile, "priority": 0, "ready_at": 1.0, "owner": hostile, "tn": 1}
    units = {"_id": hostile, "version": 1, "timers": [{"path": hostile, "at": 1.0}]}

    def claims(request: Request) -> Any:
        if request.method == "find":  # the ready rows: one of priority 0
            return [row] if request.args[0]["priority"] == 0 else []
        return {"find_one": row, "aggregate": [units]}.get(request.method, answers[request.method])

    claimed, more = run_plan(_claims.claim_plan(hostile, 10.0, 30.0, 5, source()), claims)
    assert [claim.timers for claim in claimed] == [((hostile, 1.0),)]
    sent += more
    sent += run_plan(_claims.renew_plan(hostile, hostile, 0.5, 30.0), claims)[1]
    sent += run_plan(_claims.release_plan(hostile, hostile, None, 10.0), claims)[1]
    assert {r.collection for r in sent} >= {WORK, EXECUTIONS}
    for request in sent:
        assert hostile not in _keys(request.args), "a caller's string became a field name"


def _record(execution_id: str) -> ExecutionRecord:
    """A record using ``execution_id`` everywhere a caller's string can go."""
    event = Event(id=execution_id, kind="k", data={execution_id: execution_id})
    return ExecutionRecord(
        execution_id=execution_id,
        execution=Execution(id=execution_id, definition_id=execution_id, version=3),
        updated_at=1.0,
        processed=((execution_id, 2.0),),
        timers=((execution_id, 3.0),),
        outbox=(OutboxEntry(4, execution_id, event),),
        spawns=(SpawnEntry(5, execution_id, execution_id, execution_id, {execution_id: 1}),),
        trace=({"index": 6, execution_id: execution_id},),
    )


def _keys(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set(value) | set().union(*(_keys(v) for v in value.values()))
    if isinstance(value, (list, tuple)):
        return set().union(*(_keys(v) for v in value)) if value else set()
    return set()


def test_list_leases_is_one_find_per_tier_merged_in_lease_order() -> None:
    rows = {
        4: [{"_id": "b", "priority": 4, "ready_at": 30.0, "owner": "w2", "tn": 1}],
        0: [{"_id": "", "priority": 0, "ready_at": 15.0, "owner": "w1", "tn": 2}],
    }
    leases, sent = run_plan(
        _claims.leases_plan(10.0, 1), lambda r: rows.get(r.args[0]["priority"], [])
    )
    assert leases == [Lease(execution_id=None, owner="w1", expires_at=15.0)]
    assert [(r.collection, r.method, r.kwargs["limit"]) for r in sent] == [("work", "find", 1)] * 5
    assert [r.args[0]["priority"] for r in sent] == [4, 3, 2, 1, 0]
    assert sent[0].args[0]["ready_at"] == {"$gt": 10.0}


def test_every_plan_sends_only_what_a_server_accepts() -> None:
    """One pass over every plan with ordinary values (``run`` checks each request)."""
    docs = [{"_id": "x", "version": 0, "old": [{"event": "e", "at": 1.0}], "marks_since": 1.0}]
    answers: dict[str, Any] = {
        "command": SERVER_7,
        "find_one": {"_id": "x", "version": 2, "status": "DONE"},
        "find": [],
        "aggregate": docs,
        "find_one_and_update": {"_id": "x", "version": 0, "outbox_next": None},
        "update_one": CannedResult(),
        "update_many": CannedResult(),
        "delete_many": None,
        "create_indexes": None,
        "list_indexes": [],
    }
    plans: list[Generator[Request, Any, Any]] = [
        _operations.ack_plan(5, spawns=False),
        _operations.ack_plan(5, spawns=True),
        _operations.pending_outbox_plan(3),
        _operations.pending_spawns_plan(None),
        _operations.due_timers_plan(10.0, 2),
        _claims.leases_plan(10.0, 2),
    ]
    for plan in plans:
        run_plan(plan, lambda r: answers[r.method])
    for found in (None, {"_id": "schema", "version": 1}):
        schema = dict(answers, find_one=found, find_one_and_update={"_id": "schema", "version": 2})
        run_plan(
            _operations.open_plan("test", "harel-store-mongo 9"), lambda r, s=schema: s[r.method]
        )
    calls = itertools.count()
    pruned = dict(answers, aggregate=docs)
    run_plan(
        _operations.prune_plan(2.0, 10),
        lambda r: (
            (pruned[r.method] if next(calls) < 2 else [])
            if r.method == "aggregate"
            else pruned[r.method]
        ),
    )


# -- deciding replies ---------------------------------------------------------------------------


def test_lost_cas_reads_the_stored_version_once() -> None:
    def answer(request: Request) -> Any:
        if request.method == "find_one":
            return {"_id": "x", "version": 4, "token": "other"}
        return CannedResult(matched_count=0)

    e = exe(version=2)
    with pytest.raises(StoreConflict) as info:
        commit(e, answer)
    assert (info.value.expected, info.value.found) == (2, 4)
    assert e.version == 2


def test_a_create_over_an_existing_id_is_a_conflict() -> None:
    def answer(request: Request) -> Any:
        if request.method == "update_one":
            raise DuplicateKey("E11000")
        return {"_id": "x", "version": 1, "token": "other"}

    with pytest.raises(StoreConflict) as info:
        commit(exe(), answer)
    assert (info.value.expected, info.value.found) == (0, 1)


def test_a_relay_only_document_counts_as_absent() -> None:
    def answer(request: Request) -> Any:
        if request.method == "find_one":
            return {"_id": "x", "version": 0}
        return CannedResult(matched_count=0)

    with pytest.raises(StoreConflict) as info:
        commit(exe(version=2), answer)
    assert info.value.found is None


def test_a_lost_reply_is_resent_and_recognised_by_its_token() -> None:
    """The first update's reply is lost; the re-sent update matches nothing (the first one
    landed), and the stored token is this commit's: success, nothing written twice."""
    sent: list[Request] = []

    def answer(request: Request) -> Any:
        sent.append(request)
        if request.method == "update_one" and len(sent) == 1:
            raise ReplyLost("connection reset")
        if request.method == "update_one":
            return CannedResult(matched_count=0)
        token = sent[0].args[1]["$set"]["r3"]  # a state-only commit: a plain $set
        return {"_id": "x", "version": 3, "r3": token}

    e = exe(version=2)
    commit(e, answer)
    assert e.version == 3
    assert sent[0] == sent[1], "the very same update is re-sent"


def test_two_lost_replies_say_the_outcome_is_unknown() -> None:
    def answer(request: Request) -> Any:
        raise ReplyLost("connection reset")

    e = exe(version=2)
    with pytest.raises(CommitOutcomeUnknown, match="may or may not be stored"):
        commit(e, answer)
    assert e.version == 2


def test_a_request_that_never_left_is_unavailable_and_not_resent() -> None:
    """No server selected: nothing reached it, so nothing is written and nothing is re-sent."""
    sent: list[Request] = []

    def answer(request: Request) -> Any:
        sent.append(request)
        raise StoreUnavailable("no server selected")

    e = exe(version=2)
    with pytest.raises(StoreUnavailable) as info:
        commit(e, answer)
    assert not isinstance(info.value, CommitOutcomeUnknown)
    assert len(sent) == 1 and e.version == 2


def test_a_lost_reply_then_no_server_is_an_unknown_outcome() -> None:
    replies = iter([ReplyLost("reset"), StoreUnavailable("no server selected")])

    def answer(request: Request) -> Any:
        raise next(replies)

    with pytest.raises(CommitOutcomeUnknown):
        commit(exe(version=2), answer)


def test_a_lost_reply_with_a_rival_commit_in_between_is_a_conflict_when_not_ours() -> None:
    """The first attempt never landed and a rival took the version: the receipt is the
    rival's, so the re-send's CAS miss is a real conflict."""
    sent: list[Request] = []

    def answer(request: Request) -> Any:
        sent.append(request)
        if len(sent) == 1:
            raise ReplyLost("connection reset")
        if request.method == "update_one":
            return CannedResult(matched_count=0)
        return {"_id": "x", "version": 3, "r3": "f" * 32}

    e = exe(version=2)
    with pytest.raises(StoreConflict) as info:
        commit(e, answer)
    assert info.value.found == 3 and e.version == 2
    assert sent[-1].args[1] == {"version": 1, "seq_hi": 1, "r3": 1, "r2": 1}, "receipts: new, old"


def test_an_unreadable_receipt_after_a_cas_miss_is_an_unknown_outcome() -> None:
    """A CAS miss may be the re-send of a stored commit: without the receipt, say so."""

    def answer(request: Request) -> Any:
        if request.method == "update_one":
            return CannedResult(matched_count=0)
        raise ReplyLost("reset")

    with pytest.raises(CommitOutcomeUnknown):
        commit(exe(version=2), answer)


def test_an_unconfirmed_write_concern_is_an_unknown_outcome() -> None:
    def answer(request: Request) -> Any:
        raise WriteUnconfirmed("waiting for replication timed out")

    with pytest.raises(CommitOutcomeUnknown):
        commit(exe(version=2), answer)


# -- the commit's own checks: dedupe, fence (issue 20) -----------------------------------------


def probing(doc: dict[str, Any] | None, moved: Any = None) -> Callable[[Request], Any]:
    """Replies: every commit write misses, the probe reads ``doc``, ``marks`` holds ``moved``
    (a writer registration and the work rows answer as usual)."""

    def answer(request: Request) -> Any:
        if request.collection == "meta":
            return {"n": 100}
        if request.collection == WORK:
            return CannedResult()
        if request.collection == MARKS:
            return moved
        if request.method == "find_one":
            return doc
        return None if request.method == "find_one_and_update" else CannedResult(matched_count=0)

    return answer


def test_a_fenced_update_carries_the_receipt_of_its_version() -> None:
    """A copy this process stored itself: its next update applies only while the receipt of
    the stored version is its own last token (in the filter: no read before the write)."""
    e = exe(version=0)
    _, sent = commit(e)
    token = sent[-1].args[1]["$set"]["r1"]
    _, sent = commit(e)
    assert sent[-1].args[0] == {"_id": "x", "version": 1, "r1": token}
    loaded = exe(version=1)  # a copy from load: its version alone decides
    _, sent = commit(loaded)
    assert sent[-1].args[0] == {"_id": "x", "version": 1}


@pytest.mark.parametrize("found", [2, 5])
def test_a_stored_mark_is_already_processed_after_one_probe(found: int) -> None:
    """Whatever the stored version: the probe finds the mark in the document."""
    doc = {"_id": "x", "version": found, "processed": [{"event": "e", "at": 1.0}]}
    e = exe(version=2)
    with pytest.raises(AlreadyProcessed) as info:
        commit(e, probing(doc), processed_event_id="e", emits=[("t", Event(id="o", kind="k"))])
    assert (info.value.event_id, info.value.expected, info.value.found) == ("e", 2, found)
    assert e.version == 2


def test_a_moved_mark_is_already_processed_after_reading_marks() -> None:
    doc = {"_id": "x", "version": 4, "marks_out": True}
    sent: list[Request] = []

    def answer(request: Request) -> Any:
        sent.append(request)
        return probing(doc, moved={"_id": {"e": "x", "ev": "e"}})(request)

    with pytest.raises(AlreadyProcessed):
        commit(exe(version=2), answer, processed_event_id="e")
    assert [(r.collection, r.method) for r in sent] == [
        (EXECUTIONS, "find_one_and_update"),
        (EXECUTIONS, "find_one"),
        (MARKS, "find_one"),
    ]
    assert sent[2].args[0] == {"_id": {"$eq": {"e": "x", "ev": "e"}}}


def test_a_moved_mark_filter_false_positive_is_sent_again_under_the_state_read() -> None:
    """The filter missed on the moved-mark filter alone: ``marks`` does not hold the event, so
    the same write goes again, guarded by the version and receipt just read."""
    sent: list[Request] = []

    def answer(request: Request) -> Any:
        sent.append(request)
        if request.collection == MARKS:
            return None
        if request.method == "find_one":
            return {"_id": "x", "version": 2, "r2": "theirs", "marks_out": True}
        writes = [r for r in sent if r.method == "find_one_and_update"]
        return None if len(writes) == 1 else {"_id": "x", "marks_n": 3}

    e = exe(version=2)
    commit(e, answer, processed_event_id="e")
    assert e.version == 3
    first, probe, marks, again = sent
    assert probe.args[1] == {
        "version": 1,
        "seq_hi": 1,
        "r3": 1,
        "r2": 1,
        "marks_out": 1,
        "processed": {"$elemMatch": {"event": "e"}},
    }
    assert marks.collection == MARKS
    assert again.args[0] == {
        "_id": "x",
        "version": 2,
        "r2": "theirs",
        "processed.event": {"$ne": "e"},
    }
    assert again.args[1] == first.args[1] and again.kwargs == first.kwargs


def test_a_broken_fence_is_a_conflict_not_already_processed() -> None:
    """The stored version is the expected one, written by another commit than this copy's."""
    e = exe(version=0)
    commit(e)
    doc = {"_id": "x", "version": 1, "r1": "a re-created execution's", "marks_out": True}
    with pytest.raises(StoreConflict) as info:
        commit(e, probing(doc, moved=None), processed_event_id="e")
    assert not isinstance(info.value, AlreadyProcessed)
    assert (info.value.expected, info.value.found) == (1, 1)


def test_a_resent_stored_commit_succeeds_although_its_mark_is_stored() -> None:
    sent: list[Request] = []

    def answer(request: Request) -> Any:
        sent.append(request)
        if request.method == "find_one":
            token = sent[0].args[1][0]["$set"]["r3"]["$literal"]
            return {"_id": "x", "version": 3, "r3": token, "processed": [{"event": "e"}]}
        return None

    e = exe(version=2)
    commit(e, answer, processed_event_id="e")
    assert e.version == 3 and len(sent) == 2


def test_a_refused_commit_drops_the_work_rows_its_touch_inserted() -> None:
    """The rows were touched before the write (none may be missing for stored work); the
    write was refused, so the rows it inserted go, each only while exactly as inserted."""
    sent: list[Request] = []
    doc = {"_id": "x", "version": 2, "processed": [{"event": "e", "at": 1.0}]}

    def answer(request: Request) -> Any:
        sent.append(request)
        if request.collection == WORK and request.method == "update_one":
            return CannedResult(matched_count=0, upserted_id="x")
        return probing(doc)(request)

    with pytest.raises(AlreadyProcessed):
        commit(exe(version=2), answer, processed_event_id="e", timers=[TimerOp.schedule("/a", 7.0)])
    drop = sent[-1]
    assert (drop.collection, drop.method) == (WORK, "delete_many")
    assert drop.args[0] == {"$or": [{"_id": "x", "ready_at": 7.0}], "owner": None, "tn": 1}


def test_a_commit_that_keeps_missing_a_matching_document_is_unavailable() -> None:
    doc = {"_id": "x", "version": 2, "r2": "r", "marks_out": True}
    sent: list[Request] = []

    def answer(request: Request) -> Any:
        sent.append(request)
        return probing(doc, moved=None)(request)

    with pytest.raises(StoreUnavailable) as info:
        commit(exe(version=2), answer, processed_event_id="e")
    assert not isinstance(info.value, CommitOutcomeUnknown)
    writes = [r for r in sent if r.method == "find_one_and_update"]
    assert len(writes) == 1 + _operations.MISS_ROUNDS


@pytest.mark.parametrize("seed", range(20))
def test_the_moved_mark_pattern_matches_exactly_the_filters_without_the_mark(seed: int) -> None:
    """``surely_absent`` (a regular expression the server evaluates) agrees with the filter's
    bits, over filters of every fill, for events in them and not."""
    rng = random.Random(seed)
    events = [f"ev-{seed}-{n}" for n in range(rng.choice([1, 50, 3000]))]
    bits = moved.with_marks(None, events)
    assert moved.usable(bits) and len(bits) == moved.FILTER_BITS // 4
    assert moved.with_marks(bits, events[:3]) == bits  # adding what is there changes nothing
    for event_id in [*events[:20], *(f"other-{seed}-{n}" for n in range(200))]:
        absent = re.match(moved.surely_absent(event_id), bits) is not None
        assert absent is not moved.may_hold(bits, event_id)
        if event_id in events:
            assert not absent
    assert re.match(moved.surely_absent("x"), moved.with_marks(None, [])) is not None
    assert re.match(moved.surely_absent("x"), "f" * len(bits)) is None


def test_the_moved_mark_positions_never_change() -> None:
    """Every writer of a layout-5 database must set the same bits for an event."""
    assert moved.positions("e") == (13289, 2215, 11399, 1317, 13647)
    assert moved.positions("\ud800") == moved.positions("\ud800")


@pytest.mark.parametrize(
    ("info", "ok"),
    [
        ({"version": "4.2.0", "versionArray": [4, 2, 0, 0]}, True),
        ({"version": "8.0.4", "versionArray": [8, 0, 4, 0]}, True),
        ({"version": "4.4.1"}, True),
        ({"version": "4.0.28", "versionArray": [4, 0, 28, 0]}, False),
        ({"version": "3.6.0"}, False),
        ({"ok": 1}, False),
    ],
)
def test_a_server_without_update_pipelines_is_refused(info: dict[str, Any], ok: bool) -> None:
    if ok:
        _operations.check_server(info, "here")
        return
    with pytest.raises(StoreConfigError, match=r"4\.2 or newer"):
        _operations.check_server(info, "here")


def test_the_commit_size_estimate_counts_utf8_bytes() -> None:
    """'é' is 2 bytes in BSON, '\U0001f600' 4: the estimate counts bytes, not characters."""
    e = exe(version=1)
    e.context = {"t": "\U0001f600" * 1000}
    with committing(e, []) as prepared:
        size = len(prepared.document.encode("utf-8"))
        assert size > len(prepared.document) + 2000
        with pytest.raises(PayloadTooLarge):
            _operations.check_commit_size(prepared, limit=size - 1)
        _operations.check_commit_size(prepared, limit=size)


@pytest.mark.parametrize("reply", [None, {}, {"n": None}, {"n": "7"}, {"n": 0}, {"n": True}])
def test_a_damaged_writer_counter_is_reported(reply: Any) -> None:
    with pytest.raises(StoreCorrupted, match="writer counter"):
        commit(exe(), counter(reply or {"x": 1}), source(None), spawns=[("c", "/r", {})])


def test_append_trace_to_an_unknown_execution_writes_nothing() -> None:
    with pytest.raises(ExecutionNotFound):
        run_plan(
            _operations.append_trace_plan("nobody", {"k": 1}, 3),
            lambda r: CannedResult(matched_count=0),
        )


def test_trace_indices_come_from_the_step_count() -> None:
    doc = {"_id": "x", "version": 3, "trace": ['{"a":1}', '{"a":2}'], "trace_next": 9}
    steps, _ = run_plan(_operations.read_trace_plan("x"), lambda r: doc)
    assert steps == [{"a": 1, "index": 7}, {"a": 2, "index": 8}]
    with pytest.raises(StoreCorrupted):
        run_plan(_operations.read_trace_plan("x"), lambda r: {**doc, "trace_next": 1})


@pytest.mark.parametrize("trace_max", [0, None, 2**31])
def test_an_unbounded_ring_sends_no_slice(trace_max: int | None) -> None:
    fields = _requests.append_trace_request("x", "{}", trace_max).args[1][0]["$set"]
    assert "$slice" not in fields["trace"]


def test_ring_slice_keeps_the_last_trace_max() -> None:
    fields = _requests.append_trace_request("x", "{}", 3).args[1][0]["$set"]
    assert fields["trace"]["$slice"][1] == -3


def test_due_timers_sorted_and_limited_across_documents() -> None:
    docs = [
        {"_id": "b", "timers": [{"path": "/z", "at": 2.0}, {"path": "/y", "at": 9.0}]},
        {"_id": "a", "timers": [{"path": "/x", "at": 2.0}, {"path": "/w", "at": 1.0}]},
        {"_id": "c", "timers": [{"path": "/v", "at": "broken"}]},
    ]
    due, (request,) = run_plan(_operations.due_timers_plan(5.0, 2), lambda r: docs)
    assert due == [("a", "/w", 1.0), ("a", "/x", 2.0)]
    assert request.kwargs == {"sort": [("timers_next", 1), ("_id", 1)], "limit": 2}


def test_unreadable_relay_entries_are_skipped_not_fatal() -> None:
    docs = [
        {"_id": "a", "outbox": [{"seq": 2, "target": None, "event": "{broken"}]},
        {
            "_id": "b",
            "outbox": [
                {"seq": 1, "target": "t", "event": Event(id="e", kind="k").model_dump_json()}
            ],
        },
    ]
    entries, _ = run_plan(_operations.pending_outbox_plan(None), lambda r: docs)
    assert [(e.seq, e.target_id, e.event.id) for e in entries] == [(1, "t", "e")]


def test_purge_refuses_an_unfinished_execution() -> None:
    def answer(request: Request) -> Any:
        if request.method == "find_one_and_update":
            return None
        return {"_id": "x", "version": 2, "status": "RUNNING"}

    from harel.store.errors import ExecutionActive

    with pytest.raises(ExecutionActive):
        run_plan(_operations.purge_plan("x", False), answer)


@pytest.mark.parametrize("batch_size", [1, 2**31, 2**63 - 1])
def test_prune_requests_fit_any_batch_size(batch_size: int) -> None:
    run_plan(_operations.prune_plan(1.0, batch_size), lambda r: [])


def test_prune_counts_only_what_it_dropped() -> None:
    rounds = iter(
        [
            [
                {"_id": "a", "marks_since": 1.0, "old": [{"event": "e1", "at": 1.0}]},
                {"_id": "b", "marks_since": 1.5, "old": [{"event": "e2", "at": 1.5}]},
            ],
            [],
        ]
    )

    def answer(request: Request) -> Any:
        if request.method == "aggregate":
            return next(rounds)
        if request.method == "find":  # no moved marks
            return []
        # "b" changed under us (another pruner took it): no match, not counted
        return CannedResult(matched_count=0 if request.args[0]["_id"] == "b" else 1)

    dropped, _ = run_plan(_operations.prune_plan(2.0, 10), answer)
    assert dropped == 1


# -- schema ------------------------------------------------------------------------------------


def test_schema_decision() -> None:
    assert schema_decision(None, "here") == "create"
    assert schema_decision({"_id": "schema", "version": 5}, "here") == "ready"
    assert schema_decision({"_id": "schema", "version": 4}, "here") == "upgrade"
    assert schema_decision({"_id": "schema", "version": 3}, "here") == "upgrade"
    assert schema_decision({"_id": "schema", "version": 2}, "here") == "upgrade"
    assert schema_decision({"_id": "schema", "version": 1}, "here") == "upgrade"
    for found in ({"version": 6}, {"version": 0}, {"version": "1"}, {}, []):
        with pytest.raises(SchemaVersionError):
            schema_decision(found, "here")


@pytest.mark.parametrize(
    ("found", "methods"),
    [
        ({"_id": "schema", "version": 5}, ["command", "find_one"]),
        ({"_id": "schema", "version": 4}, ["command", "find_one", *INDEXING, "update_one"]),
        *(
            ({"_id": "schema", "version": v}, ["command", "find_one", *INDEXING, *BACKFILL])
            for v in (3, 2, 1)
        ),
        (None, ["command", "find_one", "find_one", *INDEXING, "find_one_and_update"]),
    ],
)
def test_open_writes_the_schema_record_after_the_indexes(found: Any, methods: list[str]) -> None:
    """A ready layout is the version check and one read; creating checks that no foreign
    executions are there; creating or upgrading checks and creates the indexes of the three
    collections, then (upgrading a layout without work rows) backfills them, then records the
    version and the release (guarded by the old version when upgrading)."""
    replies = {
        "command": {"version": "7.0.0", "versionArray": [7, 0, 0, 0]},
        "find_one": found,
        "find_one_and_update": {"_id": "schema", "version": 5},
        "list_indexes": [],
        "find": [],
    }
    _, sent = run_plan(
        _operations.open_plan("here", "harel-store-mongo 9.9"), lambda r: replies.get(r.method)
    )
    assert [r.method for r in sent] == methods
    if found is not None and found["version"] < 5:
        query, update = sent[-1].args
        assert query == {"_id": "schema", "version": found["version"]}
        assert update == {"$set": {"version": 5, "written_by": "harel-store-mongo 9.9"}}


def test_a_newer_layout_is_refused_before_anything_is_written() -> None:
    found = {"_id": "schema", "version": 7, "written_by": "harel-store-mongo 3.1.0"}
    with pytest.raises(SchemaVersionError) as info:
        run_plan(
            _operations.open_plan("here", "harel-store-mongo 0.2.0"),
            lambda r: SERVER_7 if r.method == "command" else found,
        )
    message = str(info.value)
    assert "version 7" in message and "version 5" in message
    assert "harel-store-mongo 3.1.0" in message
    assert "pip install 'harel-store-mongo>=3.1.0'" in message


def test_indexes_cover_every_sweep() -> None:
    names = {spec.name: spec for spec in INDEXES}
    for request, index in (
        (_requests.pending_request(False, 1), "outbox_next"),
        (_requests.pending_request(True, 1), "spawns_next"),
        (_requests.due_request(1.0, 1), "timers_next"),
    ):
        spec = names[index]
        key = spec.keys[0][0]
        assert key in request.args[0]
        assert request.args[0][key] == {**spec.partial[key], **request.args[0][key]}
        assert [k for k, _ in request.kwargs["sort"]] == [k for k, _ in spec.keys]


# -- options -----------------------------------------------------------------------------------


def test_url_knobs_are_harel_s_and_the_rest_goes_to_the_driver() -> None:
    arguments, retry = SPEC.open_args(
        "mongodb://u:p%40ss@h1:27017,h2:27018/admin?db=app&w=majority&trace_max=5"
        "&connect_retries=2&retry_delay=0.5&replicaSet=rs0&readPreferenceTags=dc:ny"
        "&readPreferenceTags=",
        {},
    )
    options = make_options(
        "mongodb://u:p%40ss@h1:27017,h2:27018/admin?db=app&w=2&trace_max=5&replicaSet=rs0"
    )
    assert options.db == "app" and options.trace_max == 5 and options.w == "2"
    assert (retry["retries"], retry["delay"]) == (2, 0.5)
    assert arguments["w"] == "majority"
    assert arguments["driver_uri"] == (
        "mongodb://u:p%40ss@h1:27017,h2:27018/admin?replicaSet=rs0&readPreferenceTags=dc:ny"
        "&readPreferenceTags="  # a driver option may repeat; harel's knobs are taken out
    )
    assert "p%40ss" not in options.where and "p@ss" not in repr(options)
    assert options.client_kwargs() == {"serverSelectionTimeoutMS": 5000, "appname": "harel"}


def test_srv_and_defaults() -> None:
    options = make_options("mongodb+srv://cluster.example.net/?serverSelectionTimeoutMS=9")
    assert (options.db, options.w, options.trace_max) == ("harel", "majority", 200)
    assert options.driver_uri == "mongodb+srv://cluster.example.net/?serverSelectionTimeoutMS=9"
    assert "serverSelectionTimeoutMS" not in options.client_kwargs()
    assert SPEC.open_args("mongodb://h/", {}).retry["retries"] == 5


@pytest.mark.parametrize(
    "url",
    [
        "redis://h/",
        "mongodb://h?db=x",
        "mongodb:///?db=x",
        "mongodb://h/?db=a.b",
        "mongodb://h/?db=",
        "mongodb://h/?db=x&db=y",
        "mongodb://h/?trace_max=-1",
        "mongodb://h/?w=0",
        "mongodb://h/?w=-1",
        "mongodb://h/?w=1&W=2",
        "mongodb://h/#frag",
        "mongodb-h/",
    ],
)
def test_bad_urls_are_refused(url: str) -> None:
    with pytest.raises(InvalidStoreURL):
        make_options(url)


def test_the_spec_s_messages() -> None:
    with pytest.raises(InvalidStoreURL, match=r"'redis://h/' is not a mongodb:// URL; use mongo"):
        make_options("redis://h/")
    with pytest.raises(InvalidStoreURL, match="option trace_max=-1 must be an int >= 0 or None"):
        make_options("mongodb://h/?trace_max=-1")
    with pytest.raises(InvalidStoreURL, match=r"option db='a\.b' must be a MongoDB database"):
        make_options("mongodb://h/?db=a.b")
    assert make_options("mongodb://h/", db="é" * 31 + "x").db == "é" * 31 + "x"  # 63 bytes
    with pytest.raises(InvalidStoreURL, match="1 to 63 bytes"):
        make_options("mongodb://h/", db="é" * 32)
    with pytest.raises(InvalidStoreURL, match="option w='0' must be 'majority'"):
        make_options("mongodb://h/?w=0")


def test_keywords_win_and_unknown_keywords_are_refused() -> None:
    options = make_options("mongodb://h/?db=a&w=1", db="b", w="majority")
    assert (options.db, options.w) == ("b", "majority")
    assert SPEC.open_args("mongodb://h/", {"connect_retries": 0}).retry["retries"] == 0
    with pytest.raises(InvalidStoreURL, match=r"unknown option\(s\) prefix for a MongoDB store"):
        make_options("mongodb://h/", prefix="x")


def test_secrets_never_shown_in_errors() -> None:
    with pytest.raises(InvalidStoreURL) as info:
        make_options("mongodb://user:s3cr3t@h/?db=a.b")
    assert "s3cr3t" not in str(info.value)
    shown = SPEC.open_args("mongodb://user:s3cr3t@h/", {}).retry["what"]
    assert "s3cr3t" not in shown and "user:***@h" in shown


def test_with_db_and_legacy_variables() -> None:
    assert with_db("mongodb://h:1/?w=1&db=old", "new") == "mongodb://h:1/?w=1&db=new"
    assert make_options(with_db("mongodb://h", "a&b")).db == "a&b"  # percent-encoded
    backend = SPEC.backend()
    assert backend.legacy_vars == ("STM_MONGO_URL", "STM_MONGO_DB")
    assert backend.legacy_env == "harel_store_mongo._legacy:url_from_env"
    assert url_from_env({}) is None
    assert url_from_env({"STM_MONGO_URL": "mongodb://h/"}) == "mongodb://h/"
    assert url_from_env({"STM_MONGO_URL": "mongodb://h/", "STM_MONGO_DB": "app"}) == (
        "mongodb://h/?db=app"
    )
    with pytest.raises(StoreConfigError, match="STM_MONGO_URL"):
        url_from_env({"STM_MONGO_DB": "app"})
    with pytest.raises(StoreConfigError, match="STM_MONGO_DB"):
        url_from_env({"STM_MONGO_URL": "mongodb://h/", "STM_MONGO_DB": "a/b"})
