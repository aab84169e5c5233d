"""Checks of the optional ``wait_for_work`` (wake-ups) for a backend's own tests.

Each check takes a factory of fresh store objects over one namespace (a waiter and a writer
are two objects, as two workers would be) and asserts the rules of
:mod:`harel.store.common.wakeups`: the first call listens (and may return ``True`` at once),
a commit that touches work through *another* store object wakes a waiting call, a state-only
commit does not, a commit made between two waits is not lost, a release that leaves work
wakes, an enqueue wakes, a bad timeout is a typed error and closing the store ends a wait.
No check measures time: a wake that never comes shows as a ``False`` after a long timeout (a
slow failure).
The async check runs under asyncio and trio alike (anyio tasks).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from harel.model import Event, Execution
from harel.store.contract import TimerOp
from harel.store.errors import InvalidArgument, StoreError

LONG = 60.0
"""The timeout of a wait that must be woken (returning ``False`` after it is the failure)."""
SHORT = 0.2
"""The timeout of a wait that must not be woken."""

__all__ = ["LONG", "SHORT", "check_async_wakeups", "check_sync_wakeups"]


def _later() -> float:
    return time.time() + 10_000.0


SETTLE_MAX = 100
"""How many ``True`` answers in a row a settling waiter may give (each consumes signals)."""


def _settle(waiter: Any) -> None:
    """Listen, then consume whatever is pending (a first call may return ``True`` at once)."""
    for _ in range(SETTLE_MAX):
        if not waiter.wait_for_work(0):
            return
    pytest.fail(f"wait_for_work(0) returned True {SETTLE_MAX} times with nothing sent")


class _Waiting(threading.Thread):
    """``store.wait_for_work(timeout)`` in a thread: its result or its exception."""

    def __init__(self, store: Any, timeout: float) -> None:
        super().__init__(daemon=True)
        self._store, self._timeout = store, timeout
        self.outcome: object = None

    def run(self) -> None:
        try:
            self.outcome = self._store.wait_for_work(self._timeout)
        except BaseException as exc:  # handed to the test
            self.outcome = exc

    def result(self) -> object:
        self.join(LONG * 2)
        assert not self.is_alive(), "wait_for_work did not return within twice its timeout"
        return self.outcome


def check_sync_wakeups(open_store: Callable[[], Any], prefix: str = "wake") -> None:
    """Every rule above on a sync store; ``open_store()`` gives a new object each call."""
    waiter, writer = open_store(), open_store()
    try:
        for bad in (-1, 3601, math.nan, math.inf):
            with pytest.raises(InvalidArgument):
                waiter.wait_for_work(bad)
        with pytest.raises(TypeError):
            waiter.wait_for_work("1")
        _settle(waiter)
        assert waiter.wait_for_work(0) is False, "a wait with nothing sent returned True"

        waiting = _Waiting(waiter, LONG)
        waiting.start()
        a = Execution(id=f"{prefix}-a", definition_id="d")
        writer.commit(a, [(f"{prefix}-b", Event(id="e1", kind="Go"))])
        assert waiting.result() is True, "a commit that emits did not wake the waiting call"

        writer.commit(a, [])  # the snapshot alone
        assert waiter.wait_for_work(SHORT) is False, "a state-only commit woke the waiter"

        writer.commit(a, [], timers=[TimerOp.schedule("/t", time.time() + 3600)])
        assert waiter.wait_for_work(LONG) is True, "a commit between two waits was lost"

        claims = writer.claim(f"{prefix}-owner", _later(), lease=60.0, limit=10)
        assert claims, "the emitted event was not claimable"
        _settle(waiter)
        writer.release(f"{prefix}-owner", claims[0].execution_id)
        assert waiter.wait_for_work(LONG) is True, "a release that leaves work did not wake"

        _settle(waiter)
        waiting = _Waiting(waiter, LONG)
        waiting.start()
        writer.enqueue(f"{prefix}-c", Event(id="q1", kind="Go"))
        assert waiting.result() is True, "an enqueue did not wake the waiting call"

        waiting = _Waiting(waiter, LONG)
        waiting.start()
        waiter.close()
        outcome = waiting.result()
        assert outcome is False or isinstance(outcome, StoreError), outcome
        with pytest.raises(StoreError):
            waiter.wait_for_work(0)
    finally:
        waiter.close()
        writer.close()


async def _asettle(waiter: Any) -> None:
    for _ in range(SETTLE_MAX):
        if not await waiter.wait_for_work(0):
            return
    pytest.fail(f"wait_for_work(0) returned True {SETTLE_MAX} times with nothing sent")


async def _wait_while(waiter: Any, seconds: float, action: Callable[[], Awaitable[Any]]) -> object:
    """Start ``waiter.wait_for_work(seconds)`` in a task, run ``action()``, return the wait's
    result (or exception)."""
    outcome: list[object] = []

    async def wait() -> None:
        try:
            outcome.append(await waiter.wait_for_work(seconds))
        except StoreError as exc:
            outcome.append(exc)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(wait)
        await anyio.lowlevel.checkpoint()
        await action()
    return outcome[0]


async def check_async_wakeups(
    open_store: Callable[[], Awaitable[Any]], prefix: str = "awake"
) -> None:
    """Every rule above on an async store, plus: a cancelled wait leaves the store's waiter
    usable (the next wait listens again and no later signal is lost)."""
    waiter, writer = await open_store(), await open_store()
    try:
        for bad in (-1, 3601, math.nan):
            with pytest.raises(InvalidArgument):
                await waiter.wait_for_work(bad)
        await _asettle(waiter)
        assert await waiter.wait_for_work(0) is False, "a wait with nothing sent returned True"

        a = Execution(id=f"{prefix}-a", definition_id="d")

        async def emit() -> None:
            await writer.commit(a, [(f"{prefix}-b", Event(id="e1", kind="Go"))])

        woke = await _wait_while(waiter, LONG, emit)
        assert woke is True, "a commit that emits did not wake the waiting task"

        await writer.commit(a, [])
        assert await waiter.wait_for_work(SHORT) is False, "a state-only commit woke the waiter"

        await writer.commit(a, [], timers=[TimerOp.schedule("/t", time.time() + 3600)])
        assert await waiter.wait_for_work(LONG) is True, "a commit between two waits was lost"

        async with anyio.create_task_group() as tasks:  # a wait cancelled midway
            tasks.start_soon(waiter.wait_for_work, LONG)
            await anyio.lowlevel.checkpoint()
            tasks.cancel_scope.cancel()
        await writer.commit(a, [(f"{prefix}-b", Event(id="e2", kind="Go"))])
        assert await waiter.wait_for_work(LONG) is True, "after a cancelled wait: no wake"
        await _asettle(waiter)
        woke = await _wait_while(waiter, LONG, emit_again(writer, a, prefix))
        assert woke is True, "after a cancelled wait, a later commit was lost"

        claims = await writer.claim(f"{prefix}-owner", _later(), lease=60.0, limit=10)
        assert claims, "the emitted events were not claimable"
        await _asettle(waiter)
        await writer.release(f"{prefix}-owner", claims[0].execution_id)
        assert await waiter.wait_for_work(LONG) is True, "a release that leaves work did not wake"

        await _asettle(waiter)

        async def enqueue() -> None:
            await writer.enqueue(f"{prefix}-c", Event(id="q1", kind="Go"))

        woke = await _wait_while(waiter, LONG, enqueue)
        assert woke is True, "an enqueue did not wake the waiting task"

        outcome = await _wait_while(waiter, LONG, waiter.close)
        assert outcome is False or isinstance(outcome, StoreError), outcome
        with pytest.raises(StoreError):
            await waiter.wait_for_work(0)
    finally:
        await waiter.close()
        await writer.close()


def emit_again(writer: Any, exe: Execution, prefix: str) -> Callable[[], Awaitable[None]]:
    """An action committing one more emitted event (a fresh event id each call)."""

    async def action() -> None:
        await writer.commit(exe, [(f"{prefix}-b", Event(id=f"e-{time.time_ns()}", kind="Go"))])

    return action
