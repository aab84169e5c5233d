"""Relay sequence numbers without a counter item: ``seq`` = commit base + position.

A commit draws one *base* (47 bits: milliseconds since 2023-11-14 and 5 random bits, strictly
increasing within a process); each outbox entry or spawn intent of the commit gets
``seq = base << 16 | position``.  The position either indexes one item per entry
(``j < 2**15``) or, for a commit packed because it exceeds the 100-action transaction cap, has
bit 15 set and names the packed chunk and the slot in it (``1<<15 | chunk<<10 | slot``).  So
an ack finds its item from ``seq`` alone, entries of one commit keep their emit order, and
sequential commits get increasing seqs (across processes up to clock skew).  Two processes
drawing one base in the same millisecond collide on the relay item's key: its
``attribute_not_exists`` condition fails and the commit retries with a fresh base.
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass

EPOCH_MS = 1_700_000_000_000
RANDOM_BITS = 5
BASE_BITS = 47
POSITION_BITS = 16
PACKED = 1 << 15
MAX_UNPACKED = 1 << 15
CHUNK_SLOTS = 1 << 10
MAX_CHUNKS = 1 << 5
MAX_SEQ = (1 << 63) - 1


class BaseClock:
    """Draws commit bases: time-ordered, strictly increasing within this process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = 0

    def next(self) -> int:
        """A fresh base."""
        millis = max(time.time_ns() // 1_000_000 - EPOCH_MS, 0)
        candidate = (millis << RANDOM_BITS) | secrets.randbits(RANDOM_BITS)
        with self._lock:
            base = max(candidate, self._last + 1)
            self._last = base
        return base & ((1 << BASE_BITS) - 1)


CLOCK = BaseClock()
"""The process-wide clock (every store of the process draws from it)."""


def unpacked_seq(base: int, position: int) -> int:
    """The seq of entry ``position`` of a commit that stores one item per entry."""
    return (base << POSITION_BITS) | position


def packed_seq(base: int, chunk: int, slot: int) -> int:
    """The seq of slot ``slot`` of packed chunk ``chunk``."""
    return (base << POSITION_BITS) | PACKED | (chunk << 10) | slot


@dataclass(frozen=True, slots=True)
class SeqLocation:
    """Where an entry lives: its commit's partition and, when packed, its chunk and slot."""

    base: int
    packed: bool
    index: int
    """The entry position (unpacked) or the chunk number (packed)."""
    slot: int


def locate(seq: int) -> SeqLocation | None:
    """Decode ``seq``; ``None`` when no entry can have it (negative, too large)."""
    if seq < 0 or seq > MAX_SEQ:
        return None
    base = seq >> POSITION_BITS
    position = seq & ((1 << POSITION_BITS) - 1)
    if position & PACKED:
        return SeqLocation(base, True, (position >> 10) & (MAX_CHUNKS - 1), position & 1023)
    return SeqLocation(base, False, position, 0)


def relay_pk(base: int) -> str:
    """The partition of a commit's relay items."""
    return f"q:{base:012x}"


def seq_key(seq: int) -> str:
    """The fixed-width GSI sort key of a seq."""
    return f"{seq:016x}"
