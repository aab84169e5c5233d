"""Records: ``export_execution`` reads everything of one id, ``import_execution`` writes it back.

The reference for every comparison is the in-memory :class:`~harel.store.memory.DictStore`:
the same operations run on it and on the store under test must export equal records (by
:func:`~harel.store.common.record_digest` and field by field), with clock values — the
execution's ``updated_at`` and the marks' ``recorded_at`` — checked against the commit window
instead, since two stores never commit at the same instant.  An import keeps what the record
says (version, times, relay order, trace indices) and leaves a store that keeps working; a
refused import writes nothing.
"""

from __future__ import annotations

import time

import pytest

from harel.conformance.suite._base import FAR_FUTURE, SMOKE, Kit, KitBase, snapshot, step
from harel.conformance.suite._records import (
    CHILD,
    CLOCK_TOLERANCE,
    IMPORTED,
    INVALID,
    PEER,
    SUBJECT,
    assert_clock,
    assert_same_record,
    assert_seq_order,
    commit_broadcast,
    commit_everything,
    imported_record,
    populate,
    reference_exports,
    reference_store,
    relay_ids,
)
from harel.model import Event, Status
from harel.store.common.records import record_digest, trim_record_trace
from harel.store.contract import AsyncExecutionStore
from harel.store.errors import ExecutionAlreadyExists, StoreConflict


class RecordTests(KitBase):
    """``export_execution`` / ``import_execution`` (what ``harel migrate`` moves)."""

    async def test_export_matches_the_reference(self, kit: Kit) -> None:
        start = time.time()
        await populate(kit.store)
        end = time.time()
        ids = (SUBJECT, CHILD, PEER, "kit-rec-nobody", "kit-re", "kit-recx")  # no prefix matches
        expected = await reference_exports(ids)
        got = {execution_id: await kit.store.export_execution(execution_id) for execution_id in ids}
        for execution_id in ids:
            assert_same_record(got[execution_id], expected[execution_id])

        record = got[SUBJECT]
        assert record is not None and record.execution is not None
        assert record.execution.version == 4
        assert [e for e, _ in record.processed] == ["in-1", "in-2"]
        assert record.timers == (("/a", 15.5), ("/c", 0.1 + 0.2))
        assert relay_ids(record) == ["from-peer", "self-2"]
        assert [s.child_id for s in record.spawns] == ["kit-rec-other"]
        assert [t["index"] for t in record.trace] == [2, 3, 4]
        assert_seq_order(record.outbox)
        assert_seq_order(record.spawns)
        pending = {e.seq: e.event.id for e in await kit.store.pending_outbox()}
        assert {e.seq: e.event.id for e in record.outbox}.items() <= pending.items()
        assert_clock(record.updated_at, start, end, "updated_at")
        for event_id, at in record.processed:
            assert_clock(at, start, end, f"the mark of {event_id!r}")

        relays_only = got[CHILD]
        assert relays_only is not None and relays_only.execution is None
        assert relay_ids(relays_only) == ["to-child"] and relays_only.updated_at is None
        assert got["kit-rec-nobody"] is None and got["kit-re"] is None and got["kit-recx"] is None

    @SMOKE
    async def test_import_then_export_keeps_everything(self, kit: Kit) -> None:
        record = imported_record()
        await commit_broadcast(kit.store, "kit-before", "before")
        await kit.store.import_execution(record)
        exported = await kit.store.export_execution(IMPORTED)
        assert exported is not None and exported.execution is not None
        assert_same_record(exported, record)
        assert exported.processed == record.processed
        assert record_digest(exported) == record_digest(record)
        assert exported.updated_at == pytest.approx(record.updated_at, abs=CLOCK_TOLERANCE)
        reference = reference_store()
        await reference.import_execution(record)
        assert_same_record(exported, await reference.export_execution(IMPORTED))

        loaded = await kit.store.load(IMPORTED)
        assert loaded is not None and loaded.version == 7
        listed = {s.id: s for s in (await kit.store.list_executions(limit=10)).items}
        assert listed[IMPORTED].version == 7
        assert listed[IMPORTED].updated_at == pytest.approx(1_600_000_000.25, abs=CLOCK_TOLERANCE)
        assert await kit.store.due_timers(60.0) == [(IMPORTED, "/a", 50.0)]
        assert await kit.store.due_timers(FAR_FUTURE) == [
            (IMPORTED, "/a", 50.0),
            (IMPORTED, "/b", 1e9 + 0.5),
        ]
        outbox = await kit.store.pending_outbox()
        assert [(e.target_id, e.event.id) for e in outbox] == [
            (None, "before"),
            (IMPORTED, "r1"),
            (IMPORTED, "r2"),
            (IMPORTED, "r3"),
        ]
        assert_seq_order(tuple(outbox))
        spawns = await kit.store.pending_spawns()
        assert [(s.parent_id, s.child_id) for s in spawns] == [
            (IMPORTED, "kit-imported-c1"),
            (IMPORTED, "kit-imported-c2"),
        ]
        assert await kit.store.read_trace(IMPORTED) == list(record.trace)
        assert await kit.store.is_processed(IMPORTED, "old")
        assert await kit.store.load_for_event(IMPORTED, "young") == (loaded, True)
        assert await kit.store.prune_processed(200.0) == 1
        assert not await kit.store.is_processed(IMPORTED, "old")
        assert await kit.store.is_processed(IMPORTED, "young")

    async def test_store_keeps_working_after_import(self, kit: Kit) -> None:
        await kit.store.import_execution(imported_record())
        exe = await kit.store.load(IMPORTED)
        assert exe is not None
        exe.status = Status.DONE
        await kit.store.commit(
            exe,
            [(IMPORTED, Event(id="after", kind="Go"))],
            processed_event_id="in-8",
            trace=step("After"),
        )
        assert exe.version == 8
        assert [t["index"] for t in await kit.store.read_trace(IMPORTED)] == [40, 41, 42, 43]
        await kit.store.append_trace(IMPORTED, step("Manual"))
        assert (await kit.store.read_trace(IMPORTED))[-1]["index"] == 44
        outbox = await kit.store.pending_outbox()
        assert [e.event.id for e in outbox] == ["r1", "r2", "r3", "after"]
        for entry in outbox[:3]:
            await kit.store.ack_outbox(entry.seq)
        assert [e.event.id for e in await kit.store.pending_outbox()] == ["after"]
        for spawn in await kit.store.pending_spawns():
            await kit.store.ack_spawn(spawn.seq)
        assert await kit.store.pending_spawns() == []
        await kit.store.delete_timer(IMPORTED, "/a", 50.0)
        assert await kit.store.due_timers(FAR_FUTURE) == [(IMPORTED, "/b", 1e9 + 0.5)]
        stale = imported_record().execution
        assert stale is not None
        with pytest.raises(StoreConflict):
            await kit.store.commit(stale, [])
        assert await kit.store.purge(IMPORTED) is True
        assert kit.harness.footprint(IMPORTED) == []
        assert await kit.store.export_execution(IMPORTED) is None

    async def test_import_applies_the_ring(self, kit: Kit) -> None:
        kit.store.trace_max = 2
        record = imported_record()
        await kit.store.import_execution(record)
        assert [t["index"] for t in await kit.store.read_trace(IMPORTED)] == [41, 42]
        exported = await kit.store.export_execution(IMPORTED)
        assert exported is not None
        assert record_digest(exported) == record_digest(trim_record_trace(record, 2))
        await kit.store.append_trace(IMPORTED, step("Manual"))
        assert [t["index"] for t in await kit.store.read_trace(IMPORTED)] == [42, 43]

    async def test_relay_only_records_append(self, kit: Kit) -> None:
        relays = imported_record(
            execution=None, processed=(), timers=(), spawns=(), trace=(), updated_at=None
        )
        await kit.store.import_execution(relays)
        await kit.store.import_execution(relays)
        assert await kit.store.load(IMPORTED) is None
        exported = await kit.store.export_execution(IMPORTED)
        assert exported is not None and exported.execution is None
        assert relay_ids(exported) == ["r1", "r2", "r3"] * 2
        assert_seq_order(exported.outbox)
        await kit.store.import_execution(imported_record())  # relays do not make it "stored"
        exported = await kit.store.export_execution(IMPORTED)
        assert exported is not None and exported.execution is not None
        assert relay_ids(exported) == ["r1", "r2", "r3"] * 3

    async def test_import_over_a_stored_execution_is_refused(self, kit: Kit) -> None:
        await commit_everything(kit.store, IMPORTED)
        ids = (IMPORTED, "kit-imported-c1")
        before = await snapshot(kit.store, ids, ["old", "young", "in-1"])
        footprint = sorted(kit.harness.footprint(IMPORTED))
        with pytest.raises(ExecutionAlreadyExists) as info:
            await kit.store.import_execution(imported_record())
        assert info.value.execution_id == IMPORTED
        assert await snapshot(kit.store, ids, ["old", "young", "in-1"]) == before
        assert sorted(kit.harness.footprint(IMPORTED)) == footprint

        await kit.store.import_execution(imported_record("kit-imported-2"))
        again = await kit.store.export_execution("kit-imported-2")
        with pytest.raises(ExecutionAlreadyExists):
            await kit.store.import_execution(imported_record("kit-imported-2"))
        assert await kit.store.export_execution("kit-imported-2") == again

    async def test_concurrent_importers_one_wins(self, kit: Kit) -> None:
        record = imported_record()
        other = await kit.open()

        async def import_with(store: AsyncExecutionStore) -> None:
            await store.import_execution(record)

        outcomes = await kit.race([lambda: import_with(kit.store), lambda: import_with(other)])
        winners = [outcome for outcome in outcomes if outcome is None]
        losers = [outcome for outcome in outcomes if isinstance(outcome, ExecutionAlreadyExists)]
        assert (len(winners), len(losers)) == (1, 1), f"outcomes: {outcomes!r}"
        exported = await kit.store.export_execution(IMPORTED)
        assert exported is not None and record_digest(exported) == record_digest(record)
        assert len(await kit.store.pending_outbox()) == len(record.outbox)

    async def test_invalid_records_are_refused_before_writing(self, kit: Kit) -> None:
        problems: list[str] = []
        for label, (build, error) in INVALID.items():
            try:
                await kit.store.import_execution(build())
            except error:
                pass
            except Exception as exc:  # reported below with the case's label
                problems.append(f"{label}: raised {type(exc).__name__}: {exc}")
            else:
                problems.append(f"{label}: accepted (want {error.__name__})")
            for execution_id in (IMPORTED, "kit-other"):
                if (found := kit.harness.footprint(execution_id)) != []:
                    problems.append(f"{label}: wrote {found} for {execution_id!r}")
                    await kit.store.purge(execution_id, force=True)
        assert problems == []
        assert await kit.store.pending_outbox() == []
        await kit.store.import_execution(imported_record())  # the store still works
        assert await kit.store.load(IMPORTED) is not None
