"""Unit tests of harel.store.common: codec, commit envelope, trace policy, listing, URLs, retry."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest
from harel.model import Event, Execution, ExecutionSummary, Status
from harel.store.common.codec import decode_execution, dumps, encode_execution, loads
from harel.store.common.commit import cas_decision, collapse_timer_ops, committing
from harel.store.common.listing import decode_cursor, encode_cursor, listing_query, page_from_probe
from harel.store.common.retry import connect_with_retry
from harel.store.common.trace import decode_trace_step, encode_trace_step, trace_keep_from
from harel.store.common.urls import (
    knob_bool,
    knob_choice,
    knob_float,
    knob_int,
    parse_store_url,
    redact_url,
)
from harel.store.contract import TimerOp
from harel.store.errors import (
    InvalidCursor,
    InvalidPayload,
    InvalidStoreURL,
    StoreConflict,
    StoreUnavailable,
)


def test_codec_round_trips_execution_with_awkward_values() -> None:
    exe = Execution(
        id="a'b\"c.$:ü",
        definition_id="d",
        context={"nan": math.nan, "inf": -math.inf, "when": datetime(2026, 1, 2, tzinfo=UTC)},
        deferred=[Event(kind="Go", data={"x": 1})],
    )
    back = decode_execution(encode_execution(exe))
    assert back.id == exe.id
    assert math.isnan(back.context["nan"])
    assert back.context["inf"] == -math.inf
    assert back.context["when"] == "2026-01-02T00:00:00Z"
    assert back.deferred == exe.deferred
    assert back is not exe


def test_codec_names_the_part_it_cannot_encode() -> None:
    with pytest.raises(InvalidPayload, match="trace step"):
        dumps({"x": object()}, what="trace step")


@pytest.mark.parametrize("value", [0.1 + 0.2, 1e-300, 2.0**53 + 1.0, 1700000000.123456789, -0.0])
def test_floats_round_trip_bit_exactly(value: float) -> None:
    back = loads(dumps({"v": value}))["v"]
    assert back == value and math.copysign(1, back) == math.copysign(1, value)


def test_collapse_keeps_last_op_per_path() -> None:
    ops = [
        TimerOp.schedule("A", 1.0),
        TimerOp.cancel("A"),
        TimerOp.schedule("B", 2.0),
        TimerOp.schedule("A", 3.0),
    ]
    assert collapse_timer_ops(ops) == (TimerOp.schedule("B", 2.0), TimerOp.schedule("A", 3.0))
    assert collapse_timer_ops([TimerOp.schedule("A", 1), TimerOp.cancel("A")]) == (
        TimerOp.cancel("A"),
    )


def test_timer_op_validates_action_and_time() -> None:
    with pytest.raises(ValueError, match="schedule"):
        TimerOp("arm", "A", 1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="finite"):
        TimerOp.schedule("A", math.nan)
    with pytest.raises(TypeError):
        TimerOp.schedule("A", True)
    assert isinstance(TimerOp.schedule("A", 560).fire_at, float)


def test_committing_bumps_and_restores_version_on_any_error() -> None:
    exe = Execution(definition_id="d", version=4)
    with committing(exe, [(None, Event(kind="Go"))], "e1", [], [("c", "R", {})]) as plan:
        assert exe.version == 5
        assert plan.expected_version == 4 and plan.new_version == 5
        assert loads(plan.document)["version"] == 5
    assert exe.version == 5

    with pytest.raises(RuntimeError), committing(exe) as plan:
        raise RuntimeError("driver failed")
    assert exe.version == 5

    with pytest.raises(InvalidPayload), committing(exe, trace={"bad": object()}):
        pass
    assert exe.version == 5


@pytest.mark.parametrize(
    ("emits", "spawns"),
    [
        ([("t", "not an event")], []),
        ([(1, Event(kind="Go"))], []),
        ([], [("c", "R")]),
        ([], [("", "R", {})]),
    ],
)
def test_committing_rejects_malformed_effects(emits: list, spawns: list) -> None:  # type: ignore[type-arg]
    exe = Execution(definition_id="d")
    with pytest.raises((TypeError, ValueError)), committing(exe, emits, spawns=spawns):
        pass
    assert exe.version == 0


def test_cas_decision_pins_the_contract_rule() -> None:
    assert cas_decision(0, None) == "insert"
    assert cas_decision(3, None) == "conflict"
    assert cas_decision(3, 3) == "update"
    assert cas_decision(3, 4) == "conflict"
    assert cas_decision(0, 1) == "conflict"


def test_store_conflict_message_and_pickle() -> None:
    import pickle

    err = StoreConflict("x", 1, None)
    assert "no stored record" in str(err)
    again = pickle.loads(pickle.dumps(err))
    assert (again.execution_id, again.expected, again.found) == ("x", 1, None)


def test_trace_policy() -> None:
    text = encode_trace_step({"index": 99, "event_kind": "Go"})
    assert decode_trace_step(text, 4) == {"event_kind": "Go", "index": 4}
    assert trace_keep_from(5, 3) == 3
    assert trace_keep_from(5, None) is None
    assert trace_keep_from(5, 0) is None
    with pytest.raises(ValueError):
        trace_keep_from(5, -1)


def test_cursor_round_trip_and_garbage() -> None:
    assert decode_cursor(encode_cursor("a:b.c$ü")) == "a:b.c$ü"
    for bad in ["", "%%%", "bm90IGpzb24", encode_cursor("x")[:-2], "eyJ2IjoyLCJhZnRlciI6IngifQ"]:
        with pytest.raises(InvalidCursor):
            decode_cursor(bad)


def test_listing_query_validation() -> None:
    with pytest.raises(ValueError):
        listing_query(status=None, definition_id=None, roots_only=False, limit=0, cursor=None)
    with pytest.raises(TypeError):
        listing_query(
            status=Status.DONE,  # type: ignore[arg-type]
            definition_id=None,
            roots_only=False,
            limit=1,
            cursor=None,
        )
    query = listing_query(status=[], definition_id=None, roots_only=False, limit=2, cursor=None)
    assert query.matches_nothing


def test_page_from_probe_never_returns_cursor_after_last_page() -> None:
    query = listing_query(status=None, definition_id=None, roots_only=False, limit=2, cursor=None)
    rows = [ExecutionSummary(id=i, definition_id="d", status=Status.DONE) for i in "abc"]
    first = page_from_probe(query, rows)
    assert [s.id for s in first.items] == ["a", "b"]
    assert first.next_cursor is not None and decode_cursor(first.next_cursor) == "b"
    last = page_from_probe(query, rows[:2])
    assert last.next_cursor is None


def test_urls_parse_and_redact() -> None:
    url = "postgresql://bob:s3cr%40t@db.example:5433/app?sslmode=require"
    parsed = parse_store_url(url)
    assert (parsed.scheme, parsed.username, parsed.password) == ("postgresql", "bob", "s3cr@t")
    assert (parsed.host, parsed.port, parsed.path) == ("db.example", 5433, "/app")
    assert "s3cr" not in str(parsed) and "s3cr" not in repr(parsed)
    assert redact_url(url) == "postgresql://bob:***@db.example:5433/app?sslmode=require"
    with pytest.raises(InvalidStoreURL, match="allowed"):
        parsed.knobs({"timeout"})
    for bad in ["", "nourl", "redis://h:notaport/"]:
        with pytest.raises(InvalidStoreURL) as info:
            parse_store_url(bad)
        assert "secret" not in str(info.value)
    with pytest.raises(InvalidStoreURL, match="twice"):
        parse_store_url("sqlite:///x.db?a=1&a=2")


def test_knob_helpers_name_the_knob() -> None:
    knobs = {"n": "x", "f": "-1", "b": "maybe", "c": "full"}
    with pytest.raises(InvalidStoreURL, match="n="):
        knob_int(knobs, "n", 1)
    with pytest.raises(InvalidStoreURL, match="f="):
        knob_float(knobs, "f", 1.0)
    with pytest.raises(InvalidStoreURL, match="b="):
        knob_bool(knobs, "b", False)
    assert knob_choice(knobs, "c", "NORMAL", ("NORMAL", "FULL")) == "FULL"
    assert knob_int({}, "n", 7) == 7


def test_connect_with_retry_retries_only_listed_errors() -> None:
    calls = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionError("not yet")
        return "ok"

    assert connect_with_retry(flaky, retries=5, delay=0.0, retry_on=(ConnectionError,), what="x")
    assert len(calls) == 3
    with pytest.raises(StoreUnavailable, match="2 attempt"):
        connect_with_retry(
            lambda: (_ for _ in ()).throw(ConnectionError("down")),
            retries=1,
            delay=0.0,
            retry_on=(ConnectionError,),
            what="x",
        )
    with pytest.raises(KeyError):
        connect_with_retry(
            lambda: {}["x"], retries=3, delay=0.0, retry_on=(ConnectionError,), what="x"
        )
