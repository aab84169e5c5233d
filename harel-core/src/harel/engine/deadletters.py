"""Dead letters: the relay entries and timers a runner gave up on, kept in the store itself.

Design (within the store contract, no new store method): the dead letters live in ONE
reserved execution record, id :data:`DEAD_LETTERS_ID`, status FAILED, whose context holds
the newest :data:`KEEP` letters (and the total count).  Every worker on the store appends
to it with an ordinary CAS ``commit``, so ``harel list`` shows the record (definition
``harel.dead-letters``), ``harel dead-letters`` prints the letters from any host, and
``harel dead-letters --clear`` (or ``harel purge``) empties it and ``harel dead-letters
--requeue REF`` hands one letter's event back to the workers (:mod:`harel.engine.requeue`).
A letter names what was set aside (``outbox:SEQ``, ``spawn:SEQ``,
``timer:ID:PATH@FIRE_AT``), its target, the event's kind and id, the error (redacted,
truncated) and the attempts made; the event's data is kept when small, so the letter can be
requeued (:func:`resend_of` says which can) or re-sent by hand (``harel send ID KIND --data
... --event-id ...``).

The record is never targeted by events or timers and no runner holds a definition for it.
This module is pure: it builds the new record; :mod:`harel.engine.plan` writes it (and
:mod:`harel.engine.requeue` when a letter is requeued).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from harel.model import Event, Execution, Status
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
    """The letters held by the record (oldest first) and the total still set aside (the
    kept letters and the older ones no longer kept; :func:`cleared` makes it 0)."""
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


def find_letter(record: Execution | None, ref: str) -> DeadLetter | None:
    """The newest letter of ``record`` whose ref is ``ref``; ``None`` when it holds none."""
    letters, _ = letters_of(record)
    return next((letter for letter in reversed(letters) if letter.ref == ref), None)


def without_letter(record: Execution, ref: str) -> Execution:
    """The record to commit: ``record`` without its letters named ``ref`` (its version kept
    for the CAS commit), ``total`` decremented by as many.

    ``total`` counts the letters still set aside (``cleared`` makes it 0), so a letter that
    was dealt with stops counting; the older letters no longer kept still count.  A record
    holding no letter ``ref`` comes back with the same letters and total.
    """
    letters, total = letters_of(record)
    kept = [letter.as_dict() for letter in letters if letter.ref != ref]
    left = max(0, total - (len(letters) - len(kept)))
    record.context = {"letters": kept, "total": left}
    record.error = _summary(left)
    return record


def _parent_of(child_id: str) -> str:
    """The parent of a region's execution id (``PARENT:REGION:SEQ``, as the engine forks)."""
    parts = child_id.rsplit(":", 2)
    return parts[0] if len(parts) == 3 else child_id


def resend_of(letter: DeadLetter) -> tuple[str, Event] | str:
    """``(target_id, event)`` to enqueue to requeue ``letter`` (the event keeps its id), or
    a text saying why it cannot be requeued and what to do instead.

    Requeueable: an outbox or timer letter with a target, an event kind, an event id and its
    data kept.  Re-sending a timer's ``Timeout`` through the outbox is what the timer sweep
    would have delivered: the engine applies the same staleness guard and the same event id
    dedupes it (the timer row itself was deleted when the letter was recorded).  A spawn
    letter is not an event: its child region was never started, and a ``Start`` sent to it
    starts nothing, so it is refused.
    """
    kind, _, _ = letter.ref.partition(":")
    if kind == "spawn":
        target = letter.target_id or "?"
        parent = _parent_of(target)
        return (
            f"{letter.ref} is a spawn letter: region {target!r} was never started and "
            "re-sending its Start event starts nothing; its parent waits for it: look with "
            f"`harel trace {parent}`, give up on it with `harel purge --id {parent} --force`, "
            "then `harel dead-letters --clear`"
        )
    if kind not in ("outbox", "timer"):
        return f"{letter.ref} is not an outbox or timer letter; nothing is requeued"
    if not letter.target_id or not letter.event_kind:
        return (
            f"{letter.ref} names no target execution or event kind: there is nothing to "
            "send it to; drop it with `harel dead-letters --clear`"
        )
    if letter.event_data is None or not letter.event_id:
        why = letter.note or "its event data was not kept"
        return (
            f"{letter.ref} cannot be requeued ({why}): re-send it with `harel send "
            f"{letter.target_id} {letter.event_kind} --data '{{...}}' --event-id "
            f"{letter.event_id or 'ID'}`"
        )
    event = Event(kind=letter.event_kind, data=letter.event_data, id=letter.event_id)
    return letter.target_id, event


def requeue_refusal(letter: DeadLetter) -> str | None:
    """Why ``letter`` cannot be requeued (see :func:`resend_of`); ``None`` when it can."""
    found = resend_of(letter)
    return found if isinstance(found, str) else None
