"""The envelope's fast scan (harel.store.common.payload_scan) changes no decision: every input
gets the same outcome (accepted, or the same error type and message) with the scan as with the
precise field-by-field checks alone."""

from __future__ import annotations

import asyncio
import datetime
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import IntEnum, StrEnum
from typing import Any

import pytest
from harel.model import ChildState, Event, Execution, Status
from harel.store.common import commit as commit_module
from harel.store.common import payloads as payloads_module
from harel.store.common.codec import decode_execution, dumps
from harel.store.common.commit import committing
from harel.store.common.limits import MAX_INT, MAX_NESTING_DEPTH, MIN_INT
from harel.store.common.payload_scan import execution_ok, field_ok, key_ok, record_ok
from harel.store.common.trace import encode_trace_step
from harel.store.contract import TimerOp
from harel.store.errors import InvalidPayload
from hypothesis import given, settings
from hypothesis import strategies as st

_SCANS: list[tuple[Any, str]] = [
    (payloads_module, name)
    for name in ("execution_ok", "event_ok", "field_ok", "record_ok", "tree_ok")
] + [(commit_module, "key_ok")]


@contextmanager
def precise_only() -> Iterator[None]:
    """The payload checks with the fast scan switched off (it answers "unsure" to everything)."""
    saved = [(module, name, getattr(module, name)) for module, name in _SCANS]
    try:
        for module, name in _SCANS:
            setattr(module, name, lambda *args, **kwargs: False)
        yield
    finally:
        for module, name, scan in saved:
            setattr(module, name, scan)


def outcome(call: Callable[[], Any]) -> tuple[str, str]:
    """What ``call`` did: ``("ok", "")`` or the error's type and message."""
    try:
        call()
    except Exception as exc:  # the point is to compare any outcome
        return type(exc).__name__, str(exc)
    return "ok", ""


def same_decision(call: Callable[[], Any]) -> tuple[str, str]:
    """``call``'s outcome, asserted equal with and without the fast scan."""
    fast = outcome(call)
    with precise_only():
        precise = outcome(call)
    assert fast == precise
    return fast


def nest(levels: int, leaf: Any = 1) -> Any:
    """``levels`` containers (alternating list/dict) around ``leaf``."""
    value = leaf
    for level in range(levels):
        value = {"k": value} if level % 2 else [value]
    return value


def commit_outcome(exe: Execution, **kwargs: Any) -> tuple[str, str]:
    def call() -> None:
        with committing(exe, **kwargs):
            pass

    return same_decision(call)


def exe_with(**fields: Any) -> Execution:
    """An execution whose fields are set after construction (as engine code can)."""
    exe = Execution(id="x", definition_id="d")
    for name, value in fields.items():
        setattr(exe, name, value)
    return exe


class Colour(StrEnum):
    RED = "red"


class Level(IntEnum):
    HIGH = 3


class Tagged(dict[Any, Any]):
    """A dict subclass: accepted (stored as a dict), but not by the exact-type scan."""


# -- the edges the scan handles itself -----------------------------------------------------


def test_depth_exactly_64_is_accepted_and_65_refused() -> None:
    ok = {"v": nest(MAX_NESTING_DEPTH - 1)}
    assert field_ok(ok)
    assert commit_outcome(exe_with(context=ok)) == ("ok", "")
    deep = {"v": nest(MAX_NESTING_DEPTH)}
    assert not field_ok(deep)
    kind, message = commit_outcome(exe_with(context=deep))
    assert kind == "InvalidPayload" and "64 levels" in message


def test_trace_step_depth_counts_from_each_field() -> None:
    assert record_ok({"context_out": nest(MAX_NESTING_DEPTH)})
    assert not record_ok({"context_out": nest(MAX_NESTING_DEPTH + 1)})
    kind, message = same_decision(
        lambda: encode_trace_step({"context_out": nest(MAX_NESTING_DEPTH + 1)})
    )
    assert kind == "InvalidPayload" and "trace step['context_out']" in message


def test_lone_surrogate_deep_in_a_list_is_refused() -> None:
    context = {"a": [[1, 2, ["ok", "ü", "bad \ud800"]]]}
    assert not field_ok(context)
    kind, message = commit_outcome(exe_with(context=context))
    assert kind == "InvalidPayload"
    assert "context['a'][0][2][2]" in message and "lone surrogate" in message


@pytest.mark.parametrize("value", [2**63, MIN_INT - 1, 10**30])
def test_int_beyond_64_bits_in_a_nested_dict_is_refused(value: int) -> None:
    context = {"outer": {"inner": {"n": value}}}
    assert not field_ok(context)
    kind, message = commit_outcome(exe_with(context=context))
    assert kind == "InvalidPayload" and "context['outer']['inner']['n']" in message


def test_int_range_edges_are_accepted() -> None:
    context = {"outer": {"inner": [MAX_INT, MIN_INT]}}
    assert field_ok(context)
    assert commit_outcome(exe_with(context=context)) == ("ok", "")


def test_tuple_inside_context_is_refused() -> None:
    context = {"pairs": [{"p": (1, 2)}]}
    assert not field_ok(context)
    kind, message = commit_outcome(exe_with(context=context))
    assert kind == "InvalidPayload" and "tuple" in message and "['pairs'][0]['p']" in message


def test_non_str_key_at_depth_30_is_refused() -> None:
    bad = nest(29, {7: "seven"})
    assert not field_ok({"v": bad})
    kind, message = commit_outcome(exe_with(context={"v": bad}))
    assert kind == "InvalidPayload" and "key 7 of type int" in message


@pytest.mark.parametrize(
    "fields",
    [
        {"context": {"k \ud800": 1}},
        {"history": {"k \udfff": "Main"}},
        {"invoke_seq": {"k \udfff": 1}},
        {"children": {"c \ud800": ChildState(root_path="/r")}},
        {"children": {"c": ChildState(root_path="/r", result={"k \ud800": 1})}},
        {"deferred": [Event(id="e", kind="K", data={"k \ud800": 1})]},
    ],
    ids=["context", "history", "invoke_seq", "children", "child-result", "deferred-data"],
)
def test_lone_surrogates_in_keys_are_refused(fields: dict[str, Any]) -> None:
    """pydantic-core writes such model dict keys lossily (U+FFFD) instead of failing."""
    assert not execution_ok(exe_with(**fields))
    kind, message = commit_outcome(exe_with(**fields))
    assert kind == "InvalidPayload" and "surrogate" in message


def test_nan_and_infinities_are_kept_in_payloads_and_refused_as_times() -> None:
    context = {"n": [math.nan, {"i": math.inf, "j": -math.inf}]}
    assert field_ok(context)
    with committing(exe_with(context=context)) as plan:
        back = decode_execution(plan.document).context
    assert math.isnan(back["n"][0]) and back["n"][1] == {"i": math.inf, "j": -math.inf}
    for when in (math.nan, math.inf, -math.inf):
        op = TimerOp.schedule("/a", 1.0)
        object.__setattr__(op, "fire_at", when)  # past TimerOp's own check
        kind, message = commit_outcome(exe_with(), timers=[op])
        assert kind == "InvalidPayload" and "must be finite" in message


def test_self_reference_ends_the_scan() -> None:
    loop: dict[str, Any] = {}
    loop["a"] = loop
    loop["b"] = [loop, loop]
    assert not field_ok(loop)
    kind, message = commit_outcome(exe_with(context=loop))
    assert kind == "InvalidPayload" and "refers to itself" in message


# -- what the scan leaves to the precise checks: same decisions -----------------------------


@pytest.mark.parametrize(
    "value",
    [
        Colour.RED,
        Level.HIGH,
        Tagged(a=1),
        datetime.datetime(2024, 1, 2, tzinfo=datetime.UTC),
        datetime.date(2024, 1, 2),
        True,
        None,
    ],
)
def test_subclasses_and_datetimes_take_the_precise_path_and_pass(value: Any) -> None:
    assert commit_outcome(exe_with(context={"v": [value]})) == ("ok", "")


@pytest.mark.parametrize(
    ("fields", "accepted"),
    [
        ({"id": "ü-é"}, True),
        ({"id": "x" * 1024}, True),
        ({"id": "x" * 1025}, False),
        ({"id": "é" * 513}, False),
        ({"id": ""}, False),
        ({"root_path": ""}, True),
        ({"parent_id": "p\x00"}, False),
        ({"outcome": "a\x00b"}, False),
        ({"error": "a\x00b"}, True),
        ({"definition_fqn": "bad \ud800"}, False),
        ({"active_path": "Main.ü"}, True),
        ({"status": "DONE"}, True),
        ({"status": "done"}, False),
        ({"priority": 4}, True),
        ({"priority": Level.HIGH}, True),
        ({"priority": False}, False),
        ({"processed_events": MAX_INT + 1}, False),
        ({"history": {"a": Colour.RED}}, True),
        ({"history": {"a": 1}}, False),
        ({"invoke_seq": {"a": True}}, False),
        ({"invoke_seq": {"a": Level.HIGH}}, True),
        ({"context": Tagged(a=1)}, True),
        ({"deferred": (Event(id="e", kind="K"),)}, False),
        ({"children": {"c": ChildState(root_path="/r", key="k\ud800")}}, False),
        ({"children": {"c": ChildState(root_path="/r", outcome="o\x00")}}, True),
    ],
)
def test_model_fields_get_the_precise_decision(fields: dict[str, Any], accepted: bool) -> None:
    kind, _ = commit_outcome(exe_with(**fields))
    assert (kind == "ok") is accepted


@pytest.mark.parametrize(
    "event",
    [
        Event(id="e", kind="K", data={"a": [1]}),
        Event(id="e", kind="K", created_time=datetime.datetime(2024, 1, 2)),
        Event.model_construct(id="e", kind="K", data={}, created_time=1.5),
        Event.model_construct(id="e", kind=5, data={}),
        Event.model_construct(id="", kind="K", data={}),
        Event(id="e", kind="bad \ud800"),
        Event(id="e", kind="K", data={"t": (1,)}),
    ],
)
def test_events_get_the_precise_decision(event: Event) -> None:
    commit_outcome(exe_with(deferred=[event]))
    commit_outcome(exe_with(), emits=[("target", event)])


def test_emit_spawn_and_timer_ids_are_still_checked() -> None:
    event = Event(id="e", kind="K")
    cases: list[dict[str, Any]] = [
        {"emits": [("", event)]},
        {"emits": [("t\x00", event)]},
        {"spawns": [("c", "\ud800", {})]},
        {"spawns": [("", "/r", {})]},
        {"spawns": [("c", "/r", {"t": (1,)})]},
        {"timers": [TimerOp.schedule("a\x00", 1.0)]},
        {"processed_event_id": ""},
    ]
    for kwargs in cases:
        kind, _ = commit_outcome(exe_with(), **kwargs)
        assert kind != "ok", kwargs
    assert not key_ok("") and key_ok("", empty_ok=True)


# -- any value: the same decision with and without the scan ---------------------------------

_leaves = (
    st.none()
    | st.booleans()
    | st.integers(MIN_INT - 2, MAX_INT + 2)
    | st.integers()
    | st.floats()
    | st.text(max_size=6)
    | st.sampled_from(["\ud800", "a\udfffb", "ü", Colour.RED, Level.HIGH, b"x", 1j])
    | st.datetimes()
)
_keys = st.text(max_size=4) | st.sampled_from([1, None, 1.5, True, "\ud800", Colour.RED])
hostile = st.recursive(
    _leaves,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(_keys, inner, max_size=4)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(_keys, inner, max_size=3).map(lambda pairs: Tagged(pairs))
        | st.frozensets(st.integers(), max_size=2)
    ),
    max_leaves=25,
)


@settings(max_examples=400, deadline=None, database=None)
@given(hostile)
def test_any_value_gets_the_same_decision(value: Any) -> None:
    same_decision(lambda: dumps(value, what="v"))
    same_decision(lambda: encode_trace_step({"context_out": value, "event": "E"}))
    same_decision(lambda: committing(exe_with(context={"v": value})).__enter__())
    if field_ok(value):
        assert outcome(lambda: dumps(value, what="v")) == ("ok", "")


@settings(max_examples=150, deadline=None, database=None)
@given(hostile, st.sampled_from(["history", "invoke_seq", "children-result", "event-data"]))
def test_any_value_in_any_map_gets_the_same_decision(value: Any, where: str) -> None:
    if where == "history":
        exe = exe_with(history={"a": value})
    elif where == "invoke_seq":
        exe = exe_with(invoke_seq={"a": value})
    elif where == "children-result":
        exe = exe_with(children={"c": ChildState.model_construct(root_path="/r", result=value)})
    else:
        exe = exe_with(deferred=[Event.model_construct(id="e", kind="K", data=value)])
    commit_outcome(exe)


def test_a_status_member_is_accepted_either_way() -> None:
    assert commit_outcome(exe_with(status=Status.DONE)) == ("ok", "")
    with pytest.raises(InvalidPayload):
        dumps({"v": [1, (2,)]}, what="v")


# -- the envelope as a class: the same behaviour as the generator it replaced ---------------


def test_committing_does_nothing_until_entered() -> None:
    manager = committing("not an execution")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="needs an Execution"), manager:
        pytest.fail("entered")


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt, asyncio.CancelledError])
def test_any_exception_in_the_block_restores_the_version(error: type[BaseException]) -> None:
    exe = exe_with()
    with pytest.raises(error), committing(exe) as plan:
        assert exe.version == plan.new_version == 1
        raise error
    assert exe.version == 0
    with committing(exe) as plan:
        pass
    assert exe.version == plan.new_version == 1
