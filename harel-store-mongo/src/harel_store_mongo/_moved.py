"""The moved-mark filter: a Bloom filter of the dedupe marks moved out of a document (to the
``marks`` collection), kept in the document itself so that a commit's own filter can rule a
moved mark out without reading ``marks`` first.

The filter is the document's ``mf`` field, :data:`FILTER_BITS` bits as a string of hex digits
(digit ``i`` holds bits ``4i .. 4i+3``, bit ``b`` of a digit being ``(value >> b) & 1``); an
event id sets the :data:`FILTER_HASHES` bits :func:`positions` names.  A commit carrying a
``processed_event_id`` matches only a document whose ``mf`` has one of those bits clear (a
regular expression on the hex string, :func:`surely_absent`): then the event was surely never
moved out.  When all its bits are set (the event was moved out, or a false positive), the
commit's filter misses and the plan reads ``marks`` to decide exactly.

Nothing here does IO, and the positions depend on the event id only (never on a process, a
release or a random seed): every writer of a layout-5 database must set the same bits.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

FILTER_BITS = 16384
"""Bits of the filter (4 KiB of hex digits in a document that has moved marks out).  With
:data:`FILTER_HASHES` bits per mark, one commit in ~700 takes the exact path at 1024 moved
marks, one in ~50 at 2048."""
FILTER_HASHES = 5
"""Bits set per moved mark."""
REBUILD_AT = 1024
"""A move that would leave more marks in the filter than this, and more than twice as many
as its last rebuild counted, rebuilds it from the ``marks`` collection instead (marks pruned
since then leave it, so a pruned execution's filter does not fill up)."""

HEX = "0123456789abcdef"
DIGITS = FILTER_BITS // 4
_PERSON = b"harel-mf-1"


def positions(event_id: str) -> tuple[int, ...]:
    """The filter bits of ``event_id`` (:data:`FILTER_HASHES` of them, in ``[0, FILTER_BITS)``)."""
    digest = hashlib.blake2b(
        event_id.encode("utf-8", "surrogatepass"), digest_size=2 * FILTER_HASHES, person=_PERSON
    ).digest()
    return tuple(
        int.from_bytes(digest[2 * i : 2 * i + 2], "big") % FILTER_BITS for i in range(FILTER_HASHES)
    )


def usable(bits: object) -> bool:
    """Whether ``bits`` is a filter this release can extend (else a move rebuilds it)."""
    return (
        isinstance(bits, str)
        and len(bits) == DIGITS
        and bits.isascii()
        and all(c in HEX for c in bits)
    )


def with_marks(bits: str | None, event_ids: Iterable[str]) -> str:
    """``bits`` (``None``: an empty filter) with the bits of every event of ``event_ids`` set;
    a superset of ``bits``."""
    nibbles = bytearray(DIGITS) if bits is None else bytearray(HEX.index(c) for c in bits)
    for event_id in event_ids:
        for position in positions(event_id):
            nibbles[position >> 2] |= 1 << (position & 3)
    return "".join(HEX[value] for value in nibbles)


def may_hold(bits: str, event_id: str) -> bool:
    """Whether the filter ``bits`` may hold ``event_id`` (every one of its bits set)."""
    return all(HEX.index(bits[p >> 2]) >> (p & 3) & 1 for p in positions(event_id))


def surely_absent(event_id: str) -> str:
    """A regular expression matching exactly the filters with at least one bit of
    ``event_id`` clear (built from numbers only: the event id never enters it)."""
    branches = []
    for position in positions(event_id):
        bit = position & 3
        clear = "".join(HEX[value] for value in range(16) if not value >> bit & 1)
        branches.append(f".{{{position >> 2}}}[{clear}]")
    return "^(?:" + "|".join(branches) + ")"
