"""Claims on Redis against the reference: the same random histories run on the memory store
and on Redis give the same claims, renewals, releases and ``LeaseLost`` errors; plus what only
Redis has (its keys, racing claimers over one script, the async twin, touch-free commits)."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from harel.conformance.suite.claims import claim_content
from harel.model import Event, Execution
from harel.store.common import commit as commit_module
from harel.store.common import plan_store as plan_store_module
from harel.store.common.claims import relay_due
from harel.store.contract import Claim, TimerOp
from harel.store.errors import AlreadyProcessed, LeaseLost
from harel.store.memory import DictStore
from harel_store_redis import RedisStore, _commit, _scripts
from harel_store_redis._keys import UNTARGETED, owner_prefix
from harel_store_redis.testing import RedisHarness

pytestmark = pytest.mark.anyio

IDS = ("a", "b", "c:{x} é", "d")
OWNERS = ("w1", "w2", "w 3")


class Clock:
    """``time`` as the commit envelope and ``release`` see it: a settable ``time()``."""

    def __init__(self) -> None:
        self.now = 1000.0

    def time(self) -> float:
        return self.now

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(commit_module, "time", fake)
    monkeypatch.setattr(plan_store_module, "time", fake)
    return fake


def shape(claims: list[Claim]) -> list[tuple[Any, ...]]:
    """Claims without seqs (see :func:`harel.conformance.suite.claims.claim_content`)."""
    return claim_content(claims)


def outcome(call: Callable[[], Any]) -> Any:
    try:
        value = call()
    except LeaseLost as exc:
        return ("LeaseLost", exc.execution_id, exc.owner, exc.holder, exc.why)
    return shape(value) if isinstance(value, list) else value


class Pair:
    """The same operations on the memory store and on Redis (``priorities``: what commits
    draw their execution's priority from)."""

    def __init__(self, redis_store: RedisStore, priorities: tuple[int, ...] = (0, 1, 2, 3, 4)):
        self.stores = (DictStore(), redis_store)
        self.exes: list[dict[str, Execution]] = [{}, {}]
        self.events = 0
        self.priorities = priorities

    def both(self, name: str, *args: Any, **knobs: Any) -> None:
        results = [outcome(lambda s=s: getattr(s, name)(*args, **knobs)) for s in self.stores]
        assert results[1] == results[0], (name, args, knobs)

    def commit(self, rng: random.Random, execution_id: str, now: float) -> None:
        priority = rng.choice(self.priorities)
        emits = []
        for _ in range(rng.choice((0, 0, 1, 2))):
            self.events += 1
            target = rng.choice((*IDS, None))
            emits.append((target, Event(id=f"e{self.events}", kind="Go")))
        timers = []
        for path in rng.sample(("/t1", "/t2", "/t3", "/t4"), rng.randrange(4)):
            if rng.random() < 0.25:
                timers.append(TimerOp.cancel(path))
            else:
                at = rng.choice((now - 10.0, now + 2.0, now + 20.0, now + 60.0, -0.0))
                timers.append(TimerOp.schedule(path, at))
        spawns = [(f"kid{self.events}-{n}", "/r", {}) for n in range(rng.choice((0, 0, 0, 1)))]
        mark = f"m{self.events}" if rng.random() < 0.3 else None  # sometimes one seen before
        results: list[tuple[Any, ...]] = []
        for exes, store in zip(self.exes, self.stores, strict=True):
            exe = exes.setdefault(execution_id, Execution(id=execution_id, definition_id="f"))
            exe.priority = priority
            try:
                store.commit(exe, emits, mark, tuple(timers), spawns)
                results.append(("stored", exe.version))
            except AlreadyProcessed as exc:  # nothing written, on both alike
                results.append(("AlreadyProcessed", exc.event_id, exc.expected, exc.found))
        assert results[1] == results[0], (execution_id, mark)

    def ack_some(self, rng: random.Random) -> None:
        n = rng.randrange(3)
        for store in self.stores:
            for entry in store.pending_outbox()[:n]:
                store.ack_outbox(entry.seq)
            for spawn in store.pending_spawns()[:n]:
                store.ack_spawn(spawn.seq)


def run_history(
    pair: Pair, clock: Clock, seed: int, steps: int, limits: tuple[int, ...] = (1, 2, 3, 5, 100)
) -> int:
    rng = random.Random(seed)
    claimed = 0
    for _ in range(steps):
        clock.now += rng.choice((0.0, 0.5, 3.0, 8.0))
        roll = rng.random()
        key = rng.choice((*IDS, None))
        owner = rng.choice(OWNERS)
        if roll < 0.35:
            pair.commit(rng, rng.choice(IDS), clock.now)
        elif roll < 0.6:
            limit = rng.choice(limits)
            lease = rng.choice((5.0, 30.0))
            results = [s.claim(owner, clock.now, lease=lease, limit=limit) for s in pair.stores]
            assert shape(results[1]) == shape(results[0]), (seed, clock.now, limit)
            claimed += len(results[0])
        elif roll < 0.72:
            pair.both("renew", owner, key, clock.now, lease=rng.choice((5.0, 20.0)))
        elif roll < 0.86:
            retry_at = rng.choice((None, None, clock.now + 10.0, 0.0))
            pair.both("release", owner, key, retry_at=retry_at)
        elif roll < 0.95:
            pair.ack_some(rng)
        else:
            victim = rng.choice(IDS)
            pair.both("purge", victim, force=True)
            for exes in pair.exes:
                exes.pop(victim, None)
    for now in (clock.now + 100.0, clock.now + 1000.0):  # drain: everything left, in order
        pair.both("claim", "drain", now, limit=1000)
    return claimed


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_histories_match_the_memory_store(
    harel_harness: RedisHarness, clock: Clock, seed: int
) -> None:
    pair = Pair(harel_harness.open_sync())
    assert run_history(pair, clock, seed, 160) > 10  # the histories do claim things


@pytest.mark.parametrize("shards", [1, 2, 3])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_sharded_random_histories_match_the_memory_store(
    redis_url: str, clock: Clock, seed: int, shards: int
) -> None:
    """The sharded layout gives the memory store's claims too, where a claim sees every ready
    row (a limit of at least the groups' count) and every execution has one priority: then
    neither the per-shard bound of a claim's reads nor the priority of a group's rows in other
    shards (the emitter's until the group is claimed) can show (README, "Sharded layout")."""
    harness = RedisHarness(f"{redis_url}{'&' if '?' in redis_url else '?'}shards={shards}")
    try:
        pair = Pair(harness.open_sync(), priorities=(2,))
        assert run_history(pair, clock, seed, 160, limits=(5, 100)) > 10
    finally:
        harness.destroy()


def test_work_rows_live_in_one_hash_and_five_zsets(
    harel_harness: RedisHarness, clock: Clock
) -> None:
    store = harel_harness.open_sync()
    exe = Execution(id="p:{1}", definition_id="f", priority=3)
    store.commit(exe, [(None, Event(id="u", kind="Go"))], timers=(TimerOp.schedule("/t", 7.5),))
    keys = harel_harness.keys
    member, relay_at = owner_prefix("p:{1}"), relay_due(clock.now)
    dump = harel_harness.dump()
    assert dump[keys.work] == {member: b"3 7.5 ", UNTARGETED: b"3 %r " % relay_at}
    assert dump[keys.ready_3] == [(UNTARGETED, relay_at), (member, 7.5)]
    assert all(key not in dump for key in (keys.ready_0, keys.ready_1, keys.ready_2))
    [claim] = [c for c in store.claim("w", 10.0, limit=10) if c.execution_id == "p:{1}"]
    assert claim.timers == (("/t", 7.5),) and claim.priority == 3
    assert harel_harness.dump()[keys.work][member] == b"3 %r w" % claim.expires_at
    assert store.purge("p:{1}", force=True)
    dump = harel_harness.dump()
    lease = b"3 %r w" % claim.expires_at  # the untargeted group was claimed too: it stays
    assert dump[keys.work] == {UNTARGETED: lease}
    assert dump[keys.ready_3] == [(UNTARGETED, claim.expires_at)]


def test_commits_that_touch_no_work_row_send_no_work_key(harel_harness: RedisHarness) -> None:
    store = harel_harness.open_sync()
    exe = Execution(id="quiet", definition_id="f")
    store.save(exe)
    sent: list[tuple[bytes, ...]] = []
    real = _commit.run_script

    def spy(script: Any, keys: Any, args: Any, **knobs: Any) -> Any:
        sent.append((script.name, *keys))
        return (yield from real(script, keys, args, **knobs))

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_commit, "run_script", spy)
        store.save(exe)  # state only
        store.commit(exe, [], processed_event_id="m1", timers=(TimerOp.cancel("/x"),))
        store.commit(exe, [], timers=(TimerOp.schedule("/y", 5.0),))
    work = harel_harness.keys.work
    assert sent[0] == (
        _scripts.COMMIT_STATE.name,
        harel_harness.keys.execution("quiet"),
        harel_harness.keys.summaries,
    )
    assert work not in sent[1] and sent[1][0] == _scripts.COMMIT.name
    assert sent[2][-6:] == harel_harness.keys.work_keys  # a timer armed: the row is touched
    assert harel_harness.dump()[work] == {owner_prefix("quiet"): b"0 5.0 "}


def test_racing_claimers_take_disjoint_groups(harel_harness: RedisHarness) -> None:
    store = harel_harness.open_sync()
    for n in range(40):
        exe = Execution(id=f"r{n}", definition_id="f", priority=n % 5)
        store.commit(exe, [], timers=(TimerOp.schedule("/t", float(n)),))
    barrier = threading.Barrier(4)

    def claimer(owner: str) -> list[Claim]:
        mine = harel_harness.open_sync()
        barrier.wait()
        taken: list[Claim] = []
        while batch := mine.claim(owner, 100.0, limit=3):
            taken += batch
        return taken

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(claimer, ["k1", "k2", "k3", "k4"]))
    groups = [c.execution_id for taken in results for c in taken]
    assert sorted(groups) == sorted(f"r{n}" for n in range(40))  # each group exactly once


async def test_the_async_store_claims_renews_and_releases(harel_harness: RedisHarness) -> None:
    store = await harel_harness.open_async()
    exe = Execution(id="as", definition_id="f", priority=1)
    await store.commit(exe, [("as", Event(id="self", kind="Go"))])
    [claim] = await store.claim("w", time.time() + 1, lease=30.0)
    assert claim.execution_id == "as" and [e.event.id for e in claim.outbox] == ["self"]
    assert await store.renew("w", "as", claim.expires_at - 1, lease=60.0) == claim.expires_at + 59
    with pytest.raises(LeaseLost) as info:
        await store.release("other", "as")
    assert info.value.holder == "w"
    await store.release("w", "as", retry_at=time.time() + 3600)
    assert await store.claim("w", time.time() + 1) == []
    assert [c.execution_id for c in await store.claim("w", time.time() + 7200)] == ["as"]
