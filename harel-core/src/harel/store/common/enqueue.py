"""A producer's enqueue, written once for every backend: check and encode the entry, and say
which work row it touches.

``enqueue(target_id, event, priority=)`` writes one outbox entry targeted at ``target_id``
and nothing else; a backend writes :attr:`PreparedEnqueue.emit` as it writes an emitted event
and applies :attr:`PreparedEnqueue.touch` to the target's work row in the same atomic write.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from harel.model import Event
from harel.store.common.claims import WorkTouch, relay_due
from harel.store.common.commit import PreparedEmit, prepare_emit
from harel.store.common.limits import MAX_DOCUMENT_BYTES
from harel.store.common.validate import check_id, check_int

__all__ = ["PreparedEnqueue", "prepare_enqueue"]


@dataclass(frozen=True, slots=True)
class PreparedEnqueue:
    """One enqueued entry, validated and encoded, ready for any backend's plan."""

    emit: PreparedEmit
    """The outbox row (its ``target_id`` is never ``None``)."""
    priority: int
    """The priority the target's work row takes when this write creates it (0-4)."""
    enqueued_at: float
    """Epoch seconds (this process's clock): the entry's relay due time is dated from it."""

    @property
    def target_id(self) -> str:
        """The execution the entry is for."""
        assert self.emit.target_id is not None  # prepare_enqueue refuses None
        return self.emit.target_id

    @property
    def touch(self) -> WorkTouch:
        """What the write does to the target's work row (see :mod:`.claims`): relay work due
        at once, not the target's own write (its priority is kept when the row exists)."""
        return WorkTouch(self.target_id, relay_due(self.enqueued_at), self.priority, False)


def prepare_enqueue(
    target_id: object,
    event: object,
    priority: object,
    *,
    max_document_bytes: int = MAX_DOCUMENT_BYTES,
) -> PreparedEnqueue:
    """Validate and encode one enqueue; every refusal comes before anything is written.

    ``InvalidIdentifier`` for a target that is not a usable id, ``TypeError`` for an event
    that is not an :class:`Event` or a priority that is not an ``int``, ``InvalidArgument``
    for a priority outside 0-4, ``InvalidPayload`` / ``PayloadTooLarge`` for an event that
    does not read back equal or does not fit.
    """
    target = check_id(target_id, "enqueue target id")
    level = check_int(priority, "enqueue priority", minimum=0, maximum=4)
    if not isinstance(event, Event):
        raise TypeError(f"enqueue event must be an Event, got {type(event).__name__}")
    emit = prepare_emit(target, event, "enqueue", max_document_bytes)
    return PreparedEnqueue(emit, level, time.time())
