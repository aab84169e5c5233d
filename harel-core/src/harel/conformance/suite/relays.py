"""Relays: the outbox and the spawn intents (order, acks, limits, fan-out)."""

from __future__ import annotations

import pytest

from harel.conformance.suite._base import SMOKE, Kit, KitBase, event, new_exe

FAN_OUT = 150


class RelayTests(KitBase):
    """``pending_outbox``/``ack_outbox`` and ``pending_spawns``/``ack_spawn``."""

    async def test_outbox_in_commit_order_across_executions(self, kit: Kit) -> None:
        a, b = new_exe("kit-a"), new_exe("kit-b")
        await kit.store.commit(a, [("kit-b", event("a1")), (None, event("a2"))])
        await kit.store.commit(b, [(None, event("b1"))])
        await kit.store.commit(a, [("kit-a", event("a3"))])
        await kit.store.commit(b, [])
        await kit.store.commit(b, [("kit-a", event("b2")), ("kit-b", event("b3"))])
        entries = await kit.store.pending_outbox()
        assert [(e.target_id, e.event.id) for e in entries] == [
            ("kit-b", "a1"),
            (None, "a2"),
            (None, "b1"),
            ("kit-a", "a3"),
            ("kit-a", "b2"),
            ("kit-b", "b3"),
        ]
        seqs = [e.seq for e in entries]
        assert all(type(s) is int for s in seqs)
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)

    @SMOKE
    async def test_outbox_ack(self, kit: Kit) -> None:
        await kit.store.commit(
            new_exe("kit-1"), [(None, event("e1")), (None, event("e2")), (None, event("e3"))]
        )
        first, second, third = await kit.store.pending_outbox()
        await kit.store.ack_outbox(second.seq)
        assert [e.event.id for e in await kit.store.pending_outbox()] == ["e1", "e3"]
        await kit.store.ack_outbox(second.seq)  # twice: no-op
        await kit.store.ack_outbox(max(first.seq, third.seq) + 1000)  # unknown: no-op
        assert [e.seq for e in await kit.store.pending_outbox()] == [first.seq, third.seq]
        await kit.store.ack_outbox(first.seq)
        await kit.store.ack_outbox(third.seq)
        assert await kit.store.pending_outbox() == []

    async def test_outbox_limit(self, kit: Kit) -> None:
        exe = new_exe("kit-1")
        await kit.store.commit(exe, [(None, event(f"e{n}")) for n in range(5)])
        await kit.store.commit(exe, [(None, event("e5"))])
        assert [e.event.id for e in await kit.store.pending_outbox(limit=2)] == ["e0", "e1"]
        assert len(await kit.store.pending_outbox(limit=6)) == 6
        assert len(await kit.store.pending_outbox(limit=100)) == 6
        (head,) = await kit.store.pending_outbox(limit=1)
        await kit.store.ack_outbox(head.seq)
        assert [e.event.id for e in await kit.store.pending_outbox(limit=2)] == ["e1", "e2"]

    async def test_duplicate_event_ids_in_outbox_are_kept(self, kit: Kit) -> None:
        """The outbox is not deduplicated: the same event emitted twice is delivered twice."""
        exe = new_exe("kit-1")
        await kit.store.commit(exe, [("t1", event("same")), ("t2", event("same"))])
        await kit.store.commit(exe, [("t1", event("same"))])
        entries = await kit.store.pending_outbox()
        assert [(e.target_id, e.event.id) for e in entries] == [
            ("t1", "same"),
            ("t2", "same"),
            ("t1", "same"),
        ]

    @SMOKE
    async def test_spawns_round_trip_and_ack(self, kit: Kit) -> None:
        exe = new_exe("kit-p")
        await kit.store.commit(
            exe,
            [],
            spawns=[
                ("child-1", "/fork/a", {"seed": {"n": 1}, "list": [1, "x"]}),
                ("child-2", "/fork/b", {}),
            ],
        )
        entries = await kit.store.pending_spawns()
        assert [(s.parent_id, s.child_id, s.root_path, s.context) for s in entries] == [
            ("kit-p", "child-1", "/fork/a", {"seed": {"n": 1}, "list": [1, "x"]}),
            ("kit-p", "child-2", "/fork/b", {}),
        ]
        seqs = [s.seq for s in entries]
        assert seqs == sorted(seqs) and len(set(seqs)) == 2
        await kit.store.ack_spawn(entries[0].seq)
        await kit.store.ack_spawn(entries[0].seq)
        await kit.store.ack_spawn(max(seqs) + 1000)
        assert [s.child_id for s in await kit.store.pending_spawns()] == ["child-2"]
        await kit.store.ack_spawn(entries[1].seq)
        assert await kit.store.pending_spawns() == []

    async def test_spawn_context_is_a_copy(self, kit: Kit) -> None:
        context = {"items": [1]}
        await kit.store.commit(new_exe("kit-p"), [], spawns=[("child-1", "/r", context)])
        context["items"].append(2)
        (entry,) = await kit.store.pending_spawns()
        entry.context["items"].append(3)
        (again,) = await kit.store.pending_spawns()
        assert again.context == {"items": [1]}

    async def test_spawn_fan_out(self, kit: Kit) -> None:
        """150 spawns in one commit all land, in order."""
        spawns = [(f"child-{n:03d}", f"/fork/{n}", {"n": n}) for n in range(FAN_OUT)]
        exe = new_exe("kit-p")
        await kit.store.commit(exe, [(None, event("forked"))], spawns=spawns)
        entries = await kit.store.pending_spawns()
        assert [(s.child_id, s.root_path, s.context) for s in entries] == spawns
        assert {s.parent_id for s in entries} == {"kit-p"}
        assert exe.version == 1

    async def test_spawns_limit_and_order_across_commits(self, kit: Kit) -> None:
        a, b = new_exe("kit-a"), new_exe("kit-b")
        await kit.store.commit(a, [], spawns=[("a1", "/r", {}), ("a2", "/r", {})])
        await kit.store.commit(b, [], spawns=[("b1", "/r", {})])
        await kit.store.commit(a, [], spawns=[("a3", "/r", {})])
        assert [s.child_id for s in await kit.store.pending_spawns()] == ["a1", "a2", "b1", "a3"]
        assert [s.child_id for s in await kit.store.pending_spawns(limit=3)] == ["a1", "a2", "b1"]
        assert [s.child_id for s in await kit.store.pending_spawns(limit=1)] == ["a1"]

    @pytest.mark.parametrize("method", ["pending_outbox", "pending_spawns", "due_timers"])
    async def test_sweep_limit_below_one_rejected(self, kit: Kit, method: str) -> None:
        with pytest.raises(ValueError):
            if method == "due_timers":
                await kit.store.due_timers(1.0, limit=0)
            elif method == "pending_outbox":
                await kit.store.pending_outbox(limit=0)
            else:
                await kit.store.pending_spawns(limit=0)
