"""The Redis store on a real Redis Cluster (3 masters with a replica each, started by the
``redis_cluster`` fixture of conftest.py): the conformance kit over the single-slot layout (a
hash-tagged prefix), and the typed errors of a layout that cannot run there."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import ClassVar

import pytest
from harel.conformance import ConformanceSuite
from harel.conformance.proxy import FaultMode
from harel.conformance.suite import (
    ArgumentErrorTests,
    BadInputTests,
    ClaimTests,
    CommitTests,
    ConcurrencyTests,
    ContractTests,
    DedupeTests,
    EnqueueTests,
    FenceTests,
    LostReplyTests,
    RecordTests,
    RelayTests,
    ResendTests,
    lost_reply,
)
from harel.conformance.suite._base import Kit, SyncAsAsync, event, new_exe, run_inline
from harel.conformance.suite.lost_reply import CASES
from harel.conformance.wakeups import check_async_wakeups, check_sync_wakeups
from harel.model import Execution
from harel.store.contract import TimerOp
from harel.store.errors import StoreConfigError, StoreUnavailable
from harel_store_redis import AsyncRedisStore, RedisStore
from harel_store_redis._exists import store_exists
from harel_store_redis._shards import ShardMap, key_slot
from harel_store_redis.testing import RedisHarness, with_prefix
from harel_testing.redis import RedisClusterProcess


def tagged_prefix() -> str:
    """A fresh hash-tagged prefix: the whole namespace in one cluster slot."""
    return f"{{kit-{uuid.uuid4().hex[:12]}}}:"


class TestRedisClusterSingleSlotConformance(
    ContractTests,
    CommitTests,
    ResendTests,
    LostReplyTests,
    ConcurrencyTests,
    DedupeTests,
    FenceTests,
    RelayTests,
    ClaimTests,
    EnqueueTests,
    RecordTests,
):
    """The kit's concerns where the cluster client matters, on the cluster with the namespace
    in one slot (``?prefix={...}:``): the single-slot layout's scripts are the single server's
    (whose whole kit test_conformance.py runs), so this run checks the routing, the error
    mapping and lost replies through the cluster client (the whole kit passes here too: about
    70 s on this machine, over the budget of ``make test``)."""

    expected_failures: ClassVar[dict[str, str]] = {}

    @pytest.fixture
    def harel_harness(self, redis_cluster: RedisClusterProcess) -> Iterator[RedisHarness]:
        harness = RedisHarness(redis_cluster.url, prefix=tagged_prefix())
        yield harness
        harness.destroy()


CLUSTER_SHARDED_CONCERNS = tuple(
    concern
    for concern in ConformanceSuite.__bases__
    if concern not in (ArgumentErrorTests, BadInputTests)
)
"""Every kit concern but the argument and bad-input checks (refused before any key is read)."""


class TestRedisClusterShardedConformance(*CLUSTER_SHARDED_CONCERNS):
    """The kit on the cluster in the sharded layout: three shards, one per master, so most
    emits, claims and sweeps cross masters.  Every concern but the argument and bad-input
    checks, which refuse before any key is touched (the sharded layout's whole kit, those
    included, runs on one server in test_sharded_conformance.py)."""

    expected_failures: ClassVar[dict[str, str]] = {}

    @pytest.fixture
    def harel_harness(self, redis_cluster: RedisClusterProcess) -> Iterator[RedisHarness]:
        url = f"{redis_cluster.url}&shards=3"
        harness = RedisHarness(url, prefix=f"kit-{uuid.uuid4().hex[:12]}:")
        yield harness
        harness.destroy()


def test_an_untagged_prefix_on_a_cluster_is_a_config_error_naming_the_fixes(
    redis_cluster: RedisClusterProcess,
) -> None:
    url = with_prefix(redis_cluster.url, f"plain-{uuid.uuid4().hex[:8]}:")
    with pytest.raises(StoreConfigError) as info:
        RedisStore.from_url(url, connect_retries=0)
    message = str(info.value)
    assert "hash tag" in message and "?prefix={harel}:" in message and "?shards=" in message


@pytest.mark.anyio
async def test_async_an_untagged_prefix_on_a_cluster_is_a_config_error(
    redis_cluster: RedisClusterProcess,
) -> None:
    url = with_prefix(redis_cluster.url, f"plain-{uuid.uuid4().hex[:8]}:")
    with pytest.raises(StoreConfigError, match="hash tag"):
        await AsyncRedisStore.from_url(url, connect_retries=0)


def test_a_plain_client_on_a_cluster_node_is_told_to_use_the_cluster_knob(
    redis_cluster: RedisClusterProcess,
) -> None:
    """Without ``?cluster=yes`` the client talks to one node; the first key another node
    serves is redirected (MOVED), which names the knob."""
    url = with_prefix(redis_cluster.url.replace("?cluster=yes", ""), tagged_prefix())
    with pytest.raises(StoreConfigError, match=r"\?cluster=yes"):
        for n in range(8):  # some prefix of these lands on another node
            store = RedisStore.from_url(with_prefix(url, f"{{p{n}}}:"), connect_retries=0)
            try:
                store.commit(new_exe("e"), [(None, event("x"))])
            finally:
                store.close()


def test_a_tagged_prefix_keeps_the_whole_store_in_one_slot(
    redis_cluster: RedisClusterProcess,
) -> None:
    harness = RedisHarness(redis_cluster.url, prefix=tagged_prefix())
    try:
        store = harness.open_sync()
        store.commit(new_exe("a"), [("b", event("x"))], timers=(), processed_event_id="p")
        assert store.load("a") is not None
        with harness._raw() as client:
            slots = {client.keyslot(key) for key in harness.all_keys()}
        assert len(slots) == 1
    finally:
        harness.destroy()


# -- sharded layout on the cluster -----------------------------------------------------------------


def sharded_harness(cluster: RedisClusterProcess, shards: int = 3) -> RedisHarness:
    """A fresh namespace on ``cluster`` in the sharded layout."""
    return RedisHarness(f"{cluster.url}&shards={shards}", prefix=f"kit-{uuid.uuid4().hex[:12]}:")


def test_the_sharded_layout_spreads_over_every_master(redis_cluster: RedisClusterProcess) -> None:
    harness = sharded_harness(redis_cluster)
    try:
        store = harness.open_sync()
        for n in range(60):
            store.commit(new_exe(f"s-{n}"), [(f"s-{n + 1}", event(f"e{n}"))])
        masters = {redis_cluster.master_of(key_slot(key)) for key in harness.all_keys()}
        assert len(masters) == 3
        assert [e.event.id for e in store.pending_outbox()] == [f"e{n}" for n in range(60)]
    finally:
        harness.destroy()


def test_failover_a_stopped_masters_commits_fail_typed_and_no_acknowledged_one_is_lost(
    private_cluster: RedisClusterProcess,
) -> None:
    """A master stopped: commits to its shard raise ``StoreUnavailable`` (or its
    ``CommitOutcomeUnknown``), those of the other shards are stored; once its replica took
    over, every acknowledged commit is there and its shard takes commits again, through the
    same store object."""
    cluster = private_cluster
    store = sharded_harness(cluster).open_sync()
    try:
        shards = store._plan.shards
        assert shards is not None
        by_shard: dict[int, list[Execution]] = {0: [], 1: [], 2: []}
        n = 0
        while min(len(exes) for exes in by_shard.values()) < 4:
            exe = new_exe(f"f-{n}")
            by_shard[shards.home(exe.id)].append(exe)
            n += 1
        acknowledged: dict[str, int] = {}
        emitted: set[str] = set()

        def step(exe: Execution, tag: str) -> None:
            exe.context["last"] = tag
            store.commit(exe, [(None, event(tag))], timers=(TimerOp.schedule("/t", 9.0),))
            acknowledged[exe.id] = exe.version
            emitted.add(tag)

        for exes in by_shard.values():
            for exe in exes:
                step(exe, f"{exe.id}-before")
        victim_shard = 1
        victim = cluster.master_of(key_slot(shards.shards[victim_shard].work))
        cluster.stop_node(victim)
        failures: list[BaseException] = []
        for exe in by_shard[victim_shard]:
            with pytest.raises(StoreUnavailable) as info:
                step(exe, f"{exe.id}-during")
            failures.append(info.value)
        for shard in (0, 2):
            for exe in by_shard[shard]:
                step(exe, f"{exe.id}-during")  # the other masters go on
        cluster.wait_healthy(60.0)  # the replica was elected; every slot is served again
        for exe in by_shard[victim_shard]:
            exe.version = acknowledged[exe.id]
            reloaded = store.load(exe.id)
            assert reloaded is not None
            if reloaded.version > exe.version:  # an unknown outcome that landed: settle it
                exe = reloaded
                acknowledged[exe.id] = reloaded.version
            step(exe, f"{exe.id}-after")
        for exes in by_shard.values():
            for exe in exes:
                loaded = store.load(exe.id)
                assert loaded is not None and loaded.version == acknowledged[exe.id]
        pending = {e.event.id for e in store.pending_outbox()}
        assert emitted <= pending, sorted(emitted - pending)
        assert all(isinstance(f, StoreUnavailable) for f in failures)
    finally:
        store.close()


@pytest.mark.parametrize(("mode", "rival"), CASES)
def test_lost_replies_on_the_sharded_cluster_never_misreport_the_commit(
    redis_cluster: RedisClusterProcess, mode: FaultMode, rival: bool
) -> None:
    """The kit's lost-reply case, with the proxy in front of the master that serves the case's
    execution (the kit's own run proxies one address, which a sharded namespace does not
    have)."""
    harness = sharded_harness(redis_cluster)
    try:
        shards = ShardMap.of(harness.keys, 3)
        execution_id = f"kit-lost-{mode}-{'rival' if rival else 'alone'}"
        master = redis_cluster.master_of(key_slot(shards.keys_of(execution_id).work))
        harness.proxied_master = ("127.0.0.1", master)
        kit = Kit("sync", harness, True, SyncAsAsync(harness.open_sync()))
        try:
            run_inline(lost_reply._one_case(kit, ("127.0.0.1", master), mode, rival))
        finally:
            run_inline(kit.aclose())
            run_inline(kit.store.close())
    finally:
        harness.destroy()


def test_wakeups_on_the_sharded_cluster(redis_cluster: RedisClusterProcess) -> None:
    """Writes in every shard publish on the one ``<prefix>wake`` channel; classic pub/sub
    carries them to the waiter's node."""
    harness = sharded_harness(redis_cluster)
    try:
        check_sync_wakeups(harness.open_sync)
    finally:
        harness.destroy()


@pytest.mark.anyio
async def test_async_wakeups_on_the_sharded_cluster(redis_cluster: RedisClusterProcess) -> None:
    harness = sharded_harness(redis_cluster)
    try:
        await check_async_wakeups(harness.open_async)
    finally:
        for store in list(harness._async):
            await store.close()
        harness.destroy()


def test_a_sharded_store_on_a_cluster_exists_once_created(
    redis_cluster: RedisClusterProcess,
) -> None:
    harness = sharded_harness(redis_cluster)
    try:
        assert not store_exists(harness.url())
        harness.open_sync()
        assert store_exists(harness.url())
    finally:
        harness.destroy()
