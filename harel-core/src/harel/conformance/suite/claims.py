"""Claims: due work grouped by execution, leased to one owner at a time.

* a claim groups due timers, the outbox entries targeted at an execution and the spawn
  intents it wrote (untargeted entries: the group ``None``), in the documented orders;
* a held lease hides the group from every claimer (its owner included) until it expires or
  is released; renew extends it; ``LeaseLost`` for anyone but the holder;
* ``limit`` bounds the units of a claim and cuts a group spawns → outbox → timers;
* priority order with aging; a released group is claimable again (not before ``retry_at``);
* racing claimers (threads / tasks, two store objects) never get the same group;
* purge drops the group and its lease; early rows (cancelled timers) are repaired;
* bad arguments raise typed errors before anything is read;
* ``list_leases`` shows the leases held at ``now`` (owner, expiry), follows renew / release /
  purge, leaves expired ones out, orders by ``(expires_at, execution_id)`` (``None`` first
  among equals), honours ``limit``, changes nothing, and refuses bad arguments.
"""

from __future__ import annotations

import math
import time

import pytest

from harel.conformance.suite._base import SMOKE, Kit, KitBase, event, new_exe
from harel.store.contract import PRIORITY_AGING, Claim, Lease, TimerOp
from harel.store.errors import InvalidArgument, InvalidIdentifier, LeaseLost

LEASE = 30.0
RACERS = 6
RACED = 20


def _later() -> float:
    """A ``now`` at which every relay unit written so far is due (they are due from the
    moment they were written, by the writing process's clock)."""
    return time.time() + 10_000.0


def claim_content(claims: list[Claim]) -> list[tuple[object, ...]]:
    """What claims say, seqs left out (each store numbers its relay entries its own way): for
    comparing a store's claims with the memory store's over the same history."""
    return [
        (
            c.execution_id,
            c.owner,
            c.expires_at,
            c.priority,
            c.timers,
            tuple((e.target_id, e.event.id) for e in c.outbox),
            tuple((s.parent_id, s.child_id, s.root_path, repr(s.context)) for s in c.spawns),
        )
        for c in claims
    ]


def _by_group(claims: list[Claim]) -> dict[str | None, Claim]:
    groups = {claim.execution_id: claim for claim in claims}
    assert len(groups) == len(claims), f"a claim returned one group twice: {claims}"
    return groups


def _summary(claim: Claim) -> tuple[list[str], list[str], list[tuple[str, float]]]:
    return (
        [spawn.child_id for spawn in claim.spawns],
        [entry.event.id for entry in claim.outbox],
        list(claim.timers),
    )


class ClaimTests(KitBase):
    """``claim`` / ``renew`` / ``release`` and the leases behind them."""

    @SMOKE
    async def test_claim_groups_due_work_by_execution(self, kit: Kit) -> None:
        a = new_exe("kit-a", priority=1)
        await kit.store.commit(
            a,
            [("kit-b", event("b1")), (None, event("u1")), ("kit-b", event("b2"))],
            timers=[
                TimerOp.schedule("/t2", 200.0),
                TimerOp.schedule("/t1", 100.0),
                TimerOp.schedule("/never", 1e15),
            ],
            spawns=[("kit-c1", "/fork/a", {"n": 1})],
        )
        now = _later()
        claims = await kit.store.claim("w1", now, lease=LEASE, limit=100)
        groups = _by_group(claims)
        assert set(groups) == {"kit-a", "kit-b", None}, f"claimed groups: {claims}"
        assert _summary(groups["kit-a"]) == (["kit-c1"], [], [("/t1", 100.0), ("/t2", 200.0)])
        assert _summary(groups["kit-b"]) == ([], ["b1", "b2"], [])
        assert _summary(groups[None]) == ([], ["u1"], [])
        for claim in claims:
            assert claim.owner == "w1"
            assert claim.expires_at == now + LEASE
        assert groups["kit-a"].priority == 1
        spawn = groups["kit-a"].spawns[0]
        assert (spawn.parent_id, spawn.root_path, spawn.context) == ("kit-a", "/fork/a", {"n": 1})
        assert all(entry.target_id == "kit-b" for entry in groups["kit-b"].outbox)
        assert groups["kit-a"].units == 3 and groups["kit-b"].units == 2

    async def test_nothing_due_nothing_claimed(self, kit: Kit) -> None:
        await kit.store.commit(new_exe("kit-a"), [], timers=[TimerOp.schedule("/t", 500.0)])
        assert await kit.store.claim("w1", 499.0, lease=LEASE) == []
        (claim,) = await kit.store.claim("w1", 500.0, lease=LEASE)
        assert claim.timers == (("/t", 500.0),)

    @SMOKE
    async def test_a_held_lease_hides_the_group_until_it_expires(self, kit: Kit) -> None:
        await kit.store.commit(new_exe("kit-a"), [], timers=[TimerOp.schedule("/t", 100.0)])
        (first,) = await kit.store.claim("w1", 1000.0, lease=LEASE)
        assert await kit.store.claim("w2", 1000.0, lease=LEASE) == []
        assert await kit.store.claim("w1", 1000.0, lease=LEASE) == [], "the owner re-claimed"
        assert await kit.store.claim("w2", 1000.0 + LEASE - 0.5, lease=LEASE) == []
        (taken,) = await kit.store.claim("w2", 1000.0 + LEASE, lease=LEASE)
        assert taken.execution_id == "kit-a" and taken.owner == "w2"
        assert taken.timers == first.timers
        with pytest.raises(LeaseLost):
            await kit.store.release("w1", "kit-a")
        with pytest.raises(LeaseLost):
            await kit.store.renew("w1", "kit-a", 1000.0 + LEASE + 1, lease=LEASE)
        await kit.store.release("w2", "kit-a")

    async def test_release_makes_what_is_left_claimable(self, kit: Kit) -> None:
        a = new_exe("kit-a")
        await kit.store.commit(
            a,
            [("kit-a", event("e1")), ("kit-a", event("e2"))],
            timers=[TimerOp.schedule("/t1", 100.0), TimerOp.schedule("/t2", 150.0)],
        )
        now = _later()
        (claim,) = await kit.store.claim("w1", now, lease=LEASE)
        assert _summary(claim) == ([], ["e1", "e2"], [("/t1", 100.0), ("/t2", 150.0)])
        await kit.store.ack_outbox(claim.outbox[0].seq)
        await kit.store.delete_timer("kit-a", "/t1", 100.0)
        await kit.store.release("w1", "kit-a")
        (again,) = await kit.store.claim("w2", now, lease=LEASE)
        assert _summary(again) == ([], ["e2"], [("/t2", 150.0)])
        await kit.store.ack_outbox(again.outbox[0].seq)
        await kit.store.delete_timer("kit-a", "/t2", 150.0)
        await kit.store.release("w2", "kit-a")
        assert await kit.store.claim("w3", now, lease=LEASE) == []

    async def test_release_not_before_retry_at(self, kit: Kit) -> None:
        await kit.store.commit(new_exe("kit-a"), [], timers=[TimerOp.schedule("/t", 100.0)])
        await kit.store.claim("w1", 200.0, lease=LEASE)
        await kit.store.release("w1", "kit-a", retry_at=5000.0)
        assert await kit.store.claim("w2", 4999.0, lease=LEASE) == []
        (claim,) = await kit.store.claim("w2", 5000.0, lease=LEASE)
        assert claim.timers == (("/t", 100.0),)

    async def test_renew_extends_only_the_holders_unexpired_lease(self, kit: Kit) -> None:
        await kit.store.commit(new_exe("kit-a"), [], timers=[TimerOp.schedule("/t", 100.0)])
        (claim,) = await kit.store.claim("w1", 1000.0, lease=LEASE)
        assert claim.expires_at == 1000.0 + LEASE
        expires = await kit.store.renew("w1", "kit-a", 1020.0, lease=100.0)
        assert expires == 1120.0
        assert await kit.store.claim("w2", 1100.0, lease=LEASE) == [], "the renewal was ignored"
        with pytest.raises(LeaseLost) as other:
            await kit.store.renew("w2", "kit-a", 1100.0, lease=LEASE)
        assert other.value.holder == "w1"
        with pytest.raises(LeaseLost):
            await kit.store.release("w2", "kit-a")
        with pytest.raises(LeaseLost):
            await kit.store.renew("w1", "kit-a", 1120.0, lease=LEASE)  # expired at 1120
        with pytest.raises(LeaseLost):
            await kit.store.renew("w1", "kit-unknown", 1000.0, lease=LEASE)
        with pytest.raises(LeaseLost):
            await kit.store.release("w1", "kit-unknown")
        await kit.store.release("w1", "kit-a")  # expired but not taken over: still the owner's
        with pytest.raises(LeaseLost):
            await kit.store.release("w1", "kit-a")  # released already
        (back,) = await kit.store.claim("w2", 1200.0, lease=LEASE)
        assert back.owner == "w2"

    async def test_limit_bounds_units_and_cuts_a_group_in_order(self, kit: Kit) -> None:
        a = new_exe("kit-a")
        await kit.store.commit(
            a,
            [("kit-a", event(f"e{n}")) for n in range(3)],
            timers=[TimerOp.schedule(f"/t{n}", 100.0 + n) for n in range(3)],
            spawns=[(f"kit-c{n}", "/r", {}) for n in range(3)],
        )
        now = _later()
        (cut,) = await kit.store.claim("w1", now, lease=LEASE, limit=4)
        assert _summary(cut) == (["kit-c0", "kit-c1", "kit-c2"], ["e0"], [])
        for spawn in cut.spawns:
            await kit.store.ack_spawn(spawn.seq)
        await kit.store.ack_outbox(cut.outbox[0].seq)
        await kit.store.release("w1", "kit-a")
        (rest,) = await kit.store.claim("w1", now, lease=LEASE, limit=4)
        assert _summary(rest) == (
            [],
            ["e1", "e2"],
            [("/t0", 100.0), ("/t1", 101.0)],
        )

    async def test_limit_spreads_executions_over_claimers(self, kit: Kit) -> None:
        for n in range(5):
            await kit.store.commit(
                new_exe(f"kit-{n}"), [], timers=[TimerOp.schedule("/t", 100.0 + n)]
            )
        seen: list[str | None] = []
        for owner in ("w1", "w2", "w3"):
            claims = await kit.store.claim(owner, 1000.0, lease=LEASE, limit=2)
            assert sum(claim.units for claim in claims) <= 2
            seen += [claim.execution_id for claim in claims]
        assert seen == ["kit-0", "kit-1", "kit-2", "kit-3", "kit-4"], "oldest due first"

    async def test_priority_orders_claims_and_aging_bounds_it(self, kit: Kit) -> None:
        plan = {"kit-p0": (0, 1000.0), "kit-p4": (4, 1100.0), "kit-p2": (2, 1050.0)}
        plan |= {"kit-old0": (0, 0.0), "kit-new4": (4, 4 * PRIORITY_AGING + 60.0)}
        for execution_id, (priority, due) in plan.items():
            exe = new_exe(execution_id, priority=priority)
            await kit.store.commit(exe, [], timers=[TimerOp.schedule("/t", due)])
        order = []
        for n in range(len(plan)):
            (claim,) = await kit.store.claim(f"w{n}", 2000.0, lease=LEASE, limit=1)
            order.append(claim.execution_id)
        # ranks (due - 60 s * priority): old0 0, new4 60, p4 860, p2 930, p0 1000
        assert order == ["kit-old0", "kit-new4", "kit-p4", "kit-p2", "kit-p0"], order

    async def test_relays_for_one_execution_come_in_seq_order(self, kit: Kit) -> None:
        a, b = new_exe("kit-a"), new_exe("kit-b")
        await kit.store.commit(a, [("kit-t", event("a1"))])
        await kit.store.commit(b, [("kit-t", event("b1")), ("kit-u", event("b2"))])
        await kit.store.commit(a, [("kit-t", event("a2"))])
        await kit.store.commit(b, [("kit-t", event("b3"))])
        groups = _by_group(await kit.store.claim("w1", _later(), lease=LEASE))
        outbox = groups["kit-t"].outbox
        assert [entry.event.id for entry in outbox] == ["a1", "b1", "a2", "b3"]
        seqs = [entry.seq for entry in outbox]
        assert seqs == sorted(seqs)
        pending = [e.seq for e in await kit.store.pending_outbox() if e.target_id == "kit-t"]
        assert seqs == pending

    async def test_a_commit_to_a_leased_group_waits_for_the_lease(self, kit: Kit) -> None:
        a = new_exe("kit-a")
        await kit.store.commit(a, [], timers=[TimerOp.schedule("/t", 100.0)])
        now = _later()
        assert len(await kit.store.claim("w1", now, lease=LEASE)) == 1
        await kit.store.commit(new_exe("kit-b"), [("kit-a", event("late"))])
        groups = _by_group(await kit.store.claim("w2", now, lease=LEASE))
        assert "kit-a" not in groups, "a commit broke the lease"
        await kit.store.delete_timer("kit-a", "/t", 100.0)
        await kit.store.release("w1", "kit-a")
        (after,) = await kit.store.claim("w2", now, lease=LEASE)
        assert _summary(after) == ([], ["late"], [])

    async def test_cancelled_and_moved_timers_are_not_claimed(self, kit: Kit) -> None:
        a = new_exe("kit-a")
        await kit.store.commit(a, [], timers=[TimerOp.schedule("/t", 100.0)])
        await kit.store.commit(a, [], timers=[TimerOp.cancel("/t")])
        assert await kit.store.claim("w1", 200.0, lease=LEASE) == []
        await kit.store.commit(a, [], timers=[TimerOp.schedule("/t", 500.0)])
        assert await kit.store.claim("w1", 200.0, lease=LEASE) == []
        await kit.store.commit(a, [], timers=[TimerOp.schedule("/t", 300.0)])
        assert await kit.store.claim("w1", 250.0, lease=LEASE) == []
        (claim,) = await kit.store.claim("w1", 300.0, lease=LEASE)
        assert claim.timers == (("/t", 300.0),)

    async def test_purge_drops_the_group_and_its_lease(self, kit: Kit) -> None:
        for name in ("kit-a", "kit-b"):
            exe = new_exe(name)
            await kit.store.commit(
                exe, [(name, event(f"{name}-e"))], timers=[TimerOp.schedule("/t", 100.0)]
            )
        now = _later()
        assert {c.execution_id for c in await kit.store.claim("w1", now, lease=LEASE)} == {
            "kit-a",
            "kit-b",
        }
        assert await kit.store.purge("kit-a", force=True)
        with pytest.raises(LeaseLost):
            await kit.store.release("w1", "kit-a")
        await kit.store.release("w1", "kit-b")
        groups = _by_group(await kit.store.claim("w2", now + LEASE, lease=LEASE))
        assert set(groups) == {"kit-b"}, f"a purged execution's work was claimed: {groups}"

    async def test_imported_work_is_claimable(self, kit: Kit) -> None:
        a = new_exe("kit-a", priority=3)
        await kit.store.commit(a, [("kit-a", event("e1"))], timers=[TimerOp.schedule("/t", 100.0)])
        record = await kit.store.export_execution("kit-a")
        assert record is not None
        await kit.store.purge("kit-a", force=True)
        await kit.store.import_execution(record)
        (claim,) = await kit.store.claim("w1", _later(), lease=LEASE)
        assert (claim.execution_id, claim.priority) == ("kit-a", 3)
        assert _summary(claim) == ([], ["e1"], [("/t", 100.0)])

    async def test_a_lease_is_seen_by_another_store_object(self, kit: Kit) -> None:
        other = await kit.open()
        await kit.store.commit(new_exe("kit-a"), [], timers=[TimerOp.schedule("/t", 100.0)])
        (claim,) = await kit.store.claim("w1", 1000.0, lease=LEASE)
        assert await other.claim("w2", 1000.0, lease=LEASE) == []
        await other.release("w1", "kit-a")
        (again,) = await other.claim("w2", 1000.0, lease=LEASE)
        assert again.timers == claim.timers

    @SMOKE
    async def test_racing_claimers_get_disjoint_groups(self, kit: Kit) -> None:
        other = await kit.open()
        for n in range(RACED):
            await kit.store.commit(
                new_exe(f"kit-{n:02d}"), [], timers=[TimerOp.schedule("/t", 100.0 + n)]
            )
        stores = [kit.store, other]

        def claimer(index: int):  # type: ignore[no-untyped-def]
            async def run() -> list[Claim]:
                return await stores[index % 2].claim(f"w{index}", 1000.0, lease=LEASE, limit=5)

            return run

        outcomes = await kit.race([claimer(i) for i in range(RACERS)])
        errors = [o for o in outcomes if isinstance(o, Exception)]
        assert not errors, f"racing claims raised: {errors}"
        taken = [c.execution_id for claims in outcomes for c in claims]  # type: ignore[union-attr]
        assert len(taken) == len(set(taken)), f"two claimers got one group: {sorted(taken)}"
        rest = await kit.store.claim("w-last", 1000.0, lease=LEASE, limit=100)
        every = taken + [claim.execution_id for claim in rest]
        assert sorted(every) == [f"kit-{n:02d}" for n in range(RACED)]

    async def test_bad_arguments_are_refused_before_anything_is_read(self, kit: Kit) -> None:
        await kit.store.commit(new_exe("kit-a"), [], timers=[TimerOp.schedule("/t", 100.0)])
        for lease in (0, -1.0, math.nan, math.inf):
            with pytest.raises(InvalidArgument):
                await kit.store.claim("w1", 1000.0, lease=lease)
        for limit in (0, -3):
            with pytest.raises(InvalidArgument):
                await kit.store.claim("w1", 1000.0, lease=LEASE, limit=limit)
        with pytest.raises(InvalidIdentifier):
            await kit.store.claim("", 1000.0, lease=LEASE)
        with pytest.raises(TypeError):
            await kit.store.claim("w1", "soon", lease=LEASE)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument):
            await kit.store.renew("w1", "kit-a", 1000.0, lease=0)
        with pytest.raises(InvalidArgument):
            await kit.store.release("w1", "kit-a", retry_at=math.nan)
        (claim,) = await kit.store.claim("w1", 1000.0, lease=LEASE)
        assert claim.timers == (("/t", 100.0),), "a refused claim took the lease"

    @SMOKE
    async def test_list_leases_shows_who_holds_what_until_when(self, kit: Kit) -> None:
        for name in ("kit-a", "kit-b"):
            await kit.store.commit(new_exe(name), [], timers=[TimerOp.schedule("/t", 100.0)])
        await kit.store.commit(new_exe("kit-later"), [], timers=[TimerOp.schedule("/t", 5000.0)])
        assert await kit.store.list_leases(1000.0) == [], "a free row was listed as a lease"
        claims = await kit.store.claim("w1", 1000.0, lease=LEASE)
        assert {claim.execution_id for claim in claims} == {"kit-a", "kit-b"}
        assert await kit.store.list_leases(1000.0) == [
            Lease(execution_id="kit-a", owner="w1", expires_at=1000.0 + LEASE),
            Lease(execution_id="kit-b", owner="w1", expires_at=1000.0 + LEASE),
        ]

    async def test_list_leases_follows_renew_and_release(self, kit: Kit) -> None:
        await kit.store.commit(new_exe("kit-a"), [], timers=[TimerOp.schedule("/t", 100.0)])
        await kit.store.claim("w1", 1000.0, lease=LEASE)
        assert await kit.store.renew("w1", "kit-a", 1020.0, lease=100.0) == 1120.0
        (renewed,) = await kit.store.list_leases(1100.0)
        assert (renewed.execution_id, renewed.owner, renewed.expires_at) == ("kit-a", "w1", 1120.0)
        await kit.store.release("w1", "kit-a")
        assert await kit.store.list_leases(1100.0) == [], "a released lease was listed"

    async def test_an_expired_lease_is_not_listed_though_nobody_took_it(self, kit: Kit) -> None:
        await kit.store.commit(new_exe("kit-a"), [], timers=[TimerOp.schedule("/t", 100.0)])
        await kit.store.claim("w1", 1000.0, lease=LEASE)
        (held,) = await kit.store.list_leases(1000.0 + LEASE - 0.5)
        assert (held.execution_id, held.owner) == ("kit-a", "w1")
        assert await kit.store.list_leases(1000.0 + LEASE) == [], "listed at its expiry"
        assert await kit.store.list_leases(1e9) == [], "an expired lease was listed"
        await kit.store.release("w1", "kit-a")  # not taken over: still the owner's to release

    async def test_list_leases_orders_by_expiry_and_honours_limit(self, kit: Kit) -> None:
        for name, priority, due in (("kit-a", 0, 100.0), ("kit-b", 0, 200.0), ("kit-c", 4, 300.0)):
            exe = new_exe(name, priority=priority)
            await kit.store.commit(exe, [], timers=[TimerOp.schedule("/t", due)])
        # one group due per claim; kit-c is in another priority tier than the others
        for owner, now, lease, name in (
            ("w2", 150.0, 870.0, "kit-a"),
            ("w3", 250.0, 800.0, "kit-b"),
            ("w1", 350.0, 700.0, "kit-c"),
        ):
            (claim,) = await kit.store.claim(owner, now, lease=lease)
            assert claim.execution_id == name, claim
        await kit.store.commit(new_exe("kit-e"), [(None, event("u1"))])
        (untargeted,) = await kit.store.claim("w0", 1000.0, lease=50.0)
        assert untargeted.execution_id is None, untargeted
        expected = [
            Lease(execution_id="kit-a", owner="w2", expires_at=1020.0),
            Lease(execution_id=None, owner="w0", expires_at=1050.0),
            Lease(execution_id="kit-b", owner="w3", expires_at=1050.0),
            Lease(execution_id="kit-c", owner="w1", expires_at=1050.0),
        ]
        assert await kit.store.list_leases(1000.0) == expected
        assert await kit.store.list_leases(1000.0, limit=100) == expected
        assert await kit.store.list_leases(1000.0, limit=2) == expected[:2]
        assert await kit.store.list_leases(1000.0, limit=1) == expected[:1]
        assert await kit.store.list_leases(1020.0) == expected[1:], "kit-a expired at 1020"

    async def test_purge_drops_a_listed_lease(self, kit: Kit) -> None:
        for name in ("kit-a", "kit-b"):
            await kit.store.commit(new_exe(name), [], timers=[TimerOp.schedule("/t", 100.0)])
        await kit.store.claim("w1", 1000.0, lease=LEASE)
        assert await kit.store.purge("kit-a", force=True)
        leases = await kit.store.list_leases(1000.0)
        assert [lease.execution_id for lease in leases] == ["kit-b"], leases

    async def test_list_leases_changes_nothing(self, kit: Kit) -> None:
        a = new_exe("kit-a")
        await kit.store.commit(a, [], timers=[TimerOp.schedule("/t", 100.0)])
        (claim,) = await kit.store.claim("w1", 1000.0, lease=LEASE)
        before = await kit.store.list_leases(1000.0)
        for _ in range(3):
            assert await kit.store.list_leases(1000.0, limit=1) == before
        stored = await kit.store.load("kit-a")
        assert stored is not None and stored.version == 1, "list_leases wrote the execution"
        assert await kit.store.claim("w2", 1000.0, lease=LEASE) == [], "the lease was dropped"
        await kit.store.commit(new_exe("kit-b"), [], timers=[TimerOp.schedule("/t", 100.0)])
        (other,) = await kit.store.claim("w2", 1000.0, lease=LEASE)
        assert other.execution_id == "kit-b"
        assert await kit.store.renew("w1", "kit-a", 1010.0, lease=LEASE) == 1010.0 + LEASE
        again = _by_group(await kit.store.claim("w3", 1010.0 + LEASE, lease=LEASE))
        assert again["kit-a"].timers == claim.timers

    async def test_list_leases_refuses_bad_arguments(self, kit: Kit) -> None:
        await kit.store.commit(new_exe("kit-a"), [], timers=[TimerOp.schedule("/t", 100.0)])
        await kit.store.claim("w1", 1000.0, lease=LEASE)
        for limit in (0, -3, True, 2.5):
            with pytest.raises(InvalidArgument):
                await kit.store.list_leases(1000.0, limit=limit)  # type: ignore[arg-type]
        for now in (math.nan, math.inf, -math.inf):
            with pytest.raises(InvalidArgument):
                await kit.store.list_leases(now)
        with pytest.raises(TypeError):
            await kit.store.list_leases("soon")  # type: ignore[arg-type]
        (held,) = await kit.store.list_leases(1000.0)
        assert (held.execution_id, held.owner) == ("kit-a", "w1")
