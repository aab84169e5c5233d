"""Awkward and invalid input: odd characters everywhere, malformed arguments, no side effects."""

from __future__ import annotations

from typing import Any

import pytest

from harel.conformance.suite._base import (
    FAR_FUTURE,
    Kit,
    KitBase,
    drain_listing,
    event,
    new_exe,
    snapshot,
    step,
    stored,
)
from harel.model import Execution
from harel.store.contract import TimerOp

ODD_STRINGS = (
    "quote'single",
    'quote"double',
    "ünïcødé-✓-漢字-🙂",
    "dots.in.the.name",
    "colons:in:the:name",
    "$dollar$",
    "with space",
    "back\\slash",
    "percent%and_underscore",
    "star*question?[set]",
    "{braces}",
    "slash/and//double",
    "semi;--comment",
    "nul-free\ttab\nnewline",
)


class BadInputTests(KitBase):
    """Values stored exactly as given; bad arguments rejected without side effects."""

    @pytest.mark.parametrize("odd", ODD_STRINGS)
    async def test_odd_strings_round_trip(self, kit: Kit, odd: str) -> None:
        store = kit.store
        exe = new_exe(f"id-{odd}", f"def-{odd}", context={f"key-{odd}": odd, "plain": 1})
        await store.commit(
            exe,
            [(f"target-{odd}", event(f"event-{odd}", **{f"k-{odd}": odd}))],
            processed_event_id=f"in-{odd}",
            timers=(TimerOp.schedule(f"/path-{odd}", 5.0),),
            spawns=[(f"child-{odd}", f"/root-{odd}", {f"c-{odd}": odd})],
            trace=step(f"kind-{odd}", **{f"t-{odd}": odd}),
        )
        # a sibling whose names a pattern/LIKE/glob match of the odd ones would also catch
        sibling = new_exe("id-x", "def-x", context={})
        await store.commit(sibling, [], processed_event_id="in-x")

        loaded = await store.load(f"id-{odd}")
        assert loaded is not None
        assert (loaded.id, loaded.definition_id) == (f"id-{odd}", f"def-{odd}")
        assert loaded.context == {f"key-{odd}": odd, "plain": 1}
        assert await store.load("id-x") is not None
        assert await store.is_processed(f"id-{odd}", f"in-{odd}") is True
        assert await store.is_processed(f"id-{odd}", "in-x") is False
        assert await store.is_processed("id-x", f"in-{odd}") is False
        assert (await store.load_for_event(f"id-{odd}", f"in-{odd}"))[1] is True
        (entry,) = await store.pending_outbox()
        assert entry.target_id == f"target-{odd}"
        assert entry.event == event(f"event-{odd}", **{f"k-{odd}": odd})
        (spawn,) = await store.pending_spawns()
        assert (spawn.parent_id, spawn.child_id, spawn.root_path, spawn.context) == (
            f"id-{odd}",
            f"child-{odd}",
            f"/root-{odd}",
            {f"c-{odd}": odd},
        )
        assert await store.due_timers(FAR_FUTURE) == [(f"id-{odd}", f"/path-{odd}", 5.0)]
        (trace,) = await store.read_trace(f"id-{odd}")
        assert trace["event_kind"] == f"kind-{odd}" and trace[f"t-{odd}"] == odd
        assert await store.read_trace("id-x") == []
        page = await store.list_executions(definition_id=f"def-{odd}")
        assert [item.id for item in page.items] == [f"id-{odd}"]
        assert [item.id for item in (await store.list_executions(definition_id="def-x")).items] == [
            "id-x"
        ]
        all_ids = [i for p in await drain_listing(store, limit=1) for i in p]
        assert sorted(all_ids) == sorted([f"id-{odd}", "id-x"])
        await store.delete_timer(f"id-{odd}", f"/path-{odd}", 5.0)
        assert await store.due_timers(FAR_FUTURE) == []

    async def test_wildcard_ids_do_not_match_others(self, kit: Kit) -> None:
        """Ids that look like patterns only ever address themselves."""
        for execution_id in ("a", "ab", "a%", "a_", "a*", "a?", "a[b]"):
            await kit.store.commit(
                new_exe(execution_id, f"def-{execution_id}"),
                [],
                processed_event_id="e",
                timers=(TimerOp.schedule("/t", 1.0),),
                trace=step("Start"),
            )
        for execution_id in ("a%", "a_", "a*", "a?", "a[b]"):
            page = await kit.store.list_executions(definition_id=f"def-{execution_id}")
            assert [i.id for i in page.items] == [execution_id]
        assert await kit.store.load("a.") is None
        assert await kit.store.load("a%%") is None
        assert await kit.store.read_trace("a.*") == []
        assert await kit.store.is_processed("a_x", "e") is False
        assert len(await kit.store.due_timers(FAR_FUTURE)) == 7

    @pytest.mark.parametrize(
        "bad",
        [
            {"timers": ("not a TimerOp",)},
            {"timers": [{"action": "schedule", "path": "/x", "fire_at": 1.0}]},
            {"emits": [("target", "not an event")]},
            {"emits": [(3, event("e"))]},
            {"emits": ["not a tuple"]},
            {"spawns": [("child", "/r")]},
            {"spawns": [("", "/r", {})]},
            {"spawns": [("child", "/r", "not a dict")]},
            {"trace": ["not", "a", "dict"]},
            {"processed_event_id": 42},
        ],
        ids=[
            "timer-str",
            "timer-dict",
            "emit-not-event",
            "emit-bad-target",
            "emit-not-tuple",
            "spawn-short",
            "spawn-empty-child",
            "spawn-context-str",
            "trace-list",
            "processed-int",
        ],
    )
    async def test_malformed_commit_rejected_without_effects(
        self, kit: Kit, bad: dict[str, Any]
    ) -> None:
        store = kit.store
        exe = await stored(store, new_exe("kit-1"))
        before = await snapshot(store, ["kit-1"])
        args: dict[str, Any] = {"emits": [(None, event("ok"))], "timers": (), "spawns": ()}
        args.update(bad)
        with pytest.raises((TypeError, ValueError)):
            await store.commit(exe, **args)
        assert exe.version == 1
        assert await snapshot(store, ["kit-1"]) == before

    @pytest.mark.parametrize("version", [-1, True])
    async def test_bad_version_rejected(self, kit: Kit, version: Any) -> None:
        exe = new_exe("kit-1")
        exe.version = version
        with pytest.raises(ValueError):
            await kit.store.save(exe)
        assert exe.version is version
        assert await kit.store.load("kit-1") is None

    async def test_empty_id_rejected(self, kit: Kit) -> None:
        exe = Execution(id="", definition_id="kit.flow")
        with pytest.raises(ValueError):
            await kit.store.save(exe)
        assert exe.version == 0
        assert (await kit.store.list_executions()).items == []
