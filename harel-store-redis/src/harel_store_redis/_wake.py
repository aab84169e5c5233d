"""Wake-ups on Redis: the channel the writes publish on (driver-free).

The commit and import scripts ``PUBLISH`` on :func:`channel` when they touched work rows, the
release script when it left work; a state-only commit publishes nothing.  The waiters (one
dedicated pub/sub connection each, ``SUBSCRIBE`` once) are the stores'
(:class:`harel_store_redis.sync.RedisWakeups`, :class:`harel_store_redis.aio.AsyncRedisWakeups`),
under :class:`harel.store.common.wakeups.Wakeups`' rules.

A channel is not a key: ``PUBLISH`` from a script declares no key, so it does not break the
one-slot rule of a hash-tagged prefix on a Redis Cluster (the message reaches subscribers on
every node).
"""

from __future__ import annotations

from harel_store_redis._schema import Keys

SUFFIX = b"wake"

SUBSCRIBE_WITHIN = 10.0
"""Seconds a new subscription has to be confirmed by the server (else ``StoreUnavailable``)."""

DRAIN_MAX = 1000
"""At most this many queued signals are consumed with the one that woke a wait."""


def channel(keys: Keys) -> bytes:
    """The prefix's wake-up channel: ``<prefix>wake`` (``harel:wake`` by default)."""
    return keys.prefix + SUFFIX
