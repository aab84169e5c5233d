"""Connect-with-retry for stores whose server may still be starting (backoff + jitter).

Every failed attempt that will be retried is logged at WARNING on the ``harel.store.retry``
logger ("waiting for URL — attempt 2 of 9 ...", the URL redacted) and handed to the wait
reporter installed with :func:`report_waits` (the ``harel`` CLI prints it on stderr).
:func:`retry_limit` caps the retries of the opens made inside it (the CLI enters it for its
interactive commands unless the URL sets ``connect_retries``: they give up sooner than workers).
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import math
import random
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio

from harel.store.common.urls import knob_float, knob_int, redact_text
from harel.store.errors import StoreUnavailable

T = TypeVar("T")

RETRY_KNOBS = frozenset({"connect_retries", "retry_delay"})
"""The knobs of a ``from_url``'s bounded retry (URL query or keyword arguments)."""


LOGGER = logging.getLogger("harel.store.retry")
"""Where each retried connection attempt is logged (WARNING)."""


@dataclass(frozen=True, slots=True)
class Wait:
    """One failed connection attempt that will be retried after ``pause`` seconds.

    ``what`` is the store, redacted; ``attempt`` (1-based) of ``attempts`` failed with
    ``reason`` (redacted)."""

    what: str
    attempt: int
    attempts: int
    pause: float
    reason: str

    def describe(self) -> str:
        """``waiting for WHAT — attempt 2 of 9 in 0.5 s (REASON)``: the next attempt's number."""
        reason = f" ({self.reason})" if self.reason else ""
        return (
            f"waiting for {self.what} \u2014 attempt {self.attempt + 1} of {self.attempts} "
            f"in {self.pause:.1f} s{reason}"
        )


WaitReporter = Callable[[Wait], None]
_REPORTER: contextvars.ContextVar[WaitReporter | None] = contextvars.ContextVar(
    "harel_wait_reporter", default=None
)
_LIMIT: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "harel_retry_limit", default=None
)


@contextlib.contextmanager
def report_waits(reporter: WaitReporter | None) -> Iterator[None]:
    """Within the block, hand every retried connection attempt to ``reporter`` (besides the
    WARNING log line); ``None`` reports nothing more."""
    token = _REPORTER.set(reporter)
    try:
        yield
    finally:
        _REPORTER.reset(token)


@contextlib.contextmanager
def retry_limit(retries: int | None) -> Iterator[None]:
    """Within the block, :func:`connect_with_retry` / :func:`aconnect_with_retry` make at most
    ``retries`` retries (``None`` lifts the cap); a caller that honours a URL's explicit
    ``connect_retries`` does not enter the block for it."""
    if retries is not None and (isinstance(retries, bool) or retries < 0):
        raise ValueError(f"retry_limit needs an int >= 0, got {retries!r}")
    token = _LIMIT.set(retries)
    try:
        yield
    finally:
        _LIMIT.reset(token)


def _capped(retries: int) -> int:
    limit = _LIMIT.get()
    return retries if limit is None else min(retries, limit)


def _waiting(what: str, attempt: int, retries: int, pause: float, exc: BaseException) -> None:
    wait = Wait(
        what=redact_text(what),
        attempt=attempt,
        attempts=retries + 1,
        pause=pause,
        reason=" ".join(redact_text(str(exc)).split())[:200] or type(exc).__name__,
    )
    LOGGER.warning("%s", wait.describe())
    reporter = _REPORTER.get()
    if reporter is not None:
        reporter(wait)


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
    retries = _capped(retries)
    for attempt, pause in enumerate([*backoff_delays(retries, delay), None], start=1):
        try:
            return connect()
        except retry_on as exc:
            last = exc
            if pause is None:
                break
            _waiting(what, attempt, retries, pause, exc)
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
    retries = _capped(retries)
    for attempt, pause in enumerate([*backoff_delays(retries, delay), None], start=1):
        try:
            return await connect()
        except retry_on as exc:
            last = exc
            if pause is None:
                break
            _waiting(what, attempt, retries, pause, exc)
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
