"""Trace-step policy shared by every store: encoding, index stamping and the ring window."""

from __future__ import annotations

from typing import Any

from harel.store.common.codec import decode_payload, encode_checked
from harel.store.common.limits import MAX_DOCUMENT_BYTES
from harel.store.common.payloads import check_record
from harel.store.errors import StoreCorrupted

INDEX_KEY = "index"


def encode_trace_step(
    entry: dict[str, Any], *, max_document_bytes: int = MAX_DOCUMENT_BYTES
) -> str:
    """Encode a step for storage; a caller-supplied ``index`` is dropped (the store assigns it).

    Every field of the step is a payload field (:mod:`harel.store.common.limits`): a value that
    would not read back equal raises ``InvalidPayload`` naming it (``trace step['context_out']
    ['a']``), an encoding over ``max_document_bytes`` raises ``PayloadTooLarge``.
    """
    if not isinstance(entry, dict):
        raise TypeError(f"a trace step must be a dict, got {type(entry).__name__}")
    body = {key: value for key, value in entry.items() if key != INDEX_KEY}
    check_record(body, "trace step")
    return encode_checked(body, "trace step", max_document_bytes)


def decode_trace_step(
    text: str | bytes, index: int, *, what: str = "a stored trace step"
) -> dict[str, Any]:
    """Rebuild a stored step with its store-assigned ``index`` (damage: ``StoreCorrupted``)."""
    step = decode_payload(text, what=what)
    if not isinstance(step, dict):
        raise StoreCorrupted(f"{what} is not a JSON object")
    step[INDEX_KEY] = index
    return step


def next_trace_index(last_index: int | None) -> int:
    """The index of the next step given the highest stored one (``None`` = none stored)."""
    return 0 if last_index is None else last_index + 1


def trace_keep_from(new_index: int, trace_max: int | None) -> int | None:
    """Lowest index kept after writing ``new_index``; ``None`` when the ring is unbounded.

    Rows with an index below the returned value are to be deleted, so lowering
    ``trace_max`` trims at the next write.
    """
    if not trace_max:
        return None
    if isinstance(trace_max, bool) or not isinstance(trace_max, int) or trace_max < 0:
        raise ValueError(f"trace_max must be an int >= 0 or None, got {trace_max!r}")
    return new_index - trace_max + 1
