"""The wake-up steps without a server: the ``SUBSCRIBE`` and its confirmation, the wait for a
signal (the plans are stepped by hand, on a clock the test moves)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from harel.store.errors import StoreUnavailable
from harel_store_redis import _wake
from harel_store_redis._wake import NextMessage, Subscribe, Subscription, receive_plan


class Clock:
    """A ``time.monotonic`` that moves only when the test says so."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(_wake, "time", SimpleNamespace(monotonic=fake))
    return fake


LINE = Subscription(client=object(), channel=b"p:wake", where="redis://h:6379/0")


def test_listen_subscribes_first_then_returns_on_the_confirmation(clock: Clock) -> None:
    plan = LINE.listen()
    assert next(plan) == Subscribe(b"p:wake")
    assert plan.send(None) == NextMessage(_wake.SUBSCRIBE_WITHIN)
    clock.now += 4.0
    assert plan.send({"type": "message"}) == NextMessage(_wake.SUBSCRIBE_WITHIN - 4.0)
    with pytest.raises(StopIteration) as done:
        plan.send({"type": "subscribe"})
    assert done.value.value is None


def test_listen_counts_its_deadline_from_the_subscribe_reply(clock: Clock) -> None:
    plan = LINE.listen()
    next(plan)
    clock.now += 50.0  # a slow SUBSCRIBE does not eat into the confirmation's time
    assert plan.send(None) == NextMessage(_wake.SUBSCRIBE_WITHIN)


def test_an_unconfirmed_subscribe_is_unavailable_at_the_deadline(clock: Clock) -> None:
    plan = LINE.listen()
    next(plan)
    plan.send(None)
    clock.now += _wake.SUBSCRIBE_WITHIN
    with pytest.raises(StoreUnavailable, match="SUBSCRIBE was not confirmed") as raised:
        plan.send(None)
    assert "redis://h:6379/0" in str(raised.value)


def test_receive_drains_what_is_queued_with_the_signal(clock: Clock) -> None:
    plan = receive_plan(5.0)
    assert next(plan) == NextMessage(5.0)
    assert plan.send({"type": "message"}) == NextMessage(0.0)
    assert plan.send({"type": "message"}) == NextMessage(0.0)
    with pytest.raises(StopIteration) as done:
        plan.send(None)
    assert done.value.value is True


def test_receive_is_false_when_the_time_is_up(clock: Clock) -> None:
    plan = receive_plan(5.0)
    next(plan)
    clock.now += 5.0
    with pytest.raises(StopIteration) as done:
        plan.send(None)
    assert done.value.value is False
