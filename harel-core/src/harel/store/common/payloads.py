"""Payload checks: refuse, before encoding, every value that would not read back equal.

The rules (depth, key types, value types, strings, int range) are those of
:mod:`harel.store.common.limits`; each refusal is an
:class:`~harel.store.errors.InvalidPayload` naming the field, e.g.
``execution 'order-1' context['lines'][3]['qty']``.  The codec calls these checks, so every
backend applies them through the commit envelope and ``encode_trace_step``.

Each check first runs the cheap, conservative scan of
:mod:`harel.store.common.payload_scan` (exact JSON types, an explicit stack, no message built);
only when the scan is unsure does the precise field-by-field walk below run, and it alone
decides and names the field — so the decisions and messages are the walk's, and the common,
valid case costs a fraction of it.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from harel.model import ChildState, Event, Execution, Status
from harel.store.common.limits import MAX_INT, MAX_NESTING_DEPTH, MIN_INT
from harel.store.common.payload_scan import event_ok, execution_ok, field_ok, record_ok, tree_ok
from harel.store.common.validate import (
    check_id,
    check_optional_id,
    check_path,
    check_text,
    show,
    surrogate_at,
)
from harel.store.errors import InvalidPayload

_DATES = (datetime.date, datetime.time)  # datetime.datetime is a date


class _Attr(str):
    """A path segment naming a model field (rendered ``.name``, not ``['name']``)."""


def render(what: str, segments: list[Any]) -> str:
    """``what`` followed by the rendered path, e.g. ``context['a'][3]``."""
    parts = [what]
    for segment in segments:
        if isinstance(segment, _Attr):
            parts.append(f".{segment}")
        else:
            parts.append(f"[{show(segment, 40)}]")
    return "".join(parts)


def _refuse(what: str, segments: list[Any], problem: str) -> InvalidPayload:
    return InvalidPayload(f"{render(what, segments)} {problem}")


_ADVICE = {
    tuple: "a tuple reads back as a list; store a list",
    set: "a set cannot be stored as JSON; store a sorted list",
    frozenset: "a frozenset cannot be stored as JSON; store a sorted list",
    bytes: "bytes cannot be stored as JSON text; store base64 or hex text",
    bytearray: "bytes cannot be stored as JSON text; store base64 or hex text",
    memoryview: "bytes cannot be stored as JSON text; store base64 or hex text",
}


def _check_str(value: str, what: str, segments: list[Any]) -> None:
    index = surrogate_at(value)
    if index is not None:
        raise _refuse(
            what,
            segments,
            f"holds a lone surrogate {value[index]!r} at index {index}; "
            "strings must be valid Unicode text (UTF-8 encodable)",
        )


def _walk(value: Any, what: str, segments: list[Any], depth: int) -> None:
    kind = type(value)
    if kind is str:
        if not value.isascii():
            _check_str(value, what, segments)
        return
    if kind is int:
        if not MIN_INT <= value <= MAX_INT:
            raise _refuse(
                what,
                segments,
                f"is {show(value)}, outside the signed 64-bit range [{MIN_INT}, {MAX_INT}] "
                "every backend reads back exactly; store it as a str",
            )
        return
    if value is None or kind is float or kind is bool:
        return
    if kind is dict or kind is list:
        _walk_container(value, what, segments, depth + 1)
        return
    _walk_other(value, what, segments, depth)


def _walk_container(value: Any, what: str, segments: list[Any], depth: int) -> None:
    # The hot loop: plain leaves are checked inline (no call per leaf); the rest via _walk.
    if depth > MAX_NESTING_DEPTH:
        raise _refuse(
            what,
            segments,
            f"nests containers more than {MAX_NESTING_DEPTH} levels deep "
            "(harel.store.common.limits.MAX_NESTING_DEPTH), or refers to itself",
        )
    pairs = value.items() if isinstance(value, dict) else enumerate(value)
    is_dict = isinstance(value, dict)
    for key, item in pairs:
        if is_dict and (type(key) is not str or not key.isascii()):
            _check_key(key, what, segments)
        if _plain_leaf(item):
            continue
        segments.append(key)
        _walk(item, what, segments, depth)
        segments.pop()


def _plain_leaf(item: Any) -> bool:
    """A leaf that needs no further look: ASCII str, float, bool, None, int in range."""
    kind = type(item)
    if kind is str:
        return bool(item.isascii())
    if kind is int:
        return bool(MIN_INT <= item <= MAX_INT)
    return kind is float or kind is bool or item is None


def _check_key(key: Any, what: str, segments: list[Any]) -> None:
    if not isinstance(key, str):
        raise _refuse(
            what,
            segments,
            f"has the key {show(key)} of type {type(key).__name__}; dict keys must be "
            "str (JSON stores keys as text, so it would not read back equal)",
        )
    if surrogate_at(key) is not None:
        segments.append(key)
        raise _refuse(what, segments, "is a key holding a lone surrogate")


def _walk_other(value: Any, what: str, segments: list[Any], depth: int) -> None:
    if isinstance(value, (bool, float)):
        return
    if isinstance(value, str):
        _check_str(value, what, segments)
        return
    if isinstance(value, int):
        _walk(int(value), what, segments, depth)
        return
    if isinstance(value, (dict, list)):
        _walk_container(value, what, segments, depth + 1)
        return
    if isinstance(value, _DATES):
        return
    for kind, advice in _ADVICE.items():
        if isinstance(value, kind):
            raise _refuse(what, segments, f"is a {type(value).__name__}: {advice}")
    raise _refuse(
        what,
        segments,
        f"is a {type(value).__name__}, which does not read back equal from JSON; store only "
        "dicts with str keys, lists, str, int, float, bool, None (or datetimes, read back as "
        "ISO 8601 text)",
    )


def check_value(value: Any, what: str) -> None:
    """Refuse ``value`` (one payload field: a context, event data, a spawn context) unless it
    reads back equal; :class:`InvalidPayload` names the offending part of ``what``."""
    if not field_ok(value):  # the precise walk only when the fast scan is unsure
        _walk(value, what, [], 0)


def check_dict(value: Any, what: str) -> None:
    """:func:`check_value` for a field that must be a ``dict`` (``TypeError`` otherwise)."""
    if not isinstance(value, dict):
        raise TypeError(f"{what} must be a dict, got {type(value).__name__}")
    if not (type(value) is dict and tree_ok(value, 1)):
        _walk(value, what, [], 0)


def check_record(record: Any, what: str) -> None:
    """A trace step: a ``dict`` with ``str`` keys whose values are each a payload field."""
    if not isinstance(record, dict):
        raise TypeError(f"{what} must be a dict, got {type(record).__name__}")
    if record_ok(record):
        return
    for key, item in record.items():
        if not isinstance(key, str):
            raise InvalidPayload(
                f"{what} has the key {show(key)} of type {type(key).__name__}; keys must be str"
            )
        _walk(key, what, [], 0)
        _walk(item, what, [key], 0)


def _field(owner: str, name: str) -> str:
    return f"{owner}.{name}"


def _optional(value: Any, check: Callable[[Any, str], Any], what: str) -> None:
    if value is not None:
        check(value, what)


def _typed(value: Any, kind: type, what: str) -> None:
    if isinstance(value, bool) and kind is not bool:
        raise InvalidPayload(f"{what} must be a {kind.__name__}, got bool")
    if not isinstance(value, kind):
        raise InvalidPayload(f"{what} must be a {kind.__name__}, got {type(value).__name__}")


def check_event(event: Event, what: str) -> None:
    """Every field of an event (its ``id`` an identifier, ``data`` a payload field)."""
    if event_ok(event):
        return
    check_id(event.id, f"{what} id")
    _typed(event.kind, str, _field(what, "kind"))
    _walk(event.kind, _field(what, "kind"), [], 0)
    for name in ("created_time", "received_time"):
        stamp = getattr(event, name)
        if stamp is not None and not isinstance(stamp, datetime.datetime):
            raise InvalidPayload(
                f"{_field(what, name)} must be a datetime or None, got {type(stamp).__name__}"
            )
    _typed(event.data, dict, _field(what, "data"))
    _walk(event.data, _field(what, "data"), [], 0)


def _check_child(state: ChildState, what: str) -> None:
    if not isinstance(state, ChildState):
        raise InvalidPayload(f"{what} must be a ChildState, got {type(state).__name__}")
    check_path(state.root_path, _field(what, "root_path"))
    _typed(state.finished, bool, _field(what, "finished"))
    _typed(state.submachine, bool, _field(what, "submachine"))
    _optional(state.outcome, lambda v, w: _typed(v, str, w), _field(what, "outcome"))
    _walk(state.outcome, _field(what, "outcome"), [], 0)
    _typed(state.key, str, _field(what, "key"))
    _walk(state.key, _field(what, "key"), [], 0)
    _typed(state.result, dict, _field(what, "result"))
    _walk(state.result, _field(what, "result"), [], 0)


def _check_str_map(value: Any, kind: type, what: str) -> None:
    _typed(value, dict, what)
    for key, item in value.items():
        if not isinstance(key, str):
            raise InvalidPayload(f"{what} has the key {show(key)}; keys must be str")
        _walk(key, what, [], 0)
        _typed(item, kind, f"{what}[{show(key, 40)}]")
        _walk(item, what, [key], 0)


def check_execution(exe: Execution) -> None:
    """Every field of an execution, so that what is stored loads back as an equal execution.

    Identifiers follow :func:`~harel.store.common.validate.check_id`; summary fields hold no
    NUL; payload fields follow :func:`check_value`.  The cheap scan of
    :mod:`~harel.store.common.payload_scan` accepts the common case; the field-by-field checks
    below run only when it is unsure, and decide and name the offending field.
    """
    if execution_ok(exe):
        return
    check_id(exe.id, "execution id")
    what = f"execution {show(exe.id, 40)}"
    check_id(exe.definition_id, _field(what, "definition_id"))
    check_optional_id(exe.parent_id, _field(what, "parent_id"))
    check_optional_id(exe.child_id, _field(what, "child_id"))
    check_path(exe.root_path, _field(what, "root_path"))
    status = exe.status
    if not isinstance(status, Status) and not (
        isinstance(status, str) and status in Status._value2member_map_
    ):
        raise InvalidPayload(f"{_field(what, 'status')} {show(exe.status)} is not a Status")
    _optional(exe.outcome, check_text, _field(what, "outcome"))
    _optional(exe.active_path, check_text, _field(what, "active_path"))
    for name in ("definition_fqn", "error"):
        value = getattr(exe, name)
        _optional(value, lambda v, w: _typed(v, str, w), _field(what, name))
        _walk(value, _field(what, name), [], 0)
    for name, low, high in (("processed_events", MIN_INT, MAX_INT), ("priority", 0, 4)):
        value = getattr(exe, name)
        _typed(value, int, _field(what, name))
        if not low <= value <= high:
            raise InvalidPayload(f"{_field(what, name)} must be in [{low}, {high}], got {value}")
    _check_str_map(exe.history, str, _field(what, "history"))
    _check_str_map(exe.invoke_seq, int, _field(what, "invoke_seq"))
    _check_str_map(exe.armed_timers, float, _field(what, "armed_timers"))
    _typed(exe.context, dict, _field(what, "context"))
    _walk(exe.context, _field(what, "context"), [], 0)
    _typed(exe.deferred, list, _field(what, "deferred"))
    for index, deferred in enumerate(exe.deferred):
        where = f"{what}.deferred[{index}]"
        if not isinstance(deferred, Event):
            raise InvalidPayload(f"{where} must be an Event, got {type(deferred).__name__}")
        check_event(deferred, where)
    _typed(exe.children, dict, _field(what, "children"))
    for key, state in exe.children.items():
        where = f"{what}.children[{show(key, 40)}]"
        if not isinstance(key, str):
            raise InvalidPayload(f"{where}: keys must be str")
        _walk(key, where, [], 0)
        _check_child(state, where)


CHECKED_FIELDS: dict[type, frozenset[str]] = {
    Execution: frozenset(
        {
            "id",
            "definition_id",
            "definition_fqn",
            "root_path",
            "status",
            "outcome",
            "error",
            "active_path",
            "history",
            "context",
            "processed_events",
            "version",
            "priority",
            "parent_id",
            "child_id",
            "deferred",
            "children",
            "invoke_seq",
            "armed_timers",
        }
    ),
    Event: frozenset({"id", "kind", "created_time", "received_time", "data"}),
    ChildState: frozenset({"root_path", "finished", "outcome", "result", "submachine", "key"}),
}
"""The model fields these checks cover (``version`` is the envelope's); a unit test keeps it
equal to the models' fields, so a new field cannot slip past unchecked."""

__all__ = [
    "CHECKED_FIELDS",
    "check_dict",
    "check_event",
    "check_execution",
    "check_record",
    "check_value",
    "render",
]
