"""``list_leases`` on DynamoDB (moto's server): the shared lease scenario (claims, renewals, a
release, a purge, refused arguments), sync and async: on a table with one index shard (every
row in one GSI1 partition per tier, so the free row dated before the leases makes the read page
on), and on one with three, the groups in different shards (merged in order)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from harel_store_dynamodb._schema import shard_of
from harel_store_dynamodb.testing import DynamoDBHarness
from harel_testing.leases import arun_lease_scenario, run_lease_scenario

pytestmark = pytest.mark.anyio

SHARDS = 3


@pytest.fixture
def sharded(dynamodb_target: dict[str, Any]) -> Iterator[DynamoDBHarness]:
    harness = DynamoDBHarness(**dynamodb_target, index_shards=SHARDS)
    yield harness
    harness.destroy()


@pytest.fixture
def one_shard(dynamodb_target: dict[str, Any]) -> Iterator[DynamoDBHarness]:
    harness = DynamoDBHarness(**dynamodb_target, index_shards=1)
    yield harness
    harness.destroy()


def on_other_shards() -> list[str]:
    """Two ids indexed in two different shards, neither the untargeted group's."""
    taken = {shard_of("", SHARDS)}
    found: list[str] = []
    for n in range(1000):
        shard = shard_of(f"x{n}", SHARDS)
        if shard not in taken:
            taken.add(shard)
            found.append(f"x{n}")
    return found


def test_leases_follow_claims_renewals_releases_and_purges(one_shard: DynamoDBHarness) -> None:
    run_lease_scenario(one_shard.open_sync())


async def test_the_async_store_lists_the_same_leases(one_shard: DynamoDBHarness) -> None:
    await arun_lease_scenario(await one_shard.open_async())


def test_sharded_leases_merge_every_shard_in_order(sharded: DynamoDBHarness) -> None:
    first, second = on_other_shards()
    run_lease_scenario(sharded.open_sync(), first, second)


async def test_the_async_sharded_store_lists_the_same_leases(sharded: DynamoDBHarness) -> None:
    second, first = on_other_shards()
    await arun_lease_scenario(await sharded.open_async(), first, second)
