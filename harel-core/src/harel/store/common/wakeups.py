"""Wake-ups for idle workers: the optional ``wait_for_work(timeout)`` of a store, written once.

A backend that can push a signal when a write may have made work ready (PostgreSQL
``LISTEN/NOTIFY``, Redis pub/sub) subclasses :class:`Wakeups` (sync) or
:class:`AsyncWakeups` (asyncio) and says only how to listen, receive, hang up and poke; the
rules live here:

* ``timeout`` is checked (:func:`check_wait`: a number in ``[0, MAX_WAIT]``, else
  :class:`~harel.store.errors.InvalidArgument`; a non-number is a ``TypeError``).
* The first call listens (a dedicated connection, outside any pool) and returns ``True`` at
  once: a write made before the listener was in place would otherwise be missed.  Later calls
  block up to ``timeout`` and return ``True`` when a signal came (every signal already
  received is consumed with it: their writes committed before the call returns), ``False``
  on timeout.  A spurious ``True`` is allowed, a missed signal is not.
* A lost connection raises :class:`~harel.store.errors.StoreUnavailable` and hangs up; the
  next call listens again (and returns ``True`` at once).
* Calls on one store are serialised; a call that waited for another's turn returns ``True``
  when that one was woken meanwhile.
* ``close()`` ends a wait in progress (it pokes the channel; the waiting call then hangs up
  and returns ``False``, also when the store closed the connection under it) and hangs up an
  idle listener; a later call raises the store's "closed" error.  Async: a cancelled wait
  hangs up (shielded), so nothing is left half read; the next call listens again.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from abc import ABC, abstractmethod
from typing import Any, Generic, TypeVar

from harel.store.common.validate import check_now, show
from harel.store.errors import InvalidArgument, StoreError, StoreUnavailable

__all__ = [
    "MAX_WAIT",
    "SLICE",
    "AsyncWakeups",
    "Wakeups",
    "check_wait",
    "unavailable",
    "wait_in_thread",
]

MAX_WAIT = 3600.0
"""The longest ``wait_for_work`` timeout, in seconds."""

H = TypeVar("H")
"""The backend's listening handle (a connection, a pub/sub object)."""


def check_wait(timeout: object) -> float:
    """``wait_for_work``'s timeout: a finite number of seconds in ``[0, MAX_WAIT]``."""
    seconds = check_now(timeout, "timeout")
    if not 0 <= seconds <= MAX_WAIT:
        raise InvalidArgument(
            f"timeout must be a number of seconds in [0, {MAX_WAIT:g}], got {show(timeout)}"
        )
    return seconds


class Wakeups(ABC, Generic[H]):
    """The sync waiter of one store (see the module docstring); thread-safe."""

    def __init__(self, where: str) -> None:
        self.where = where
        self._lock = threading.Lock()
        self._handle: H | None = None
        self._wakes = 0
        self._kept = False
        self._closed = False

    @abstractmethod
    def _listen(self) -> H:
        """A new dedicated connection, listening when this returns (store errors only)."""

    @abstractmethod
    def _receive(self, handle: H, seconds: float) -> bool:
        """Block up to ``seconds`` for a signal; consume every one received (store errors
        only: a lost connection is ``StoreUnavailable``)."""

    @abstractmethod
    def _hang_up(self, handle: H) -> None:
        """Close ``handle``; never raises."""

    @abstractmethod
    def _poke(self) -> None:
        """Send one signal on the channel through the store's own connections."""

    def wait(self, timeout: object) -> bool:
        """``wait_for_work``: ``True`` when work may be ready, ``False`` after ``timeout``."""
        seconds = check_wait(timeout)
        if self._closed:
            raise StoreError(f"the store over {self.where} is closed; open a new store")
        seen = self._wakes
        deadline = time.monotonic() + seconds
        if not self._lock.acquire(timeout=seconds):
            return self._wakes != seen
        try:
            return self._turn(seen, deadline)
        finally:
            self._lock.release()
            if self._closed:
                self._drop_if_idle()

    def keep_wake(self) -> None:
        """Make the next call return ``True`` at once (a wake its caller could not act on)."""
        self._kept = True

    def _turn(self, seen: int, deadline: float) -> bool:
        if self._wakes != seen:
            return True
        if self._closed:
            return False
        if self._kept:
            self._kept = False
            return True
        handle = self._handle
        try:
            if handle is None:
                self._handle = self._listen()
                return True
            woke = self._receive(handle, max(deadline - time.monotonic(), 0.0))
        except Exception:
            self._drop()
            if self._closed:  # the store closed its connections under the wait
                return False
            raise
        except BaseException:
            self._drop()
            raise
        if self._closed:
            return False
        if woke:
            self._wakes += 1
        return woke

    def _drop(self) -> None:
        handle, self._handle = self._handle, None
        if handle is not None:
            self._hang_up(handle)

    def _drop_if_idle(self) -> None:
        if self._lock.acquire(blocking=False):
            try:
                self._drop()
            finally:
                self._lock.release()

    def close(self) -> None:
        """Hang up (a wait in progress is poked and hangs up itself); idempotent.  Call it
        while the store's own connections are still open."""
        self._closed = True
        if self._lock.acquire(blocking=False):
            try:
                self._drop()
            finally:
                self._lock.release()
            return
        with contextlib.suppress(StoreError):
            self._poke()


class AsyncWakeups(ABC, Generic[H]):
    """The asyncio waiter of one store (see the module docstring); for tasks of one loop."""

    def __init__(self, where: str) -> None:
        self.where = where
        self._lock: asyncio.Lock | None = None
        self._hanging: set[asyncio.Future[None]] = set()
        self._handle: H | None = None
        self._wakes = 0
        self._closed = False

    @abstractmethod
    async def _listen(self) -> H:
        """A new dedicated connection, listening when this returns (store errors only)."""

    @abstractmethod
    async def _receive(self, handle: H, seconds: float) -> bool:
        """Wait up to ``seconds`` for a signal; consume every one received."""

    @abstractmethod
    async def _hang_up(self, handle: H) -> None:
        """Close ``handle``; never raises."""

    @abstractmethod
    async def _poke(self) -> None:
        """Send one signal on the channel through the store's own connections."""

    async def wait(self, timeout: object) -> bool:  # noqa: ASYNC109 - the contract's shape
        """``wait_for_work``: ``True`` when work may be ready, ``False`` after ``timeout``."""
        seconds = check_wait(timeout)
        if self._closed:
            raise StoreError(f"the store over {self.where} is closed; open a new store")
        seen = self._wakes
        deadline = time.monotonic() + seconds
        lock = self._lock
        if lock is None:
            lock = self._lock = asyncio.Lock()
        try:
            async with asyncio.timeout(seconds):
                await lock.acquire()
        except TimeoutError:
            return self._wakes != seen
        try:
            return await self._turn(seen, deadline)
        finally:
            lock.release()
            if self._closed:
                await asyncio.shield(self._drop())

    async def _turn(self, seen: int, deadline: float) -> bool:
        if self._wakes != seen:
            return True
        if self._closed:
            return False
        if self._handle is None:
            listening = asyncio.ensure_future(self._listen())
            try:
                self._handle = await asyncio.shield(listening)
            except asyncio.CancelledError:
                # a half-made listener is hung up once it exists; nothing is left behind
                listening.add_done_callback(self._discard)
                raise
            return True
        try:
            woke = await self._receive(self._handle, max(deadline - time.monotonic(), 0.0))
        except Exception:
            await asyncio.shield(self._drop())
            if self._closed:  # the store closed its connections under the wait
                return False
            raise
        except BaseException:
            await asyncio.shield(self._drop())
            raise
        if self._closed:
            return False
        if woke:
            self._wakes += 1
        return woke

    def _discard(self, listening: asyncio.Future[H]) -> None:
        if not listening.cancelled() and listening.exception() is None:
            task = asyncio.ensure_future(self._hang_up(listening.result()))
            self._hanging.add(task)
            task.add_done_callback(self._hanging.discard)

    async def _drop(self) -> None:
        handle, self._handle = self._handle, None
        if handle is not None:
            await self._hang_up(handle)

    async def close(self) -> None:
        """Hang up (a wait in progress is poked and hangs up itself); idempotent.  Call it
        while the store's own connections are still open."""
        self._closed = True
        if self._lock is None or not self._lock.locked():
            await self._drop()
            return
        with contextlib.suppress(StoreError):
            await self._poke()


SLICE = 0.5
"""Seconds of one thread hop of :func:`wait_in_thread` (its cancellation latency)."""


async def wait_in_thread(waiter: Wakeups[Any], timeout: object) -> bool:  # noqa: ASYNC109
    """``wait_for_work`` of a sync store's ``waiter`` from trio (the form of an asyncio-only
    backend there): the wait runs in worker threads of its own, not through the store's
    one-at-a-time offload, so it never holds up the store's other calls.  It waits in slices
    of :data:`SLICE` seconds (no server round trip between them: the listener keeps every
    signal), so a cancelled call ends within one slice and never abandons a thread; a wake
    that lands as the caller is cancelled is kept for the next call."""
    import anyio.lowlevel
    import anyio.to_thread

    deadline = time.monotonic() + check_wait(timeout)
    while True:
        left = max(deadline - time.monotonic(), 0.0)
        woke = await anyio.to_thread.run_sync(
            waiter.wait, min(left, SLICE), abandon_on_cancel=False
        )
        if woke:
            try:
                await anyio.lowlevel.checkpoint_if_cancelled()
            except BaseException:
                waiter.keep_wake()
                raise
            return True
        if left <= SLICE:
            return False


def unavailable(where: str, detail: str) -> StoreUnavailable:
    """The error of a lost or refused listening connection."""
    return StoreUnavailable(
        f"the wake-up connection to {where} failed ({detail}); the worker should poll for "
        "now: the next wait_for_work listens again"
    )
