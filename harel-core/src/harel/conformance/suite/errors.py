"""Typed errors everywhere: wrong-typed and out-of-range arguments never let a raw error out.

Every contract method, given an argument of the wrong type, raises ``TypeError``; given a value
out of the range every backend serves (an empty or over-long id, NUL or a lone surrogate in an
id, ``seq``/``limit`` of ``2**63``, ``now`` of ``1e309``, ``-inf`` or NaN, an unknown status),
raises an error that is both a :class:`~harel.store.errors.StoreError` and a ``ValueError``
(``InvalidArgument``, ``InvalidIdentifier``, ``InvalidPayload``, ``InvalidCursor``).  Never a
driver's ``OverflowError``, ``UnicodeEncodeError``, ``ProgrammingError`` or ``KeyError``, and
never a silent ``None``.  Values at the edge of the range are accepted.  After each bad call
nothing has changed and the store still works.  The rules: :mod:`harel.store.common.limits`
and :mod:`harel.store.common.validate`.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import pytest

from harel.conformance.suite._base import (
    Kit,
    KitBase,
    event,
    new_exe,
    snapshot,
    step,
)
from harel.model import Status
from harel.store.common.limits import MAX_ID_BYTES, MAX_INT
from harel.store.contract import AsyncExecutionStore, TimerOp
from harel.store.errors import StoreError

Expect = Literal["type", "value", "ok"]
Case = tuple[str, tuple[Any, ...], dict[str, Any], Expect]
"""``(label, args, kwargs, expected)`` for one call of the method under test."""

HUGE = 10**400
NAN = math.nan
SURROGATE = "lone-\ud800"


def _deep(levels: int) -> Any:
    value: Any = 0
    for _ in range(levels):
        value = [value]
    return value


CASES: dict[str, list[Case]] = {
    "load": [
        ("int id", (5,), {}, "type"),
        ("None id", (None,), {}, "type"),
        ("bytes id", (b"kit-1",), {}, "type"),
        ("empty id", ("",), {}, "value"),
        ("surrogate id", (SURROGATE,), {}, "value"),
        ("NUL id", ("kit\x00-1",), {}, "value"),
        ("64 KiB id", ("x" * 65536,), {}, "value"),
        ("id at the limit", ("x" * MAX_ID_BYTES,), {}, "ok"),
    ],
    "load_for_event": [
        ("int event id", ("kit-1", 5), {}, "type"),
        ("int id", (5, "e"), {}, "type"),
        ("surrogate event id", ("kit-1", "\udc00"), {}, "value"),
        ("empty event id", ("kit-1", ""), {}, "value"),
    ],
    "is_processed": [
        ("int id", (5, "e"), {}, "type"),
        ("None event id", ("kit-1", None), {}, "type"),
        ("surrogate id", (SURROGATE, "e"), {}, "value"),
        ("NUL event id", ("kit-1", "e\x00"), {}, "value"),
    ],
    "ack_outbox": [
        ("str seq", ("1",), {}, "type"),
        ("float seq", (1.0,), {}, "type"),
        ("bool seq", (True,), {}, "type"),
        ("None seq", (None,), {}, "type"),
        ("seq 2**63", (2**63,), {}, "value"),
        ("huge seq", (HUGE,), {}, "value"),
        ("negative seq", (-1,), {}, "value"),
        ("unknown seq at the limit", (MAX_INT,), {}, "ok"),
    ],
    "ack_spawn": [
        ("str seq", ("1",), {}, "type"),
        ("seq 2**63", (2**63,), {}, "value"),
        ("negative seq", (-5,), {}, "value"),
        ("unknown seq at the limit", (MAX_INT,), {}, "ok"),
    ],
    "pending_outbox": [
        ("limit 2**63", (), {"limit": 2**63}, "value"),
        ("limit 0", (), {"limit": 0}, "value"),
        ("str limit", (), {"limit": "2"}, "type"),
        ("limit at the limit", (), {"limit": MAX_INT}, "ok"),
    ],
    "pending_spawns": [
        ("limit 2**63", (), {"limit": 2**63}, "value"),
        ("float limit", (), {"limit": 2.0}, "type"),
    ],
    "due_timers": [
        ("None now", (None,), {}, "type"),
        ("str now", ("5",), {}, "type"),
        ("bool now", (True,), {}, "type"),
        ("now 1e309", (1e309,), {}, "value"),
        ("now -inf", (-math.inf,), {}, "value"),
        ("now NaN", (NAN,), {}, "value"),
        ("now beyond float", (HUGE,), {}, "value"),
        ("limit 2**63", (1.0,), {"limit": 2**63}, "value"),
        ("largest now", (1.7976931348623157e308,), {}, "ok"),
        ("smallest now", (-1.7976931348623157e308,), {}, "ok"),
        ("int now", (10**18,), {}, "ok"),
    ],
    "delete_timer": [
        ("None fire_at", ("kit-1", "/t", None), {}, "type"),
        ("str fire_at", ("kit-1", "/t", "2.0"), {}, "type"),
        ("int path", ("kit-1", 5, 2.0), {}, "type"),
        ("int id", (5, "/t", 2.0), {}, "type"),
        ("NaN fire_at", ("kit-1", "/t", NAN), {}, "value"),
        ("fire_at beyond float", ("kit-1", "/t", HUGE), {}, "value"),
        ("surrogate path", ("kit-1", SURROGATE, 2.0), {}, "value"),
        ("empty id", ("", "/t", 2.0), {}, "value"),
        ("other fire_at", ("kit-1", "/t", 1e308), {}, "ok"),
    ],
    "read_trace": [
        ("int id", (5,), {}, "type"),
        ("surrogate id", (SURROGATE,), {}, "value"),
        ("64 KiB id", ("🙂" * 16384,), {}, "value"),
    ],
    "append_trace": [
        ("int id", (5, step("X")), {}, "type"),
        ("str entry", ("kit-1", "not a dict"), {}, "type"),
        ("surrogate id", (SURROGATE, step("X")), {}, "value"),
        ("surrogate value", ("kit-1", step("X", note="\ud800")), {}, "value"),
        ("set value", ("kit-1", step("X", note={1, 2})), {}, "value"),
        ("tuple value", ("kit-1", step("X", note=(1, 2))), {}, "value"),
        ("int key", ("kit-1", {1: "x"}), {}, "value"),
        ("nested 250 deep", ("kit-1", step("X", note=_deep(250))), {}, "value"),
        ("int beyond 64 bits", ("kit-1", step("X", note=2**64)), {}, "value"),
    ],
    "list_executions": [
        ("limit 2**63", (), {"limit": 2**63}, "value"),
        ("str limit", (), {"limit": "5"}, "type"),
        ("int definition_id", (), {"definition_id": 5}, "type"),
        ("surrogate definition_id", (), {"definition_id": SURROGATE}, "value"),
        ("unknown status", (), {"status": ["NOPE"]}, "value"),
        ("int status", (), {"status": [5]}, "type"),
        ("int cursor", (), {"cursor": 5}, "type"),
        ("limit at the limit", (), {"limit": MAX_INT}, "ok"),
        ("status as str values", (), {"status": ["DONE", Status.RUNNING]}, "ok"),
    ],
    "list_leases": [
        ("None now", (None,), {}, "type"),
        ("str now", ("5",), {}, "type"),
        ("now NaN", (NAN,), {}, "value"),
        ("now beyond float", (HUGE,), {}, "value"),
        ("limit 0", (1.0,), {"limit": 0}, "value"),
        ("limit 2**63", (1.0,), {"limit": 2**63}, "value"),
        # the contract makes a wrong-typed limit an InvalidArgument here (not a TypeError)
        ("bool limit", (1.0,), {"limit": True}, "value"),
        ("str limit", (1.0,), {"limit": "5"}, "value"),
        ("largest now", (1.7976931348623157e308,), {}, "ok"),
        ("smallest now", (-1.7976931348623157e308,), {}, "ok"),
    ],
    "purge": [
        ("int id", (5,), {}, "type"),
        ("empty id", ("",), {}, "value"),
        ("surrogate id", (SURROGATE,), {}, "value"),
        ("str force", ("kit-1",), {"force": "yes"}, "type"),
        ("unknown id", ("kit-unknown",), {}, "ok"),
    ],
    "prune_processed": [
        ("None older_than", (None,), {}, "type"),
        ("str older_than", ("0",), {}, "type"),
        ("NaN older_than", (NAN,), {}, "value"),
        ("inf older_than", (math.inf,), {}, "value"),
        ("batch_size 0", (0.0,), {"batch_size": 0}, "value"),
        ("batch_size 2**63", (0.0,), {"batch_size": 2**63}, "value"),
        ("str batch_size", (0.0,), {"batch_size": "10"}, "type"),
        ("smallest older_than", (-1.7976931348623157e308,), {}, "ok"),
    ],
    "commit": [
        ("not an execution", ("kit-1", []), {}, "type"),
        ("emits None", (new_exe("kit-x"), None), {}, "type"),
        ("timers str", (new_exe("kit-x"), []), {"timers": "abc"}, "type"),
        (
            "surrogate processed id",
            (new_exe("kit-x"), []),
            {"processed_event_id": SURROGATE},
            "value",
        ),
        (
            "NUL timer path",
            (new_exe("kit-x"), []),
            {"timers": (TimerOp.schedule("a\x00", 1),)},
            "value",
        ),
    ],
}
"""Calls per contract method; ``ok`` cases pin the edge of the accepted range."""


def _classify(exc: BaseException) -> str:
    if isinstance(exc, TypeError):
        return "type"
    if isinstance(exc, ValueError) and isinstance(exc, StoreError):
        return "value"
    return "raw"


async def _seed(store: AsyncExecutionStore) -> None:
    await store.commit(
        new_exe("kit-1", status=Status.DONE),
        [(None, event("e-1"))],
        processed_event_id="in-1",
        timers=(TimerOp.schedule("/t", 2.0),),
        spawns=[("child-1", "/r", {})],
        trace=step("Start"),
    )


async def _call(store: AsyncExecutionStore, method: str, case: Case) -> Any:
    fn: Callable[..., Awaitable[Any]] = getattr(store, method)
    _, args, kwargs, _ = case
    return await fn(*args, **kwargs)


class ArgumentErrorTests(KitBase):
    """No exception outside harel.store.errors (or TypeError for wrong types) escapes."""

    @pytest.mark.parametrize("method", sorted(CASES))
    async def test_bad_arguments_raise_typed_errors(self, kit: Kit, method: str) -> None:
        store = kit.store
        await _seed(store)
        before = await snapshot(store, ["kit-1", "kit-x"], ["in-1"])
        problems: list[str] = []
        for case in CASES[method]:
            label, _, _, expected = case
            try:
                await _call(store, method, case)
            except Exception as exc:
                got = _classify(exc)
                if got != expected:
                    problems.append(
                        f"{method}({label}) raised {type(exc).__module__}.{type(exc).__name__}: "
                        f"{exc!s:.200} — expected {_describe(expected)}"
                    )
            else:
                if expected != "ok":
                    problems.append(f"{method}({label}) returned, expected {_describe(expected)}")
        assert not problems, "\n".join(problems)
        after = await snapshot(store, ["kit-1", "kit-x"], ["in-1"])
        assert after == before, _snapshot_changes(method, before, after)
        exe = new_exe("kit-after")
        await store.commit(exe, [])
        assert exe.version == 1 and await store.load("kit-after") is not None


def _snapshot_changes(method: str, before: Any, after: Any) -> str:
    """What the refused ``method`` calls changed in the store: expected and found, per part."""
    lines = [f"the refused {method}(...) calls changed the store (expected no change):"]
    for part in ("executions", "outbox", "spawns", "timers", "traces", "processed"):
        old, new = getattr(before, part), getattr(after, part)
        if old != new:
            lines.append(f"  {part}: expected {old!r:.600}")
            lines.append(f"  {part}: found    {new!r:.600}")
    return "\n".join(lines)


def _describe(expected: Expect) -> str:
    return {
        "type": "TypeError",
        "value": "an error that is both a harel.store.errors.StoreError and a ValueError "
        "(InvalidArgument, InvalidIdentifier, InvalidPayload)",
        "ok": "no error",
    }[expected]


__all__ = ["CASES", "ArgumentErrorTests"]
