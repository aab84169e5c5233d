"""The envelope's fast path: a cheap, conservative scan run before the precise payload checks.

Each ``*_ok`` predicate returns ``True`` only for input that the precise checks of
:mod:`harel.store.common.payloads` accept; anything it is unsure about (a subclass of a JSON
type, a datetime, a non-ASCII identifier with a lone surrogate, an error of any kind) returns
``False``, and the caller then runs the precise check, which produces the decision and the
message naming the field.  So the accept/refuse decisions and the errors are exactly those of
the precise checks; only the accepted common case gets cheaper:

* exact types only (``type(v) is str``), no message strings built, no call per leaf;
* containers are walked with an explicit stack (no recursion), depth counted as in
  :data:`~harel.store.common.limits.MAX_NESTING_DEPTH` (a self-referencing value exceeds it);
* the keys of a dict are checked in one ``"".join`` (``TypeError`` when one is not a ``str``;
  the joined text holds a lone surrogate iff one key does).
"""

from __future__ import annotations

import datetime
from typing import Any

from harel.model import ChildState, Event, Execution, Status
from harel.store.common.limits import MAX_ID_BYTES, MAX_INT, MAX_NESTING_DEPTH, MIN_INT

_STATUS_VALUES = frozenset(member.value for member in Status)


def text_ok(value: str) -> bool:
    """True when the ``str`` ``value`` is UTF-8 encodable (holds no lone surrogate)."""
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _keys_ok(mapping: dict[Any, Any]) -> bool:
    try:
        joined = "".join(mapping)
    except TypeError:
        return False
    return joined.isascii() or text_ok(joined)


def tree_ok(container: Any, depth: int) -> bool:
    """True when ``container`` (an exact ``dict`` or ``list`` at nesting level ``depth``) holds
    only exact JSON types, str keys, encodable text and ints in the signed 64-bit range, nested
    at most :data:`MAX_NESTING_DEPTH` levels; ``False`` whenever unsure.

    One flat loop per container; nested containers wait on a stack that exists only once one
    is found (most payloads are shallow: no stack at all)."""
    node, level = container, depth
    stack: list[tuple[Any, int]] | None = None
    while True:
        if level > MAX_NESTING_DEPTH:
            return False
        if type(node) is dict:
            if not _keys_ok(node):
                return False
            items = node.values()
        else:
            items = node
        for item in items:
            kind = type(item)
            if kind is str:
                if item.isascii() or text_ok(item):
                    continue
                return False
            if kind is int:
                if MIN_INT <= item <= MAX_INT:
                    continue
                return False
            if kind is float or kind is bool or item is None:
                continue
            if kind is dict or kind is list:
                if stack is None:
                    stack = []
                stack.append((item, level + 1))
                continue
            return False
        if not stack:
            return True
        node, level = stack.pop()


def field_ok(value: Any) -> bool:
    """:func:`tree_ok` for one payload field (a scalar or a container at level 1)."""
    return tree_ok([value], 0)


def _payload_dict_ok(value: Any) -> bool:
    return type(value) is dict and tree_ok(value, 1)


def key_ok(value: Any, *, empty_ok: bool = False) -> bool:
    """True when ``value`` is an identifier (or, with ``empty_ok``, a state path) that
    :func:`~harel.store.common.validate.check_id` (``check_path``) accepts."""
    if type(value) is not str or "\x00" in value:
        return False
    if value.isascii():
        size = len(value)
    else:
        try:
            size = len(value.encode("utf-8"))
        except UnicodeEncodeError:
            return False
    return (empty_ok or size > 0) and size <= MAX_ID_BYTES


def _optional_text_ok(value: Any, *, nul_ok: bool) -> bool:
    if value is None:
        return True
    return type(value) is str and (nul_ok or "\x00" not in value) and text_ok(value)


def _int_ok(value: Any, low: int, high: int) -> bool:
    return type(value) is int and low <= value <= high


def event_ok(event: Any) -> bool:
    """True when :func:`~harel.store.common.payloads.check_event` accepts ``event``."""
    if type(event) is not Event or not key_ok(event.id) or type(event.kind) is not str:
        return False
    if not text_ok(event.kind):
        return False
    for stamp in (event.created_time, event.received_time):
        if stamp is not None and type(stamp) is not datetime.datetime:
            return False
    return _payload_dict_ok(event.data)


def _child_ok(state: Any) -> bool:
    return (
        type(state) is ChildState
        and key_ok(state.root_path, empty_ok=True)
        and type(state.finished) is bool
        and type(state.submachine) is bool
        and _optional_text_ok(state.outcome, nul_ok=True)
        and type(state.key) is str
        and text_ok(state.key)
        and _payload_dict_ok(state.result)
    )


def _maps_ok(exe: Execution) -> bool:
    history, invoke_seq, children = exe.history, exe.invoke_seq, exe.children
    if type(history) is not dict or type(invoke_seq) is not dict or type(children) is not dict:
        return False
    if history and not (
        _keys_ok(history)
        and all(type(value) is str and text_ok(value) for value in history.values())
    ):
        return False
    if invoke_seq and not (
        _keys_ok(invoke_seq)
        and all(_int_ok(value, MIN_INT, MAX_INT) for value in invoke_seq.values())
    ):
        return False
    armed = exe.armed_timers
    if type(armed) is not dict or (
        armed and not (_keys_ok(armed) and all(type(value) is float for value in armed.values()))
    ):
        return False
    return not children or (
        _keys_ok(children) and all(_child_ok(state) for state in children.values())
    )


def execution_ok(exe: Any) -> bool:
    """True when :func:`~harel.store.common.payloads.check_execution` accepts ``exe``.

    Every commit's path, so written flat: the fields are read from the instance's
    ``__dict__`` (a missing one: unsure), the common shapes (ASCII identifiers, empty maps, no
    deferred events) are checked inline, and anything else goes through the general
    predicates above (:func:`key_ok`, :func:`text_ok`, :func:`_maps_ok`).
    """
    if type(exe) is not Execution:
        return False
    try:
        fields = exe.__dict__
        status = fields["status"]
        if type(status) is not Status and not (type(status) is str and status in _STATUS_VALUES):
            return False
        # identifiers: the ASCII case inline (non-empty, within the limit, no NUL), else key_ok
        for value in (fields["id"], fields["definition_id"]):
            if not (
                type(value) is str
                and value.isascii()
                and 0 < len(value) <= MAX_ID_BYTES
                and "\x00" not in value
            ) and not key_ok(value):
                return False
        value = fields["parent_id"]
        if value is not None and not key_ok(value):
            return False
        value = fields["child_id"]
        if value is not None and not key_ok(value):
            return False
        value = fields["root_path"]
        if (type(value) is not str or value) and not key_ok(value, empty_ok=True):
            return False
        # summary texts: no NUL; free texts: any encodable str
        for value in (fields["outcome"], fields["active_path"]):
            if value is not None and not (
                type(value) is str and "\x00" not in value and (value.isascii() or text_ok(value))
            ):
                return False
        value = fields["definition_fqn"]
        if value is not None and not (type(value) is str and (value.isascii() or text_ok(value))):
            return False
        value = fields["error"]
        if value is not None and not (type(value) is str and (value.isascii() or text_ok(value))):
            return False
        value = fields["processed_events"]
        if type(value) is not int or not MIN_INT <= value <= MAX_INT:
            return False
        value = fields["priority"]
        if type(value) is not int or not 0 <= value <= 4:
            return False
        history, invoke_seq = fields["history"], fields["invoke_seq"]
        armed, children = fields["armed_timers"], fields["children"]
        if not (
            type(history) is dict
            and type(invoke_seq) is dict
            and type(armed) is dict
            and type(children) is dict
            and not (history or invoke_seq or armed or children)
        ) and not _maps_ok(exe):
            return False
        context = fields["context"]
        if type(context) is not dict or not tree_ok(context, 1):
            return False
        deferred = fields["deferred"]
    except KeyError:
        return False
    return type(deferred) is list and (not deferred or all(event_ok(event) for event in deferred))


def record_ok(record: Any) -> bool:
    """True when :func:`~harel.store.common.payloads.check_record` accepts ``record``."""
    return type(record) is dict and tree_ok(record, 0)


__all__ = ["event_ok", "execution_ok", "field_ok", "key_ok", "record_ok", "text_ok", "tree_ok"]
