"""The worker loop: ``recover()`` + ``fire_due_timers()`` over a shared store, until stopped.

Several workers (threads or processes) may run over one store: the relay and the sweep are
idempotent and every delivery is a CAS commit with a dedupe row, so each event takes effect
once whichever worker wins; the loser sees a conflict or the dedupe row and moves on.

Nothing stops a worker but :meth:`Worker.stop` (or SIGTERM/SIGINT): a poisoned entry or
timer is quarantined by the runner's plan (:mod:`harel.engine.deadletters`); a round that
fails with ``StoreUnavailable`` backs off exponentially (``poll`` doubling up to
``max_backoff``, with jitter); any other error is logged and the next round runs after
``poll`` seconds.
"""

from __future__ import annotations

import logging
import random
import signal
import threading
from dataclasses import dataclass
from types import FrameType

from harel.engine.deadletters import error_text
from harel.engine.runner import DurableRunner
from harel.store.errors import StoreUnavailable

log = logging.getLogger("harel.worker")

MIN_BACKOFF = 0.1
"""The first back-off pause (seconds) when ``poll`` is smaller."""


@dataclass
class WorkerStats:
    """Totals since the worker started."""

    rounds: int = 0
    relayed: int = 0
    fired: int = 0
    unavailable: int = 0
    errors: int = 0
    quarantined: int = 0


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
    """Runs rounds of relay + timer sweep; sleeps ``poll`` seconds only after an idle round.

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
    ) -> None:
        if poll < 0:
            raise ValueError(f"poll must be >= 0 seconds, got {poll!r}")
        if max_backoff < 0:
            raise ValueError(f"max_backoff must be >= 0 seconds, got {max_backoff!r}")
        self.runner = runner
        self.poll = poll
        self.max_backoff = max_backoff
        self.stats = WorkerStats()
        self._stop = stop or StopSignal()
        self._unavailable_streak = 0
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
        """The pause after the current streak of unavailable rounds (0 when there is none):
        ``max(poll, MIN_BACKOFF) * 2**(streak - 1)`` capped at ``max_backoff``, +-25%."""
        if not self._unavailable_streak:
            return 0.0
        base = max(self.poll, MIN_BACKOFF)
        factor = 2.0 ** min(self._unavailable_streak - 1, 30)
        return min(self.max_backoff, base * factor) * random.uniform(0.75, 1.25)

    def run_round(self) -> int:
        """One round: relay everything pending, fire due timers; returns the work done.

        Never raises an ``Exception``: ``StoreUnavailable`` starts (or lengthens) the back-off,
        any other error is logged; both count as no work.
        """
        self.stats.rounds += 1
        plan = self.runner.plan
        quarantined, errors = plan.quarantined, plan.errors
        try:
            relayed = self.runner.relay()
            fired = self.runner.fire_due_timers()
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
        self._unavailable_streak = 0
        self.stats.relayed += relayed
        self.stats.fired += fired
        return relayed + fired

    def run(self, *, once: bool = False) -> WorkerStats:
        """Loop until stopped (or a single round with ``once``); returns the totals."""
        while not self._stop.is_set():
            worked = self.run_round()
            if once:
                break
            if self._unavailable_streak:
                self._stop.wait(self.backoff())
            elif not worked:
                self._stop.wait(self.poll)
        return self.stats
