"""Outbox and spawn seqs without a store-wide counter: a hybrid logical clock per process and a
writer id per store.  Imports no driver and sends nothing itself (the registration request is
:func:`harel_store_mongo._requests.register_writer`, sent by the plans).

A seq is one signed 64-bit int, ``tick << WRITER_BITS | writer``:

* ``tick`` (49 bits) comes from the process's :class:`HybridClock`: milliseconds since
  2025-01-01 (UTC, 41 bits: until 2094) times 256, plus a logical count (8 bits), and always
  above every tick the clock issued or observed before — ``max(now, last + 1)``.  So one
  process's seqs strictly increase in the order it issues them, across all its stores;
* ``writer`` (14 bits) is the store's writer id, ``n mod 16384`` for the ``n`` of one
  ``$inc`` of the registration counter ``{_id: "writers"}`` in ``meta`` — sent once, by the
  first write of the store that needs seqs, and again after :data:`ROTATE_AFTER` seconds of use
  (by the store's monotonic clock), never by any other commit.  Two stores that share a tick
  differ in their writer id (or, within one process, never share a tick), so seqs are unique
  in the store as long as fewer than 16,384 registrations happen on one database within
  :data:`ROTATE_AFTER` plus the largest disagreement between the writers' clocks.

Ticks never start below :data:`MIN_TICK` (every new seq is at least 2**53), above any seq the
counter of layouts before 5 handed out, so entries written before the upgrade stay first.

The clock *observes* the seqs the store reads — ``seq_hi`` (the highest seq an execution's
commits wrote) of every document loaded, probed, swept or claimed, and the entries read — so
a write issued after reading something is ordered after it, whatever the clocks say; a seq more
than :data:`MAX_AHEAD` seconds ahead of this clock is not observed (one machine with a wrong
clock cannot drag every other one along), except where a commit must order its entries after
its own execution's (the commit's filter insists: see :mod:`harel_store_mongo._operations`).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from harel.store.errors import StoreCorrupted

log = logging.getLogger("harel_store_mongo")

EPOCH_MS = 1_735_689_600_000
"""2025-01-01T00:00:00Z in Unix milliseconds: tick 0's physical time."""
LOGICAL_BITS = 8
"""Ticks per millisecond: a process issuing more than 256 seqs in one millisecond runs its
clock ahead of the wall clock until the wall clock catches up (harmless)."""
WRITER_BITS = 14
WRITERS = 1 << WRITER_BITS
"""Writer ids: seqs are unique while fewer registrations than this happen within one
:data:`ROTATE_AFTER` window."""
TICK_END = 1 << (63 - WRITER_BITS)
"""Every tick is below this (a seq fits a signed 64-bit int)."""
MIN_TICK = 1 << (53 - WRITER_BITS)
"""The lowest tick ever issued: new seqs are at least 2**53 (above any counter seq of an older
layout, even from a wall clock that reads before 2025)."""
MAX_AHEAD = 60.0
"""Seconds: a seq read from the store whose tick is further ahead of this clock is not
observed."""
ROTATE_AFTER = 600.0
"""Seconds a store issues seqs under one writer id before it registers a new one."""


def tick_of(seq: int) -> int:
    """The tick of a seq (0 for the small seqs of layouts before 5)."""
    return seq >> WRITER_BITS


def seq_of(tick: int, writer: int) -> int:
    """The seq of ``tick`` under ``writer``."""
    return tick << WRITER_BITS | writer


def _seq_value(value: Any) -> int | None:
    """``value`` when it can be a stored seq (an int in [0, 2**63)), else ``None``."""
    if type(value) is int and 0 <= value < 1 << 63:
        return value
    return None


class HybridClock:
    """A hybrid logical clock: ticks from ``wall`` (epoch seconds, ``time.time`` by default),
    never repeating and never going back, and never below a tick it observed.  Thread-safe;
    one per process serves all its stores (:data:`PROCESS_CLOCK`), tests inject their own to
    play writers on machines whose clocks disagree."""

    def __init__(self, wall: Callable[[], float] = time.time) -> None:
        self._wall = wall
        self._last = 0
        self._lock = threading.Lock()

    @property
    def last(self) -> int:
        """The highest tick issued or observed so far."""
        return self._last

    def physical(self) -> int:
        """The wall clock as a tick (at least :data:`MIN_TICK`)."""
        ms = math.floor(self._wall() * 1000) - EPOCH_MS
        return max(ms << LOGICAL_BITS, MIN_TICK)

    def issue(self, count: int, above: int = 0) -> int:
        """The first of ``count`` consecutive ticks, all above every tick issued or observed
        before and above ``above``, none below the wall clock's; they count as issued.
        ``StoreCorrupted`` when they would not fit a seq (``above`` near the end of the range:
        a damaged ``seq_hi``)."""
        with self._lock:
            now = self.physical()
            first = max(now, self._last + 1, above + 1)
            last = first + count - 1
            if last >= TICK_END:
                raise StoreCorrupted(
                    f"no seq is left above tick {max(self._last, above)} (a stored seq_hi of "
                    f"{seq_of(above, 0)} or more is damaged: restore it to the highest seq in use)"
                )
            self._last = last
        if above + 1 > now + _ahead_ticks():
            log.warning(
                "issuing seqs %.1f s ahead of this machine's clock to order them after an "
                "execution's earlier entries: another writer's clock runs ahead",
                (first - now) / (1000 << LOGICAL_BITS),
            )
        return first

    def observe(self, tick: int) -> None:
        """Issue only ticks above ``tick`` from now on, unless it is more than
        :data:`MAX_AHEAD` seconds ahead of the wall clock (then it is ignored)."""
        if tick <= self._last:
            return
        with self._lock:
            if tick > self._last and tick <= self.physical() + _ahead_ticks():
                self._last = tick


def _ahead_ticks() -> int:
    return int(MAX_AHEAD * 1000) << LOGICAL_BITS


PROCESS_CLOCK = HybridClock()
"""The clock every store of this process shares unless it is given another."""


class SeqSource:
    """One store's seqs: the (shared) hybrid clock and the store's writer id.  The plans ask
    :meth:`needs_writer` before they issue, send the registration when it says so and hand
    its reply to :meth:`registered`."""

    def __init__(
        self,
        clock: HybridClock | None = None,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        rotate_after: float = ROTATE_AFTER,
    ) -> None:
        self.clock = PROCESS_CLOCK if clock is None else clock
        self._monotonic = monotonic
        self._rotate_after = rotate_after
        self._writer: tuple[int, float] | None = None
        """``(writer id, when its registration was sent)``."""

    @property
    def writer(self) -> int | None:
        """The writer id in use (``None`` before the first registration)."""
        return None if self._writer is None else self._writer[0]

    def needs_writer(self) -> float | None:
        """The monotonic time to register at when the store has no writer id, or has used its
        id for :data:`ROTATE_AFTER` seconds; ``None`` when the id in use is good."""
        now = self._monotonic()
        if self._writer is None or now - self._writer[1] >= self._rotate_after:
            return now
        return None

    def registered(self, reply: Any, sent_at: float, where: str) -> None:
        """Take the writer id of a registration's reply (sent at ``sent_at``)."""
        n = reply.get("n") if isinstance(reply, dict) else None
        if type(n) is not int or n < 1:
            raise StoreCorrupted(
                f"{where}: the writer counter {{_id: 'writers'}} in collection 'meta' holds "
                f"{n!r}, not a count of registrations; delete it (the next store registers "
                "afresh)"
            )
        self._writer = (n % WRITERS, sent_at)

    def issue(self, count: int, above: int | None = None) -> list[int]:
        """``count`` increasing seqs, above everything this process issued or observed, and
        above ``above`` (a seq) when given; the store must hold a writer id."""
        if self._writer is None:
            raise RuntimeError("issue() before a writer id was registered")
        writer = self._writer[0]
        first = self.clock.issue(count, 0 if above is None else tick_of(above))
        return [seq_of(first + n, writer) for n in range(count)]

    def observe(self, docs: Iterable[Any]) -> None:
        """Observe the seqs of documents read: their ``seq_hi`` and their entries' seqs."""
        top = -1
        for doc in docs:
            if not isinstance(doc, dict):
                continue
            found = _seq_value(doc.get("seq_hi"))
            if found is not None:
                top = max(top, found)
            for array in ("outbox", "spawns"):
                for entry in doc.get(array) or ():
                    seq = _seq_value(entry.get("seq")) if isinstance(entry, dict) else None
                    if seq is not None:
                        top = max(top, seq)
        if top >= 0:
            self.clock.observe(tick_of(top))

    def observe_seqs(self, seqs: Iterable[int]) -> None:
        """Observe seqs already decoded (entries of a record or a claim)."""
        top = max((seq for seq in seqs if _seq_value(seq) is not None), default=-1)
        if top >= 0:
            self.clock.observe(tick_of(top))
