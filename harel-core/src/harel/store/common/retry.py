"""Connect-with-retry for stores whose server may still be starting (backoff + jitter)."""

from __future__ import annotations

import math
import random
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any, TypeVar

import anyio

from harel.store.common.urls import knob_float, knob_int, redact_text
from harel.store.errors import StoreUnavailable

T = TypeVar("T")

RETRY_KNOBS = frozenset({"connect_retries", "retry_delay"})
"""The knobs of a ``from_url``'s bounded retry (URL query or keyword arguments)."""


BUSY_FIRST_PAUSE = 0.001
BUSY_LONGEST_PAUSE = 0.05


def busy_waits(timeout_ms: int) -> Iterator[bool]:
    """The pauses of a bounded wait on a locked database file, for drivers whose engine does
    not wait itself: each ``next()`` sleeps (1 ms, doubling up to 50 ms, never past the
    deadline ``timeout_ms`` after the first ``next()``) and yields ``True``; once the time is
    up the iteration ends, so ``next(waits, False)`` says whether to try again."""
    deadline = time.monotonic() + timeout_ms / 1000
    pause = BUSY_FIRST_PAUSE
    while (now := time.monotonic()) < deadline:
        time.sleep(min(pause, deadline - now))
        pause = min(pause * 2, BUSY_LONGEST_PAUSE)
        yield True


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


def retry_knobs(query: Mapping[str, str]) -> dict[str, Any]:
    """``connect_retries`` / ``retry_delay`` of a URL's query (strings) as an int and a float,
    ready for :func:`retry_arguments`; the other parameters are ignored.

    A value that is not an int >= 0 (``abc``, ``-1``, ``1.5``) or a number >= 0 raises
    :class:`~harel.store.errors.InvalidStoreURL` (a ``ValueError``) naming the knob, with the
    same message on every backend.
    """
    text = dict(query)
    knobs: dict[str, Any] = {}
    if "connect_retries" in text:
        knobs["connect_retries"] = knob_int(text, "connect_retries", 0, minimum=0)
    if "retry_delay" in text:
        knobs["retry_delay"] = knob_float(text, "retry_delay", 0.0, minimum=0.0)
    return knobs


def retry_arguments(
    knobs: Mapping[str, Any], *, what: str, default_retries: int, default_delay: float
) -> dict[str, Any]:
    """The keyword arguments of :func:`connect_with_retry` / :func:`aconnect_with_retry` for a
    ``from_url``: ``connect_retries`` / ``retry_delay`` taken from ``knobs`` (validated: an int
    >= 0 and a finite number of seconds >= 0, never coerced; a bad value raises ``ValueError``
    naming it), retrying only while the server is unreachable (``StoreUnavailable``); ``what``
    names the store in the final error.  URL query strings go through :func:`retry_knobs`
    first."""
    retries = knobs.get("connect_retries", default_retries)
    delay = knobs.get("retry_delay", default_delay)
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ValueError(f"connect_retries must be an int >= 0, got {retries!r}")
    if (
        isinstance(delay, bool)
        or not isinstance(delay, (int, float))
        or not (delay >= 0 and math.isfinite(delay))
    ):
        raise ValueError(f"retry_delay must be a finite number of seconds >= 0, got {delay!r}")
    return {
        "retries": retries,
        "delay": float(delay),
        "retry_on": (StoreUnavailable,),
        "what": what,
    }
