"""Requeue one dead letter: its event handed back to the workers, the letter removed.

The one operation behind ``harel dead-letters --requeue REF`` and the monitor's requeue
button; it goes through the store contract only (``load``, ``enqueue``, ``commit``).  Which
letters can be requeued is the pure rule :func:`harel.engine.deadletters.resend_of`.
"""

from __future__ import annotations

from dataclasses import dataclass

from harel.engine.deadletters import (
    DEAD_LETTERS_ID,
    DeadLetter,
    find_letter,
    resend_of,
    without_letter,
)
from harel.store.contract import ExecutionStore
from harel.store.errors import StoreConflict

REMOVE_ATTEMPTS = 5
"""How many CAS commits removing the letter are tried (reloading the record in between)."""


class RequeueError(Exception):
    """A letter was not requeued; the message says why and what to do instead."""


class LetterNotFound(RequeueError):
    """The dead-letter record holds no letter with that ref (requeued or cleared already)."""

    def __init__(self, ref: str) -> None:
        super().__init__(
            f"no dead letter {ref!r}: it was requeued or cleared already, or the ref is "
            "mistyped (`harel dead-letters` lists the refs)"
        )
        self.ref = ref


class NotRequeueable(RequeueError):
    """The letter exists but re-sending its event would not redo its work."""


class LetterKept(RequeueError):
    """The event was requeued but the record stayed busy, so the letter is still listed."""


@dataclass(frozen=True)
class Requeued:
    """What :func:`requeue` did: ``letter``'s event is outbox entry ``seq``; ``removed`` is
    False when the letter was already gone at removal (another operator requeued or cleared
    it meanwhile: nothing more to do)."""

    letter: DeadLetter
    seq: int
    removed: bool

    def describe(self) -> str:
        """One line for the operator: what went where, and whether the letter was removed."""
        letter = self.letter
        text = (
            f"requeued {letter.ref}: event {letter.event_kind!r} (id {letter.event_id}) for "
            f"{letter.target_id} is outbox entry {self.seq}"
        )
        if not self.removed:
            text += "; the letter was already gone (requeued or cleared meanwhile)"
        return text


def requeue(store: ExecutionStore, ref: str) -> Requeued:
    """Enqueue dead letter ``ref``'s event for its target FIRST, then remove the letter with
    a CAS commit of the record (reloaded and retried on ``StoreConflict``).

    The event keeps its id, so requeueing twice (two operators, a retry after an error, a
    crash between the two writes) is harmless: the runner's dedupe marks deliver it once.
    Raises :class:`LetterNotFound` for an unknown ref, :class:`NotRequeueable` for a letter
    whose re-sent event would not redo its work (or whose target is no longer stored),
    :class:`LetterKept` when the record stayed busy after the event was enqueued.
    """
    record = store.load(DEAD_LETTERS_ID)
    letter = find_letter(record, ref)
    if letter is None:
        raise LetterNotFound(ref)
    resend = resend_of(letter)
    if isinstance(resend, str):
        raise NotRequeueable(resend)
    target_id, event = resend
    if not callable(getattr(store, "enqueue", None)):
        raise NotRequeueable(
            f"{type(store).__name__} has no enqueue() (it predates the contract's enqueue): "
            f"upgrade the store's package, or re-send with `harel send {target_id} "
            f"{event.kind} --event-id {event.id} --data ...`"
        )
    target = store.load(target_id)
    if target is None:
        raise NotRequeueable(
            f"{ref}: its target {target_id!r} is no longer stored, so the event would be "
            "dropped; drop the letter with `harel dead-letters --clear`"
        )
    seq = store.enqueue(target.id, event, priority=target.priority)
    return Requeued(letter, seq, _remove(store, ref, seq))


def _remove(store: ExecutionStore, ref: str, seq: int) -> bool:
    """Remove letter ``ref`` from the record; False when it is already gone."""
    for _ in range(REMOVE_ATTEMPTS):
        record = store.load(DEAD_LETTERS_ID)
        if record is None or find_letter(record, ref) is None:
            return False
        try:
            store.commit(without_letter(record, ref), [])
        except StoreConflict:
            continue
        return True
    raise LetterKept(
        f"{ref}'s event was requeued (outbox entry {seq}) but the dead-letter record stayed "
        f"busy, so the letter is still listed: run the same requeue again (harmless: same "
        "event id) or `harel dead-letters --clear`"
    )
