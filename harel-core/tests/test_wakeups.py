"""The shared wake-up rules (harel.store.common.wakeups) over a fake channel: no server."""

from __future__ import annotations

import math
import threading

import pytest
from harel.store.common.wakeups import MAX_WAIT, Wakeups, check_wait
from harel.store.errors import InvalidArgument, StoreError, StoreUnavailable


class _Channel(Wakeups[list[int]]):
    """Signals are ints in a list guarded by a condition; ``fail`` makes the next receive
    lose its connection."""

    def __init__(self) -> None:
        super().__init__("fake://")
        self.cond = threading.Condition()
        self.listens = 0
        self.hung_up = 0
        self.fail = False

    def _listen(self) -> list[int]:
        self.listens += 1
        return []

    def _receive(self, handle: list[int], seconds: float) -> bool:
        with self.cond:
            if self.fail:
                self.fail = False
                raise StoreUnavailable("lost")
            self.cond.wait_for(lambda: bool(handle), timeout=seconds)
            woke = bool(handle)
            handle.clear()
            return woke

    def _hang_up(self, handle: list[int]) -> None:
        self.hung_up += 1

    def _poke(self) -> None:
        self.send()

    def send(self) -> None:
        with self.cond:
            if self._handle is not None:
                self._handle.append(1)
            self.cond.notify_all()


def test_check_wait_bounds() -> None:
    assert check_wait(0) == 0.0 and check_wait(MAX_WAIT) == MAX_WAIT
    for bad in (-0.1, MAX_WAIT + 1, math.nan):
        with pytest.raises(InvalidArgument, match="timeout"):
            check_wait(bad)
    with pytest.raises(TypeError):
        check_wait(True)


def test_first_call_listens_then_signals_are_kept_between_calls() -> None:
    channel = _Channel()
    assert channel.wait(0) is True and channel.listens == 1
    assert channel.wait(0) is False
    channel.send()
    channel.send()
    assert channel.wait(0) is True  # both consumed by one wake
    assert channel.wait(0) is False


def test_a_lost_connection_is_unavailable_and_the_next_call_listens_again() -> None:
    channel = _Channel()
    channel.wait(0)
    channel.fail = True
    with pytest.raises(StoreUnavailable):
        channel.wait(0)
    assert channel.hung_up == 1
    assert channel.wait(0) is True and channel.listens == 2


def test_a_kept_wake_is_returned_by_the_next_call() -> None:
    channel = _Channel()
    channel.wait(0)
    channel.keep_wake()
    assert channel.wait(0) is True
    assert channel.wait(0) is False


def test_close_ends_a_wait_and_later_calls_raise() -> None:
    channel = _Channel()
    channel.wait(0)
    outcome: list[object] = []
    entered = threading.Event()
    original = channel._receive

    def receive(handle: list[int], seconds: float) -> bool:
        entered.set()
        return original(handle, seconds)

    channel._receive = receive  # type: ignore[method-assign]
    waiting = threading.Thread(target=lambda: outcome.append(channel.wait(60)))
    waiting.start()
    assert entered.wait(30)
    channel.close()
    waiting.join(30)
    assert outcome == [False] and channel.hung_up == 1
    with pytest.raises(StoreError, match="closed"):
        channel.wait(0)
