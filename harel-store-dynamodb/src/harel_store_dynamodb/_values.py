"""Typed attribute values, expression placeholders, sortable keys, compression and item sizes.

Driver-free helpers every item builder uses, so no value is ever spliced into an expression:
:class:`Expr` hands out ``#n`` / ``:v`` placeholders and collects the
``ExpressionAttributeNames`` / ``ExpressionAttributeValues`` they stand for.
"""

from __future__ import annotations

import struct
import zlib
from typing import Any

from harel.store.errors import PayloadTooLarge, StoreCorrupted

AttributeValue = dict[str, Any]
Item = dict[str, AttributeValue]

ITEM_LIMIT = 400 * 1024
"""DynamoDB's item size limit (attribute names and values)."""
ITEM_BUDGET = ITEM_LIMIT - 1024
"""What this store fills at most (a margin for the estimate)."""
COMPRESS_ABOVE = 8 * 1024
"""JSON payloads longer than this (UTF-8 bytes) are stored zlib-compressed as Binary."""


def s(value: str) -> AttributeValue:
    """A String attribute value."""
    return {"S": value}


def n(value: int) -> AttributeValue:
    """A Number attribute value (integers only: floats travel as exact strings)."""
    return {"N": str(int(value))}


def as_str(item: Item, name: str, what: str) -> str:
    """A String attribute, or StoreCorrupted naming ``what``."""
    try:
        value = item[name]["S"]
    except (KeyError, TypeError):
        raise StoreCorrupted(f"{what} has no string attribute {name!r}") from None
    if not isinstance(value, str):
        raise StoreCorrupted(f"{what}: attribute {name!r} is not a string")
    return value


def opt_str(item: Item, name: str) -> str | None:
    """A String attribute or ``None`` when absent (or NULL)."""
    value = item.get(name)
    if not value or "S" not in value:
        return None
    text = value["S"]
    return text if isinstance(text, str) else None


def as_int(item: Item, name: str, what: str) -> int:
    """A Number attribute as an int, or StoreCorrupted naming ``what``."""
    try:
        return int(item[name]["N"])
    except (KeyError, TypeError, ValueError):
        raise StoreCorrupted(f"{what} has no integer attribute {name!r}") from None


def float_key(value: float) -> str:
    """A fixed-width string whose order is the numeric order of ``value`` (-0.0 equals 0.0)."""
    bits: int = struct.unpack(">Q", struct.pack(">d", float(value) + 0.0))[0]
    bits = bits ^ 0xFFFF_FFFF_FFFF_FFFF if bits >> 63 else bits | (1 << 63)
    return f"{bits:016x}"


def float_from_key(key: str, what: str) -> float:
    """The float a :func:`float_key` was made from (bit-exact; ``-0.0`` reads as ``0.0``)."""
    try:
        bits = int(key, 16)
    except ValueError:
        raise StoreCorrupted(f"{what}: {key[:40]!r} is not a number key") from None
    bits = bits & ~(1 << 63) if bits >> 63 else bits ^ 0xFFFF_FFFF_FFFF_FFFF
    value: float = struct.unpack(">d", struct.pack(">Q", bits))[0]
    return value


def exact_float(text: str, what: str) -> float:
    """Parse the ``repr`` a float was stored as (bit-exact round trip)."""
    try:
        return float(text)
    except ValueError:
        raise StoreCorrupted(f"{what}: {text[:40]!r} is not a number") from None


def put_blob(item: Item, plain: str, zipped: str, text: str) -> str:
    """Store JSON ``text`` under ``plain`` (S) or, when long, compressed under ``zipped`` (B).

    Returns the attribute name used.
    """
    raw = text.encode("utf-8")
    if len(raw) > COMPRESS_ABOVE:
        packed = zlib.compress(raw, 6)
        if len(packed) < len(raw):
            item[zipped] = {"B": packed}
            return zipped
    item[plain] = {"S": text}
    return plain


def get_blob(item: Item, plain: str, zipped: str, what: str) -> str:
    """The JSON text :func:`put_blob` stored; StoreCorrupted when neither attribute is usable."""
    if plain in item and "S" in item[plain]:
        return str(item[plain]["S"])
    if zipped in item and "B" in item[zipped]:
        try:
            return zlib.decompress(bytes(item[zipped]["B"])).decode("utf-8")
        except (zlib.error, UnicodeDecodeError):
            raise StoreCorrupted(f"{what}: the compressed payload is damaged") from None
    raise StoreCorrupted(f"{what} has no payload")


def value_size(value: AttributeValue) -> int:
    """An upper estimate of one attribute value's stored size, by DynamoDB's rules."""
    ((kind, raw),) = value.items()
    if kind == "S":
        return len(raw.encode("utf-8"))
    if kind == "B":
        return len(raw)
    if kind == "N":
        return len(raw) // 2 + 2
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(member.encode("utf-8")) for member in raw)
    if kind == "M":
        return 3 + sum(len(k.encode("utf-8")) + value_size(v) + 1 for k, v in raw.items())
    if kind == "L":
        return 3 + sum(value_size(v) + 1 for v in raw)
    raise ValueError(f"unsupported attribute type {kind!r}")


def item_size(item: Item) -> int:
    """An upper estimate of an item's stored size (names plus values)."""
    return sum(len(name.encode("utf-8")) + value_size(value) for name, value in item.items())


def check_item(item: Item, what: str) -> int:
    """The item's size; PayloadTooLarge naming ``what`` when it exceeds DynamoDB's item limit."""
    size = item_size(item)
    if size > ITEM_BUDGET:
        raise PayloadTooLarge(
            f"{what} needs {size:,} bytes after compression, but a DynamoDB item holds at most "
            f"{ITEM_LIMIT:,} bytes (400 KB): keep large data outside the execution"
        )
    return size


class Expr:
    """Placeholders for one request: ``name("st")`` -> ``#n0``, ``value(s("x"))`` -> ``:v0``."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.values: dict[str, AttributeValue] = {}
        self._by_name: dict[str, str] = {}

    def name(self, attribute: str) -> str:
        """The placeholder of an attribute name (one per name)."""
        placeholder = self._by_name.get(attribute)
        if placeholder is None:
            placeholder = f"#n{len(self._by_name)}"
            self._by_name[attribute] = placeholder
            self.names[placeholder] = attribute
        return placeholder

    def value(self, value: AttributeValue) -> str:
        """A fresh placeholder bound to ``value``."""
        placeholder = f":v{len(self.values)}"
        self.values[placeholder] = value
        return placeholder

    def args(self) -> dict[str, Any]:
        """``ExpressionAttributeNames``/``ExpressionAttributeValues`` (only the non-empty ones)."""
        out: dict[str, Any] = {}
        if self.names:
            out["ExpressionAttributeNames"] = dict(self.names)
        if self.values:
            out["ExpressionAttributeValues"] = dict(self.values)
        return out
