"""Commit atomicity: every effect lands together, and a failed commit leaves nothing behind."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from harel.conformance.suite._base import (
    FAR_FUTURE,
    SMOKE,
    Kit,
    KitBase,
    event,
    new_exe,
    snapshot,
    step,
    stored,
)
from harel.model import Event
from harel.store.common.codec import decode_execution, encode_execution, loads
from harel.store.contract import StoreConflict, TimerOp
from harel.store.errors import InvalidPayload


class _Unencodable:
    """A value no JSON codec can store."""


BAD_PARTS = ("context", "trace", "spawn_context", "event_data")


def _failing_commit_args(part: str) -> dict[str, Any]:
    """Commit arguments whose ``part`` cannot be encoded, everything else valid."""
    args: dict[str, Any] = {
        "emits": [("kit-x", event("bad-e1")), (None, event("bad-e2"))],
        "processed_event_id": "bad-processed",
        "timers": (TimerOp.schedule("/bad", 10.0),),
        "spawns": [("bad-child", "/r", {"ok": True})],
        "trace": step("Bad"),
    }
    if part == "trace":
        args["trace"] = step("Bad", context_out={"x": _Unencodable()})
    elif part == "spawn_context":
        args["spawns"] = [("bad-child", "/r", {"x": _Unencodable()})]
    elif part == "event_data":
        args["emits"] = [(None, Event(id="bad-e1", kind="Bad", data={"x": _Unencodable()}))]
    return args


VERSION_EDGES = ("absent_with_version", "future_version", "create_over_existing")


class CommitTests(KitBase):
    """All-or-nothing commits, version bookkeeping, and no leftovers after failures."""

    @SMOKE
    async def test_commit_writes_every_effect(self, kit: Kit) -> None:
        exe = new_exe("kit-1", context={"step": 1})
        await kit.store.commit(
            exe,
            [("kit-2", event("e-1")), (None, event("e-2"))],
            processed_event_id="in-1",
            timers=(TimerOp.schedule("/a", 5.0), TimerOp.schedule("/b", 6.0)),
            spawns=[("child-1", "/region", {"seed": 1})],
            trace=step("Start", to_path="/a"),
        )
        assert exe.version == 1
        store = kit.store
        loaded = await store.load("kit-1")
        assert loaded is not None and loaded.context == {"step": 1} and loaded.version == 1
        outbox = await store.pending_outbox()
        assert [(entry.target_id, entry.event.id) for entry in outbox] == [
            ("kit-2", "e-1"),
            (None, "e-2"),
        ]
        assert await store.is_processed("kit-1", "in-1") is True
        assert await store.due_timers(FAR_FUTURE) == [("kit-1", "/a", 5.0), ("kit-1", "/b", 6.0)]
        spawns = await store.pending_spawns()
        assert [(s.parent_id, s.child_id, s.root_path, s.context) for s in spawns] == [
            ("kit-1", "child-1", "/region", {"seed": 1})
        ]
        trace = await store.read_trace("kit-1")
        assert [(t["index"], t["event_kind"], t["to_path"]) for t in trace] == [(0, "Start", "/a")]

    async def test_save_writes_only_the_snapshot(self, kit: Kit) -> None:
        exe = await stored(kit.store, new_exe("kit-1"))
        await kit.store.save(exe)
        after = await snapshot(kit.store, ["kit-1"])
        assert after.outbox == [] and after.spawns == [] and after.timers == []
        assert after.traces == {"kit-1": []}

    async def test_emits_on_the_insert_commit_are_kept(self, kit: Kit) -> None:
        await kit.store.commit(new_exe("kit-1"), [(None, event("first"))])
        assert [entry.event.id for entry in await kit.store.pending_outbox()] == ["first"]

    @pytest.mark.parametrize("part", BAD_PARTS)
    async def test_failed_commit_leaves_nothing(self, kit: Kit, part: str) -> None:
        """An un-encodable value anywhere: nothing visible, version restored, no leftovers."""
        store = kit.store
        exe = await stored(store, new_exe("kit-1", context={"good": True}))
        probes = ["bad-processed"]
        before = await snapshot(store, ["kit-1", "kit-2"], probes)
        args = _failing_commit_args(part)
        if part == "context":
            exe.context["bad"] = _Unencodable()
        with pytest.raises(InvalidPayload):
            await store.commit(exe, **args)
        assert exe.version == 1, "exe.version must be restored after a failed commit"
        assert await snapshot(store, ["kit-1", "kit-2"], probes) == before
        # the next commit (of another execution) must not publish anything of the failed one
        await store.commit(new_exe("kit-2"), [(None, event("clean"))], processed_event_id="ok")
        after = await snapshot(store, ["kit-1", "kit-2"], probes)
        assert [loads(body)["id"] for _, body in after.outbox] == ["clean"]
        assert after.spawns == [] and after.timers == []
        assert after.traces == {"kit-1": [], "kit-2": []}
        assert after.processed == {
            ("kit-1", "bad-processed"): False,
            ("kit-2", "bad-processed"): False,
        }
        assert after.executions["kit-1"] == before.executions["kit-1"]

    async def test_failed_insert_leaves_nothing(self, kit: Kit) -> None:
        exe = new_exe("kit-1", context={"bad": _Unencodable()})
        with pytest.raises(InvalidPayload):
            await kit.store.commit(exe, [(None, event("e"))], timers=(TimerOp.schedule("/a", 1.0),))
        assert exe.version == 0
        assert await kit.store.load("kit-1") is None
        assert await kit.store.pending_outbox() == []
        assert await kit.store.due_timers(FAR_FUTURE) == []
        # the id is still free
        exe.context = {"good": True}
        await kit.store.save(exe)
        assert exe.version == 1

    async def test_failed_commit_does_not_consume_a_version(self, kit: Kit) -> None:
        exe = await stored(kit.store, new_exe("kit-1"))
        exe.context["bad"] = _Unencodable()
        with pytest.raises(InvalidPayload):
            await kit.store.save(exe)
        del exe.context["bad"]
        await kit.store.save(exe)
        assert exe.version == 2
        loaded = await kit.store.load("kit-1")
        assert loaded is not None and loaded.version == 2

    @SMOKE
    async def test_conflicting_commit_leaves_nothing(self, kit: Kit) -> None:
        """A lost CAS writes no outbox, processed mark, timer, spawn or trace step."""
        store = kit.store
        await stored(store, new_exe("kit-1"))
        stale = await store.load("kit-1")
        winner = await store.load("kit-1")
        assert stale is not None and winner is not None
        await store.save(winner)
        before = await snapshot(store, ["kit-1"], ["lost-in"])
        with pytest.raises(StoreConflict):
            await store.commit(
                stale,
                [(None, event("lost-e"))],
                processed_event_id="lost-in",
                timers=(TimerOp.schedule("/lost", 1.0),),
                spawns=[("lost-child", "/r", {})],
                trace=step("Lost"),
            )
        assert stale.version == 1
        assert await snapshot(store, ["kit-1"], ["lost-in"]) == before
        # the trace index of the next real step is still 0: a lost commit consumes none
        await store.commit(winner, [], trace=step("Next"))
        assert [t["index"] for t in await store.read_trace("kit-1")] == [0]

    async def test_datetime_in_context_and_trace(self, kit: Kit) -> None:
        """Datetimes are stored the way the shared codec encodes them (ISO strings)."""
        when = datetime(2024, 5, 6, 7, 8, 9, 101112, tzinfo=UTC)
        exe = new_exe("kit-1", context={"at": when, "list": [when]})
        expected_context = decode_execution(encode_execution(exe)).context
        await kit.store.commit(exe, [], trace=step("Go", context_out={"at": when}, timestamp=1.5))
        loaded = await kit.store.load("kit-1")
        assert loaded is not None and loaded.context == expected_context
        assert isinstance(loaded.context["at"], str)
        assert datetime.fromisoformat(loaded.context["at"].replace("Z", "+00:00")) == when
        (trace,) = await kit.store.read_trace("kit-1")
        assert trace["context_out"] == {"at": expected_context["at"]}
        assert trace["timestamp"] == 1.5

    async def test_one_megabyte_context(self, kit: Kit) -> None:
        blob = "x" * 1_000_000
        exe = new_exe("kit-big", context={"blob": blob, "tail": [1, 2, 3]})
        await kit.store.save(exe)
        loaded = await kit.store.load("kit-big")
        assert loaded is not None
        assert loaded.context["blob"] == blob and loaded.context["tail"] == [1, 2, 3]
        exe.context["blob"] = "y" * 1_000_000
        await kit.store.save(exe)
        again = await kit.store.load("kit-big")
        assert again is not None and again.context["blob"] == exe.context["blob"]

    @pytest.mark.parametrize("case", VERSION_EDGES)
    async def test_refused_version_writes_no_side_effect(self, kit: Kit, case: str) -> None:
        """A commit whose version the CAS refuses writes none of its effects: no outbox entry,
        mark, timer, spawn or trace step, and the stored record is untouched."""
        store = kit.store
        if case == "absent_with_version":
            exe = new_exe("kit-1", version=3)
            expected, found = 3, None
        else:
            await stored(store, new_exe("kit-1", context={"v": "original"}))
            if case == "future_version":
                exe = new_exe("kit-1", version=5, context={"v": "future"})
                expected, found = 5, 1
            else:
                exe = new_exe("kit-1", context={"v": "impostor"})
                expected, found = 0, 1
        probes = ["edge-in"]
        before = await snapshot(store, ["kit-1", "kit-2"], probes)
        footprint = sorted(kit.harness.footprint("kit-1"))
        with pytest.raises(StoreConflict) as info:
            await store.commit(
                exe,
                [("kit-1", event("edge-e1")), ("kit-2", event("edge-e2")), (None, event("e3"))],
                processed_event_id="edge-in",
                timers=(TimerOp.schedule("/edge", 1.0),),
                spawns=[("edge-child", "/r", {})],
                trace=step("Edge"),
            )
        assert (info.value.expected, info.value.found) == (expected, found)
        assert exe.version == expected
        assert await snapshot(store, ["kit-1", "kit-2"], probes) == before
        assert sorted(kit.harness.footprint("kit-1")) == footprint
