"""The worker loop: claim due work and do it, over a shared store, until stopped.

Several workers (threads or processes) split the work: each round claims batches of due
work — timers, outbox entries, spawn intents, grouped by execution — under a lease
(``store.claim``), so concurrent workers take *different* executions; a killed worker's
leases expire and its work is claimed again.  Every delivery is still a CAS commit with a
dedupe mark, so each event takes effect once even when a stalled worker's lease was taken over
(the version CAS decides, see the contract).  A store without ``claim`` (a third-party store
written before claims) gets the sweeping rounds of old: ``recover()`` + ``fire_due_timers()``.

Idle rounds back off adaptively: the first idle pause is :data:`MIN_IDLE` seconds, doubling
up to ``poll``; any work resets it.  A round that did work runs the next one at once.  A store
that wakes idle workers (``wait_for_work``: PostgreSQL LISTEN/NOTIFY, Redis pub/sub) is waited
on instead: a commit that adds work ends the pause at once, and the next armed timer's
``fire_at`` bounds it (:func:`idle_bound`).

Nothing stops a worker but :meth:`Worker.stop` (or SIGTERM/SIGINT): a poisoned entry or
timer is quarantined by the runner's plan (:mod:`harel.engine.deadletters`); a round that
fails with ``StoreUnavailable`` backs off exponentially (``poll`` doubling up to
``max_backoff``, with jitter); any other error is logged and the next round runs after
``poll`` seconds.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType

from harel.engine.deadletters import error_text
from harel.engine.runner import DurableRunner
from harel.store.contract import DEFAULT_LEASE
from harel.store.errors import StoreConfigError, StoreUnavailable

log = logging.getLogger("harel.worker")

MIN_BACKOFF = 0.1
"""The first back-off pause (seconds) when ``poll`` is smaller."""

MIN_IDLE = 0.02
"""The first idle pause (seconds) of a claiming worker; it doubles up to ``poll``."""

DEFAULT_BATCH = 10
"""Units of work a worker claims at once.  Small on purpose: a worker does its claim's units
one after another, so a big batch would sit leased (idle for every other worker, and expiring
before the last group is reached on a slow store) while a small one costs one claim round trip
per ten units."""

CLAIMS_PER_ROUND = 50
"""At most this many claims in one round (a stop is honoured between two)."""


def backoff_pause(poll: float, max_backoff: float, streak: int) -> float:
    """The pause after ``streak`` unavailable rounds in a row (0 when there is none):
    ``max(poll, MIN_BACKOFF) * 2**(streak - 1)`` capped at ``max_backoff``, +-25%."""
    if not streak:
        return 0.0
    base = max(poll, MIN_BACKOFF)
    factor = 2.0 ** min(streak - 1, 30)
    return min(max_backoff, base * factor) * random.uniform(0.75, 1.25)


def check_knobs(poll: float, max_backoff: float, lease: float, batch: int) -> None:
    """``ValueError`` naming the first worker knob out of range."""
    if not poll >= 0:
        raise ValueError(f"poll must be >= 0 seconds, got {poll!r}")
    if not max_backoff >= 0:
        raise ValueError(f"max_backoff must be >= 0 seconds, got {max_backoff!r}")
    if not lease > 0:
        raise ValueError(f"lease must be > 0 seconds, got {lease!r}")
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch!r}")


WAKE_SLICE = 0.25
"""Longest single ``wait_for_work`` call, so a stop is honoured within this many seconds."""


def idle_bound(
    poll: float, adaptive: float, now: float, next_timers: list[tuple[str, str, float]]
) -> float:
    """The pause of an idle worker whose store wakes it: ``poll`` (commits wake it earlier),
    cut to the next armed timer's ``fire_at``; ``adaptive`` when that timer is already due
    (another worker holds it, or it waits for a retry), so nobody spins on it."""
    if not next_timers:
        return poll
    fire_at = next_timers[0][2]
    if fire_at <= now:
        return adaptive
    return min(poll, fire_at - now)


def next_idle(idle: float, poll: float) -> float:
    """The next idle pause of a claiming worker: :data:`MIN_IDLE`, doubling up to ``poll``."""
    return min(poll, max(MIN_IDLE, idle * 2))


def owner_token() -> str:
    """A lease owner token naming this process: ``host:pid:random``."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclass
class WorkerStats:
    """Totals since the worker started."""

    rounds: int = 0
    claims: int = 0
    relayed: int = 0
    fired: int = 0
    unavailable: int = 0
    errors: int = 0
    quarantined: int = 0
    conflicts: int = 0  # deliveries refused with StoreConflict (another worker stepped first)
    repeats: int = 0  # deliveries found already done (their dedupe mark was set)


class StopSignal:
    """A stop flag that SIGTERM/SIGINT set; install it before any start-up work."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def set(self) -> None:
        """Ask the loop to stop after the current round."""
        self._event.set()

    def is_set(self) -> bool:
        """Whether a stop was asked for."""
        return self._event.is_set()

    def wait(self, timeout: float) -> bool:
        """Sleep up to ``timeout`` seconds, waking early on a stop; whether one was asked."""
        return self._event.wait(timeout)

    def install(self) -> None:
        """Make SIGTERM and SIGINT set this flag (main thread only)."""

        def handle(signum: int, frame: FrameType | None) -> None:
            log.info("signal %d: stopping after this round", signum)
            self.set()

        signal.signal(signal.SIGTERM, handle)
        signal.signal(signal.SIGINT, handle)


class Worker:
    """Runs rounds of claims (or relay + timer sweep on a store without claims); sleeps only
    after an idle round (adaptively, up to ``poll`` seconds).

    ``owner`` is the lease owner token (default: :func:`owner_token`), ``lease`` the lease
    seconds, ``batch`` the units per claim.

    :meth:`stop` (or SIGTERM/SIGINT once :meth:`install_signal_handlers` ran, or the
    ``stop`` flag passed in) ends the loop after the unit of work in progress (one relay
    entry or one timer, each atomic); the rest waits for the next worker.
    """

    def __init__(
        self,
        runner: DurableRunner,
        *,
        poll: float = 1.0,
        max_backoff: float = 30.0,
        stop: StopSignal | None = None,
        owner: str | None = None,
        lease: float = DEFAULT_LEASE,
        batch: int = DEFAULT_BATCH,
    ) -> None:
        check_knobs(poll, max_backoff, lease, batch)
        self.runner = runner
        self.poll = poll
        self.max_backoff = max_backoff
        self.owner = owner or owner_token()
        self.lease = lease
        self.batch = batch
        self.claiming = callable(getattr(runner.store, "claim", None))
        """Whether the store claims (else the worker sweeps)."""
        waker = getattr(runner.store, "wait_for_work", None)
        self.waker: Callable[[float], bool] | None = waker if callable(waker) else None
        """The store's ``wait_for_work`` (PostgreSQL LISTEN/NOTIFY, Redis pub/sub), if any."""
        self.stats = WorkerStats()
        self._stop = stop or StopSignal()
        self._unavailable_streak = 0
        self._idle = 0.0
        runner.plan.interrupted = self._stop.is_set  # a stop ends the pass between two units

    def stop(self) -> None:
        """Ask the loop to finish the current round and return."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        """Whether :meth:`stop` was called."""
        return self._stop.is_set()

    def install_signal_handlers(self) -> None:
        """Make SIGTERM and SIGINT call :meth:`stop` (main thread only)."""
        self._stop.install()

    def backoff(self) -> float:
        """The pause after the current streak of unavailable rounds (see :func:`backoff_pause`)."""
        return backoff_pause(self.poll, self.max_backoff, self._unavailable_streak)

    def run_round(self) -> int:
        """One round: relay everything pending, fire due timers; returns the work done.

        Never raises an ``Exception``: ``StoreUnavailable`` starts (or lengthens) the back-off,
        any other error is logged; both count as no work.
        """
        self.stats.rounds += 1
        plan = self.runner.plan
        quarantined, errors = plan.quarantined, plan.errors
        conflicts, repeats = plan.conflicts, plan.repeats
        try:
            relayed, fired = self._claim_round() if self.claiming else self._sweep_round()
        except StoreConfigError as err:
            self.stats.errors += 1
            if self.claiming:  # this server cannot claim (e.g. rqlite before 8): sweep instead
                log.warning("this store cannot claim, sweeping instead: %s", error_text(err))
                self.claiming = False
            else:
                log.error("round failed, retrying next round: %s", error_text(err))
            return 0
        except StoreUnavailable as err:
            self.stats.unavailable += 1
            self._unavailable_streak += 1
            log.warning("store unavailable, backing off: %s", error_text(err))
            return 0
        except Exception as err:
            self.stats.errors += 1
            log.error("round failed, retrying next round: %s", error_text(err))
            return 0
        finally:
            self.stats.quarantined += plan.quarantined - quarantined
            self.stats.errors += plan.errors - errors
            self.stats.conflicts += plan.conflicts - conflicts
            self.stats.repeats += plan.repeats - repeats
        self._unavailable_streak = 0
        self.stats.relayed += relayed
        self.stats.fired += fired
        return relayed + fired

    def _sweep_round(self) -> tuple[int, int]:
        return self.runner.relay(), self.runner.fire_due_timers()

    def _claim_round(self) -> tuple[int, int]:
        """Claim and work until a claim comes back empty (or a stop, or
        :data:`CLAIMS_PER_ROUND` claims); ``(relayed, fired)``."""
        relayed = fired = 0
        for _ in range(CLAIMS_PER_ROUND):
            done = self.runner.work(self.owner, lease=self.lease, limit=self.batch)
            self.stats.claims += done.groups
            relayed += done.relayed
            fired += done.fired
            if not done.groups or self._stop.is_set():
                break
        return relayed, fired

    def idle_pause(self, worked: bool) -> float:
        """The pause before the next round: none after work; after an idle round
        :data:`MIN_IDLE` seconds doubling up to ``poll`` (``poll`` at once when sweeping, or
        when the store wakes idle workers: then the next timer bounds it, see
        :func:`idle_bound`)."""
        if worked:
            self._idle = 0.0
            return 0.0
        if not self.claiming:
            return self.poll
        self._idle = next_idle(self._idle, self.poll)
        if self.waker is None:
            return self._idle
        now = self.runner.clock()
        try:
            nxt = self.runner.store.due_timers(now + self.poll, limit=1)
        except Exception as err:  # the pause only: the next round reports store trouble
            log.debug("cannot read the next timer: %s", error_text(err))
            return self._idle
        return idle_bound(self.poll, self._idle, now, nxt)

    def _pause(self, seconds: float) -> None:
        """Sleep ``seconds``: on the store's wake-ups when it has them (a commit that adds work
        ends the sleep), else on the stop signal; a stop ends it either way."""
        if self.waker is None:
            self._stop.wait(seconds)
            return
        deadline = time.monotonic() + seconds
        while not self._stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            try:
                if self.waker(min(left, WAKE_SLICE)):
                    return
            except Exception as err:  # a lost listener: poll for the rest of this pause
                log.warning("wake-ups unavailable, polling: %s", error_text(err))
                self._stop.wait(max(0.0, deadline - time.monotonic()))
                return

    def run(self, *, once: bool = False) -> WorkerStats:
        """Loop until stopped (or a single round with ``once``); returns the totals."""
        while not self._stop.is_set():
            worked = self.run_round()
            if once:
                break
            if self._unavailable_streak:
                self._stop.wait(self.backoff())
            else:
                pause = self.idle_pause(bool(worked))
                if pause:
                    self._pause(pause)
        return self.stats
