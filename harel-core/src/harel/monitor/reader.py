"""Store calls off the event loop: a sync store, one call at a time, in a worker thread.

Every page reads the store through :meth:`StoreReader.run`, which runs a plain function of
the sync store in anyio's worker threads behind a capacity limiter of one.  A slow store
therefore never blocks the event loop (other requests, the live endpoints, keep being
answered), and a store that is not thread-safe (any third-party one) still sees one call at a
time.  Only contract methods are used, so every backend works.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import anyio
import anyio.to_thread

from harel.monitor.counting import COUNT_BOUND, StatusCount, count_by_status
from harel.store.contract import ExecutionStore

P = ParamSpec("P")
T = TypeVar("T")

COUNTS_TTL = 5.0
"""Seconds the counts by status are reused: an open list tab does not recount every poll."""


class StoreReader:
    """The monitor's handle on a sync store (the caller opens and closes the store)."""

    def __init__(self, store: ExecutionStore, *, clock: Callable[[], float] = time.monotonic):
        self.store = store
        self._limiter = anyio.CapacityLimiter(1)
        self._clock = clock
        self._counts: dict[tuple[str | None, bool], tuple[float, list[StatusCount]]] = {}

    async def run(self, func: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``func(*args, **kwargs)`` in a worker thread, after every earlier call finished."""

        def call() -> T:
            return func(*args, **kwargs)

        return await anyio.to_thread.run_sync(call, limiter=self._limiter)

    async def counts(self, definition_id: str | None, roots_only: bool) -> list[StatusCount]:
        """Counts by status for this filter, at most :data:`COUNTS_TTL` seconds old."""
        key = (definition_id, roots_only)
        now = self._clock()
        cached = self._counts.get(key)
        if cached is not None and now - cached[0] < COUNTS_TTL:
            return cached[1]
        counted = await self.run(
            count_by_status,
            self.store,
            definition_id=definition_id,
            roots_only=roots_only,
            bound=COUNT_BOUND,
        )
        if len(self._counts) > 64:  # many filters seen: start over rather than grow
            self._counts.clear()
        self._counts[key] = (now, counted)
        return counted
