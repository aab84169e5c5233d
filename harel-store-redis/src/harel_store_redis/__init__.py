"""harel-store-redis: the Redis ``ExecutionStore`` (sync over redis-py, async over redis.asyncio).

The store classes are imported on first access, so importing the plugin module
(``harel_store_redis._spec``, what the entry point names) never loads ``redis``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harel.store.author import lazy_exports

if TYPE_CHECKING:
    from harel_store_redis.aio import AsyncRedisStore
    from harel_store_redis.sync import RedisStore

__all__ = ["AsyncRedisStore", "RedisStore"]

__getattr__ = lazy_exports(
    __name__,
    {"RedisStore": "harel_store_redis.sync", "AsyncRedisStore": "harel_store_redis.aio"},
)
