"""What only the sharded layout has (``?shards=N``): where keys and entries live, the shard
clock's seqs and cuts, leases over rows in several shards, records moving between layouts,
and the layout record (on the shared server; the cluster runs are in test_cluster.py)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import parse_qsl, urlencode

import pytest
import redis
from harel.model import Event, Execution
from harel.store.common.records import record_digest
from harel.store.contract import TimerOp
from harel.store.errors import StoreConfigError
from harel_store_redis import RedisStore
from harel_store_redis._exists import store_exists
from harel_store_redis._keys import stream_id
from harel_store_redis._plan import RedisPlan
from harel_store_redis._shards import SHARD_MASK, SLOTS, ShardMap, key_slot, shard_labels, shard_of
from harel_store_redis.testing import RedisHarness, with_prefix


def sharded(url: str, shards: int = 3) -> str:
    """``url`` asking for the sharded layout with ``shards`` shards."""
    return f"{url}{'&' if '?' in url else '?'}shards={shards}"


def without_shards(url: str) -> str:
    """``url`` without its ``shards`` knob."""
    base, _, query = url.partition("?")
    pairs = [(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if k != "shards"]
    return f"{base}?{urlencode(pairs)}" if pairs else base


@pytest.fixture
def harness(redis_url: str) -> Iterator[RedisHarness]:
    """A fresh namespace in the sharded layout with three shards."""
    made = RedisHarness(sharded(redis_url))
    yield made
    made.destroy()


def ids_per_shard(count: int, shards: int = 3) -> list[list[str]]:
    """``count`` execution ids living in each of ``shards`` shards."""
    found: list[list[str]] = [[] for _ in range(shards)]
    n = 0
    while any(len(ids) < count for ids in found):
        candidate = f"x{n}"
        if len(found[shard_of(candidate, shards)]) < count:
            found[shard_of(candidate, shards)].append(candidate)
        n += 1
    return found


def ev(event_id: str) -> Event:
    return Event(id=event_id, kind="Go")


# -- where things live -------------------------------------------------------------------------


@pytest.mark.parametrize("count", [1, 2, 3, 4, 6, 16, 64])
def test_shard_tags_land_in_their_share_of_the_slots(count: int) -> None:
    labels = shard_labels(count)
    assert len(set(labels)) == count
    for shard, label in enumerate(labels):
        slot = key_slot(b"{" + label + b"}")
        assert shard * SLOTS // count <= slot < (shard + 1) * SLOTS // count


@pytest.mark.parametrize(
    "key", [b"harel:{0.1}x:a", b"plain", b"{}x", b"a{b}c{d}", b"p:{3.7}own", "é{ü}".encode()]
)
def test_key_slots_are_the_clusters(key: bytes) -> None:
    from redis.crc import key_slot as redis_key_slot

    assert key_slot(key) == redis_key_slot(key)


def test_an_execution_and_what_it_writes_stay_in_its_shard(harness: RedisHarness) -> None:
    store = harness.open_sync()
    shards = ShardMap.of(harness.keys, 3)
    ids = ids_per_shard(2)
    for home, (first, second) in enumerate(ids):
        exe = Execution(id=first, definition_id="d")
        target = ids[(home + 1) % 3][0]  # an execution of another shard
        store.commit(
            exe,
            [(target, ev(f"to-{target}")), (None, ev(f"u-{first}"))],
            processed_event_id="in",
            timers=(TimerOp.schedule("/t", 5.0),),
            spawns=[(second, "/r", {})],
            trace={"step": 1},
        )
    keys = harness.all_keys()
    labels = shard_labels(3)
    for key in keys:
        if key in (harness.keys.layout, harness.keys.schema):
            continue
        assert any(key.startswith(shard.prefix) for shard in shards.shards), key
    for home, (first, _) in enumerate(ids):
        own = [k for k in keys if first.encode() in k]  # its hash and trace
        assert own and all(b"{" + labels[home] + b"}" in k for k in own)
    # every entry names the shard of the commit that wrote it, whatever its target
    for entry in store.pending_outbox():
        writer = entry.event.id.rsplit("-", 1)[1] if entry.target_id is None else None
        shard = entry.seq & SHARD_MASK
        if writer is not None:
            assert shard == shards.home(writer)
        else:
            assert shard == (shards.home(entry.target_id or "") - 1) % 3
    for spawn in store.pending_spawns():
        assert spawn.seq & SHARD_MASK == shards.home(spawn.parent_id)


def test_seqs_follow_commit_order_across_shards(harness: RedisHarness) -> None:
    store = harness.open_sync()
    ids = ids_per_shard(1)
    writers = [Execution(id=ids[n % 3][0], definition_id="d") for n in range(3)]
    for n in range(30):
        store.commit(writers[n % 3], [(None, ev(f"e{n}"))])
    entries = store.pending_outbox()
    assert [e.event.id for e in entries] == [f"e{n}" for n in range(30)]
    assert [e.seq for e in entries] == sorted(e.seq for e in entries)
    assert len({e.seq & SHARD_MASK for e in entries}) == 3


def test_a_store_object_orders_its_writes_after_a_clock_that_ran_ahead(
    harness: RedisHarness,
) -> None:
    """A commit with many relay entries runs its shard's clock past the server's time; the
    store object carries the highest seq it wrote into its next write in any shard."""
    store = harness.open_sync()
    a_id, b_id = ids_per_shard(1)[0][0], ids_per_shard(1)[1][0]
    store.commit(
        Execution(id=a_id, definition_id="d"), [], spawns=[(f"k{n}", "/r", {}) for n in range(400)]
    )
    store.commit(Execution(id=b_id, definition_id="d"), [], spawns=[("last", "/r", {})])
    spawns = store.pending_spawns()
    assert [s.child_id for s in spawns] == [*(f"k{n}" for n in range(400)), "last"]


def test_a_shard_clock_ahead_of_the_others_holds_its_entries_back_for_one_sweep(
    harness: RedisHarness,
) -> None:
    """A sweep returns only entries up to the lowest shard's cut (nothing below it can appear
    later); it lifts its store object's floor to the highest, so its next sweep lifts every
    shard there and returns them."""
    writer = harness.open_sync()
    shards = ShardMap.of(harness.keys, 3)
    ahead = ids_per_shard(1)[1][0]
    future = stream_id(int((time.time() + 3600) * 1000) << 20)
    assert future is not None
    with redis.Redis(**harness.options.client_kwargs()) as client:
        client.hset(shards.shards[1].work, b"clock", future)
    writer.commit(Execution(id=ahead, definition_id="d"), [(None, ev("early-bird"))])
    reader = harness.open_sync()  # a fresh floor
    assert reader.pending_outbox() == []
    assert [e.event.id for e in reader.pending_outbox()] == ["early-bird"]
    assert [c.execution_id for c in reader.claim("w", 1.0)] == [None]


# -- leases over rows in several shards -----------------------------------------------------------


def test_a_group_with_entries_in_every_shard_is_leased_whole(harness: RedisHarness) -> None:
    store, other = harness.open_sync(), harness.open_sync()
    ids = ids_per_shard(2)
    target = ids[0][1]
    emitters = [Execution(id=ids[n][0], definition_id="d") for n in range(3)]
    for n in range(6):
        store.commit(emitters[n % 3], [(target, ev(f"e{n}"))])
    (claim,) = store.claim("w1", 1000.0, lease=30.0)
    assert claim.execution_id == target
    assert [e.event.id for e in claim.outbox] == [f"e{n}" for n in range(6)]
    # written while the lease holds, in a shard without a row of the group yet: hidden too
    store.commit(Execution(id=ids[2][1], definition_id="d"), [(target, ev("late"))])
    assert other.claim("w2", 1000.0, lease=30.0) == []
    for entry in claim.outbox:
        store.ack_outbox(entry.seq)
    other.release("w1", target, retry_at=2000.0)
    assert other.claim("w2", 1999.0) == []
    (again,) = other.claim("w2", 2000.0)
    assert [e.event.id for e in again.outbox] == ["late"]


def test_the_limit_cuts_a_group_spread_over_shards_in_seq_order(harness: RedisHarness) -> None:
    store = harness.open_sync()
    ids = ids_per_shard(2)
    target = ids[1][1]
    emitters = [Execution(id=ids[n][0], definition_id="d") for n in range(3)]
    for n in range(9):
        store.commit(emitters[n % 3], [(target, ev(f"e{n}"))])
    (first,) = store.claim("w", 1000.0, limit=4)
    assert [e.event.id for e in first.outbox] == ["e0", "e1", "e2", "e3"]
    for entry in first.outbox:
        store.ack_outbox(entry.seq)
    store.release("w", target)
    (rest,) = store.claim("w", 1000.0, limit=100)
    assert [e.event.id for e in rest.outbox] == [f"e{n}" for n in range(4, 9)]


def test_purge_and_export_reach_every_shard(harness: RedisHarness) -> None:
    store = harness.open_sync()
    ids = ids_per_shard(2)
    target = ids[0][1]
    done = Execution(id=target, definition_id="d", status="DONE")
    store.save(done)
    for n in range(3):
        store.commit(Execution(id=ids[n][0], definition_id="d"), [(target, ev(f"e{n}"))])
    record = store.export_execution(target)
    assert record is not None
    assert [e.event.id for e in record.outbox] == ["e0", "e1", "e2"]
    assert store.purge(target)
    assert harness.footprint(target) == []
    assert store.pending_outbox() == []


@pytest.mark.parametrize(("source_shards", "destination_shards"), [(None, 3), (3, None), (2, 5)])
def test_records_move_between_layouts_unchanged(
    redis_url: str, source_shards: int | None, destination_shards: int | None
) -> None:
    def namespace(shards: int | None) -> RedisHarness:
        return RedisHarness(redis_url if shards is None else sharded(redis_url, shards))

    source, destination = namespace(source_shards), namespace(destination_shards)
    try:
        store = source.open_sync()
        exe = Execution(id="m-1", definition_id="d", priority=2)
        store.commit(
            exe,
            [("m-1", ev("self")), ("m-2", ev("other"))],
            processed_event_id="in",
            timers=(TimerOp.schedule("/t", 12.5),),
            spawns=[("kid", "/r", {"n": 1})],
            trace={"step": 1},
        )
        store.commit(Execution(id="m-3", definition_id="d"), [("m-1", ev("from-3"))])
        record = store.export_execution("m-1")
        assert record is not None and len(record.outbox) == 2
        moved = destination.open_sync()
        moved.import_execution(record)
        again = moved.export_execution("m-1")
        assert again is not None and record_digest(again) == record_digest(record)
    finally:
        source.destroy()
        destination.destroy()


# -- the layout record -----------------------------------------------------------------------------


def test_the_layout_records_version_5_and_its_shard_count(harness: RedisHarness) -> None:
    harness.open_sync()
    with redis.Redis(**harness.options.client_kwargs()) as client:
        layout = client.hgetall(harness.keys.layout)
        assert layout[b"v"] == b"5" and layout[b"shards"] == b"3"
        assert layout[b"by"].startswith(b"harel-store-redis")
        assert client.get(harness.keys.schema) == b"5"
    plain = RedisStore.from_url(without_shards(harness.url()))
    try:  # opened without ?shards=: the stored layout decides
        assert plain._plan.shards is not None and plain._plan.shards.count == 3
    finally:
        plain.close()
    assert store_exists(harness.url())


def test_another_shard_count_or_a_braced_prefix_is_a_config_error(
    harness: RedisHarness, redis_url: str
) -> None:
    harness.open_sync()
    with pytest.raises(StoreConfigError, match=r"3 shards, not 4"):
        RedisStore.from_url(sharded(without_shards(harness.url()), 4))
    with pytest.raises(StoreConfigError, match=re.escape("no '{' or '}'")):
        RedisStore.from_url(sharded(with_prefix(redis_url, "{braced}:")))


# -- the upgrade from the single-slot layout ------------------------------------------------------


def fill(store: RedisStore) -> list[str]:
    """Executions with every kind of record, relays crossing between them; their ids."""
    ids = [f"u-{n}" for n in range(7)]
    exes = {i: Execution(id=i, definition_id="d", priority=n % 5) for n, i in enumerate(ids)}
    for round_no in range(3):
        for n, execution_id in enumerate(ids):
            store.commit(
                exes[execution_id],
                [(ids[(n + 1) % 7], ev(f"e{round_no}-{n}")), (None, ev(f"u{round_no}-{n}"))],
                processed_event_id=f"in-{round_no}",
                timers=(TimerOp.schedule(f"/t{round_no}", 100.0 + n),),
                spawns=[(f"kid-{round_no}-{n}", "/r", {"n": n})] if n % 2 else [],
                trace={"round": round_no},
            )
    store.enqueue("u-nobody", ev("queued"))
    exes["u-0"].status = "DONE"
    store.save(exes["u-0"])
    return [*ids, "u-nobody"]


def observed(store: RedisStore, ids: list[str]) -> dict[str, Any]:
    """What the contract shows of a filled namespace (seqs left out, digests of records)."""
    records = {i: store.export_execution(i) for i in ids}
    return {
        "records": {i: None if r is None else record_digest(r) for i, r in records.items()},
        "outbox": [(e.target_id, e.event.id) for e in store.pending_outbox()],
        "spawns": [(s.parent_id, s.child_id) for s in store.pending_spawns()],
        "timers": store.due_timers(1e18),
        "listing": [s.id for s in store.list_executions(limit=100).items],
    }


def test_a_single_slot_namespace_is_upgraded_to_the_sharded_layout_in_place(
    redis_url: str,
) -> None:
    single = RedisHarness(redis_url)
    try:
        store = single.open_sync()
        ids = fill(store)
        before = observed(store, ids)
        store.close()
        upgraded = RedisStore.from_url(sharded(single.url(), 3))
        try:
            assert upgraded._plan.shards is not None and upgraded._plan.shards.count == 3
            assert observed(upgraded, ids) == before
            keys = single.all_keys()
            old = [
                k
                for k in keys
                if b"{" not in k and k not in (single.keys.layout, single.keys.schema)
            ]
            assert old == []  # nothing left under the single-slot names
            with redis.Redis(**single.options.client_kwargs()) as client:
                assert client.hget(single.keys.layout, "v") == b"5"
                assert client.get(single.keys.schema) == b"5"
            claims = upgraded.claim("w", 1e12, limit=1000)
            units = sum(len(before[name]) for name in ("outbox", "spawns", "timers"))
            assert sum(c.units for c in claims) == units
        finally:
            upgraded.close()
        again = RedisStore.from_url(single.url())  # later opens need no ?shards=
        try:
            assert again._plan.shards is not None
        finally:
            again.close()
    finally:
        single.destroy()


@pytest.mark.parametrize("stop_after", [6, 40, 70, 84])
def test_an_interrupted_upgrade_is_finished_by_the_next_opener(
    redis_url: str, stop_after: int
) -> None:
    """The upgrade stopped after ``stop_after`` requests (relays half moved, executions half
    moved): the next opener, with or without ``?shards=``, finishes it, nothing lost or
    doubled."""
    single = RedisHarness(redis_url)
    try:
        store = single.open_sync()
        ids = fill(store)
        before = observed(store, ids)
        store.close()
        crashed = RedisPlan(single.keys, "test", 512 * 1024 * 1024, shards=3)
        operation = crashed.open()
        with redis.Redis(**single.options.client_kwargs()) as client:
            request = next(operation)
            for _ in range(stop_after):
                request = operation.send(client.execute_command(*request.wire))
        operation.close()
        with redis.Redis(**single.options.client_kwargs()) as client:
            assert client.hget(single.keys.layout, "v") == b"4"  # not finished
            assert client.hget(single.keys.layout, "shards") == b"3"
        finisher = RedisStore.from_url(single.url())
        try:
            assert finisher._plan.shards is not None
            assert observed(finisher, ids) == before
        finally:
            finisher.close()
    finally:
        single.destroy()


def test_two_openers_upgrading_at_once_both_succeed(redis_url: str) -> None:
    single = RedisHarness(redis_url)
    try:
        store = single.open_sync()
        ids = fill(store)
        before = observed(store, ids)
        store.close()
        with ThreadPoolExecutor(2) as pool:
            opened = list(pool.map(lambda _: RedisStore.from_url(sharded(single.url())), range(2)))
        try:
            assert observed(opened[0], ids) == before
        finally:
            for one in opened:
                one.close()
    finally:
        single.destroy()


def test_an_upgrade_to_another_shard_count_than_the_one_begun_is_refused(redis_url: str) -> None:
    single = RedisHarness(redis_url)
    try:
        single.open_sync().close()
        with redis.Redis(**single.options.client_kwargs()) as client:
            client.hset(single.keys.layout, "shards", "2")  # an upgrade to 2 shards begun
        with pytest.raises(StoreConfigError, match="with 2 shards, not 3"):
            RedisStore.from_url(sharded(single.url(), 3))
    finally:
        single.destroy()
