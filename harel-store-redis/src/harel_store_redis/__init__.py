"""harel-store-redis: the Redis ``ExecutionStore`` (sync over redis-py, async over redis.asyncio).

The store classes are imported on first access, so importing the plugin module
(``harel_store_redis._plugin``) never loads ``redis``.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harel_store_redis.aio import AsyncRedisStore
    from harel_store_redis.sync import RedisStore

__all__ = ["AsyncRedisStore", "RedisStore"]

_LAZY = {
    "RedisStore": "harel_store_redis.sync",
    "AsyncRedisStore": "harel_store_redis.aio",
}


def __getattr__(name: str) -> Any:
    """Import ``RedisStore`` / ``AsyncRedisStore`` on first use."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'harel_store_redis' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
