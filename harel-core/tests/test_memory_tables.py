"""The memory tables' sorted indexes: sweeps, listing, purge and prune read through them, so
they must always say what the dicts say (and a purge must leave no index entry behind)."""

from __future__ import annotations

import random

from harel.model import Event, Execution, Status
from harel.store import TimerOp
from harel.store.memory import DictStore, MemoryData
from harel.store.memory.testing import footprint


def _consistent(data: MemoryData) -> None:
    """Every index equals what a scan of its table would give (and no empty group stays)."""
    assert data.ids == sorted(data.executions)
    timers = [(at, eid, path) for eid, paths in data.timers.items() for path, at in paths.items()]
    assert data.due == sorted(timers)
    marks = [(at, eid, ev) for eid, events in data.processed.items() for ev, at in events.items()]
    assert data.ages == sorted(marks)
    assert all(data.timers.values()) and all(data.processed.values())
    assert data.outbox_seqs == sorted(data.outbox) and data.spawn_seqs == sorted(data.spawns)
    outbox: dict[str | None, set[int]] = {}
    for seq, row in data.outbox.items():
        outbox.setdefault(row.target_id, set()).add(seq)
    assert data.outbox_of == outbox
    spawns: dict[str | None, set[int]] = {}
    for seq, spawn in data.spawns.items():
        spawns.setdefault(spawn.parent_id, set()).add(seq)
    assert data.spawns_of == spawns
    ready = {
        p: sorted((r.ready_at, r.key or "") for r in data.work.values() if r.priority == p)
        for p in data.ready
    }
    assert data.ready == ready
    leased = sorted((r.ready_at, r.key or "") for r in data.work.values() if r.owner is not None)
    assert data.leased == leased


def test_random_operations_keep_every_index_equal_to_its_table() -> None:
    pick = random.Random(7)
    store = DictStore(trace_max=3)
    live: dict[str, Execution] = {}
    for step in range(600):
        action = pick.choice(
            ["commit", "commit", "commit", "ack", "fire", "purge", "prune", "claim", "release"]
        )
        if action == "commit":
            eid = f"x{pick.randrange(40):02d}"
            exe = live.get(eid) or Execution(id=eid, definition_id=pick.choice("ab"))
            exe.status = pick.choice([Status.RUNNING, Status.DONE])
            target = f"x{pick.randrange(40):02d}"
            timer = pick.choice(
                [TimerOp.schedule("T", float(pick.randrange(50))), TimerOp.cancel("T")]
            )
            spawns: list[tuple[str, str, dict[str, int]]] = []
            if pick.random() < 0.2:
                spawns.append((f"{eid}-c{step}", "R", {}))
            store.commit(
                exe, [(target, Event(kind="E"))], f"ev{step}", [timer], spawns, {"s": step}
            )
            live[eid] = exe
        elif action == "ack":
            for entry in store.pending_outbox(limit=pick.randrange(1, 5)):
                store.ack_outbox(entry.seq)
            for spawn in store.pending_spawns(limit=2):
                store.ack_spawn(spawn.seq)
        elif action == "fire":
            for eid, path, at in store.due_timers(float(pick.randrange(50)), limit=3):
                store.delete_timer(eid, path, at)
        elif action == "purge" and live:
            eid = pick.choice(sorted(live))
            store.purge(eid, force=True)
            del live[eid]
            assert footprint(store.data, eid) == []
        elif action == "prune" and store.data.ages:
            store.prune_processed(store.data.ages[len(store.data.ages) // 2][0], batch_size=3)
        elif action == "claim":
            now = float(pick.randrange(60))
            store.claim(f"w{step % 3}", now, lease=float(pick.randrange(1, 20)), limit=3)
            leases = store.list_leases(now)
            expiries = [lease.expires_at for lease in leases]
            assert expiries == sorted(expiries) and all(at > now for at in expiries)
        elif action == "release":
            for lease in store.list_leases(-1e9, limit=2):
                store.release(lease.owner, lease.execution_id)
        _consistent(store.data)


def test_sweeps_and_listing_come_back_in_index_order() -> None:
    store = DictStore()
    for n, at in enumerate([30.0, 10.0, 20.0, 10.0]):
        exe = Execution(id=f"e{3 - n}", definition_id="d")
        store.commit(exe, [], None, [TimerOp.schedule("P", at)])
    assert store.due_timers(25.0) == [("e0", "P", 10.0), ("e2", "P", 10.0), ("e1", "P", 20.0)]
    assert store.due_timers(25.0, limit=1) == [("e0", "P", 10.0)]
    page = store.list_executions(limit=2)
    assert [s.id for s in page.items] == ["e0", "e1"]
    rest = store.list_executions(limit=2, cursor=page.next_cursor)
    assert [s.id for s in rest.items] == ["e2", "e3"] and rest.next_cursor is None


def test_a_long_acknowledged_relay_keeps_its_order() -> None:
    store = DictStore()
    exe = Execution(id="x", definition_id="d")
    store.commit(exe, [("x", Event(id=f"e{n}", kind="E")) for n in range(500)])
    for entry in store.pending_outbox(limit=450)[::-1]:  # acked newest first
        store.ack_outbox(entry.seq)
    assert [e.event.id for e in store.pending_outbox(limit=3)] == ["e450", "e451", "e452"]
    assert [e.event.id for e in store.pending_outbox()] == [f"e{n}" for n in range(450, 500)]
    _consistent(store.data)


def test_load_for_event_reads_the_row_and_the_mark_together() -> None:
    store = DictStore()
    assert store.load_for_event("x", "e1") == (None, False)
    exe = Execution(id="x", definition_id="d")
    store.commit(exe, [], "e1")
    loaded, seen = store.load_for_event("x", "e1")
    assert seen and loaded == exe and loaded is not exe
    assert store.load_for_event("x", "e2") == (exe, False)
    assert store.load_for_event("y", "e1") == (None, False)
