"""Wake-ups on Redis: the channel the writes publish on (driver-free).

The commit and import scripts ``PUBLISH`` on :func:`channel` when they touched work rows, the
release script when it left work; a state-only commit publishes nothing.  The waiters (one
dedicated pub/sub connection each, ``SUBSCRIBE`` once) are the stores'
(:class:`harel_store_redis.sync.RedisWakeups`, :class:`harel_store_redis.aio.AsyncRedisWakeups`),
under :class:`harel.store.common.wakeups.Wakeups`' rules.

:class:`Subscription` holds what a waiter listens with; its :meth:`Subscription.listen` (the
``SUBSCRIBE`` and its confirmation) and :func:`receive_plan` are the waiters' steps, written
once: each yields :class:`Subscribe` / :class:`NextMessage` requests (``pubsub.subscribe`` and
``pubsub.get_message(timeout=...)``, awaited or not) and the two stores drive them with
:func:`harel.store.author.drive` / ``adrive``.

A channel is not a key: ``PUBLISH`` from a script declares no key, so it does not break the
one-slot rule of a hash-tagged prefix on a Redis Cluster (the message reaches subscribers on
every node).
"""

from __future__ import annotations

import time
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from harel.store.author import unavailable

from harel_store_redis._schema import Keys

SUFFIX = b"wake"

SUBSCRIBE_WITHIN = 10.0
"""Seconds a new subscription has to be confirmed by the server (else ``StoreUnavailable``)."""

DRAIN_MAX = 1000
"""At most this many queued signals are consumed with the one that woke a wait."""

C = TypeVar("C")
"""The client a waiter opens its pub/sub connections from (sync or asyncio)."""


def channel(keys: Keys) -> bytes:
    """The prefix's wake-up channel: ``<prefix>wake`` (``harel:wake`` by default)."""
    return keys.store_prefix + SUFFIX


@dataclass(frozen=True, slots=True)
class Subscribe:
    """-> ``SUBSCRIBE`` the pub/sub connection to ``channel`` (its reply is not needed)."""

    channel: bytes


@dataclass(frozen=True, slots=True)
class NextMessage:
    """-> the next pub/sub message, or ``None`` after ``timeout`` seconds."""

    timeout: float


MessagePlan = Generator[Subscribe | NextMessage, "dict[str, Any] | None", Any]


@dataclass(frozen=True, slots=True)
class Subscription(Generic[C]):
    """What one store's waiter listens with: the ``client`` whose pub/sub connections it
    opens, the prefix's ``channel`` and ``where`` (the redacted address, for errors)."""

    client: C
    channel: bytes
    where: str

    def listen(self) -> MessagePlan:
        """``SUBSCRIBE`` to the channel, then wait for the server's ``subscribe``
        confirmation (listening from then on), at most :data:`SUBSCRIBE_WITHIN` seconds;
        else ``StoreUnavailable``."""
        yield Subscribe(self.channel)
        deadline = time.monotonic() + SUBSCRIBE_WITHIN
        while True:
            message = yield NextMessage(max(deadline - time.monotonic(), 0.0))
            if message is not None and message["type"] == "subscribe":
                return None
            if time.monotonic() >= deadline:
                raise unavailable(self.where, "SUBSCRIBE was not confirmed")


def receive_plan(seconds: float) -> MessagePlan:
    """``True`` once a signal came within ``seconds`` (every signal already queued consumed
    with it, at most :data:`DRAIN_MAX`), ``False`` when the time is up.  A ``subscribe``
    message counts as a signal: the client reconnected and subscribed again by itself (a
    client with retries), so signals may have been missed meanwhile."""
    deadline = time.monotonic() + seconds
    while True:
        message = yield NextMessage(max(deadline - time.monotonic(), 0.0))
        if message is not None and message["type"] in ("message", "subscribe"):
            for _ in range(DRAIN_MAX):  # consumed: their writes ran before this returns
                if (yield NextMessage(0.0)) is None:
                    break
            return True
        if time.monotonic() >= deadline:
            return False
