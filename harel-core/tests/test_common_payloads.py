"""The envelope's input rules (harel.store.common.limits): refused before anything is written,
typed, naming the field; accepted values read back equal."""

from __future__ import annotations

import math
import uuid
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from harel.model import ChildState, Event, Execution, Status
from harel.store.common.codec import (
    check_max_bytes,
    decode_event,
    decode_execution,
    dumps,
    encode_execution,
    loads,
)
from harel.store.common.commit import collapse_timer_ops, committing
from harel.store.common.limits import (
    MAX_DOCUMENT_BYTES,
    MAX_ID_BYTES,
    MAX_INT,
    MAX_NESTING_DEPTH,
    MIN_INT,
)
from harel.store.common.listing import encode_cursor, listing_query
from harel.store.common.payloads import CHECKED_FIELDS
from harel.store.common.sweeps import sweep_limit
from harel.store.common.trace import decode_trace_step, encode_trace_step
from harel.store.common.validate import (
    check_count,
    check_event_ref,
    check_flag,
    check_id,
    check_limit,
    check_now,
    check_path,
    check_prune,
    check_seq,
    check_timer_ref,
)
from harel.store.contract import TimerOp
from harel.store.errors import (
    InvalidArgument,
    InvalidCursor,
    InvalidIdentifier,
    InvalidPayload,
    PayloadTooLarge,
    StoreCorrupted,
    StoreError,
)
from hypothesis import given, settings
from hypothesis import strategies as st


def nest(levels: int, leaf: Any = 1) -> Any:
    """``levels`` dicts/lists (alternating) around ``leaf``."""
    value = leaf
    for level in range(levels):
        value = {"k": value} if level % 2 else [value]
    return value


def refused(exc_type: type[BaseException], *, exe: Execution | None = None, **kwargs: Any) -> str:
    """Commit ``exe`` (a fresh one by default) with ``kwargs``; return the error message."""
    exe = exe or Execution(id="x", definition_id="d")
    before = exe.version
    with pytest.raises(exc_type) as info, committing(exe, **kwargs):
        pytest.fail("the commit was not refused")
    assert exe.version == before, "exe.version must be restored"
    return str(info.value)


def accepted(exe: Execution | None = None, **kwargs: Any) -> Any:
    exe = exe or Execution(id="x", definition_id="d")
    with committing(exe, **kwargs) as plan:
        return plan


# -- depth -------------------------------------------------------------------------------


def test_depth_limit_is_64_levels_counting_the_field_itself() -> None:
    assert MAX_NESTING_DEPTH == 64
    ok = Execution(id="x", definition_id="d", context={"v": nest(MAX_NESTING_DEPTH - 1)})
    plan = accepted(ok)
    assert decode_execution(plan.document).context == ok.context
    deep = Execution(id="x", definition_id="d", context={"v": nest(MAX_NESTING_DEPTH)})
    message = refused(InvalidPayload, exe=deep)
    assert "execution 'x'.context['v']" in message and "64 levels" in message


@pytest.mark.parametrize("levels", [200, 250, 1000])
def test_poison_depths_are_refused_not_written(levels: int) -> None:
    value = nest(levels)
    refused(InvalidPayload, exe=Execution(id="x", definition_id="d", context={"v": value}))
    refused(InvalidPayload, emits=[(None, Event(id="e", kind="K", data={"v": value}))])
    refused(InvalidPayload, spawns=[("c", "/r", {"v": value})])
    refused(InvalidPayload, trace={"context_out": {"v": value}})
    with pytest.raises(InvalidPayload):
        encode_trace_step({"event_data": value})


def test_trace_step_fields_count_from_their_own_level() -> None:
    """The engine copies the context into ``context_out``: a legal context is a legal step."""
    context = {"v": nest(MAX_NESTING_DEPTH - 1)}
    text = encode_trace_step({"context_out": context, "event_data": context})
    assert decode_trace_step(text, 0)["context_out"] == context


def test_self_referencing_value_is_refused() -> None:
    loop: dict[str, Any] = {}
    loop["me"] = loop
    assert "refers to itself" in refused(
        InvalidPayload, exe=Execution(id="x", definition_id="d", context=loop)
    )


# -- size --------------------------------------------------------------------------------


def test_payload_too_large_names_the_limit() -> None:
    exe = Execution(id="x", definition_id="d", context={"blob": "x" * 2000})
    message = refused(PayloadTooLarge, exe=exe, max_document_bytes=1000)
    assert "1000" in message
    assert "1000" in refused(
        PayloadTooLarge,
        emits=[(None, Event(id="e", kind="K", data={"b": "y" * 1000}))],
        max_document_bytes=1000,
    )
    assert "1000" in refused(
        PayloadTooLarge, spawns=[("c", "/r", {"b": "y" * 1000})], max_document_bytes=1000
    )
    assert "1000" in refused(PayloadTooLarge, trace={"b": "y" * 1000}, max_document_bytes=1000)
    with pytest.raises(PayloadTooLarge, match="1000"):
        encode_trace_step({"b": "y" * 1000}, max_document_bytes=1000)


def test_default_limit_is_16_mib_and_the_ceiling() -> None:
    assert MAX_DOCUMENT_BYTES == 16 * 1024 * 1024
    exe = Execution(id="x", definition_id="d", context={"blob": "x" * MAX_DOCUMENT_BYTES})
    assert str(MAX_DOCUMENT_BYTES) in refused(PayloadTooLarge, exe=exe)
    with pytest.raises(ValueError):
        check_max_bytes(MAX_DOCUMENT_BYTES + 1)
    with pytest.raises(ValueError):
        check_max_bytes(0)
    with pytest.raises(TypeError):
        check_max_bytes(1.5)  # type: ignore[arg-type]


# -- keys and types ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ({1: "a"}, "key 1 of type int"),
        ({1: "a", "1": "b"}, "key 1"),
        ({None: 1}, "key None"),
        ({(1, 2): 1}, "key (1, 2)"),
        ((1, 2), "tuple"),
        ({1, 2}, "set"),
        (frozenset({1}), "frozenset"),
        (b"raw", "bytes"),
        (bytearray(b"raw"), "bytes"),
        (Decimal("1.5"), "Decimal"),
        (uuid.UUID(int=1), "UUID"),
        (object(), "object"),
        (MAX_INT + 1, "64-bit"),
        (MIN_INT - 1, "64-bit"),
        (10**400, "64-bit"),
        ("bad \ud800 text", "lone surrogate"),
        ({"bad \udfff key": 1}, "lone surrogate"),
    ],
)
def test_values_that_would_not_read_back_equal_are_refused(value: Any, words: str) -> None:
    exe = Execution(id="x", definition_id="d", context={"a": [0, 1, 2, {"deep": value}]})
    message = refused(InvalidPayload, exe=exe)
    assert "context['a'][3]['deep']" in message
    assert words in message


@pytest.mark.parametrize(
    "value",
    [
        MAX_INT,
        MIN_INT,
        2**53 + 1,
        0.1 + 0.2,
        5e-324,
        1.7976931348623157e308,
        -0.0,
        "nul\x00inside",
        "\U0010ffff\ufeff🙂 ü 漢",
        "",
        {"": [None, True, False, [], {}]},
        Status.DONE,
    ],
)
def test_json_values_read_back_equal(value: Any) -> None:
    exe = Execution(id="x", definition_id="d", context={"v": value})
    back = decode_execution(accepted(exe).document).context["v"]
    assert back == value
    assert type(back) is (str if isinstance(value, str) else type(value))
    if isinstance(value, float):
        assert math.copysign(1, back) == math.copysign(1, value)


def test_nan_and_infinities_survive() -> None:
    exe = Execution(id="x", definition_id="d", context={"n": math.nan, "i": [math.inf, -math.inf]})
    back = decode_execution(accepted(exe).document).context
    assert math.isnan(back["n"]) and back["i"] == [math.inf, -math.inf]


def test_datetimes_are_the_one_documented_conversion() -> None:
    when = datetime(2024, 5, 6, 7, 8, 9, 101112, tzinfo=UTC)
    back = decode_execution(accepted(context_exe(when)).document).context["v"]
    assert back == "2024-05-06T07:08:09.101112Z"


def context_exe(value: Any) -> Execution:
    return Execution(id="x", definition_id="d", context={"v": value})


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(MIN_INT, MAX_INT)
    | st.floats(allow_nan=False)
    | st.text(st.characters(exclude_categories=("Cs",))),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None, database=None)
@given(json_values)
def test_accepted_json_reads_back_equal(value: Any) -> None:
    assert loads(dumps({"v": value}))["v"] == value


# -- identifiers ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad_id",
    ["", "a\x00b", "lone \ud800", "x" * (MAX_ID_BYTES + 1), "🙂" * (MAX_ID_BYTES // 4 + 1)],
    ids=["empty", "nul", "surrogate", "long-ascii", "long-4-byte"],
)
def test_bad_ids_are_refused_everywhere_in_a_commit(bad_id: str) -> None:
    def exe(**fields: Any) -> Execution:
        return Execution(**{"id": "x", "definition_id": "d", **fields})

    refused(InvalidIdentifier, exe=exe(id=bad_id))
    refused(InvalidIdentifier, exe=exe(definition_id=bad_id))
    refused(InvalidIdentifier, exe=exe(parent_id=bad_id))
    refused(InvalidIdentifier, processed_event_id=bad_id)
    refused(InvalidIdentifier, emits=[(bad_id, Event(id="e", kind="K"))])
    refused(InvalidIdentifier, emits=[(None, Event(id=bad_id, kind="K"))])
    refused(InvalidIdentifier, spawns=[(bad_id, "/r", {})])
    if bad_id:  # paths may be empty
        refused(InvalidIdentifier, timers=[TimerOp.schedule(bad_id, 1.0)])
        refused(InvalidIdentifier, spawns=[("c", bad_id, {})])
    with pytest.raises(InvalidIdentifier):
        check_id(bad_id)


def test_id_limit_is_in_utf8_bytes() -> None:
    assert MAX_ID_BYTES == 1024
    for ok in ("x" * MAX_ID_BYTES, "🙂" * (MAX_ID_BYTES // 4), "é" * (MAX_ID_BYTES // 2)):
        assert check_id(ok) == ok
        accepted(Execution(id=ok, definition_id=ok), timers=[TimerOp.schedule(ok, 1.0)])
    with pytest.raises(InvalidIdentifier, match="1026 bytes"):
        check_id("é" * (MAX_ID_BYTES // 2 + 1))


def test_messages_about_huge_ids_stay_short() -> None:
    with pytest.raises(InvalidIdentifier) as info:
        check_id("x" * 65536)
    assert len(str(info.value)) < 400 and "65536 chars" in str(info.value)


def test_lone_surrogates_in_kinds_and_summary_fields_are_refused() -> None:
    refused(InvalidPayload, emits=[(None, Event(id="e", kind="bad\ud800"))])
    refused(InvalidPayload, exe=Execution(id="x", definition_id="d", outcome="o\udc00"))
    refused(InvalidPayload, exe=Execution(id="x", definition_id="d", active_path="\ud800"))
    refused(InvalidPayload, exe=Execution(id="x", definition_id="d", active_path="a\x00b"))
    refused(InvalidPayload, trace={"event_kind": "\udfff"})
    refused(InvalidPayload, trace={"bad\ud800key": 1})


def test_wrong_typed_ids_are_type_errors() -> None:
    refused(TypeError, processed_event_id=42)
    refused(TypeError, emits=[(3, Event(id="e", kind="K"))])
    refused(TypeError, spawns=[(None, "/r", {})])
    refused(TypeError, exe=Execution.model_construct(id=5, definition_id="d", version=0))
    with pytest.raises(TypeError):
        check_id(b"x")


# -- typed model fields --------------------------------------------------------------------


def test_every_model_field_is_checked() -> None:
    for model, fields in CHECKED_FIELDS.items():
        assert set(model.model_fields) == fields, f"{model.__name__} gained an unchecked field"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("history", {"a": 1}),
        ("invoke_seq", {"a": "1"}),
        ("invoke_seq", {"a": MAX_INT + 1}),
        ("status", "NOPE"),
        ("priority", 7),
        ("priority", True),
        ("processed_events", 1.5),
        ("context", [1]),
        ("deferred", ["not an event"]),
        ("deferred", [Event.model_construct(id="e", kind="K", data={}, created_time=1.5)]),
        ("children", {"c": {"root_path": "/r"}}),
        ("children", {"c": ChildState(root_path="/r", result={"x": (1,)})}),
        ("error", 5),
    ],
)
def test_model_fields_that_would_not_load_back_are_refused(field: str, value: Any) -> None:
    exe = Execution(id="x", definition_id="d")
    setattr(exe, field, value)
    refused(InvalidPayload, exe=exe)


def test_a_full_execution_round_trips() -> None:
    exe = Execution(
        id="x",
        definition_id="d",
        definition_fqn="pkg.mod:d",
        status=Status.RUNNING,
        outcome="ok",
        error="E: msg",
        active_path="A.B",
        history={"A": "A.B"},
        context={"a": [1, 2.5, None, {"b": "c"}]},
        processed_events=3,
        priority=2,
        parent_id="p",
        child_id="c",
        deferred=[Event(id="e", kind="K", created_time=datetime(2024, 1, 1, tzinfo=UTC))],
        children={"k": ChildState(root_path="/r", finished=True, result={"r": 1})},
        invoke_seq={"A": 2},
    )
    assert decode_execution(accepted(exe).document) == exe


# -- timers and versions -------------------------------------------------------------------


def test_negative_zero_fire_at_is_stored_as_zero() -> None:
    (op,) = collapse_timer_ops([TimerOp.schedule("/a", -0.0)])
    assert math.copysign(1, op.fire_at) == 1.0


def test_version_range() -> None:
    exe = Execution(id="x", definition_id="d", version=MAX_INT)
    with pytest.raises(ValueError), committing(exe):
        pass
    assert exe.version == MAX_INT
    exe.version = MAX_INT - 1
    with committing(exe) as plan:
        assert plan.new_version == MAX_INT


# -- argument validators -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda: check_seq(2**63), InvalidArgument),
        (lambda: check_seq(-1), InvalidArgument),
        (lambda: check_seq(True), TypeError),
        (lambda: check_seq("1"), TypeError),
        (lambda: check_seq(1.0), TypeError),
        (lambda: check_limit(2**63), InvalidArgument),
        (lambda: check_limit(0), InvalidArgument),
        (lambda: check_limit("3"), TypeError),
        (lambda: sweep_limit(2**63), InvalidArgument),
        (lambda: sweep_limit(1.5), TypeError),
        (lambda: check_count(0, "batch_size"), InvalidArgument),
        (lambda: check_now(1e309), InvalidArgument),
        (lambda: check_now(-math.inf), InvalidArgument),
        (lambda: check_now(math.nan), InvalidArgument),
        (lambda: check_now(10**400), InvalidArgument),
        (lambda: check_now(-(10**400)), InvalidArgument),
        (lambda: check_now(None), TypeError),
        (lambda: check_now("1"), TypeError),
        (lambda: check_now(False), TypeError),
        (lambda: check_timer_ref("x", "/p", None), TypeError),
        (lambda: check_timer_ref("x", 5, 1.0), TypeError),
        (lambda: check_timer_ref("x", "\ud800", 1.0), InvalidIdentifier),
        (lambda: check_timer_ref("", "/p", 1.0), InvalidIdentifier),
        (lambda: check_event_ref("x", ""), InvalidIdentifier),
        (lambda: check_event_ref(None, "e"), TypeError),
        (lambda: check_prune(math.nan, 10), InvalidArgument),
        (lambda: check_prune(1.0, 2**63), InvalidArgument),
        (lambda: check_prune(1.0, "10"), TypeError),
        (lambda: check_flag("yes", "force"), TypeError),
        (lambda: check_path("a\x00"), InvalidIdentifier),
    ],
)
def test_argument_validators_raise_typed_errors(call: Any, error: type[Exception]) -> None:
    with pytest.raises(error) as info:
        call()
    if not issubclass(error, TypeError):
        assert isinstance(info.value, StoreError) and isinstance(info.value, ValueError)


def test_argument_validators_pass_good_values_through() -> None:
    assert check_seq(0) == 0 and check_seq(MAX_INT) == MAX_INT
    assert check_limit(None) is None and check_limit(MAX_INT) == MAX_INT
    assert check_now(1e308) == 1e308 and type(check_now(5)) is float
    assert check_timer_ref("x", "", 2) == ("x", "", 2.0)
    assert check_prune(0, 1) == (0.0, 1)
    assert check_path("") == ""


def test_listing_arguments_are_typed() -> None:
    def query(**kwargs: Any) -> Any:
        args: dict[str, Any] = {
            "status": None,
            "definition_id": None,
            "roots_only": False,
            "limit": 10,
            "cursor": None,
        }
        args.update(kwargs)
        return listing_query(**args)

    for kwargs, error in [
        ({"limit": 2**63}, InvalidArgument),
        ({"limit": 0}, InvalidArgument),
        ({"limit": "5"}, TypeError),
        ({"status": ["NOPE"]}, InvalidArgument),
        ({"status": [5]}, TypeError),
        ({"status": 5}, TypeError),
        ({"definition_id": "\ud800"}, InvalidIdentifier),
        ({"definition_id": 5}, TypeError),
        ({"cursor": 5}, TypeError),
        ({"cursor": encode_cursor("bad\ud800")}, InvalidCursor),
        ({"cursor": encode_cursor("")}, InvalidCursor),
    ]:
        with pytest.raises(error):
            query(**kwargs)
    assert query(limit=MAX_INT, status=["DONE"]).statuses == {Status.DONE}


# -- decoding damaged data -----------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "{", '{"id": 1}', "[]", '{"kind": 5}'])
def test_damaged_documents_are_store_corrupted(text: str) -> None:
    with pytest.raises(StoreCorrupted, match="execution 'x'"):
        decode_execution(text, what="execution 'x'")
    with pytest.raises(StoreCorrupted):
        decode_event(text)


def test_fields_a_newer_release_added_survive_read_modify_write() -> None:
    stored = (
        '{"definition_id": "d", "version": 3, "added_later": {"a": [1]}, '
        '"deferred": [{"kind": "k", "id": "e1", "hint": 2}]}'
    )
    exe = decode_execution(stored)
    exe.context["step"] = 1
    again = decode_execution(encode_execution(exe))
    assert again == exe
    assert again.model_dump()["added_later"] == {"a": [1]}
    assert again.deferred[0].model_dump()["hint"] == 2
    assert decode_event('{"kind": "k", "later": true}').model_dump()["later"] is True


def test_fields_nobody_declared_are_refused_when_built_in_code() -> None:
    with pytest.raises(ValueError, match="has no field"):
        Execution(definition_id="d", staus="DONE")  # type: ignore[call-arg]


def test_damaged_trace_step_is_store_corrupted() -> None:
    with pytest.raises(StoreCorrupted):
        decode_trace_step("[1]", 0)
    with pytest.raises(StoreCorrupted):
        decode_trace_step("{", 0)
