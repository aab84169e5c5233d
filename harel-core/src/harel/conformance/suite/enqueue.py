"""Enqueue: a producer's one-write hand-off of an event to the fleet.

* ``enqueue`` writes one outbox entry for the target and nothing else, and returns its seq;
* the entry is relay work: listed by ``pending_outbox``, in the target's claim group (due at
  once, in write order with emitted entries), dropped by ``purge``, carried by records;
* ``priority`` is the group's when the enqueue creates it; an existing group keeps its own;
* a held lease hides what is enqueued to its group until released;
* the store does not read the target (an entry for a missing execution is stored);
* racing enqueues get distinct seqs and all are kept;
* bad input is refused with a typed error and nothing written.
"""

from __future__ import annotations

import pytest

from harel.conformance.suite._base import SMOKE, Kit, KitBase, event, new_exe, snapshot
from harel.conformance.suite.commits import _Unencodable
from harel.model import Status
from harel.store.common.limits import MAX_DOCUMENT_BYTES
from harel.store.contract import TimerOp
from harel.store.errors import InvalidArgument, InvalidIdentifier, InvalidPayload, PayloadTooLarge

LEASE = 30.0
LATER = 1e12
"""A ``now`` at which every relay unit written so far is due."""


class EnqueueTests(KitBase):
    """``enqueue`` and the relay work it writes."""

    @SMOKE
    async def test_enqueue_writes_one_entry_and_nothing_else(self, kit: Kit) -> None:
        store = kit.store
        target = new_exe("kit-t")
        await store.save(target)
        before = await store.load("kit-t")
        seq = await store.enqueue("kit-t", event("q1", n=1))
        assert isinstance(seq, int) and not isinstance(seq, bool)
        (entry,) = await store.pending_outbox()
        assert (entry.seq, entry.target_id, entry.event) == (seq, "kit-t", event("q1", n=1))
        assert await store.load("kit-t") == before, "enqueue changed the target's record"
        assert not await store.is_processed("kit-t", "q1"), "enqueue recorded a dedupe mark"
        assert await store.due_timers(LATER) == []
        assert await store.pending_spawns() == []

    async def test_enqueued_entries_keep_write_order_with_emits(self, kit: Kit) -> None:
        store = kit.store
        a = new_exe("kit-a")
        await store.commit(a, [("kit-b", event("e1"))])
        first = await store.enqueue("kit-b", event("e2"))
        await store.commit(a, [("kit-b", event("e3"))])
        second = await store.enqueue("kit-b", event("e4"))
        assert second > first
        outbox = await store.pending_outbox()
        assert [e.event.id for e in outbox] == ["e1", "e2", "e3", "e4"]
        assert [e.seq for e in outbox] == sorted(e.seq for e in outbox)
        (claim,) = await store.claim("w1", LATER, lease=LEASE)
        assert claim.execution_id == "kit-b"
        assert [e.event.id for e in claim.outbox] == ["e1", "e2", "e3", "e4"]

    @SMOKE
    async def test_enqueued_work_joins_the_targets_group(self, kit: Kit) -> None:
        store = kit.store
        await store.commit(new_exe("kit-t"), [], timers=[TimerOp.schedule("/t", 100.0)])
        await store.enqueue("kit-t", event("q1"))
        (claim,) = await store.claim("w1", 1000.0, lease=LEASE)
        assert claim.execution_id == "kit-t"
        assert claim.timers == (("/t", 100.0),)
        assert [e.event.id for e in claim.outbox] == ["q1"]
        assert claim.units == 2

    async def test_enqueued_work_is_due_at_once(self, kit: Kit) -> None:
        """Relay work is due whatever clock the claimer passes (a fake clock at 0 included)."""
        await kit.store.enqueue("kit-t", event("q1"))
        (claim,) = await kit.store.claim("w1", 0.0, lease=LEASE)
        assert [e.event.id for e in claim.outbox] == ["q1"]

    async def test_a_held_lease_hides_what_is_enqueued(self, kit: Kit) -> None:
        store = kit.store
        await store.enqueue("kit-t", event("q1"))
        (first,) = await store.claim("w1", 1000.0, lease=LEASE)
        await store.enqueue("kit-t", event("q2"))
        assert await store.claim("w2", 1000.0, lease=LEASE) == [], "the lease did not hold"
        await store.ack_outbox(first.outbox[0].seq)
        await store.release("w1", "kit-t")
        (again,) = await store.claim("w2", 1000.0, lease=LEASE)
        assert [e.event.id for e in again.outbox] == ["q2"]

    async def test_priority_is_the_new_groups_and_an_existing_group_keeps_its_own(
        self, kit: Kit
    ) -> None:
        store = kit.store
        await store.enqueue("kit-low", event("low"), priority=0)
        await store.enqueue("kit-high", event("high"), priority=4)
        first = await store.claim("w1", LATER, lease=LEASE, limit=1)
        assert [(c.execution_id, c.priority) for c in first] == [("kit-high", 4)]
        (low,) = await store.claim("w1", LATER, lease=LEASE, limit=1)
        assert (low.execution_id, low.priority) == ("kit-low", 0)

        own = new_exe("kit-own", priority=2)
        await store.commit(own, [], timers=[TimerOp.schedule("/t", 100.0)])
        await store.enqueue("kit-own", event("q-own"), priority=4)
        (claim,) = await store.claim("w2", LATER, lease=LEASE)
        assert (claim.execution_id, claim.priority) == ("kit-own", 2)

    async def test_a_missing_target_is_not_read(self, kit: Kit) -> None:
        await kit.store.enqueue("kit-nobody", event("q1"))
        (entry,) = await kit.store.pending_outbox()
        assert (entry.target_id, entry.event.id) == ("kit-nobody", "q1")
        assert await kit.store.load("kit-nobody") is None

    async def test_purge_drops_enqueued_entries_and_records_carry_them(self, kit: Kit) -> None:
        store = kit.store
        done = new_exe("kit-done", status=Status.DONE)
        await store.save(done)
        await store.enqueue("kit-done", event("q1", v=[1, 2]))
        await store.enqueue("kit-other", event("q2"))
        record = await store.export_execution("kit-done")
        assert record is not None
        assert [(e.target_id, e.event) for e in record.outbox] == [
            ("kit-done", event("q1", v=[1, 2]))
        ]
        assert await store.purge("kit-done")
        assert [e.event.id for e in await store.pending_outbox()] == ["q2"]
        groups = {c.execution_id for c in await store.claim("w1", LATER, lease=LEASE)}
        assert groups == {"kit-other"}, f"a purged target's enqueued work was claimed: {groups}"

    async def test_racing_enqueues_get_distinct_seqs(self, kit: Kit) -> None:
        other = await kit.open()
        stores = [kit.store, other] * 4
        outcomes = await kit.race(
            [
                lambda s=s, n=n: s.enqueue(f"kit-r{n % 3}", event(f"r{n}"))  # type: ignore[misc]
                for n, s in enumerate(stores)
            ]
        )
        errors = [o for o in outcomes if isinstance(o, Exception)]
        assert not errors, errors
        assert len(set(outcomes)) == len(stores), f"two enqueues got one seq: {outcomes}"
        outbox = await kit.store.pending_outbox()
        assert sorted(e.event.id for e in outbox) == sorted(f"r{n}" for n in range(len(stores)))
        assert {e.seq for e in outbox} == set(outcomes)

    @pytest.mark.parametrize(
        "case",
        [
            "empty id",
            "nul id",
            "not an event",
            "priority 5",
            "priority -1",
            "priority str",
            "priority bool",
            "unencodable",
            "too large",
        ],
    )
    async def test_bad_input_is_refused_and_writes_nothing(self, kit: Kit, case: str) -> None:
        store = kit.store
        target, item, priority, error = "kit-t", event("q1"), 0, InvalidArgument
        expected: type[Exception]
        if case == "empty id":
            target, expected = "", InvalidIdentifier
        elif case == "nul id":
            target, expected = "kit\x00t", InvalidIdentifier
        elif case == "not an event":
            item, expected = {"kind": "Go"}, TypeError  # type: ignore[assignment]
        elif case in ("priority 5", "priority -1"):
            priority, expected = int(case.split()[1]), error
        elif case == "priority str":
            priority, expected = "1", TypeError  # type: ignore[assignment]
        elif case == "priority bool":
            priority, expected = True, TypeError
        elif case == "unencodable":
            item, expected = event("q1", bad=_Unencodable()), InvalidPayload
        else:
            item, expected = event("q1", blob="x" * MAX_DOCUMENT_BYTES), PayloadTooLarge
        before = await snapshot(store, ["kit-t"])
        with pytest.raises(expected):
            await store.enqueue(target, item, priority=priority)
        assert await snapshot(store, ["kit-t"]) == before
        assert await store.pending_outbox() == []
        assert await store.claim("w1", LATER, lease=LEASE) == []
