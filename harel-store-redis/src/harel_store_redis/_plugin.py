"""Registers the Redis backend with harel's store registry (imports no driver, no engine)."""

from __future__ import annotations

from collections.abc import Callable

from harel.registry import StoreBackend, hookimpl

from harel_store_redis._capabilities import CAPABILITIES
from harel_store_redis._legacy import VARIABLES as LEGACY_VARIABLES

DISTRIBUTION = "harel-store-redis"


@hookimpl
def harel_register_stores(register: Callable[[StoreBackend], None]) -> None:
    """Register ``redis://``, ``rediss://`` and ``unix://`` (sync ``RedisStore``, async
    ``AsyncRedisStore``)."""
    register(
        StoreBackend(
            name="redis",
            schemes=("redis", "rediss", "unix"),
            store="harel_store_redis.sync:RedisStore",
            async_store="harel_store_redis.aio:AsyncRedisStore",
            capabilities=CAPABILITIES,
            distribution=DISTRIBUTION,
            harness="harel_store_redis.testing:harness_from_url",
            # the Redis server on this machine; each workdir gets its own key prefix
            local_url="redis://127.0.0.1:6379/0?prefix=harel-test:{workdir}:",
            description="Redis (redis-py; async over redis.asyncio): one Lua script per commit",
            exists="harel_store_redis._exists:store_exists",
            legacy_env="harel_store_redis._legacy:url_from_env",
            legacy_vars=LEGACY_VARIABLES,
        )
    )
