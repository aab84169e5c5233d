"""What only the Redis backend has, against real servers: round trips per operation (counted on
the wire), NOSCRIPT recovery, failure modes (unreachable, stopped mid-run, wrong password,
foreign keys), the key layout, hostile ids, listing and sweeps that do not scan.

Tests that stop, restart, flush or reconfigure a server use a throwaway ``redis-server`` on a
free port (the ``throwaway_redis`` fixture); the shared server only ever sees random prefixes.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import struct
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest
import redis
from harel.conformance.proxy import CountingProxy, FaultProxy
from harel.conformance.suite._base import SyncAsAsync, run_inline
from harel.model import Event, Execution, Status
from harel.store.common.plan_store import in_settled_write
from harel.store.contract import TimerOp
from harel.store.errors import (
    AlreadyProcessed,
    CommitOutcomeUnknown,
    InvalidIdentifier,
    StoreConfigError,
    StoreConflict,
    StoreCorrupted,
    StoreError,
    StoreUnavailable,
)
from harel_store_redis import AsyncRedisStore, RedisStore, _commit, _keys, aio
from harel_store_redis._keys import UNTARGETED, owned, owner_prefix
from harel_store_redis._scripts import COMMIT
from harel_store_redis.testing import RedisHarness
from harel_testing.redis import RedisServerProcess, free_port

pytestmark = pytest.mark.anyio

FAR = 1e18
CLAIM_NOW = 4e9
"""A claim's ``now`` after every commit of these tests (their relay units are due)."""


def new_exe(execution_id: str, definition_id: str = "flow", **fields: Any) -> Execution:
    return Execution(id=execution_id, definition_id=definition_id, **fields)


def ev(event_id: str, kind: str = "Go") -> Event:
    return Event(id=event_id, kind=kind)


def step(kind: str = "Go") -> dict[str, Any]:
    return {"event_kind": kind, "event_data": {}, "actions": [], "context_out": {}}


def dataset(harness: RedisHarness) -> dict[bytes, Any]:
    """Every key under the harness prefix with its whole content (for before/after checks)."""
    return harness.dump()


@pytest.fixture
def proxy(redis_url: str) -> Iterator[CountingProxy]:
    """A round-trip counting proxy in front of the test server."""
    options = RedisHarness(redis_url).options
    with CountingProxy(options.host, options.port) as counting:
        yield counting


@pytest.fixture
def proxied(proxy: CountingProxy, redis_url: str) -> Iterator[RedisHarness]:
    """A harness whose stores reach the server through ``proxy``."""
    options = RedisHarness(redis_url).options
    harness = RedisHarness(f"redis://127.0.0.1:{proxy.port}/{options.db}")
    yield harness
    harness.destroy()


# -- round trips ------------------------------------------------------------------------------

EXPECTED_ROUND_TRIPS = {
    "commit: insert, state only": 1,
    "commit: update, state only": 1,
    "commit: 3 emits": 1,
    "commit: processed mark": 1,
    "commit: 2 timers scheduled, 1 cancelled": 1,
    "commit: 2 spawns": 1,
    "commit: trace step": 1,
    "commit: everything at once": 1,
    "commit: lost CAS (StoreConflict)": 1,
    "load": 1,
    "load_for_event": 1,
    "is_processed": 1,
    "pending_outbox": 1,
    "ack_outbox": 1,
    "pending_spawns": 1,
    "ack_spawn": 1,
    "due_timers": 1,
    "delete_timer": 1,
    "read_trace": 1,
    "append_trace": 1,
    "list_executions (2 statuses, definition, roots)": 1,
    "prune_processed (2 marks, batch_size=2)": 2,
    "export_execution": 1,
    "purge": 1,
    "import_execution": 1,
    "enqueue": 1,
    "claim": 1,
    "renew": 1,
    "release": 1,
}
"""The figures README.md quotes; every commit shape must stay at exactly 1."""


Step = Callable[[Any], Awaitable[Any]]


def operations(tag: str) -> list[tuple[str, Step]]:
    """Each measured operation as a step over the async contract (the sync store is seen
    through the kit's ``SyncAsAsync``), in an order where each has something to work on."""
    exe = new_exe(f"rt-{tag}", status=Status.RUNNING)

    async def lost_cas(store: Any) -> None:
        with pytest.raises(StoreConflict):
            await store.commit(new_exe(exe.id), [(None, ev("never"))])

    seen: dict[str, Any] = {}

    async def pending(store: Any, name: str) -> None:
        seen[name] = await getattr(store, name)()

    async def ack(store: Any, pending: str, acker: str) -> None:
        await getattr(store, acker)(seen[pending][0].seq)

    async def prune(store: Any) -> None:  # one full batch, then the short one that ends it
        assert await store.prune_processed(FAR, batch_size=2) == 2

    async def export(store: Any) -> None:
        seen["record"] = await store.export_execution(exe.id)
        assert seen["record"] is not None and seen["record"].trace

    async def import_(store: Any) -> None:
        await store.import_execution(seen["record"])

    async def claim(store: Any) -> None:
        seen["claims"] = await store.claim("rt-worker", CLAIM_NOW, limit=1000)
        assert exe.id in {claim.execution_id for claim in seen["claims"]}

    return [
        ("commit: insert, state only", lambda s: s.save(exe)),
        ("commit: update, state only", lambda s: s.save(exe)),
        (
            "commit: 3 emits",
            lambda s: s.commit(exe, [(None, ev("a")), ("other", ev("b")), (exe.id, ev("c"))]),
        ),
        ("commit: processed mark", lambda s: s.commit(exe, [], processed_event_id="p1")),
        (
            "commit: 2 timers scheduled, 1 cancelled",
            lambda s: s.commit(
                exe,
                [],
                timers=(
                    TimerOp.schedule("/a", 10.0),
                    TimerOp.schedule("/b", 20.0),
                    TimerOp.cancel("/c"),
                ),
            ),
        ),
        (
            "commit: 2 spawns",
            lambda s: s.commit(exe, [], spawns=[("c1", "/r", {}), ("c2", "/r", {"n": 1})]),
        ),
        ("commit: trace step", lambda s: s.commit(exe, [], trace=step())),
        (
            "commit: everything at once",
            lambda s: s.commit(
                exe,
                [(exe.id, ev("d"))],
                processed_event_id="p2",
                timers=(TimerOp.schedule("/a", 5.0), TimerOp.cancel("/b")),
                spawns=[("c3", "/r", {})],
                trace=step(),
            ),
        ),
        ("commit: lost CAS (StoreConflict)", lost_cas),
        ("load", lambda s: s.load(exe.id)),
        ("load_for_event", lambda s: s.load_for_event(exe.id, "p1")),
        ("is_processed", lambda s: s.is_processed(exe.id, "p1")),
        ("pending_outbox", lambda s: pending(s, "pending_outbox")),
        ("ack_outbox", lambda s: ack(s, "pending_outbox", "ack_outbox")),
        ("pending_spawns", lambda s: pending(s, "pending_spawns")),
        ("ack_spawn", lambda s: ack(s, "pending_spawns", "ack_spawn")),
        ("due_timers", lambda s: s.due_timers(FAR)),
        ("delete_timer", lambda s: s.delete_timer(exe.id, "/a", 5.0)),
        ("read_trace", lambda s: s.read_trace(exe.id)),
        ("append_trace", lambda s: s.append_trace(exe.id, step("Extra"))),
        (
            "list_executions (2 statuses, definition, roots)",
            lambda s: s.list_executions(
                status=[Status.RUNNING, Status.DONE], definition_id="flow", roots_only=True
            ),
        ),
        ("prune_processed (2 marks, batch_size=2)", prune),
        ("export_execution", export),
        ("purge", lambda s: s.purge(exe.id, force=True)),
        ("import_execution", import_),
        ("enqueue", lambda s: s.enqueue(exe.id, ev("q"), priority=2)),
        ("claim", claim),
        ("renew", lambda s: s.renew("rt-worker", exe.id, CLAIM_NOW, lease=60.0)),
        ("release", lambda s: s.release("rt-worker", exe.id)),
    ]


async def count_round_trips(proxy: CountingProxy, store: Any) -> dict[str, int]:
    """Warm up (connections, script cache), then count each operation's round trips."""
    for _, operation in operations("warm"):
        await operation(store)
    await store.purge("rt-warm", force=True)
    await store.prune_processed(FAR)
    figures: dict[str, int] = {}
    for name, operation in operations("measured"):
        proxy.reset()
        await operation(store)
        figures[name] = proxy.round_trips
    return figures


def report(flavour: str, figures: dict[str, int]) -> None:
    print(f"\nround trips per operation ({flavour}):")
    for name, count in figures.items():
        print(f"  {name:<52} {count}")


def test_round_trips_per_operation_sync(proxy: CountingProxy, proxied: RedisHarness) -> None:
    store = SyncAsAsync(proxied.open_sync())
    figures = run_inline(count_round_trips(proxy, store))
    report("sync", figures)
    assert figures == EXPECTED_ROUND_TRIPS
    assert all(n == 1 for name, n in figures.items() if name.startswith("commit"))


async def test_round_trips_per_operation_async(proxy: CountingProxy, proxied: RedisHarness) -> None:
    store = await proxied.open_async()
    try:
        figures = await count_round_trips(proxy, store)
    finally:
        await store.close()
    report("async", figures)
    assert figures == EXPECTED_ROUND_TRIPS


SHARDED_ROUND_TRIPS = {
    **EXPECTED_ROUND_TRIPS,
    "pending_outbox": 3,
    "pending_spawns": 3,
    "due_timers": 3,
    "list_executions (2 statuses, definition, roots)": 3,
    "prune_processed (2 marks, batch_size=2)": 4,
    "export_execution": 3,
    "purge": 3,
    "claim": 0,  # measured below: it depends on where the claimed groups' rows are
    "release": 4,
}
"""The sharded layout with 3 shards (README, "Sharded layout"): every commit, every read of
one execution and every enqueue stays ONE call in one shard; sweeps, listing, prune, export
and purge make one per shard (prune: one per batch per shard); release looks at the home row,
then visits every shard."""


def test_round_trips_per_operation_sharded(proxy: CountingProxy) -> None:
    harness = RedisHarness(f"redis://127.0.0.1:{proxy.port}/0?shards=3")
    try:
        store = SyncAsAsync(harness.open_sync())
        figures = run_inline(count_round_trips(proxy, store))
        report("sync, 3 shards", figures)
        claim = figures.pop("claim")
        assert figures == {k: v for k, v in SHARDED_ROUND_TRIPS.items() if k != "claim"}
        assert all(n == 1 for name, n in figures.items() if name.startswith("commit"))
        # a claim: 3 scans, at most 3 lease scripts (one per home shard of the groups it takes)
        # and one per other shard for the groups' entries there
        assert 3 + 1 + 2 <= claim <= 3 + 3 + 3, claim
    finally:
        harness.destroy()


WRITE_COMMANDS = ("hset", "hdel", "hincrby", "zadd", "zrem", "xadd", "xdel", "rpush", "ltrim")
"""What a commit script writes with (``INFO commandstats`` counts script-run commands too)."""


def refused_in_one_call(
    proxy: CountingProxy, admin: redis.Redis, commit: Callable[[], Any], refusal: type
) -> None:
    """``commit()`` raises ``refusal`` after exactly one round trip, which is one ``EVALSHA``
    whose script wrote nothing."""
    admin.config_resetstat()
    proxy.reset()
    with pytest.raises(refusal) as info:
        commit()
    calls = commandstats(admin)
    assert type(info.value) is refusal
    assert proxy.round_trips == 1
    assert calls.get("cmdstat_evalsha") == 1 and "cmdstat_eval" not in calls
    assert not [name for name in WRITE_COMMANDS if f"cmdstat_{name}" in calls], calls


def test_an_already_processed_commit_and_a_fenced_refusal_are_one_script_call(
    throwaway_redis: RedisServerProcess,
) -> None:
    side: dict[str, Any] = {
        "timers": (TimerOp.schedule("/t", 5.0),),
        "spawns": [("kid", "/r", {})],
        "trace": step("Again"),
    }
    with (
        CountingProxy("127.0.0.1", throwaway_redis.port) as proxy,
        throwaway_redis.client() as admin,
    ):
        harness = RedisHarness(f"redis://127.0.0.1:{proxy.port}/0")
        store = harness.open_sync()
        # already processed: the mark is found inside the commit script, nothing written
        exe = new_exe("e1", status=Status.RUNNING)
        store.commit(exe, [], processed_event_id="in-1")
        before = harness.dump()
        refused_in_one_call(
            proxy,
            admin,
            lambda: store.commit(exe, [(None, ev("x"))], processed_event_id="in-1", **side),
            AlreadyProcessed,
        )
        assert exe.version == 1
        assert harness.dump() == before
        # fenced: purged and re-created up to the same version; the old copy (state only, then
        # with side writes: the two commit scripts) is refused with the version it expected
        assert store.purge("e1", force=True) is True
        store.commit(new_exe("e1", status=Status.RUNNING), [])
        before = harness.dump()
        exe.context = {"stale": True}
        refused_in_one_call(proxy, admin, lambda: store.commit(exe, []), StoreConflict)
        refused_in_one_call(
            proxy,
            admin,
            lambda: store.commit(exe, [(None, ev("y"))], processed_event_id="in-2", **side),
            StoreConflict,
        )
        assert exe.version == 1
        assert harness.dump() == before
        harness.destroy()


# -- NOSCRIPT ---------------------------------------------------------------------------------


def test_scripts_are_reloaded_after_script_flush(throwaway_redis: RedisServerProcess) -> None:
    with CountingProxy("127.0.0.1", throwaway_redis.port) as proxy:
        store = RedisStore.from_url(f"redis://127.0.0.1:{proxy.port}/0", connect_retries=0)
        exe = new_exe("e1")
        store.save(exe)
        with throwaway_redis.client() as admin:
            admin.script_flush()
        proxy.reset()
        store.commit(exe, [(None, ev("a"))], trace=step())
        assert proxy.round_trips == 2  # EVALSHA -> NOSCRIPT, then EVAL (which caches it)
        proxy.reset()
        store.commit(exe, [(None, ev("b"))], trace=step())
        assert proxy.round_trips == 1
        assert exe.version == 3 and len(store.pending_outbox()) == 2
        store.close()


async def test_async_scripts_are_reloaded_after_script_flush(
    throwaway_redis: RedisServerProcess,
) -> None:
    store = await AsyncRedisStore.from_url(throwaway_redis.url, connect_retries=0)
    try:
        exe = new_exe("e1")
        await store.save(exe)
        with throwaway_redis.client() as admin:
            admin.script_flush()
        await store.commit(exe, [(None, ev("a"))])
        assert [e.event.id for e in await store.pending_outbox()] == ["a"]
        assert (await store.load("e1")).version == 2  # type: ignore[union-attr]
    finally:
        await store.close()


# -- failure modes ----------------------------------------------------------------------------


def test_unreachable_at_start_retries_then_raises_store_unavailable() -> None:
    url = f"redis://user:s3cr%2Fet@127.0.0.1:{free_port()}/0"
    started = time.monotonic()
    with pytest.raises(StoreUnavailable) as info:
        RedisStore.from_url(url, connect_retries=2, retry_delay=0.01, connect_timeout=0.5)
    assert time.monotonic() - started < 10
    assert "3 attempt(s)" in str(info.value)
    assert "s3cr" not in str(info.value) and "s3cr" not in repr(info.value)
    assert info.value.retryable


async def test_async_unreachable_at_start_retries_then_raises_store_unavailable() -> None:
    url = f"redis://:s3cr%2Fet@127.0.0.1:{free_port()}/0"
    with pytest.raises(StoreUnavailable) as info:
        await AsyncRedisStore.from_url(url, connect_retries=1, retry_delay=0.01)
    assert "2 attempt(s)" in str(info.value) and "s3cr" not in str(info.value)


def test_server_stopped_mid_run_then_back(throwaway_redis: RedisServerProcess) -> None:
    store = RedisStore.from_url(throwaway_redis.url, connect_retries=0, connect_timeout=1)
    exe = new_exe("e1", status=Status.RUNNING)
    store.commit(exe, [(None, ev("first"))], processed_event_id="in-1")
    throwaway_redis.stop()
    with pytest.raises(StoreUnavailable) as info:
        store.commit(
            exe,
            [(None, ev("second"))],
            processed_event_id="in-2",
            timers=(TimerOp.schedule("/t", 1.0),),
            spawns=[("child", "/r", {})],
            trace=step(),
        )
    assert info.value.retryable and exe.version == 1
    assert type(info.value) is StoreUnavailable  # never sent: certainly not written
    with pytest.raises(StoreUnavailable):
        store.load("e1")
    throwaway_redis.start()  # same port, same append-only file
    loaded = store.load("e1")  # the same store object works again
    assert loaded is not None and loaded.version == 1
    assert [e.event.id for e in store.pending_outbox()] == ["first"]
    assert store.due_timers(FAR) == [] and store.pending_spawns() == []
    assert store.read_trace("e1") == [] and not store.is_processed("e1", "in-2")
    store.commit(exe, [(None, ev("second"))], processed_event_id="in-2")
    assert exe.version == 2 and store.load("e1").version == 2  # type: ignore[union-attr]
    store.close()


async def test_async_server_stopped_mid_run_then_back(throwaway_redis: RedisServerProcess) -> None:
    store = await AsyncRedisStore.from_url(throwaway_redis.url, connect_retries=0)
    try:
        exe = new_exe("e1")
        await store.commit(exe, [(None, ev("first"))])
        throwaway_redis.stop()
        with pytest.raises(StoreUnavailable):
            await store.commit(exe, [(None, ev("second"))], trace=step())
        assert exe.version == 1
        throwaway_redis.start()
        assert (await store.load("e1")).version == 1  # type: ignore[union-attr]
        await store.commit(exe, [(None, ev("second"))])
        assert [e.event.id for e in await store.pending_outbox()] == ["first", "second"]
    finally:
        await store.close()


def test_a_commit_whose_reply_was_lost_is_recognised_when_re_sent(
    harel_harness: RedisHarness,
) -> None:
    """The commit script is idempotent by its receipt: re-sending the same request (what the
    plan does after a lost reply), even after a rival's commit, applies nothing twice and
    reports success; the same request under another token is a conflict."""
    store = harel_harness.open_sync()
    exe = new_exe("e1")
    store.save(exe)
    with committing_prepared(exe, [(None, ev("once"))], trace=step()) as prepared:
        token = prepared.token.encode()
        keys, args = _commit.commit_request(store._keys, prepared, 10, token)
        with redis.Redis(**harel_harness.options.client_kwargs()) as client:
            first = client.evalsha(COMMIT.sha, len(keys), *keys, *args)
            rival = store.load("e1")
            assert rival is not None
            store.commit(rival, [(None, ev("rival"))])
            again = client.evalsha(COMMIT.sha, len(keys), *keys, *args)
        _commit.decide_commit(prepared, first, "test")
        assert again == [0, b"3", token]  # the CAS missed; the receipt of version 2 is ours
        _commit.decide_commit(prepared, again, "test")  # no StoreConflict
        with pytest.raises(StoreConflict):
            _commit.decide_commit(prepared._replace(token="f" * 32), again, "test")
    assert [e.event.id for e in store.pending_outbox()] == ["once", "rival"]
    assert [t["index"] for t in store.read_trace("e1")] == [0]
    assert store.load("e1").version == 3  # type: ignore[union-attr]


# -- lost replies through a fault proxy ----------------------------------------------------------


def rival_commit(harness: RedisHarness, execution_id: str) -> None:
    """Another writer's commit, on a store of its own (not through the proxy)."""
    store = harness.open_sync()
    try:
        other = store.load(execution_id)
        assert other is not None
        other.context = {"by": "rival"}
        store.commit(other, [(None, ev("rival"))])
    finally:
        store.close()


def marked_step(marker: str) -> dict[str, Any]:
    return {"emits": [(None, ev(marker))], "processed_event_id": f"{marker}-in"}


def fault_proxy(redis_url: str) -> FaultProxy:
    options = RedisHarness(redis_url).options
    return FaultProxy(options.host, options.port)


def test_a_lost_reply_with_a_rival_in_between_is_settled_within_the_call(
    harel_harness: RedisHarness, redis_url: str
) -> None:
    with fault_proxy(redis_url) as proxy:
        store = harel_harness.open_sync_at(proxy.host, proxy.port)
        exe = new_exe("lost-1")
        store.save(exe)
        rival = functools.partial(rival_commit, harel_harness, "lost-1")
        proxy.arm("drop_reply", marker=b"mark-1", between=rival)
        store.commit(exe, **marked_step("mark-1"))  # resent: the receipt says it is stored
        assert proxy.fired and proxy.between_error is None and exe.version == 2
        store.close()
    check = harel_harness.open_sync()
    assert [e.event.id for e in check.pending_outbox()] == ["mark-1", "rival"]
    assert check.load("lost-1").version == 3  # type: ignore[union-attr]


async def test_async_a_lost_reply_with_a_rival_in_between_is_settled_within_the_call(
    harel_harness: RedisHarness, redis_url: str
) -> None:
    with fault_proxy(redis_url) as proxy:
        store = await harel_harness.open_async_at(proxy.host, proxy.port)
        exe = new_exe("lost-1")
        await store.save(exe)
        rival = functools.partial(rival_commit, harel_harness, "lost-1")
        proxy.arm("drop_reply", marker=b"mark-1", between=rival)
        await store.commit(exe, **marked_step("mark-1"))
        assert proxy.fired and proxy.between_error is None and exe.version == 2
        await store.close()
    check = harel_harness.open_sync()
    assert [e.event.id for e in check.pending_outbox()] == ["mark-1", "rival"]


def test_an_outage_after_a_lost_reply_is_an_unknown_outcome_that_a_resend_settles(
    harel_harness: RedisHarness, redis_url: str
) -> None:
    with fault_proxy(redis_url) as proxy:
        store = harel_harness.open_sync_at(proxy.host, proxy.port)
        exe = new_exe("lost-2")
        store.save(exe)
        proxy.arm("drop_reply", marker=b"mark-2", between=proxy.down)
        with pytest.raises(CommitOutcomeUnknown) as info:
            store.commit(exe, **marked_step("mark-2"))
        assert (info.value.execution_id, info.value.expected) == ("lost-2", 1)
        assert exe.version == 1
        proxy.up()
        store.commit(exe, **marked_step("mark-2"))  # the contract's re-send: found by receipt
        assert exe.version == 2
        assert [e.event.id for e in store.pending_outbox()] == ["mark-2"]  # stored once
        store.close()


async def test_async_an_outage_after_a_lost_reply_is_an_unknown_outcome_that_a_resend_settles(
    harel_harness: RedisHarness, redis_url: str
) -> None:
    with fault_proxy(redis_url) as proxy:
        store = await harel_harness.open_async_at(proxy.host, proxy.port)
        exe = new_exe("lost-2")
        await store.save(exe)
        proxy.arm("drop_reply", marker=b"mark-2", between=proxy.down)
        with pytest.raises(CommitOutcomeUnknown):
            await store.commit(exe, **marked_step("mark-2"))
        assert exe.version == 1
        proxy.up()
        await store.commit(exe, **marked_step("mark-2"))
        assert exe.version == 2
        assert [e.event.id for e in await store.pending_outbox()] == ["mark-2"]
        await store.close()


def test_an_unreachable_server_is_plainly_unavailable_and_nothing_is_written(
    harel_harness: RedisHarness, redis_url: str
) -> None:
    """A proxy that accepts and closes at once (a load balancer without a backend) fails the
    connection's handshake: the command never went out, so the error says nothing was written."""
    with fault_proxy(redis_url) as proxy:
        store = harel_harness.open_sync_at(proxy.host, proxy.port)
        exe = new_exe("down-1")
        store.save(exe)
        proxy.down()
        with pytest.raises(StoreUnavailable) as info:
            store.commit(exe, **marked_step("mark-3"))
        assert type(info.value) is StoreUnavailable and exe.version == 1
        store.close()
    assert harel_harness.open_sync().pending_outbox() == []


async def test_async_an_unreachable_server_is_plainly_unavailable(
    harel_harness: RedisHarness, redis_url: str
) -> None:
    with fault_proxy(redis_url) as proxy:
        store = await harel_harness.open_async_at(proxy.host, proxy.port)
        exe = new_exe("down-1")
        await store.save(exe)
        proxy.down()
        # redis.asyncio's pool does not notice that an idle connection was closed by the peer:
        # a command sent on it fails reading, exactly like a lost reply (may have run).  Once
        # any request has met the outage, the pool holds no such connection.
        with pytest.raises(StoreUnavailable):
            await store.load("down-1")
        with pytest.raises(StoreUnavailable) as info:
            await store.commit(exe, **marked_step("mark-3"))
        assert type(info.value) is StoreUnavailable and exe.version == 1
        await store.close()


def committing_prepared(exe: Execution, emits: Any, **effects: Any) -> Any:
    from harel.store.common.commit import committing

    return committing(exe, emits, **effects)


def test_a_lost_cas_leaves_no_side_write(harel_harness: RedisHarness) -> None:
    store = harel_harness.open_sync()
    other = harel_harness.open_sync()
    exe = new_exe("e1", status=Status.RUNNING)
    store.commit(exe, [(None, ev("a"))], timers=(TimerOp.schedule("/x", 3.0),), trace=step())
    stale = other.load("e1")
    assert stale is not None
    store.commit(exe, [])
    before = dataset(harel_harness)
    stale.status = Status.DONE
    stale.definition_id = "moved"
    with pytest.raises(StoreConflict) as info:
        other.commit(
            stale,
            [("e1", ev("b")), (None, ev("c"))],
            processed_event_id="in",
            timers=(TimerOp.schedule("/y", 1.0), TimerOp.cancel("/x")),
            spawns=[("child", "/r", {"k": 1})],
            trace=step("Lost"),
        )
    assert (info.value.expected, info.value.found) == (1, 2)
    assert stale.version == 1
    assert dataset(harel_harness) == before  # not one key or member changed


def test_a_key_of_a_foreign_type_fails_before_anything_is_written(
    harel_harness: RedisHarness,
) -> None:
    store = harel_harness.open_sync()
    with redis.Redis(**harel_harness.options.client_kwargs()) as client:
        client.set(harel_harness.keys.timers, b"not a zset")
    before = dataset(harel_harness)
    exe = new_exe("e1")
    with pytest.raises(StoreCorrupted, match="timers"):
        store.commit(exe, [(None, ev("a"))], timers=(TimerOp.schedule("/t", 1.0),))
    assert exe.version == 0 and dataset(harel_harness) == before


def test_an_enqueue_meets_foreign_keys_before_writing(harel_harness: RedisHarness) -> None:
    store = harel_harness.open_sync()
    with redis.Redis(**harel_harness.options.client_kwargs()) as client:
        client.set(harel_harness.keys.ready_2, b"not a zset")
    before = dataset(harel_harness)
    with pytest.raises(StoreCorrupted, match="ready:2"):
        store.enqueue("e1", ev("q"), priority=2)
    assert dataset(harel_harness) == before


def test_an_enqueue_writes_the_entry_its_index_and_the_work_row_only(
    harel_harness: RedisHarness,
) -> None:
    """The outbox entry, its ``P own`` member under the target and the target's work row
    (the caller's priority, due at once): no execution key, no listing index."""
    store = harel_harness.open_sync()
    before = dataset(harel_harness)
    seq = store.enqueue("o:1", ev("q"), priority=3)
    prefix = harel_harness.keys.prefix
    data = dataset(harel_harness)
    changed = {key[len(prefix) :] for key in data if data[key] != before.get(key)}
    assert changed == {b"outbox", b"own", b"work", b"ready:3"}
    entry_id = _keys.stream_id(seq)
    assert entry_id is not None
    assert [member for member, _ in data[prefix + b"own"]] == [
        owner_prefix("o:1") + b"o" + entry_id
    ]
    assert data[prefix + b"work"][owner_prefix("o:1")].startswith(b"3 ")


def test_a_state_only_commit_meets_foreign_keys_before_writing(
    harel_harness: RedisHarness,
) -> None:
    store = harel_harness.open_sync()
    keys = harel_harness.keys
    exe = new_exe("e1")
    with redis.Redis(**harel_harness.options.client_kwargs()) as client:
        client.set(keys.index(None, False, None), b"not a zset")  # entered on insert
        before = dataset(harel_harness)
        with pytest.raises(StoreCorrupted, match="ix:"):
            store.save(exe)
        assert exe.version == 0 and dataset(harel_harness) == before
        client.delete(keys.index(None, False, None))
        store.save(exe)
        client.delete(keys.summaries)
        client.set(keys.summaries, b"not a hash")  # written by every commit
        before = dataset(harel_harness)
        with pytest.raises(StoreCorrupted):
            store.save(exe)
        assert exe.version == 1 and dataset(harel_harness) == before


def test_wrong_password_is_a_config_error_that_never_shows_it(
    redis_servers: Callable[..., RedisServerProcess],
) -> None:
    server = redis_servers(password="s3cr/et#pw")
    if True:
        url = f"redis://:wr0ng%2Fpw@127.0.0.1:{server.port}/0"
        with pytest.raises(StoreConfigError) as info:
            RedisStore.from_url(url, connect_retries=3)
        assert "wr0ng" not in str(info.value) and "s3cr" not in str(info.value)
        good = f"redis://:s3cr%2Fet%23pw@127.0.0.1:{server.port}/0"
        store = RedisStore.from_url(good)
        assert "s3cr" not in repr(store) and "s3cr" not in store.where
        store.save(new_exe("e1"))
        store.close()


def test_unix_socket_urls(throwaway_redis: RedisServerProcess) -> None:
    url = f"unix://{throwaway_redis.socket}?prefix=sock:"
    store = RedisStore.from_url(url)
    store.save(new_exe("e1"))
    assert "unix://" in repr(store)
    store.close()

    async def read() -> Execution | None:
        astore = await AsyncRedisStore.from_url(url)
        try:
            return await astore.load("e1")
        finally:
            await astore.close()

    loaded = asyncio.run(read())
    assert loaded is not None and loaded.version == 1


def test_injected_clients(redis_url: str) -> None:
    options = RedisHarness(redis_url).options
    with pytest.raises(StoreConfigError, match="decode_responses"):
        RedisStore(redis.Redis(**{**options.client_kwargs(), "decode_responses": True}))
    client = redis.Redis(**options.client_kwargs())
    prefix = f"harel-inject-{uuid.uuid4().hex}:"
    store = RedisStore(client, prefix=prefix, trace_max=3)
    store.save(new_exe("e1"))
    store.close()
    assert client.ping()  # the caller still owns its client
    RedisHarness(redis_url, prefix=prefix).destroy()
    client.close()


def test_a_closed_store_raises_a_store_error(harel_harness: RedisHarness) -> None:
    store = harel_harness.open_sync()
    store.close()
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.load("e1")


# -- data model -------------------------------------------------------------------------------


def test_key_layout_of_one_execution(harel_harness: RedisHarness) -> None:
    store = harel_harness.open_sync()
    exe = new_exe("o:1", status=Status.RUNNING)
    store.commit(
        exe,
        [("o:1", ev("a")), (None, ev("b"))],
        processed_event_id="in",
        timers=(TimerOp.schedule("/t", 0.1),),
        spawns=[("c", "/r", {})],
        trace=step(),
    )
    prefix = harel_harness.keys.prefix
    names = {key[len(prefix) :] for key in harel_harness.all_keys()}
    assert names == {
        b"layout",
        b"schema",
        b"x:o%3A1",
        b"tr:o%3A1",
        b"sum",
        b"own",
        b"marks",
        b"timers",
        b"timer-at",
        b"outbox",
        b"spawns",
        b"ix:*:*:*",
        b"ix:*:root:*",
        b"ix:*:*:=flow",
        b"ix:*:root:=flow",
        b"ix:RUNNING:*:*",
        b"ix:RUNNING:root:*",
        b"ix:RUNNING:*:=flow",
        b"ix:RUNNING:root:=flow",
        b"work",  # claims: its own row and the untargeted group's, both priority 0
        b"ready:0",
    }
    data = dataset(harel_harness)
    record = data[prefix + b"x:o%3A1"]
    assert record[b"v"] == b"1" and record[b"st"] == b"RUNNING" and record[b"tn"] == b"1"
    member = owned("o:1", b"t", "/t")
    assert data[prefix + b"timers"] == [(member, 0.1)]
    assert data[prefix + b"timer-at"] == {member: b"0.1"}
    # mark, timer, targeted outbox entry, spawn, and the untargeted entry (under its prefix)
    assert len(data[prefix + b"own"]) == 5
    assert set(data[prefix + b"work"]) == {owner_prefix("o:1"), UNTARGETED}
    # a status change moves the execution between indexes inside the commit
    exe.status = Status.DONE
    store.save(exe)
    data = dataset(harel_harness)
    assert prefix + b"ix:RUNNING:*:*" not in data or data[prefix + b"ix:RUNNING:*:*"] == []
    assert data[prefix + b"ix:DONE:*:=flow"] == [(b"o:1", 0.0)]


@pytest.mark.parametrize(
    "fire_at", [5e-324, 0.1, 1 / 3, 2.0**53 + 1, 1.7976931348623157e308, -1e-300, 1e16]
)
def test_fire_at_round_trips_bit_exactly(harel_harness: RedisHarness, fire_at: float) -> None:
    store = harel_harness.open_sync()
    exe = new_exe("e1")
    store.commit(exe, [], timers=(TimerOp.schedule("/t", fire_at),))
    ((_, _, back),) = store.due_timers(math.nextafter(math.inf, 0))
    assert struct.pack("<d", back) == struct.pack("<d", fire_at)
    store.delete_timer("e1", "/t", math.nextafter(fire_at, 0.0))  # not the same time
    assert len(store.due_timers(1.7976931348623157e308)) == 1
    store.delete_timer("e1", "/t", fire_at)
    assert store.due_timers(1.7976931348623157e308) == []


def test_redis_itself_prints_negative_zero_as_zero(harel_harness: RedisHarness) -> None:
    """Why the exact ``repr`` is stored beside each score."""
    with redis.Redis(**harel_harness.options.client_kwargs()) as client:
        key = harel_harness.keys.prefix + b"probe"
        client.zadd(key, {b"m": "-0.0"})
        assert client.zscore(key, b"m") == 0.0
        assert client.zrange(key, 0, -1, withscores=True, score_cast_func=bytes)[0][1] == b"0"


def commandstats(client: redis.Redis) -> dict[str, int]:
    return {name: int(info["calls"]) for name, info in client.info("commandstats").items()}


def test_listing_and_sweeps_read_only_what_they_return(throwaway_redis: RedisServerProcess) -> None:
    store = RedisStore.from_url(throwaway_redis.url)
    for n in range(300):
        store.commit(
            new_exe(f"other-{n:03d}", "other"), [], timers=(TimerOp.schedule("/t", 1e9 + n),)
        )
    for n in range(5):
        store.commit(new_exe(f"mine-{n}", "mine"), [], timers=(TimerOp.schedule("/t", n),))
    with throwaway_redis.client() as admin:
        admin.config_resetstat()
        page = store.list_executions(definition_id="mine", limit=3)
        assert [item.id for item in page.items] == ["mine-0", "mine-1", "mine-2"]
        stats = admin.info("stats")
        listing_hits = stats["keyspace_hits"] + stats["keyspace_misses"]
        admin.config_resetstat()
        assert [t[0] for t in store.due_timers(10.0)] == [f"mine-{n}" for n in range(5)]
        stats = admin.info("stats")
        sweep_hits = stats["keyspace_hits"] + stats["keyspace_misses"]
        calls = commandstats(admin)
    # one index read + one summary read per returned row (+ the probe row): not 305 records
    assert listing_hits <= 1 + 4
    assert sweep_hits <= 1 + 5  # the due range + one exact fire_at per due timer
    assert not any(name in calls for name in ("cmdstat_scan", "cmdstat_keys"))
    store.close()


def test_prefixes_isolate_datasets_and_may_carry_a_cluster_hash_tag(redis_url: str) -> None:
    tagged = RedisHarness(redis_url, prefix=f"{{harel-{uuid.uuid4().hex[:8]}}}:")
    plain = RedisHarness(redis_url)
    try:
        a, b = tagged.open_sync(), plain.open_sync()
        a.commit(new_exe("same"), [(None, ev("a"))])
        assert b.load("same") is None and b.pending_outbox() == []
        tag = tagged.prefix[: tagged.prefix.index("}") + 1].encode()
        assert all(key.startswith(tag) for key in tagged.all_keys())
    finally:
        tagged.destroy()
        plain.destroy()


# -- hostile ids ------------------------------------------------------------------------------

PLANES = [chr(plane * 0x10000 + 0x10D) for plane in range(17)]  # one code point per plane
PLANES += [chr(cp) for cp in (0xE9, 0x4E2D, 0xFFFD, 0x1F642, 0xE0041, 0x10FFFD)]
HOSTILE = [
    ":",
    "{",
    "}",
    "{tag}",
    "a:b",
    "x:a",
    "sum",
    "ix:*:*:*",
    ".",
    "..",
    "$",
    "$where",
    "%",
    "%25",
    "'",
    '"',
    "\\",
    "*",
    "?[]",
    " ",
    "\t\n",
    "".join(PLANES),
    *PLANES,
    "é" * 512,  # 1024 UTF-8 bytes: the longest id there is
]


def test_hostile_ids_round_trip_and_purge_cleanly(harel_harness: RedisHarness) -> None:
    store = harel_harness.open_sync()
    for n, hostile in enumerate(HOSTILE):
        exe = new_exe(hostile, hostile, status=Status.DONE, context={"n": n})
        store.commit(
            exe,
            [(hostile, ev(hostile)), (None, ev(f"u-{n}"))],
            processed_event_id=hostile,
            timers=(TimerOp.schedule(hostile, float(n)),),
            spawns=[(hostile, hostile, {"n": n})],
            trace=step(hostile),
        )
    for n, hostile in enumerate(HOSTILE):
        loaded, seen = store.load_for_event(hostile, hostile)
        assert loaded is not None and loaded.context == {"n": n} and seen
        assert [i.id for i in store.list_executions(definition_id=hostile).items] == [hostile]
        assert [t["event_kind"] for t in store.read_trace(hostile)] == [hostile]
        labels = harel_harness.footprint(hostile)
        assert "execution" in labels and f"timer:{hostile}" in labels
    assert sorted(t[0] for t in store.due_timers(FAR)) == sorted(HOSTILE)
    listed = [item.id for item in store.list_executions(limit=1000).items]
    assert listed == sorted(HOSTILE)
    for n, hostile in enumerate(HOSTILE):
        assert store.purge(hostile) is True
        assert harel_harness.footprint(hostile) == []
        rest = HOSTILE[n + 1 :]
        assert sorted(t[0] for t in store.due_timers(FAR)) == sorted(rest)
    assert [e.target_id for e in store.pending_outbox()] == [None] * len(HOSTILE)
    assert store.pending_spawns() == []


@pytest.mark.parametrize(
    "bad", ["", "nul\x00inside", "lone\ud800", "x" * 1025, "🙂" * (64 * 1024 // 4)]
)
def test_ids_that_cannot_be_keys_are_refused_before_writing(
    harel_harness: RedisHarness, bad: str
) -> None:
    store = harel_harness.open_sync()
    before = dataset(harel_harness)
    with pytest.raises(InvalidIdentifier):
        store.commit(new_exe(bad), [(None, ev("e"))])
    with pytest.raises(InvalidIdentifier):
        store.commit(new_exe("fine"), [(bad, ev("e"))])
    with pytest.raises(InvalidIdentifier):
        store.load(bad)
    assert dataset(harel_harness) == before


# -- cancellation -----------------------------------------------------------------------------


async def cancelled_after(call: Awaitable[Any], ticks: int) -> None:
    """Start ``call``, let the loop turn ``ticks`` times, cancel it and wait until it ends."""
    task = asyncio.ensure_future(call)
    for _ in range(ticks):
        await asyncio.sleep(0)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


@pytest.fixture
async def astore(harel_harness: RedisHarness) -> AsyncIterator[AsyncRedisStore]:
    """An async store over the test's namespace, closed afterwards."""
    store = await harel_harness.open_async()
    yield store
    await store.close()


async def test_requests_never_run_in_the_callers_task(
    astore: AsyncRedisStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reads shield each request in a task of its own; a write runs in core's settled task,
    which is marked so its requests skip that second task; the mark never leaks to the caller."""
    seen: list[tuple[bool, bool]] = []
    send = aio._send

    async def spy(client: Any, request: Any, where: str, retried: bool) -> Any:
        seen.append((asyncio.current_task() is caller, in_settled_write()))
        return await send(client, request, where, retried)

    caller = asyncio.current_task()
    monkeypatch.setattr(aio, "_send", spy)
    await astore.save(new_exe("e1"))
    await astore.load("e1")
    assert seen == [(False, True), (False, False)]
    assert in_settled_write() is False


async def test_cancelled_reads_leave_no_reply_for_the_next_call(astore: AsyncRedisStore) -> None:
    for name in ("a", "b"):
        await astore.save(new_exe(name, definition_id=f"def-{name}"))
    for attempt in range(40):
        await cancelled_after(astore.load("a"), attempt % 5)
        other = await astore.load("b")  # never the cancelled call's reply
        assert other is not None and other.definition_id == "def-b"


async def test_cancelled_commits_either_land_whole_or_not_at_all(
    harel_harness: RedisHarness,
) -> None:
    store = await harel_harness.open_async()
    observer = await harel_harness.open_async()
    try:
        exe = new_exe("e1")
        await store.save(exe)
        for attempt in range(60):
            before = exe.version
            commit = store.commit(
                exe,
                [(None, ev(f"out-{attempt}"))],
                processed_event_id=f"in-{attempt}",
                trace=step(),
            )
            await cancelled_after(commit, attempt % 6)
            stored = await observer.load("e1")
            assert stored is not None and stored.version == exe.version
            assert exe.version in (before, before + 1)
            applied = exe.version == before + 1
            assert await observer.is_processed("e1", f"in-{attempt}") is applied
        outbox = [e.event.id for e in await observer.pending_outbox()]
        trace = await observer.read_trace("e1")
        assert len(outbox) == exe.version - 1 == len(trace)
        assert [t["index"] for t in trace] == list(range(len(trace)))
        await store.commit(exe, [])  # the store still works
        assert exe.version == (await observer.load("e1")).version  # type: ignore[union-attr]
    finally:
        await store.close()
        await observer.close()
