"""Connect-with-retry for stores whose server may still be starting (backoff + jitter)."""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import anyio

from harel.store.common.urls import redact_text
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


def _unreachable(what: str, retries: int, last: BaseException | None) -> StoreUnavailable:
    detail = "" if last is None else redact_text(str(last)) or type(last).__name__
    error = StoreUnavailable(
        f"could not reach {redact_text(what)} after {retries + 1} attempt(s): {detail}"
    )
    error.__suppress_context__ = True
    return error


def connect_with_retry(
    connect: Callable[[], T],
    *,
    retries: int,
    delay: float,
    retry_on: tuple[type[BaseException], ...],
    what: str,
) -> T:
    """Call ``connect`` until it succeeds; retry only on ``retry_on``, then raise StoreUnavailable.

    ``connect`` must clean up whatever it half-built before raising.  The final error names
    the last failure with every URL and ``password=``-like pair in it redacted, and chains no
    exception (a driver's error may echo the connection string).
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
    raise _unreachable(what, retries, last)


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
    raise _unreachable(what, retries, last)


def retry_arguments(
    knobs: Mapping[str, Any], *, what: str, default_retries: int, default_delay: float
) -> dict[str, Any]:
    """The keyword arguments of :func:`connect_with_retry` / :func:`aconnect_with_retry` for a
    ``from_url``: ``connect_retries`` / ``retry_delay`` taken from ``knobs`` (validated; a bad
    value raises ``ValueError`` naming it), retrying only while the server is unreachable
    (``StoreUnavailable``); ``what`` names the store in the final error."""
    retries = knobs.get("connect_retries", default_retries)
    delay = knobs.get("retry_delay", default_delay)
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ValueError(f"connect_retries must be an int >= 0, got {retries!r}")
    if isinstance(delay, bool) or not isinstance(delay, (int, float)) or delay < 0:
        raise ValueError(f"retry_delay must be a number of seconds >= 0, got {delay!r}")
    return {
        "retries": retries,
        "delay": float(delay),
        "retry_on": (StoreUnavailable,),
        "what": what,
    }
