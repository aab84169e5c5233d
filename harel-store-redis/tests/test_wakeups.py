"""Wake-ups on Redis: SUBSCRIBE to ``<prefix>wake``, PUBLISH from the scripts that touch work
rows (harel.conformance.wakeups' checks, plus what only this backend has)."""

from __future__ import annotations

import pytest
import redis
from harel.conformance.wakeups import LONG, check_async_wakeups, check_sync_wakeups
from harel.model import Event, Execution
from harel.store.contract import TimerOp
from harel.store.errors import StoreUnavailable
from harel_store_redis import AsyncRedisStore
from harel_store_redis._wake import channel
from harel_store_redis.testing import RedisHarness


def test_wakeups_sync(harel_harness: RedisHarness) -> None:
    check_sync_wakeups(harel_harness.open_sync)


@pytest.mark.anyio
async def test_wakeups_async(harel_harness: RedisHarness) -> None:
    await check_async_wakeups(harel_harness.open_async)


@pytest.mark.anyio
@pytest.mark.harel_trio
@pytest.mark.parametrize("anyio_backend", ["trio"])
async def test_wakeups_under_trio(harel_harness: RedisHarness, anyio_backend: str) -> None:
    pytest.importorskip("trio")

    async def open_store() -> AsyncRedisStore:
        return await AsyncRedisStore.from_url(harel_harness.url(), connect_retries=0)

    await check_async_wakeups(open_store, prefix="trio")


def test_writes_publish_on_the_prefix_channel_only_with_touches(
    harel_harness: RedisHarness, redis_url: str
) -> None:
    assert channel(harel_harness.keys) == harel_harness.prefix.encode() + b"wake"
    listener = redis.Redis.from_url(redis_url).pubsub(ignore_subscribe_messages=True)
    listener.subscribe(channel(harel_harness.keys))
    assert listener.get_message(timeout=LONG) is None  # the confirmation, ignored
    store = harel_harness.open_sync()
    try:
        exe = Execution(id="pub-a", definition_id="d")
        store.commit(exe, [])  # state only: the two-key script, no PUBLISH
        store.commit(exe, [], timers=[TimerOp.schedule("/t", 1.0)])
        message = listener.get_message(timeout=LONG)
        assert message is not None and message["channel"] == channel(harel_harness.keys)
        assert listener.get_message(timeout=0.2) is None  # one commit, one message
        store.commit(exe, [(None, Event(id="u", kind="Go"))])
        assert listener.get_message(timeout=LONG) is not None
        assert listener.get_message(timeout=0.2) is None
        store.enqueue("pub-b", Event(id="q", kind="Go"))  # an enqueue publishes once too
        message = listener.get_message(timeout=LONG)
        assert message is not None and message["channel"] == channel(harel_harness.keys)
        assert listener.get_message(timeout=0.2) is None
    finally:
        listener.close()
        store.close()


def test_a_lost_subscriber_is_unavailable_then_subscribes_again(
    harel_harness: RedisHarness, redis_url: str
) -> None:
    waiter, writer = harel_harness.open_sync(), harel_harness.open_sync()
    waiter.wait_for_work(0)  # subscribed
    assert waiter._wakeups is not None
    handle = waiter._wakeups._handle
    assert handle is not None and handle.connection is not None
    host, port = handle.connection._sock.getsockname()[:2]
    admin = redis.Redis.from_url(redis_url)
    try:
        assert admin.client_kill(f"{host}:{port}")
    finally:
        admin.close()
    with pytest.raises(StoreUnavailable):
        waiter.wait_for_work(LONG)
    assert waiter.wait_for_work(0) is True  # subscribes again: True at once
    assert waiter.wait_for_work(0) is False
    writer.commit(Execution(id="lost-a", definition_id="d"), [("lost-b", Event(id="e", kind="Go"))])
    assert waiter.wait_for_work(LONG) is True
