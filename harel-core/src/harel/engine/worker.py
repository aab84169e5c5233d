"""The worker loop: ``recover()`` + ``fire_due_timers()`` over a shared store, until stopped.

Several workers (threads or processes) may run over one store: the relay and the sweep are
idempotent and every delivery is a CAS commit with a dedupe row, so each event takes effect
once whichever worker wins; the loser sees a conflict or the dedupe row and moves on.
"""

from __future__ import annotations

import logging
import signal
import threading
from dataclasses import dataclass
from types import FrameType

from harel.engine.runner import DurableRunner
from harel.store.errors import StoreUnavailable

log = logging.getLogger("harel.worker")


@dataclass
class WorkerStats:
    """Totals since the worker started."""

    rounds: int = 0
    relayed: int = 0
    fired: int = 0
    unavailable: int = 0


class Worker:
    """Runs rounds of relay + timer sweep; sleeps ``poll`` seconds only after an idle round.

    :meth:`stop` (or SIGTERM/SIGINT once :meth:`install_signal_handlers` ran) ends the loop
    after the current round; a round is never interrupted halfway by the loop itself.
    """

    def __init__(self, runner: DurableRunner, *, poll: float = 1.0) -> None:
        if poll < 0:
            raise ValueError(f"poll must be >= 0 seconds, got {poll!r}")
        self.runner = runner
        self.poll = poll
        self.stats = WorkerStats()
        self._stop = threading.Event()

    def stop(self) -> None:
        """Ask the loop to finish the current round and return."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        """Whether :meth:`stop` was called."""
        return self._stop.is_set()

    def install_signal_handlers(self) -> None:
        """Make SIGTERM and SIGINT call :meth:`stop` (main thread only)."""

        def handle(signum: int, frame: FrameType | None) -> None:
            log.info("signal %d: stopping after this round", signum)
            self.stop()

        signal.signal(signal.SIGTERM, handle)
        signal.signal(signal.SIGINT, handle)

    def run_round(self) -> int:
        """One round: relay everything pending, fire due timers; returns the work done.

        A busy/unreachable store (``StoreUnavailable``) is logged and counts as no work.
        """
        self.stats.rounds += 1
        try:
            relayed = self.runner.relay()
            fired = self.runner.fire_due_timers()
        except StoreUnavailable as err:
            self.stats.unavailable += 1
            log.warning("store unavailable, retrying next round: %s", err)
            return 0
        self.stats.relayed += relayed
        self.stats.fired += fired
        return relayed + fired

    def run(self, *, once: bool = False) -> WorkerStats:
        """Loop until stopped (or a single round with ``once``); returns the totals."""
        while not self._stop.is_set():
            worked = self.run_round()
            if once:
                break
            if not worked:
                self._stop.wait(self.poll)
        return self.stats
