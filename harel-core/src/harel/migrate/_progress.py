"""Progress of a migration: a snapshot per record, and a one-line terminal display."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO


@dataclass(frozen=True, slots=True)
class Progress:
    """Where a run stands: ``phase`` (``migrate``, ``dry-run`` or ``verify``), records done out
    of ``total``, and how many were moved, skipped (already there) and refused so far."""

    phase: str
    done: int
    total: int
    moved: int = 0
    skipped: int = 0
    refused: int = 0


ProgressCallback = Callable[[Progress], None]
"""Called after every record (cheap callbacks only: it runs in the copy loop)."""


class TerminalLine:
    """A :data:`ProgressCallback` that rewrites one line on a terminal: counts and rate.

    Redraws at most every ``interval`` seconds (and on the last record of a phase);
    :meth:`close` ends the line so the summary starts on a fresh one.
    """

    def __init__(
        self,
        stream: TextIO,
        *,
        interval: float = 0.2,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stream = stream
        self._interval = interval
        self._clock = clock
        self._phase = ""
        self._started = 0.0
        self._drawn = float("-inf")
        self._dirty = False

    def __call__(self, progress: Progress) -> None:
        """Show ``progress`` (throttled)."""
        now = self._clock()
        if progress.phase != self._phase:
            self.close()
            self._phase, self._started = progress.phase, now
        if now - self._drawn < self._interval and progress.done < progress.total:
            return
        self._drawn = now
        elapsed = max(now - self._started, 1e-9)
        text = (
            f"{progress.phase}: {progress.done}/{progress.total} records "
            f"({progress.done / elapsed:.0f}/s)"
        )
        if progress.phase != "verify":
            text += (
                f", {progress.moved} moved, {progress.skipped} already there, "
                f"{progress.refused} refused"
            )
        self._stream.write("\r\x1b[K" + text)
        self._stream.flush()
        self._dirty = True

    def close(self) -> None:
        """End the line (a newline) if anything was drawn."""
        if self._dirty:
            self._stream.write("\n")
            self._stream.flush()
            self._dirty = False
