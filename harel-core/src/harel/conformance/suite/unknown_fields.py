"""Unknown fields: what a newer release added to a record survives an older worker's round trip.

Records read from a store keep the fields their models do not declare (``harel.model``'s
``KEEP_UNKNOWN_FIELDS``): on the execution, on a deferred event inside it, on a child's join
state and on an outbox event.  A store that decodes with plain ``model_validate`` (refusing
them) or re-encodes only the declared fields (dropping them) fails here.
"""

from __future__ import annotations

from typing import Any

from harel.conformance.suite._base import SMOKE, Kit, KitBase
from harel.model import KEEP_UNKNOWN_FIELDS, Event, Execution
from harel.store.contract import ExecutionRecord, OutboxEntry

NEWER_EXECUTION = {"rollout": {"wave": 3, "flags": ["a", "b"]}, "sla_seconds": 1.5}
NEWER_EVENT = {"trace_parent": "00-abc-01", "hops": [1, 2]}
NEWER_CHILD = {"weight": 0.25}


def newer_execution(execution_id: str, version: int = 0) -> Execution:
    """An execution as a newer release would store it: extra fields at three levels."""
    data: dict[str, Any] = {
        "id": execution_id,
        "definition_id": "kit.flow",
        "version": version,
        "context": {"n": 0},
        "deferred": [{"id": "deferred-1", "kind": "Later", "data": {"x": 1}, **NEWER_EVENT}],
        "children": {"r": {"root_path": "/r", "key": "r:0", **NEWER_CHILD}},
        **NEWER_EXECUTION,
    }
    return Execution.model_validate(data, context=KEEP_UNKNOWN_FIELDS)


def newer_event(event_id: str) -> Event:
    """An event carrying fields a newer release added."""
    data = {"id": event_id, "kind": "Go", "data": {"k": "v"}, **NEWER_EVENT}
    return Event.model_validate(data, context=KEEP_UNKNOWN_FIELDS)


def assert_extras_kept(exe: Execution | None, what: str) -> None:
    """``exe`` still carries every unknown field of :func:`newer_execution`."""
    assert exe is not None, f"{what}: the execution is gone"
    assert exe.model_extra == NEWER_EXECUTION, f"{what}: execution extras {exe.model_extra!r}"
    (deferred,) = exe.deferred
    assert deferred.model_extra == NEWER_EVENT, f"{what}: deferred event {deferred.model_extra!r}"
    child = exe.children["r"]
    assert child.model_extra == NEWER_CHILD, f"{what}: child state extras {child.model_extra!r}"


class UnknownFieldTests(KitBase):
    """Fields a newer release added are kept through load → modify → commit, the outbox, and
    import/export."""

    @SMOKE
    async def test_unknown_fields_survive_load_modify_commit(self, kit: Kit) -> None:
        exe = newer_execution("kit-1")
        await kit.store.commit(exe, [("kit-2", newer_event("e1")), (None, newer_event("e2"))])
        delivered = await kit.store.pending_outbox()
        assert [(e.target_id, e.event.id) for e in delivered] == [("kit-2", "e1"), (None, "e2")]
        for entry in delivered:
            assert entry.event.model_extra == NEWER_EVENT, f"outbox {entry.event.id}: extras lost"
            assert entry.event.data == {"k": "v"}
        loaded = await kit.store.load("kit-1")
        assert_extras_kept(loaded, "after the first commit")
        assert loaded is not None
        loaded.context["n"] = 1
        loaded.active_path = "/b"
        await kit.store.commit(loaded, [])
        again = await kit.store.load("kit-1")
        assert_extras_kept(again, "after load, modify, commit")
        assert again is not None and (again.version, again.context) == (2, {"n": 1})
        found, seen = await kit.store.load_for_event("kit-1", "nothing")
        assert_extras_kept(found, "load_for_event")
        assert seen is False

    async def test_unknown_fields_survive_import_and_export(self, kit: Kit) -> None:
        record = ExecutionRecord(
            execution_id="kit-1",
            execution=newer_execution("kit-1", version=3),
            outbox=(OutboxEntry(1, "kit-1", newer_event("e1")),),
        )
        await kit.store.import_execution(record)
        assert_extras_kept(await kit.store.load("kit-1"), "after import")
        exported = await kit.store.export_execution("kit-1")
        assert exported is not None
        assert_extras_kept(exported.execution, "exported")
        (entry,) = exported.outbox
        assert entry.event.model_extra == NEWER_EVENT, "outbox extras lost on import/export"
