"""Connect-with-retry for stores whose server may still be starting (backoff + jitter)."""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

from harel.store.errors import StoreUnavailable

T = TypeVar("T")


def backoff_delays(retries: int, base: float, cap: float = 10.0) -> list[float]:
    """The sleep before each retry: ``base * 2**n`` capped, with +-25% jitter."""
    if retries < 0:
        raise ValueError(f"connect_retries must be >= 0, got {retries}")
    delays = []
    for attempt in range(retries):
        delay = min(cap, base * (2**attempt))
        delays.append(delay * random.uniform(0.75, 1.25))
    return delays


def connect_with_retry(
    connect: Callable[[], T],
    *,
    retries: int,
    delay: float,
    retry_on: tuple[type[BaseException], ...],
    what: str,
) -> T:
    """Call ``connect`` until it succeeds; retry only on ``retry_on``, then raise StoreUnavailable.

    ``connect`` must clean up whatever it half-built before raising.
    """
    last: BaseException | None = None
    for pause in [*backoff_delays(retries, delay), None]:
        try:
            return connect()
        except retry_on as exc:
            last = exc
            if pause is None:
                break
            time.sleep(pause)
    raise StoreUnavailable(
        f"could not reach {what} after {retries + 1} attempt(s): {last}"
    ) from last


async def aconnect_with_retry(
    connect: Callable[[], Awaitable[T]],
    *,
    retries: int,
    delay: float,
    retry_on: tuple[type[BaseException], ...],
    what: str,
) -> T:
    """The async twin of :func:`connect_with_retry`."""
    last: BaseException | None = None
    for pause in [*backoff_delays(retries, delay), None]:
        try:
            return await connect()
        except retry_on as exc:
            last = exc
            if pause is None:
                break
            await anyio.sleep(pause)
    raise StoreUnavailable(
        f"could not reach {what} after {retries + 1} attempt(s): {last}"
    ) from last
