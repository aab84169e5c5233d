"""Durability across reopen: a second store over the same dataset sees (and guards) everything."""

from __future__ import annotations

import json

import pytest

from harel.conformance._remote import WRITTEN_BY, call, dump_plan
from harel.conformance.harness import StoreHarness
from harel.conformance.suite._base import (
    FAR_FUTURE,
    NO_TRIO,
    SMOKE,
    Kit,
    KitBase,
    SyncAsAsync,
    event,
    new_exe,
    snapshot,
    step,
    stored,
)
from harel.conformance.suite._processes import require_url, run_remote
from harel.model import Status
from harel.store.common.drive import adrive
from harel.store.contract import AsyncExecutionStore, StoreConflict, TimerOp

PERSISTED_IDS = ["kit-p1", "kit-p2", "kit-p3", "kit-never"]
PERSISTED_EVENTS = ["in-1", "in-2", "in-3", "in-never"]


async def _write_everything(store: AsyncExecutionStore) -> None:
    """Every kind of record, acks and a purge included (what a fresh interpreter must see)."""
    parent = new_exe("kit-p1", status=Status.RUNNING, context={"n": 1, "f": 0.1 + 0.2})
    await store.commit(
        parent,
        [("kit-p2", event("e-1", a=[1])), (None, event("e-2")), (None, event("e-acked"))],
        processed_event_id="in-1",
        timers=(TimerOp.schedule("/a", 0.1 + 0.2), TimerOp.schedule("/b", 1700000000.123456789)),
        spawns=[("kit-p2", "/r", {"seed": {"deep": [1, "x"]}}), ("kit-c", "/s", {})],
        trace=step("Start", to_path="/a"),
    )
    await store.append_trace("kit-p1", step("Manual"))
    child = new_exe("kit-p2", status=Status.DONE, parent_id="kit-p1", outcome="ok")
    child.active_path = "/done"
    await store.commit(child, [], processed_event_id="in-2", trace=step("Start"))
    gone = new_exe("kit-p3", status=Status.DONE)
    await store.commit(gone, [("kit-p3", event("e-3"))], processed_event_id="in-3")
    assert await store.purge("kit-p3") is True
    for entry in await store.pending_outbox():
        if entry.event.id == "e-acked":
            await store.ack_outbox(entry.seq)
    (spawn, _) = await store.pending_spawns()
    await store.ack_spawn(spawn.seq)
    await store.delete_timer("kit-p1", "/b", 1700000000.123456789)


class DurabilityTests(KitBase):
    """Restart (reopen) and second-writer behaviour over one dataset."""

    @SMOKE
    async def test_reopen_sees_every_effect(self, kit: Kit) -> None:
        first = kit.store
        exe = new_exe("kit-1", status=Status.RUNNING, context={"n": 1})
        await first.commit(
            exe,
            [("kit-2", event("e-1"))],
            processed_event_id="in-1",
            timers=(TimerOp.schedule("/a", 7.25),),
            spawns=[("child-1", "/r", {"seed": [1]})],
            trace=step("Start"),
        )
        before = await snapshot(first, ["kit-1"], ["in-1", "in-2"])
        await kit.close(first)
        kit.store = await kit.open()
        second = kit.store
        assert await snapshot(second, ["kit-1"], ["in-1", "in-2"]) == before
        page = await second.list_executions(status=[Status.RUNNING])
        assert [item.id for item in page.items] == ["kit-1"]
        # the CAS token and the trace index continue where the first store left them
        exe.context["n"] = 2
        await second.commit(exe, [], trace=step("Go"))
        assert exe.version == 2
        assert [t["index"] for t in await second.read_trace("kit-1")] == [0, 1]

    async def test_second_writer_conflicts(self, kit: Kit) -> None:
        """Two stores over one dataset: a stale copy loses through either of them."""
        other = await kit.open()
        await stored(kit.store, new_exe("kit-1"))
        mine = await kit.store.load("kit-1")
        theirs = await other.load("kit-1")
        assert mine is not None and theirs is not None
        theirs.context["by"] = "other"
        await other.commit(theirs, [(None, event("theirs"))])
        with pytest.raises(StoreConflict) as info:
            await kit.store.commit(mine, [(None, event("mine"))])
        assert (info.value.expected, info.value.found) == (1, 2)
        assert [entry.event.id for entry in await kit.store.pending_outbox()] == ["theirs"]
        loaded = await kit.store.load("kit-1")
        assert loaded is not None and loaded.context == {"by": "other"}

    async def test_acks_are_visible_to_other_stores(self, kit: Kit) -> None:
        other = await kit.open()
        await kit.store.commit(
            new_exe("kit-1"), [(None, event("e-1"))], spawns=[("child", "/r", {})]
        )
        (entry,) = await other.pending_outbox()
        (spawn,) = await other.pending_spawns()
        await other.ack_outbox(entry.seq)
        await other.ack_spawn(spawn.seq)
        assert await kit.store.pending_outbox() == []
        assert await kit.store.pending_spawns() == []

    async def test_trace_max_lowered_after_reopen(self, kit: Kit) -> None:
        """A store opened later with a smaller ``trace_max`` trims at its next write."""
        kit.store.trace_max = 3
        exe = new_exe("kit-1")
        for kind in ("Start", "Go", "Go", "Go"):
            await kit.store.commit(exe, [], trace=step(kind))
        assert [t["index"] for t in await kit.store.read_trace("kit-1")] == [1, 2, 3]
        other = await kit.open()
        other.trace_max = 2
        assert [t["index"] for t in await other.read_trace("kit-1")] == [1, 2, 3]
        await other.commit(exe, [], trace=step("Go"))
        assert [t["index"] for t in await other.read_trace("kit-1")] == [3, 4]

    @SMOKE
    @NO_TRIO  # the fresh interpreter is the point (it runs asyncio); ~1-2 s per run
    async def test_persistent_data_is_read_back_by_a_fresh_interpreter(self, kit: Kit) -> None:
        """``persistent``: another interpreter opening ``harness.url()`` through the registry
        reads back every execution, mark, timer, outbox entry, spawn and trace step, and what it
        writes before exiting is here afterwards.  Nothing to verify when not declared."""
        if not kit.capabilities.persistent:
            return
        require_url(kit.harness, "persistent")
        await _write_everything(kit.store)
        expected = await adrive(
            dump_plan(PERSISTED_IDS, PERSISTED_EVENTS), lambda request: call(kit.store, request)
        )
        got = run_remote(
            kit.harness,
            "dump",
            json.dumps(PERSISTED_IDS),
            json.dumps(PERSISTED_EVENTS),
            "kit-elsewhere",
        )
        for part in expected:
            assert got[part] == expected[part], f"{part} read by a fresh interpreter differs"
        other = await kit.open()
        written = await other.load("kit-elsewhere")
        assert written is not None and written.context == {"by": WRITTEN_BY}

    @pytest.mark.parametrize("writer", ["sync", "async"])
    async def test_sync_and_async_share_one_dataset(
        self, harel_harness: StoreHarness, writer: str
    ) -> None:
        """What one flavour writes, the other reads (one schema, one encoding)."""
        sync_store = SyncAsAsync(harel_harness.open_sync())
        async_store = await harel_harness.open_async()
        try:
            write, read = (
                (sync_store, async_store) if writer == "sync" else (async_store, sync_store)
            )
            exe = new_exe("kit-1", status=Status.DONE, context={"x": [1, "two"]})
            await write.commit(
                exe,
                [(None, event("e-1", a=1))],
                processed_event_id="in-1",
                timers=(TimerOp.schedule("/t", 3.5),),
                spawns=[("c-1", "/r", {"k": "v"})],
                trace=step("Start"),
            )
            assert await snapshot(read, ["kit-1"], ["in-1"]) == await snapshot(
                write, ["kit-1"], ["in-1"]
            )
            assert await read.due_timers(FAR_FUTURE) == [("kit-1", "/t", 3.5)]
            loaded = await read.load("kit-1")
            assert loaded is not None
            await read.save(loaded)
            with pytest.raises(StoreConflict):
                await write.save(exe)
        finally:
            await sync_store.close()
            await async_store.close()
