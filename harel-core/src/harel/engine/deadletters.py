"""Dead letters: the relay entries and timers a runner gave up on, kept in the store itself.

Design (within the store contract, no new store method): the dead letters live in ONE
reserved execution record, id :data:`DEAD_LETTERS_ID`, status FAILED, whose context holds
the newest :data:`KEEP` letters (and the total count).  Every worker on the store appends
to it with an ordinary CAS ``commit``, so ``harel list`` shows the record (definition
``harel.dead-letters``), ``harel dead-letters`` prints the letters from any host, and
``harel dead-letters --clear`` (or ``harel purge``) empties it.  A letter names what was set
aside (``outbox:SEQ``, ``spawn:SEQ``, ``timer:PATH@FIRE_AT``), its target, the event's kind
and id, the error (redacted, truncated) and the attempts made; the event's data is kept when
small, so an operator can re-send it (``harel send ID KIND --data ... --event-id ...``).

The record is never targeted by events or timers and no runner holds a definition for it.
This module is pure: it builds the new record; :mod:`harel.engine.plan` writes it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from harel.model import Execution, Status
from harel.store.common.urls import redact_text

DEAD_LETTERS_ID = "harel.dead-letters"
"""The id (and definition id) of the execution record that holds the dead letters."""

KEEP = 200
"""How many of the newest letters the record keeps (older ones only count in ``total``)."""

ERROR_CHARS = 500
"""Longest error text kept per letter."""

DATA_CHARS = 2000
"""Event data larger than this (as JSON) is dropped from the letter (its size is kept)."""


@dataclass(frozen=True)
class DeadLetter:
    """One quarantined unit of work: what it was, where it went and why it was set aside."""

    ref: str
    target_id: str | None
    event_kind: str | None
    event_id: str | None
    error: str
    attempts: int
    at: float
    event_data: dict[str, Any] | None = None
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The JSON-ready form stored in the record."""
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> DeadLetter:
        """Read a stored letter back (unknown keys are ignored)."""
        known = {name: raw[name] for name in cls.__dataclass_fields__ if name in raw}
        return cls(**known)


def error_text(error: BaseException) -> str:
    """``Type: message`` of ``error``, secrets redacted, at most :data:`ERROR_CHARS` long."""
    text = " ".join(f"{type(error).__name__}: {error}".split())
    text = redact_text(text)
    return text if len(text) <= ERROR_CHARS else text[: ERROR_CHARS - 3] + "..."


def small_data(data: dict[str, Any] | None) -> tuple[dict[str, Any] | None, str]:
    """``data`` when it is small, plain JSON; else ``None`` and a note saying why."""
    if data is None:
        return None, ""
    try:
        text = json.dumps(data, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return None, "event data dropped: not plain JSON"
    if len(text) > DATA_CHARS:
        return None, f"event data dropped: {len(text)} characters"
    return data, ""


def letters_of(record: Execution | None) -> tuple[list[DeadLetter], int]:
    """The letters held by the record (oldest first) and the total ever recorded."""
    if record is None:
        return [], 0
    raw = record.context.get("letters")
    letters = [
        DeadLetter.from_dict(item)
        for item in (raw if isinstance(raw, list) else [])
        if isinstance(item, dict)
    ]
    total = record.context.get("total")
    return letters, total if isinstance(total, int) else len(letters)


def _summary(total: int) -> str:
    return f"{total} dead letter(s): `harel dead-letters` lists them"


def with_letter(record: Execution | None, letter: DeadLetter) -> Execution:
    """The record to commit: ``record`` (or a new one) with ``letter`` appended."""
    letters, total = letters_of(record)
    kept = [item.as_dict() for item in [*letters, letter][-KEEP:]]
    if record is None:
        record = Execution(
            id=DEAD_LETTERS_ID,
            definition_id=DEAD_LETTERS_ID,
            status=Status.FAILED,
            outcome="dead-letters",
        )
    record.context = {"letters": kept, "total": total + 1}
    record.error = _summary(total + 1)
    return record


def cleared(record: Execution) -> Execution:
    """The record emptied (its version kept for the CAS commit)."""
    record.context = {"letters": [], "total": 0}
    record.error = _summary(0)
    return record
