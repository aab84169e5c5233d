"""The conformance kit against the sharded layout on the single Redis server of this machine
(``?shards=3``: every operation routed or fanned out as on a cluster, all shards on one
server)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

import pytest
from harel.conformance import ConformanceSuite
from harel_store_redis.testing import RedisHarness

SHARDS = 3


def sharded_url(url: str, shards: int = SHARDS) -> str:
    """``url`` asking for the sharded layout."""
    return f"{url}{'&' if '?' in url else '?'}shards={shards}"


class TestRedisShardedConformance(ConformanceSuite):
    """Every kit test, the namespace in the sharded layout with three shards."""

    expected_failures: ClassVar[dict[str, str]] = {}

    @pytest.fixture
    def harel_harness(self, redis_url: str) -> Iterator[RedisHarness]:
        harness = RedisHarness(sharded_url(redis_url))
        yield harness
        harness.destroy()
