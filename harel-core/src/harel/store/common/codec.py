"""The one JSON codec every store uses for documents, events, contexts and trace steps.

Built on pydantic-core so datetimes, decimals, UUIDs and enums encode the same way on every
backend; NaN and infinities survive as JSON constants instead of silently becoming null.
"""

from __future__ import annotations

from typing import Any

import pydantic_core

from harel.model import Event, Execution
from harel.store.errors import InvalidPayload


def dumps(value: Any, *, what: str = "value") -> str:
    """Encode ``value`` as compact JSON text; raises :class:`InvalidPayload` naming ``what``."""
    try:
        return pydantic_core.to_json(value, inf_nan_mode="constants").decode()
    except (pydantic_core.PydanticSerializationError, TypeError, ValueError) as exc:
        raise InvalidPayload(
            f"{what} cannot be stored as JSON: {exc}; store only JSON-compatible values "
            "(str, int, float, bool, None, lists, dicts with str keys, datetimes)"
        ) from exc


def loads(text: str | bytes) -> Any:
    """Decode JSON text produced by :func:`dumps`."""
    return pydantic_core.from_json(text, allow_inf_nan=True)


def encode_execution(exe: Execution) -> str:
    """The persisted document of an execution (its ``version`` included)."""
    return dumps(exe, what=f"execution {exe.id!r}")


def decode_execution(text: str | bytes) -> Execution:
    """Rebuild an execution from :func:`encode_execution` output; always a fresh object."""
    return Execution.model_validate(loads(text))


def encode_event(event: Event) -> str:
    """The persisted form of an event (outbox rows)."""
    return dumps(event, what=f"event {event.kind!r} ({event.id})")


def decode_event(text: str | bytes) -> Event:
    """Rebuild an event from :func:`encode_event` output."""
    return Event.model_validate(loads(text))
