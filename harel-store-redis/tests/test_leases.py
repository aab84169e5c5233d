"""``list_leases`` on Redis: the shared lease scenario (claims, renewals, a release, a purge,
refused arguments) in the single-slot layout, sync and async, in the sharded layout with the
groups on different shards (each lease read from its group's home shard, merged in order), and
on a Redis Cluster."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from harel_store_redis._shards import shard_of
from harel_store_redis.testing import RedisHarness
from harel_testing.leases import arun_lease_scenario, run_lease_scenario
from harel_testing.redis import RedisClusterProcess

pytestmark = pytest.mark.anyio

SHARDS = 3


def on_shards(*shards: int) -> list[str]:
    """One execution id living in each of ``shards`` (of :data:`SHARDS`)."""
    return [next(f"x{n}" for n in range(1000) if shard_of(f"x{n}", SHARDS) == i) for i in shards]


def sharded(url: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}shards={SHARDS}"


@pytest.fixture
def sharded_harness(redis_url: str) -> Iterator[RedisHarness]:
    harness = RedisHarness(sharded(redis_url))
    yield harness
    harness.destroy()


def test_leases_follow_claims_renewals_releases_and_purges(harel_harness: RedisHarness) -> None:
    run_lease_scenario(harel_harness.open_sync())


async def test_the_async_store_lists_the_same_leases(harel_harness: RedisHarness) -> None:
    await arun_lease_scenario(await harel_harness.open_async())


def test_sharded_leases_merge_the_home_rows_of_every_shard(
    sharded_harness: RedisHarness,
) -> None:
    # the untargeted group lives in shard 0, its entry (and a remote row the claim marks
    # leased, not renewed) with the second execution in shard 2, the first in shard 1
    first, second = on_shards(1, 2)
    run_lease_scenario(sharded_harness.open_sync(), first, second)


async def test_the_async_sharded_store_lists_the_same_leases(
    sharded_harness: RedisHarness,
) -> None:
    first, second = on_shards(2, 1)
    await arun_lease_scenario(await sharded_harness.open_async(), first, second)


def test_leases_on_a_cluster_in_the_sharded_layout(redis_cluster: RedisClusterProcess) -> None:
    harness = RedisHarness(sharded(redis_cluster.url), prefix=f"leases-{uuid.uuid4().hex[:12]}:")
    try:
        run_lease_scenario(harness.open_sync(), *on_shards(1, 2))
    finally:
        harness.destroy()
