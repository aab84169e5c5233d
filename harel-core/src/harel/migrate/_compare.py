"""Comparing a source record with a destination's: whole-record digest, then set by set."""

from __future__ import annotations

import hashlib

from harel.store.common.codec import dumps
from harel.store.common.records import record_content, record_digest, trim_record_trace
from harel.store.contract import ExecutionRecord

SETS = ("execution", "processed", "timers", "outbox", "spawns", "trace")
"""The parts of a record compared one by one when the digests differ."""


def as_destination_keeps(record: ExecutionRecord, trace_max: int | None) -> ExecutionRecord:
    """``record`` as a destination with ``trace_max`` holds it after importing it."""
    return trim_record_trace(record, trace_max)


def same_record(wanted: ExecutionRecord, found: ExecutionRecord) -> bool:
    """Whether two records have the same digest (seqs and ``updated_at`` left out)."""
    return record_digest(wanted) == record_digest(found)


def set_hashes(record: ExecutionRecord) -> dict[str, str]:
    """A SHA-256 per part of the record (:data:`SETS`)."""
    content = record_content(record)
    return {
        name: hashlib.sha256(dumps(content[name], what=name).encode()).hexdigest() for name in SETS
    }


def differing_sets(wanted: ExecutionRecord, found: ExecutionRecord | None) -> tuple[str, ...]:
    """The parts that differ (``()`` when equal); ``("missing",)`` when ``found`` is None."""
    if found is None:
        return ("missing",)
    if same_record(wanted, found):
        return ()
    left, right = set_hashes(wanted), set_hashes(found)
    return tuple(name for name in SETS if left[name] != right[name]) or ("record",)
