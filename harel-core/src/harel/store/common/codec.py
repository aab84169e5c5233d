"""The one JSON codec every store uses for documents, events, contexts and trace steps.

Built on pydantic-core so datetimes encode the same way on every backend; NaN and infinities
survive as JSON constants instead of silently becoming null.  Encoding first applies the
payload rules of :mod:`harel.store.common.limits` (so nothing is encoded that would not read
back equal) and the size limit ``max_bytes``; decoding maps damaged stored text to
:class:`~harel.store.errors.StoreCorrupted` naming what was being read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pydantic
import pydantic_core

from harel.model import KEEP_UNKNOWN_FIELDS, Event, Execution
from harel.store.common.limits import MAX_DOCUMENT_BYTES
from harel.store.common.payloads import check_event, check_execution, check_value
from harel.store.common.validate import show
from harel.store.errors import InvalidPayload, PayloadTooLarge, StoreCorrupted

_EXECUTION = Execution.__pydantic_validator__
_EVENT = Event.__pydantic_validator__
"""The models' own validators (``Model.model_validate`` is a thin wrapper around them)."""


def check_max_bytes(max_bytes: int) -> int:
    """A backend's ``max_document_bytes``: an int in ``[1, MAX_DOCUMENT_BYTES]``."""
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int):
        raise TypeError(f"max_document_bytes must be an int, got {max_bytes!r}")
    if not 1 <= max_bytes <= MAX_DOCUMENT_BYTES:
        raise ValueError(
            f"max_document_bytes must be in [1, {MAX_DOCUMENT_BYTES}] (the ceiling every "
            f"backend shares), got {max_bytes}"
        )
    return max_bytes


_ENCODE_ERRORS = (pydantic_core.PydanticSerializationError, TypeError, ValueError)
_to_json = pydantic_core.to_json


def _unencodable(what: str, exc: Exception) -> InvalidPayload:
    return InvalidPayload(
        f"{what} cannot be stored as JSON: {exc}; store only JSON-compatible values "
        "(str, int, float, bool, None, lists, dicts with str keys, datetimes)"
    )


def _too_large(what: str, size: int, max_bytes: int) -> PayloadTooLarge:
    return PayloadTooLarge(
        f"{what} encodes to {size} bytes of JSON; this store's limit is {max_bytes} "
        "bytes per document: keep large data outside the execution and store a reference"
    )


def encode_checked(value: Any, what: str, max_bytes: int) -> str:
    """Encode a value the payload checks already passed; only the size limit is applied here."""
    return _encode(value, max_bytes, str, what)


def _encode(value: Any, max_bytes: int, label: Callable[[Any], str], subject: Any) -> str:
    """``value``'s JSON within ``max_bytes``; the errors name ``label(subject)``, which is
    built only when one is raised (every commit's path)."""
    try:
        raw = _to_json(value, inf_nan_mode="constants")
    except _ENCODE_ERRORS as exc:
        raise _unencodable(label(subject), exc) from exc
    if len(raw) > max_bytes:
        raise _too_large(label(subject), len(raw), max_bytes)
    return raw.decode()


def dumps(value: Any, *, what: str = "value", max_bytes: int = MAX_DOCUMENT_BYTES) -> str:
    """Encode one payload field as compact JSON text.

    Raises :class:`InvalidPayload` naming the offending part of ``what`` when the value would
    not read back equal, :class:`PayloadTooLarge` when the text exceeds ``max_bytes``.
    """
    check_value(value, what)
    return encode_checked(value, what, max_bytes)


def loads(text: str | bytes) -> Any:
    """Decode JSON text produced by :func:`dumps`."""
    return pydantic_core.from_json(text, allow_inf_nan=True)


def encode_execution(exe: Execution, *, max_bytes: int = MAX_DOCUMENT_BYTES) -> str:
    """The persisted document of an execution (its ``version`` included), every field checked."""
    check_execution(exe)
    return _encode(exe, max_bytes, _execution_label, exe)


def _execution_label(exe: Execution) -> str:
    return f"execution {show(exe.id, 40)}"


def decode_execution(text: str | bytes, *, what: str = "a stored execution") -> Execution:
    """Rebuild an execution from :func:`encode_execution` output; always a fresh object.

    Damaged text raises :class:`StoreCorrupted` naming ``what``.
    """
    try:  # the model's validator itself: what model_validate calls, minus a Python frame
        exe: Execution = _EXECUTION.validate_python(loads(text), context=KEEP_UNKNOWN_FIELDS)
    except (ValueError, pydantic.ValidationError) as exc:
        raise StoreCorrupted(f"{what} cannot be read back: {_reason(exc)}") from exc
    return exe


def encode_event(
    event: Event, *, what: str | None = None, max_bytes: int = MAX_DOCUMENT_BYTES
) -> str:
    """The persisted form of an event (outbox rows), every field checked."""
    label = what or f"event {show(event.kind, 40)} ({show(event.id, 40)})"
    check_event(event, label)
    return encode_checked(event, label, max_bytes)


def decode_event(text: str | bytes, *, what: str = "a stored event") -> Event:
    """Rebuild an event from :func:`encode_event` output (:class:`StoreCorrupted` if damaged)."""
    try:
        event: Event = _EVENT.validate_python(loads(text), context=KEEP_UNKNOWN_FIELDS)
    except (ValueError, pydantic.ValidationError) as exc:
        raise StoreCorrupted(f"{what} cannot be read back: {_reason(exc)}") from exc
    return event


def decode_payload(text: str | bytes, *, what: str) -> Any:
    """:func:`loads` for a stored payload field (a spawn context); damage is StoreCorrupted."""
    try:
        return loads(text)
    except ValueError as exc:
        raise StoreCorrupted(f"{what} cannot be read back: {_reason(exc)}") from exc


def _reason(exc: Exception) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:200]
