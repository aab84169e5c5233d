"""The async worker: ``concurrency`` claim loops in one event loop over an async store.

Each loop has its own lease owner token (``OWNER/0``, ``OWNER/1`` …), so two loops never hold
one execution's work at once, and does one unit at a time: ``concurrency`` units are in flight.
Loops back off like :class:`~harel.engine.worker.Worker` (idle: adaptive, up to ``poll``;
``StoreUnavailable``: exponential, up to ``max_backoff``) and stop on the shared
:class:`~harel.engine.worker.StopSignal` between two units, releasing what they have not
started.  Runs under asyncio and trio (anyio).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import anyio

from harel.engine.aio import AsyncDurableRunner
from harel.engine.deadletters import error_text
from harel.engine.worker import (
    DEFAULT_BATCH,
    WAKE_SLICE,
    StopSignal,
    WorkerStats,
    backoff_pause,
    check_knobs,
    idle_bound,
    next_idle,
    owner_token,
)
from harel.store.contract import DEFAULT_LEASE
from harel.store.errors import StoreUnavailable

log = logging.getLogger("harel.worker")

STOP_CHECK = 0.05
"""Seconds between two looks at the stop signal while a loop sleeps."""


class AsyncWorker:
    """Runs ``concurrency`` claim loops until stopped (or until nothing is due, ``once``)."""

    def __init__(
        self,
        runner: AsyncDurableRunner,
        *,
        concurrency: int = 1,
        poll: float = 1.0,
        max_backoff: float = 30.0,
        stop: StopSignal | None = None,
        owner: str | None = None,
        lease: float = DEFAULT_LEASE,
        batch: int = DEFAULT_BATCH,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency!r}")
        check_knobs(poll, max_backoff, lease, batch)
        if not callable(getattr(runner.store, "claim", None)):
            raise TypeError(
                f"{type(runner.store).__name__} has no claim(): the async worker needs a store "
                "that claims work (run the sync Worker over a sweeping store instead)"
            )
        self.runner = runner
        self.concurrency = concurrency
        self.poll = poll
        self.max_backoff = max_backoff
        self.owner = owner or owner_token()
        self.lease = lease
        self.batch = batch
        waker = getattr(runner.store, "wait_for_work", None)
        self.waker: Callable[[float], Awaitable[bool]] | None = waker if callable(waker) else None
        """The store's ``wait_for_work`` (PostgreSQL LISTEN/NOTIFY, Redis pub/sub), if any."""
        self.stats = WorkerStats()
        self._errors = 0
        self._counted = (runner.plan.quarantined, runner.plan.errors)
        self._wasted = (runner.plan.conflicts, runner.plan.repeats)
        self._stop = stop or StopSignal()
        runner.plan.interrupted = self._stop.is_set

    def stop(self) -> None:
        """Ask every loop to finish its current unit, release the rest and return."""
        self._stop.set()

    async def run(self, *, once: bool = False) -> WorkerStats:
        """Run the loops to their end; the totals.  With ``once`` each loop stops at its first
        empty claim (or failed round)."""
        async with anyio.create_task_group() as group:
            for index in range(self.concurrency):
                group.start_soon(self._loop, f"{self.owner}/{index}", once)
        return self.stats

    async def _loop(self, owner: str, once: bool) -> None:
        idle, streak = 0.0, 0
        while not self._stop.is_set():
            self.stats.rounds += 1
            plan = self.runner.plan
            try:
                done = await self.runner.work(owner, lease=self.lease, limit=self.batch)
            except StoreUnavailable as err:
                self.stats.unavailable += 1
                streak += 1
                log.warning("store unavailable, backing off: %s", error_text(err))
                if once:
                    return
                await self._sleep(backoff_pause(self.poll, self.max_backoff, streak))
                continue
            except Exception as err:
                self._errors += 1
                log.error("claim round failed, retrying: %s", error_text(err))
                if once:
                    return
                await self._sleep(self.poll)
                continue
            finally:
                # totals, not deltas: the loops share the plan and interleave
                self.stats.quarantined = plan.quarantined - self._counted[0]
                self.stats.errors = self._errors + plan.errors - self._counted[1]
                self.stats.conflicts = plan.conflicts - self._wasted[0]
                self.stats.repeats = plan.repeats - self._wasted[1]
            streak = 0
            self.stats.claims += done.groups
            self.stats.relayed += done.relayed
            self.stats.fired += done.fired
            if done.groups:
                idle = 0.0
                continue
            if once:
                return
            idle = next_idle(idle, self.poll)
            await self._sleep(await self._idle_pause(idle))

    async def _idle_pause(self, adaptive: float) -> float:
        """``adaptive``, or — when the store wakes idle workers — ``poll`` cut to the next armed
        timer (:func:`~harel.engine.worker.idle_bound`)."""
        if self.waker is None:
            return adaptive
        now = self.runner.clock()
        try:
            nxt = await self.runner.store.due_timers(now + self.poll, limit=1)
        except Exception as err:  # the pause only: the next round reports store trouble
            log.debug("cannot read the next timer: %s", error_text(err))
            return adaptive
        return idle_bound(self.poll, adaptive, now, nxt)

    async def _sleep(self, seconds: float) -> None:
        """Sleep ``seconds``, waking early on a stop, and on the store's wake-ups when it has
        them (a commit that adds work)."""
        deadline = anyio.current_time() + seconds
        while not self._stop.is_set():
            left = deadline - anyio.current_time()
            if left <= 0:
                return
            if self.waker is None:
                await anyio.sleep(min(left, STOP_CHECK))
                continue
            try:
                if await self.waker(min(left, WAKE_SLICE)):
                    return
            except Exception as err:  # a lost listener: poll for the rest of this pause
                log.warning("wake-ups unavailable, polling: %s", error_text(err))
                self.waker = None
