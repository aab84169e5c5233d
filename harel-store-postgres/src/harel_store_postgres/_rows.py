"""Helpers for reading rows: the one row of a function call, a stored spawn context."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harel.store.author import decode_payload
from harel.store.author.sql import Result
from harel.store.errors import StoreCorrupted


def first_row(result: Result) -> Sequence[Any]:
    """The first row of ``result``; ``StoreCorrupted`` when there is none (a statement that
    always returns a row returned nothing: the schema was altered)."""
    row = result.first
    if row is None:
        raise StoreCorrupted("a harel function returned no row; the schema may be damaged")
    return row


def spawn_context(text: str, seq: int) -> dict[str, Any]:
    """A stored spawn context (damage, or not a JSON object: ``StoreCorrupted``)."""
    value = decode_payload(text, what=f"spawn {seq}")
    if not isinstance(value, dict):
        raise StoreCorrupted(f"the context of spawn {seq} is not a JSON object")
    return value
