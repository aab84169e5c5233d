"""The Redis store's plan without a server: key encodings, script requests, reply decoding,
URL options and the error mapping (plans are stepped by hand with the replies a server sends)."""

from __future__ import annotations

import hashlib
import math
import struct
from collections.abc import Generator
from typing import Any

import pytest
import redis.exceptions as rex
from harel.model import Event, Execution, Status
from harel.store.common.claims import relay_due
from harel.store.common.commit import committing
from harel.store.common.enqueue import prepare_enqueue
from harel.store.common.listing import encode_cursor, listing_query
from harel.store.contract import Lease, TimerOp
from harel.store.errors import (
    AlreadyProcessed,
    CommitOutcomeUnknown,
    ExecutionActive,
    ExecutionNotFound,
    InvalidStoreURL,
    PayloadTooLarge,
    SchemaVersionError,
    StoreConfigError,
    StoreConflict,
    StoreCorrupted,
    StoreError,
    StoreUnavailable,
)
from harel_store_redis import _commit, _enqueue, _keys, _plan, _requests, _schema, _scripts
from harel_store_redis._errors import map_error
from harel_store_redis._options import open_options
from harel_store_redis._schema import Keys
from harel_store_redis._spec import SPEC
from harel_store_redis.testing import with_prefix
from hypothesis import given
from hypothesis import strategies as st

KEYS = Keys(b"p:")
WHERE = "Redis test"


def step_through(plan: Generator[Any, Any, Any], replies: list[Any]) -> tuple[list[Any], Any]:
    """Run ``plan`` feeding ``replies`` (an Exception is thrown in); the requests and result."""
    requests = []
    try:
        request = next(plan)
        for reply in replies:
            requests.append(request)
            request = plan.throw(reply) if isinstance(reply, Exception) else plan.send(reply)
        requests.append(request)
    except StopIteration as stop:
        return requests, stop.value
    raise AssertionError(f"the plan wanted more replies after {requests}")


def prepared(exe: Execution, **effects: Any) -> Any:
    with committing(exe, **effects) as p:
        return p


# -- key encodings ----------------------------------------------------------------------------

ids = st.text(min_size=0, max_size=30)


@given(ids, ids)
def test_key_part_is_injective_and_never_holds_structure(a: str, b: str) -> None:
    pa, pb = _keys.key_part(a), _keys.key_part(b)
    assert (pa == pb) == (a == b)
    for forbidden in b":{}*?[] \x00\n":
        assert forbidden not in pa


@given(ids, ids, ids, ids)
def test_owned_members_sort_like_tuples(a: str, x: str, b: str, y: str) -> None:
    ma, mb = _keys.owned(a, _keys.TAG_TIMER, x), _keys.owned(b, _keys.TAG_TIMER, y)
    ta, tb = (_keys.text(a), _keys.text(x)), (_keys.text(b), _keys.text(y))
    assert (ma < mb) == (ta < tb)
    assert (ma == mb) == (ta == tb)


@given(ids, ids)
def test_owner_prefix_is_self_delimiting(a: str, b: str) -> None:
    member = _keys.owned(b, _keys.TAG_MARK, "e")
    assert member.startswith(_keys.owner_prefix(a)) == (a == b)


@given(ids, ids)
def test_split_owned_round_trips(a: str, item: str) -> None:
    assert _keys.split_owned(_keys.owned(a, _keys.TAG_MARK, item)) == (
        a,
        _keys.TAG_MARK,
        _keys.text(item),
    )


def test_lone_surrogates_and_nul_survive_the_encodings() -> None:
    odd = "a\ud800b\x00c"
    assert _keys.untext(_keys.text(odd)) == odd
    assert _keys.split_owned(_keys.owned(odd, _keys.TAG_TIMER, odd))[0] == odd


@pytest.mark.parametrize("member", [b"no-separator", b"a\x00zb", b"a\x00\x01"])
def test_malformed_owned_members_are_corruption(member: bytes) -> None:
    with pytest.raises(StoreCorrupted):
        _keys.split_owned(member)


@given(st.none() | st.text(min_size=1, max_size=30), st.none() | st.text(min_size=1, max_size=30))
def test_work_group_members_round_trip_and_sort_like_claim_order(
    a: str | None, b: str | None
) -> None:
    ma, mb = _keys.group_member(a), _keys.group_member(b)
    assert _keys.group_key(ma) == a and (ma == mb) == (a == b)
    assert (ma < mb) == (_keys.text(a or "") < _keys.text(b or ""))  # None ("") first


@pytest.mark.parametrize("member", [b"", b"a", b"a\x00\x00\x01", b"\xff\x00\x01"])
def test_malformed_work_group_members_are_corruption(member: bytes) -> None:
    with pytest.raises(StoreCorrupted):
        _keys.group_key(member)


@given(st.integers(0, 2**43 - 1), st.integers(0, 2**20 - 1))
def test_seq_round_trips_through_stream_ids(ms: int, n: int) -> None:
    entry = f"{ms}-{n}".encode()
    seq = _keys.seq_of(entry)
    assert 0 <= seq <= _keys.SEQ_MAX
    assert _keys.stream_id(seq) == entry


def test_seqs_grow_with_stream_ids() -> None:
    ordered = [b"5-0", b"5-1", b"5-1048575", b"6-0", b"1796085888737-3"]
    seqs = [_keys.seq_of(e) for e in ordered]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)


@pytest.mark.parametrize("seq", [-1, 2**63, 2**70])
def test_out_of_range_seqs_name_no_entry(seq: int) -> None:
    assert _keys.stream_id(seq) is None


@pytest.mark.parametrize("bad", ["1", 1.0, True, None])
def test_seq_must_be_an_int(bad: Any) -> None:
    with pytest.raises(TypeError):
        _keys.stream_id(bad)


@pytest.mark.parametrize("entry", [b"x", b"1-2-3", b"1-1048576", b"a-b"])
def test_foreign_stream_ids_are_corruption(entry: bytes) -> None:
    with pytest.raises(StoreCorrupted):
        _keys.seq_of(entry)


def test_listing_indexes_of_one_execution() -> None:
    keys = KEYS.indexes_of(Status.DONE, True, "order:{v2}")
    assert len(keys) == 8 and len(set(keys)) == 8
    assert b"p:ix:*:*:*" in keys and b"p:ix:DONE:root:=order%3A%7Bv2%7D" in keys
    assert len(KEYS.indexes_of(Status.DONE, False, "d")) == 4


def test_per_execution_keys_cannot_collide() -> None:
    assert KEYS.execution("a:tr:b") != KEYS.trace("b")
    assert KEYS.execution("sum") != KEYS.summaries
    assert KEYS.execution("{x}") == b"p:x:%7Bx%7D"


# -- scripts ----------------------------------------------------------------------------------


def test_scripts_are_named_once_and_hashed_like_redis() -> None:
    names = [script.name for script in _scripts.SCRIPTS]
    assert len(names) == len(set(names))
    for script in _scripts.SCRIPTS:
        assert script.sha == hashlib.sha1(script.source.encode()).hexdigest()


@pytest.mark.parametrize(
    ("script", "guard"),
    [
        (_scripts.COMMIT, "foreign_write_key("),
        (_scripts.ENQUEUE, "foreign_write_key("),
        (_scripts.IMPORT, "foreign_write_key("),
        (_scripts.DELETE_TIMER, "wrong_type("),
        (_scripts.ACK, "wrong_type("),
        (_scripts.PURGE, "wrong_type("),
        (_scripts.APPEND_TRACE, "wrong_type("),
        (_scripts.PRUNE, "wrong_type("),
        (_scripts.UPGRADE, "wrong_type("),
        (_scripts.CLAIM, "wrong_type("),
        (_scripts.RENEW, "wrong_type("),
        (_scripts.RELEASE, "wrong_type("),
    ],
)
def test_write_scripts_guard_types_before_writing(script: _scripts.LuaScript, guard: str) -> None:
    body = script.source  # helpers first: defined, not run
    for helpers in (_scripts._TYPE_GUARD, _scripts._WORK, _scripts._RELAY_WRITES):
        body = body.removeprefix(helpers)
    commands = ("XADD", "HSET", "ZREM", "XDEL", "ZADD", "RPUSH", "HINCRBY")
    first_write = min([len(body), *(body.find(f"'{c}'") for c in commands if f"'{c}'" in body)])
    writers = ("relay(", "emit_entry(", "apply_touches(", "work_put(", "work_drop(", "HSETNX")
    first_write = min([first_write, *(body.find(w) for w in writers if w in body)])
    assert 0 <= body.find(guard) < first_write


def test_the_leases_script_writes_nothing() -> None:
    body = _scripts.LEASES.source
    for helpers in (_scripts._TYPE_GUARD, _scripts._WORK, _scripts._WORK_KEYS):
        body = body.removeprefix(helpers)
    writes = ("XADD", "HSET", "HDEL", "ZREM", "ZADD", "XDEL", "RPUSH", "HINCRBY", "PUBLISH")
    assert not [c for c in writes if f"'{c}'" in body]
    assert "work_put(" not in body and "work_drop(" not in body


def test_list_leases_is_one_script_call_merged_in_lease_order() -> None:
    rows = [
        [_keys.owner_prefix("b"), b"0", b"30.0", b"w2"],
        [_keys.UNTARGETED, b"2", b"15.0", b"w1"],
    ]
    requests, leases = step_through(_plan.leases_plan(KEYS, 10.0, 1, WHERE), [[1, [0] * 5, *rows]])
    (request,) = requests
    assert request.wire == ("EVALSHA", _scripts.LEASES.sha, 6, *KEYS.work_keys, b"10.0", b"1")
    assert leases == [Lease(execution_id=None, owner="w1", expires_at=15.0)]
    with pytest.raises(StoreCorrupted, match="leases script"):
        step_through(_plan.leases_plan(KEYS, 10.0, 1, WHERE), [[0]])


def test_the_state_only_commit_writes_first_what_alone_can_fail() -> None:
    body = _scripts.COMMIT_STATE.source
    read, summary = body.find("'HMGET', KEYS[1]"), body.find("'HSET', KEYS[2]")
    assert 0 <= read < summary < body.find("'HSET', KEYS[1]")  # hash read, summary, hash
    assert body.find("foreign(KEYS[2], 'hash')") < summary  # index moves probe first


def test_scripts_never_turn_scores_into_lua_numbers() -> None:
    commit = _scripts.COMMIT.source
    assert "ZADD', KEYS[6], ARGV[a + 2]" in commit  # the repr text goes to Redis as is


# -- run_script -------------------------------------------------------------------------------


def test_noscript_falls_back_to_eval_with_the_source() -> None:
    requests, result = step_through(
        _requests.run_script(_scripts.LOAD, (b"k",), ()), [_requests.ScriptMissing(), b"doc"]
    )
    assert [r.wire[0] for r in requests] == ["EVALSHA", "EVAL"]
    assert requests[0].wire[1] == _scripts.LOAD.sha
    assert requests[1].wire[1] == _scripts.LOAD.source
    assert result == b"doc"


def test_unavailable_is_retried_once_when_idempotent() -> None:
    gone = StoreUnavailable("gone")
    requests, result = step_through(_requests.run_script(_scripts.LOAD, (b"k",), ()), [gone, b"d"])
    assert len(requests) == 2 and result == b"d"
    plan = _requests.run_script(_scripts.LOAD, (b"k",), ())
    next(plan)
    plan.throw(StoreUnavailable("gone"))
    with pytest.raises(StoreUnavailable):
        plan.throw(StoreUnavailable("still gone"))


def test_non_idempotent_scripts_are_not_retried() -> None:
    plan = _requests.run_script(_scripts.APPEND_TRACE, (b"k",), (), retry_unavailable=False)
    next(plan)
    with pytest.raises(StoreUnavailable):
        plan.throw(StoreUnavailable("gone"))


def test_oversized_requests_are_refused_before_sending() -> None:
    plan = _requests.run_script(_scripts.LOAD, (b"k",), (b"x" * 100,), limit=50)
    with pytest.raises(PayloadTooLarge, match="50 bytes"):
        next(plan)


# -- open -------------------------------------------------------------------------------------


def test_open_pings_loads_missing_scripts_and_checks_the_layout() -> None:
    scripts = _plan.OPEN_SCRIPTS
    present = [1] * len(scripts)
    present[0] = 0
    current = [str(_schema.SCHEMA_VERSION).encode(), b"harel-store-redis 9", 0]
    replies: list[Any] = [True, present, scripts[0].sha.encode(), current]
    requests, _ = step_through(_plan.open_plan(KEYS, WHERE), replies)
    assert requests[0].wire == ("PING",)
    assert requests[1].wire[:1] == ("SCRIPT EXISTS",)
    assert requests[2].wire == ("SCRIPT LOAD", scripts[0].source)
    assert requests[3].wire[0] == "EVALSHA" and requests[3].wire[1] == _scripts.LAYOUT.sha
    assert len(requests) == 4  # a current layout: nothing to upgrade


def test_open_creates_the_layout_of_an_empty_namespace_in_the_same_call() -> None:
    replies: list[Any] = [True, [1] * len(_plan.OPEN_SCRIPTS), [None, None, 1]]
    requests, _ = step_through(_plan.open_plan(KEYS, WHERE), replies)
    layout = requests[2].wire
    assert layout[3 : 3 + layout[2]] == KEYS.global_keys
    assert layout[3 + layout[2] :] == (b"4", _schema.written_by())
    assert KEYS.work_keys[0] in KEYS.global_keys  # claims' keys count as harel's too


@pytest.mark.parametrize("old", [b"1", b"2", b"3"])
def test_open_upgrades_older_layouts_with_one_script_and_accepts_a_concurrent_upgrade(
    old: bytes,
) -> None:
    replies: list[Any] = [True, [1] * len(_plan.OPEN_SCRIPTS), [old, None, 0]]
    replies.append([b"4", b"harel-store-redis 0.1.0"])  # this call, or another opener, upgraded
    requests, _ = step_through(_plan.open_plan(KEYS, WHERE), replies)
    upgrade = requests[3].wire
    assert upgrade[1] == _scripts.UPGRADE.sha
    assert upgrade[3:5] == (KEYS.layout, KEYS.schema) and upgrade[3 + upgrade[2] :][:2] == (
        old,
        b"4",
    )
    assert upgrade[3 + upgrade[2] - 6 : 3 + upgrade[2]] == KEYS.work_keys  # it backfills them


@pytest.mark.parametrize(
    ("found", "message"),
    [
        ([b"6", b"harel-store-redis 0.9.0", 0], "version 6 .*harel-store-redis>=0.9.0"),
        ([b"0", None, 0], "older than any"),
        ([b"x", None, 0], "not a version number"),
        ([None, None, 0], "no layout version"),
    ],
)
def test_open_refuses_another_layout(found: list[Any], message: str) -> None:
    replies: list[Any] = [True, [1] * len(_plan.OPEN_SCRIPTS), found]
    with pytest.raises(SchemaVersionError, match=message):
        step_through(_plan.open_plan(KEYS, WHERE), replies)


def test_open_finds_a_sharded_layout_with_the_single_slot_check() -> None:
    """Without ``?shards=`` the single-slot check reads a sharded layout's record (layout 5)
    and returns its shard count; one without a readable count is damage."""
    replies: list[Any] = [
        True,
        [1] * len(_plan.OPEN_SCRIPTS),
        [b"5", b"harel-store-redis 9", 0, b"4"],
    ]
    _, count = step_through(_plan.open_plan(KEYS, WHERE), replies)
    assert count == 4
    replies[-1] = [b"5", None, 0, None]
    with pytest.raises(StoreCorrupted, match="shard count"):
        step_through(_plan.open_plan(KEYS, WHERE), replies)


# -- commit -----------------------------------------------------------------------------------


def full_commit() -> Any:
    exe = Execution(id="e:1", definition_id="d", status=Status.RUNNING, version=3)
    return prepared(
        exe,
        emits=[("t{1}", Event(id="ev", kind="K")), (None, Event(id="ev2", kind="K"))],
        processed_event_id="in",
        timers=(TimerOp.schedule("/a", 5e-324), TimerOp.cancel("/b")),
        spawns=[("c", "/r", {"k": 1})],
        trace={"event_kind": "Go", "index": 99},
    )


def test_commit_is_one_script_call_with_every_effect() -> None:
    p = full_commit()
    keys, args = _commit.commit_request(KEYS, p, 5, b"tok")
    assert keys[:9] == (
        KEYS.execution("e:1"),
        KEYS.trace("e:1"),
        KEYS.summaries,
        KEYS.owned,
        KEYS.marks,
        KEYS.timers,
        KEYS.timer_at,
        KEYS.outbox,
        KEYS.spawns,
    )
    assert set(keys[9:-6]) == set(KEYS.indexes_of(Status.RUNNING, True, "d"))
    assert args[:2] == (b"3", b"4") and args[3] == b"tok"
    assert args[13:16] == (b"2", b"1", b"2")
    assert args[16] == b"k4"  # the receipt field of version 4 (ARGV[17])
    assert args[18:20] == (b"", b"k3")  # no fence (a fresh object), expected version's field
    assert args[20:24] == (
        b"t",
        b"t{1}",
        _keys.owner_prefix("t{1}"),
        p.emits[0].event_json.encode(),
    )
    assert args[24:26] == (b"u", b"")  # untargeted: owned under the untargeted prefix
    assert args[26] == _keys.UNTARGETED
    assert b"5e-324" in args  # the exact repr, as a string for Redis to parse
    assert keys[-6:] == KEYS.work_keys and args[17] == b"3"  # 3 work rows touched (ARGV[18])
    relay_at = repr(relay_due(p.committed_at)).encode()  # it writes a spawn: due at once
    assert args[-13:-9] == (_keys.owner_prefix("e:1"), relay_at, b"0", b"1")  # its own row
    assert args[-1] == KEYS.prefix + b"wake"  # the wake-up channel the script publishes on
    assert b'"index"' not in args[11]  # a caller-supplied index is dropped
    requests, result = step_through(
        _commit.commit_plan(KEYS, p, 5, where=WHERE), [[_scripts.APPLIED]]
    )
    assert len(requests) == 1 and result is None


def test_a_state_only_commit_declares_two_keys() -> None:
    exe = Execution(id="e:1", definition_id="d", status=Status.RUNNING, version=3)
    p = prepared(exe, emits=[])
    requests, _ = step_through(_commit.commit_plan(KEYS, p, 5, where=WHERE), [[_scripts.APPLIED]])
    (request,) = requests
    assert request.wire[1] == _scripts.COMMIT_STATE.sha and request.wire[2] == 2
    assert request.wire[3:5] == (KEYS.execution("e:1"), KEYS.summaries)
    assert request.wire[-4] == b"\n".join(KEYS.indexes_of(Status.RUNNING, True, "d"))
    assert request.wire[-3] == b"k4"  # the receipt field of version 4
    assert request.wire[-2:] == (b"", b"k3")  # no fence; the receipt field of version 3
    assert request.wire[3 + 2 + 3] == p.token.encode()  # ARGV[4]: the commit token
    with_mark = prepared(exe, emits=[], processed_event_id="in")
    requests, _ = step_through(
        _commit.commit_plan(KEYS, with_mark, 5, where=WHERE), [[_scripts.APPLIED]]
    )
    assert requests[0].wire[1] == _scripts.COMMIT.sha


def test_the_fence_travels_to_both_commit_scripts() -> None:
    exe = Execution(id="e:1", definition_id="d", status=Status.RUNNING, version=3)
    fenced = prepared(exe, emits=[])._replace(base="b" * 32)
    _, state_args = _commit.state_request(KEYS, fenced, b"tok")
    assert state_args[9:] == (b"b" * 32, b"k3")  # ARGV[10], ARGV[11]
    _, args = _commit.commit_request(KEYS, fenced._replace(processed_event_id="in"), 5, b"tok")
    assert args[18:20] == (b"b" * 32, b"k3")  # ARGV[19], ARGV[20]
    for script in (_scripts.COMMIT, _scripts.COMMIT_STATE):  # the fence is in the CAS check
        assert "cur[4] ~= ARGV[" in script.source


def test_a_recorded_mark_raises_already_processed_after_the_resend_check() -> None:
    p = full_commit()
    with pytest.raises(AlreadyProcessed) as info:
        step_through(
            _commit.commit_plan(KEYS, p, 5, where=WHERE),
            [[_scripts.ALREADY_PROCESSED, b"3", b""]],
        )
    assert (info.value.event_id, info.value.expected, info.value.found) == ("in", 3, 3)
    assert p.processed_event_id == "in"
    with pytest.raises(AlreadyProcessed) as absent:  # the mark without a stored execution
        step_through(_commit.commit_plan(KEYS, p, 5, where=WHERE), [[_scripts.ALREADY_PROCESSED]])
    assert absent.value.found is None
    # a re-send of this very commit, stored (its own mark is what the script found): success
    requests, result = step_through(
        _commit.commit_plan(KEYS, p, 5, where=WHERE),
        [[_scripts.ALREADY_PROCESSED, b"6", p.token.encode()]],
    )
    assert len(requests) == 1 and result is None


def test_a_fenced_refusal_is_a_conflict_at_the_expected_version() -> None:
    exe = Execution(id="e:1", definition_id="d", status=Status.RUNNING, version=3)
    fenced = prepared(exe, emits=[])._replace(base="b" * 32)
    with pytest.raises(StoreConflict) as info:
        step_through(
            _commit.commit_plan(KEYS, fenced, 5, where=WHERE), [[_scripts.CONFLICT, b"3", b""]]
        )
    assert not isinstance(info.value, AlreadyProcessed)
    assert (info.value.expected, info.value.found) == (3, 3)


def test_lost_cas_raises_conflict_with_the_found_version() -> None:
    p = full_commit()
    with pytest.raises(StoreConflict) as info:
        step_through(
            _commit.commit_plan(KEYS, p, 5, where=WHERE), [[_scripts.CONFLICT, b"7", b"x"]]
        )
    assert (info.value.expected, info.value.found) == (3, 7)
    with pytest.raises(StoreConflict) as absent:
        step_through(_commit.commit_plan(KEYS, p, 5, where=WHERE), [[_scripts.CONFLICT]])
    assert absent.value.found is None


def lost(message: str = "reply lost") -> _requests.ReplyLost:
    return _requests.ReplyLost(message)


def test_a_resend_after_a_lost_reply_that_finds_its_receipt_counts_as_applied() -> None:
    p = full_commit()
    plan = _commit.commit_plan(KEYS, p, 5, where=WHERE)
    first = next(plan)
    second = plan.throw(lost())
    assert second.wire == first.wire  # the very same script and token, re-sent
    token = first.wire[3 + first.wire[2] + 3]  # ARGV[4]
    assert token == p.token.encode() and len(token) == 32
    # a rival committed version 5 in between: the receipt of version 4 is still ours
    with pytest.raises(StopIteration):
        plan.send([_scripts.CONFLICT, b"5", token])


def test_a_resend_whose_receipt_is_another_commits_is_a_conflict() -> None:
    p = full_commit()
    plan = _commit.commit_plan(KEYS, p, 5, where=WHERE)
    next(plan)
    plan.throw(lost())
    with pytest.raises(StoreConflict) as info:
        plan.send([_scripts.CONFLICT, b"5", b"f" * 32])
    assert info.value.found == 5


def test_a_reply_lost_on_every_attempt_is_an_unknown_outcome() -> None:
    plan = _commit.commit_plan(KEYS, full_commit(), 5, where=WHERE)
    next(plan)
    for _ in range(_commit.RESENDS):
        plan.throw(lost())
    with pytest.raises(CommitOutcomeUnknown, match="may or may not be stored") as info:
        plan.throw(lost("still lost"))
    assert (info.value.execution_id, info.value.expected) == ("e:1", 3)
    assert "still lost" in info.value.detail


def test_unreachable_after_a_lost_reply_is_still_an_unknown_outcome() -> None:
    plan = _commit.commit_plan(KEYS, full_commit(), 5, where=WHERE)
    next(plan)
    plan.throw(lost())
    plan.throw(StoreUnavailable("connection refused"))
    with pytest.raises(CommitOutcomeUnknown):
        plan.throw(StoreUnavailable("connection refused"))


def test_a_commit_that_never_reached_the_server_is_plainly_unavailable() -> None:
    plan = _commit.commit_plan(KEYS, full_commit(), 5, where=WHERE)
    next(plan)
    plan.throw(StoreUnavailable("connection refused"))  # retried once, like a stale connection
    with pytest.raises(StoreUnavailable, match="nothing of the commit") as info:
        plan.throw(StoreUnavailable("connection refused"))
    assert type(info.value) is StoreUnavailable


def test_a_commit_prepared_without_a_token_gets_one() -> None:
    p = full_commit()._replace(token="")
    plan = _commit.commit_plan(KEYS, p, 5, where=WHERE)
    request = next(plan)
    token = request.wire[3 + request.wire[2] + 3]
    assert len(token) == 32
    with pytest.raises(StopIteration):  # the receipt it finds after a resend is its own
        plan.send([_scripts.CONFLICT, b"4", token])


def test_commit_failure_replies_are_typed() -> None:
    p = full_commit()
    with pytest.raises(StoreUnavailable, match="ran out of ids"):
        _commit.decide_commit(p, [_scripts.SEQ_EXHAUSTED], WHERE)
    with pytest.raises(StoreCorrupted, match="p:timers"):
        _commit.decide_commit(p, [_scripts.WRONG_TYPE, b"p:timers"], WHERE)
    with pytest.raises(StoreCorrupted):
        _commit.decide_commit(p, b"garbage", WHERE)


def test_bad_trace_max_is_refused_before_anything_is_sent() -> None:
    with pytest.raises(ValueError):
        next(_commit.commit_plan(KEYS, full_commit(), -1, where=WHERE))


# -- enqueue ----------------------------------------------------------------------------------


def test_enqueue_is_one_script_call_with_the_entry_the_touch_and_the_wake_up() -> None:
    p = prepare_enqueue("t{1}", Event(id="q", kind="K", data={"n": 1}), 3)
    keys, args = _enqueue.enqueue_request(KEYS, p)
    assert keys == (*KEYS.write_keys("t{1}"), *KEYS.work_keys)  # a commit's, for the target
    member = _keys.owner_prefix("t{1}")
    due = repr(relay_due(p.enqueued_at)).encode()
    assert args == (
        b"t",
        b"t{1}",
        member,  # the entry is indexed under the target, like an emitted one
        p.emit.event_json.encode(),
        member,  # the target's work row: due at once, the caller's priority, not its own
        due,
        b"3",
        b"0",
        KEYS.prefix + b"wake",
    )
    assert args[:4] == tuple(_commit.emit_args(KEYS, p.emit))  # what a commit sends
    requests, seq = step_through(
        _enqueue.enqueue_plan(KEYS, p, where=WHERE), [[_scripts.APPLIED, b"1700000000000-5"]]
    )
    (request,) = requests
    assert request.wire[:3] == ("EVALSHA", _scripts.ENQUEUE.sha, len(keys))
    assert seq == _keys.seq_of(b"1700000000000-5")


def test_commit_and_enqueue_write_an_emitted_entry_with_one_helper() -> None:
    for script in (_scripts.COMMIT, _scripts.ENQUEUE):
        assert script.source.count("local function emit_entry(") == 1
        body = script.source.removeprefix(_scripts._WORK).removeprefix(_scripts._RELAY_WRITES)
        assert "emit_entry(" in body and "'XADD'" not in body
    assert _scripts.ENQUEUE in _scripts.SCRIPTS  # loaded at open, sent by SHA


def test_enqueue_is_sent_once_and_its_failures_are_typed() -> None:
    p = prepare_enqueue("t", Event(id="q", kind="K"), 0)
    plan = _enqueue.enqueue_plan(KEYS, p, where=WHERE)
    next(plan)
    with pytest.raises(_requests.ReplyLost):  # it may have run: not re-sent (not idempotent)
        plan.throw(_requests.ReplyLost("cut"))
    with pytest.raises(StoreUnavailable, match="ran out of ids"):
        _enqueue.decide_enqueue([_scripts.SEQ_EXHAUSTED], WHERE)
    with pytest.raises(StoreCorrupted, match="p:outbox"):
        _enqueue.decide_enqueue([_scripts.WRONG_TYPE, b"p:outbox"], WHERE)
    for garbage in (b"garbage", [_scripts.APPLIED], [_scripts.CONFLICT]):
        with pytest.raises(StoreCorrupted):
            _enqueue.decide_enqueue(garbage, WHERE)
    with pytest.raises(PayloadTooLarge):
        next(_enqueue.enqueue_plan(KEYS, p, where=WHERE, limit=10))


# -- other operations -------------------------------------------------------------------------


def test_delete_timer_sends_the_exact_fire_at() -> None:
    requests, _ = step_through(_plan.delete_timer_plan(KEYS, "e", "/a", 5e-324, WHERE), [1])
    assert requests[0].wire[-1] == b"5e-324"
    with pytest.raises(ValueError):
        next(_plan.delete_timer_plan(KEYS, "e", "/a", math.nan, WHERE))
    with pytest.raises(TypeError):
        next(_plan.delete_timer_plan(KEYS, "e", "/a", None, WHERE))  # type: ignore[arg-type]


def test_ack_names_the_stream_entry_of_its_seq() -> None:
    requests, result = step_through(_plan.ack_plan(KEYS, 2**62, spawns=True, where=WHERE), [0])
    assert requests[0].wire[3:] == (
        KEYS.spawns,
        KEYS.owned,
        b"4398046511104-0",
        b"s",
        _keys.UNTARGETED,
    )
    assert result is None
    with pytest.raises(ValueError):
        next(_plan.ack_plan(KEYS, -5, spawns=False, where=WHERE))
    with pytest.raises(TypeError):
        next(_plan.ack_plan(KEYS, "5", spawns=False, where=WHERE))  # type: ignore[arg-type]


def test_append_trace_to_an_unknown_execution() -> None:
    with pytest.raises(ExecutionNotFound):
        step_through(_plan.append_trace_plan(KEYS, "nope", {"a": 1}, 3, WHERE), [0])


def test_purge_refuses_an_active_execution() -> None:
    with pytest.raises(ExecutionActive) as info:
        step_through(_plan.purge_plan(KEYS, "e", False, WHERE), [[0, b"RUNNING"]])
    assert info.value.status == "RUNNING"
    _, existed = step_through(_plan.purge_plan(KEYS, "e", True, WHERE), [[1, 0]])
    assert existed is False


def test_prune_runs_batches_until_a_short_one() -> None:
    requests, total = step_through(_plan.prune_plan(KEYS, 100.0, 2, WHERE), [2, 2, 1])
    assert len(requests) == 3 and total == 5
    assert requests[0].wire[-2:] == (b"(100.0", b"2")


@pytest.mark.parametrize(
    ("older_than", "batch", "error"),
    [(math.inf, 1, ValueError), ("1", 1, TypeError), (1.0, 0, ValueError), (1.0, True, TypeError)],
)
def test_prune_arguments_are_checked(older_than: Any, batch: Any, error: type) -> None:
    with pytest.raises(error):
        next(_plan.prune_plan(KEYS, older_than, batch, WHERE))


def test_due_timers_decodes_exact_values_in_order() -> None:
    m1 = _keys.owned("a", _keys.TAG_TIMER, "/x")
    m2 = _keys.owned("b", _keys.TAG_TIMER, "/y")
    reply = [m1, b"0", b"-0.0", m2, b"2.5", None]
    _, due = step_through(_plan.due_timers_plan(KEYS, 10, None), [reply])
    assert due == [("a", "/x", -0.0), ("b", "/y", 2.5)]
    assert struct.pack("<d", due[0][2]) == struct.pack("<d", -0.0)


def test_due_timers_skips_an_unreadable_member() -> None:
    m1 = _keys.owned("a", _keys.TAG_TIMER, "/x")
    _, due = step_through(
        _plan.due_timers_plan(KEYS, 10, 5), [[b"junk", b"1", b"1.0", m1, b"2", b"2.0"]]
    )
    assert due == [("a", "/x", 2.0)]


def test_pending_outbox_decodes_entries() -> None:
    event = Event(id="e1", kind="K", data={"x": 1})
    reply = [
        [b"7-0", [b"e", event.model_dump_json().encode(), b"t", b"t:1", b"o", b"..."]],
        [b"7-1", [b"e", event.model_dump_json().encode()]],
    ]
    _, entries = step_through(_plan.pending_outbox_plan(KEYS, 10), [reply])
    assert [(e.seq, e.target_id, e.event) for e in entries] == [
        (7 << 20, "t:1", event),
        ((7 << 20) + 1, None, event),
    ]
    with pytest.raises(StoreCorrupted, match="outbox entry"):
        step_through(_plan.pending_outbox_plan(KEYS, 10), [[[b"7-2", [b"e", b"{"]]]])


def test_read_trace_takes_the_stored_index() -> None:
    _, steps = step_through(_plan.read_trace_plan(KEYS, "e"), [[b'4 {"a":1}', b'5 {"a":2}']])
    assert steps == [{"a": 1, "index": 4}, {"a": 2, "index": 5}]


def test_listing_merges_status_arms_by_id() -> None:
    def row(version: int) -> bytes:
        return f'["d","DONE",null,null,{version},null,1.5]'.encode()

    plan = _plan.listing_plan(
        KEYS,
        listing_query(
            status=[Status.DONE, Status.FAILED],
            definition_id="d",
            roots_only=True,
            limit=2,
            cursor=encode_cursor("a"),
        ),
    )
    request = next(plan)
    assert request.wire[4:6] == (
        KEYS.index(Status.DONE, True, "d"),
        KEYS.index(Status.FAILED, True, "d"),
    )
    assert request.wire[-2:] == (b"(a", b"3")
    with pytest.raises(StopIteration) as stop:
        plan.send([[b"b", row(1), b"d", row(2)], [b"c", row(3), b"e", row(4)]])
    page = stop.value.value
    assert [item.id for item in page.items] == ["b", "c"]
    assert page.items[0].updated_at == 1.5 and page.next_cursor == encode_cursor("c")


def test_listing_that_matches_nothing_sends_nothing() -> None:
    requests, page = step_through(
        _plan.listing_plan(
            KEYS,
            listing_query(status=[], definition_id=None, roots_only=False, limit=5, cursor=None),
        ),
        [],
    )
    assert requests == [] and page.items == []


# -- options ----------------------------------------------------------------------------------


def test_url_forms() -> None:
    opts, retry = open_options("redis://u:pw@h:7000/3?prefix=app:&trace_max=0", {})
    assert (opts.host, opts.port, opts.db, opts.username, opts.password) == (
        "h",
        7000,
        3,
        "u",
        "pw",
    )
    assert (opts.prefix, opts.trace_max, retry["retries"], retry["delay"]) == ("app:", 0, 5, 0.2)
    assert retry["what"] == "Redis redis://h:7000/3 (prefix 'app:')" == opts.where
    opts, _ = open_options("rediss://h?ssl_cert_reqs=NONE", {})
    assert opts.client_kwargs()["ssl"] is True and opts.client_kwargs()["ssl_cert_reqs"] == "none"
    opts, _ = open_options("unix:///tmp/r.sock?db=2&password=s", {"prefix": "k:"})
    assert opts.client_kwargs()["unix_socket_path"] == "/tmp/r.sock"
    assert (opts.db, opts.password, opts.prefix) == (2, "s", "k:")
    assert opts.where == "Redis unix:///tmp/r.sock?db=2 (prefix 'k:')"
    opts, retry = open_options("redis://h", {"connect_retries": 0, "retry_delay": 0.1})
    assert (opts.prefix, opts.db, retry["retries"], retry["delay"]) == ("harel:", 0, 0, 0.1)


def test_keywords_win_and_the_query_password_over_the_user_part() -> None:
    opts, _ = open_options("redis://:pw@h/1?db=1&prefix=a:&password=q", {"db": 4, "prefix": "b:"})
    assert (opts.db, opts.prefix, opts.password) == (4, "b:", "q")
    opts, _ = open_options("redis://:pw@h/1", {"password": None})  # None: the URL's
    assert opts.password == "pw"
    opts, _ = open_options("redis://h?cluster=yes&shards=64&max_connections=3", {})
    assert (opts.cluster, opts.shards, opts.client_kwargs()["max_connections"]) == (True, 64, 3)
    assert "db" not in opts.client_kwargs() and opts.where.startswith("Redis Cluster redis://h:")
    opts, _ = open_options("redis://h?cluster=yes", {})
    assert "max_connections" not in opts.client_kwargs()  # the cluster client's own default


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://h/db",
        "redis://h/notanumber",
        "redis://h/-1",
        "redis://h/1?db=2",
        "redis://h?colour=blue",
        "unix://host/path.sock",
        "unix://",
        "redis://h?prefix=",
        "redis://h?prefix=a%0Ab",
        "redis://h?socket_timeout=0",
        "redis://h?shards=65",
        "redis://h/1?cluster=yes",
        "unix:///r.sock?cluster=yes",
    ],
)
def test_bad_urls_are_refused(url: str) -> None:
    with pytest.raises(InvalidStoreURL):
        open_options(url, {})


@pytest.mark.parametrize(
    ("url", "keywords", "message"),
    [
        ("redis://h?shards=0", {}, "option shards=0 must be an int >= 1 <= 64 or None"),
        ("redis://h", {"db": -1}, "option db=-1 must be an int >= 0"),
        ("redis://h", {"socket_timeout": 0}, "option socket_timeout=0 must be a number > 0"),
        ("redis://h", {"cluster": "maybe"}, "option cluster='maybe' must be true or false"),
        ("redis://h", {"password": 5}, "option password=*** must be a string or None"),
        (
            "redis://h/1?db=2",
            {},
            "'redis://h/1?db=2' names two different databases (path and ?db=)",
        ),
        (
            "redis://h?cluster=yes",
            {"db": 2},
            "a Redis Cluster has only database 0 (redis://host:port/0?cluster=yes)",
        ),
        (
            "redis://h",
            {"prefx": "a:"},
            "unknown option(s) prefx for a Redis store (did you mean prefix?); allowed: ",
        ),
    ],
)
def test_refusals_say_what_to_do(url: str, keywords: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidStoreURL) as info:
        open_options(url, keywords)
    assert str(info.value).startswith(message)


def test_the_constructors_knobs_are_the_specs() -> None:
    """``RedisStore(client, prefix=...)`` checks its knobs with the same rules as a URL."""
    values = SPEC.knob_values({"prefix": "p:", "shards": 3})
    assert (values["prefix"], values["shards"], values["max_payload_bytes"]) == (
        "p:",
        3,
        512 * 1024 * 1024,
    )
    for bad in ({"prefix": ""}, {"prefix": 5}, {"trace_max": -1}, {"max_payload_bytes": 0}):
        with pytest.raises(ValueError, match="option "):
            SPEC.knob_values(bad)


def test_messages_never_show_the_password() -> None:
    opts, _ = open_options("redis://user:s3cr%2Fet@h:1/0", {})
    assert "s3cr" not in opts.where and "s3cr" not in repr(opts)
    with pytest.raises(InvalidStoreURL) as info:
        open_options("redis://user:s3cr%2Fet@h:1/0?bogus=1", {})
    assert "s3cr" not in str(info.value)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("unix:///tmp/r.sock", "unix:///tmp/r.sock?prefix=k%3A"),
        ("redis://h/0?prefix=old:&db=0", "redis://h/0?db=0&prefix=k%3A"),
    ],
)
def test_harness_urls_keep_their_form(url: str, expected: str) -> None:
    assert with_prefix(url, "k:") == expected
    assert open_options(expected, {})[0].prefix == "k:"


def test_legacy_variables() -> None:
    assert SPEC.legacy_url({}) is None
    assert SPEC.legacy_url({"STM_REDIS_URL": "redis://a"}) == "redis://a"
    assert SPEC.legacy_url(
        {"STM_REDIS_URL": "redis://a", "STM_STORE_REDIS_URL": " redis://b "}
    ) == ("redis://b")


# -- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("exc", "typed"),
    [
        (rex.NoScriptError("NOSCRIPT"), _requests.ScriptMissing),
        (rex.ConnectionError("refused"), StoreUnavailable),
        (rex.TimeoutError("slow"), StoreUnavailable),
        (rex.BusyLoadingError("LOADING"), StoreUnavailable),
        (rex.AuthenticationError("WRONGPASS"), StoreConfigError),
        (rex.NoPermissionError("NOPERM"), StoreConfigError),
        (rex.ReadOnlyError("READONLY"), StoreUnavailable),
        (rex.OutOfMemoryError("OOM"), StoreUnavailable),
        (rex.ResponseError("BUSY Redis is busy running a script"), StoreUnavailable),
        (rex.ResponseError("CROSSSLOT Keys in request don't hash"), StoreConfigError),
        (rex.ResponseError("WRONGTYPE Operation against a key"), StoreCorrupted),
        (rex.ResponseError("ERR something"), StoreError),
        (rex.DataError("bad"), StoreError),
        (OSError("reset"), StoreUnavailable),
    ],
)
def test_driver_errors_become_typed_errors(exc: Exception, typed: type) -> None:
    assert isinstance(map_error(exc, WHERE), typed)


@pytest.mark.parametrize(
    "exc",
    [
        rex.ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused."),
        rex.ConnectionError("Error connecting to unix socket: /tmp/r.sock."),
        rex.TimeoutError("Timeout connecting to server"),
        rex.BusyLoadingError("Redis is loading the dataset in memory"),
        ConnectionRefusedError(111, "Connection refused"),
    ],
)
def test_failures_before_the_request_could_run_are_plainly_unavailable(exc: Exception) -> None:
    assert type(map_error(exc, WHERE)) is StoreUnavailable


@pytest.mark.parametrize(
    "exc",
    [
        rex.ConnectionError("Connection closed by server."),
        rex.TimeoutError("Timeout reading from 127.0.0.1:6379"),
        rex.ConnectionError("Error while reading from 127.0.0.1:6379 : (104, 'reset')"),
        rex.ConnectionError("Error 32 while writing to socket. Broken pipe."),
        rex.TimeoutError("Timeout writing to socket"),
        rex.ConnectionError("something new"),  # unknown: the safe side
        OSError("reset"),
    ],
)
def test_failures_after_the_request_may_have_run_are_reply_lost(exc: Exception) -> None:
    typed = map_error(exc, WHERE)
    assert isinstance(typed, _requests.ReplyLost) and isinstance(typed, StoreUnavailable)


def _with_context(exc: BaseException, context: BaseException) -> BaseException:
    exc.__context__ = context
    return exc


@pytest.mark.parametrize(
    ("exc", "typed", "phrase"),
    [
        # the cluster client refuses keys of several slots before sending anything
        (
            rex.RedisClusterException("EVALSHA - all keys must map to the same key slot"),
            StoreConfigError,
            "?prefix={harel}:",
        ),
        (
            rex.ClusterCrossSlotError("Keys in request don't hash to the same slot"),
            StoreConfigError,
            "?shards=N",
        ),
        # a plain client redirected by a cluster node
        (rex.MovedError("3999 127.0.0.1:7001"), StoreConfigError, "?cluster=yes"),
        (rex.ResponseError("MOVED 3999 127.0.0.1:7001"), StoreConfigError, "?cluster=yes"),
        (rex.ClusterDownError("The cluster is down"), StoreUnavailable, "master"),
        (rex.MasterDownError("Link with MASTER is down"), StoreUnavailable, "master"),
        (rex.TryAgainError("Multiple keys request during rehashing"), StoreUnavailable, "retry"),
        (rex.SlotNotCoveredError("Slot 12 is not covered by the cluster."), StoreUnavailable, ""),
        (rex.RedisClusterException("Redis Cluster cannot be connected."), StoreUnavailable, ""),
    ],
)
def test_cluster_errors_become_typed_errors(exc: Exception, typed: type, phrase: str) -> None:
    mapped = map_error(exc, WHERE)
    assert type(mapped) is typed and phrase in str(mapped)


def test_a_failed_topology_refresh_after_a_lost_reply_is_still_a_lost_reply() -> None:
    """The cluster client refreshes its slot map inside its connection-error handler; when
    that fails too, the error it raises carries the connection error, which decides."""
    lost = _with_context(
        rex.RedisClusterException("Redis Cluster cannot be connected."),
        rex.ConnectionError("Connection closed by server."),
    )
    assert isinstance(map_error(lost, WHERE), _requests.ReplyLost)
    refused = _with_context(
        rex.RedisClusterException("Redis Cluster cannot be connected."),
        rex.ConnectionError("Error 111 connecting to 127.0.0.1:7000. Connection refused."),
    )
    assert type(map_error(refused, WHERE)) is StoreUnavailable


def test_a_client_that_retries_by_itself_never_proves_that_nothing_ran() -> None:
    from harel_store_redis._errors import client_retries
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    assert not client_retries({}) and not client_retries({"retry": Retry(NoBackoff(), 0)})
    assert client_retries({"retry": Retry(NoBackoff(), 3)})
    refused = rex.ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")
    # its last failure may follow an attempt that was sent and ran
    assert isinstance(map_error(refused, WHERE, retried=True), _requests.ReplyLost)
