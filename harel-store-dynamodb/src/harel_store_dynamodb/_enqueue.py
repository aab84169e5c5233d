"""``enqueue``: one outbox entry for a target and its work-row touch, as ONE
``TransactWriteItems`` of two actions.

The entry is the relay item a commit writes for one emitted event (:func:`._commit.relay_items`:
``pk = q:<base>``, ``sk = o:0000``, indexed in the target's ``O`` shard, ``tg`` naming the
target), its seq ``base << 16`` drawn from the process's relay clock like a commit's (no
counter item: nothing to read first), ``Put`` under ``attribute_not_exists``; the touch is the
target's work-row action (:func:`._work.touch_action`, from the row this store last saw, guarded
by its ``wv``).  The target's execution item is never read or written.

A refused transaction says which action failed: the work row moved (rebuild the touch from the
row DynamoDB returned and send again), or the relay key is taken — by this very write (an
earlier send landed: the stored entry is ours, so it returns its seq) or by another process
that drew the same base (draw a fresh one).  An unanswered send is sent again, the same request
with the same ``ClientRequestToken`` (DynamoDB answers a duplicate as the original); when no
send gets an answer the outcome is open: :class:`~._requests.RequestInDoubt` (a
``StoreUnavailable``), and the caller re-sends.
"""

from __future__ import annotations

from typing import Any

from harel.store.author import PreparedEnqueue
from harel.store.errors import StoreUnavailable

from harel_store_dynamodb._commit import check_relay_item, guarded_put, relay_items, relays_only
from harel_store_dynamodb._commit_plan import new_token
from harel_store_dynamodb._items import Action
from harel_store_dynamodb._requests import (
    Call,
    ItemBusy,
    RequestInDoubt,
    TableNotFound,
    TransactionCancelled,
)
from harel_store_dynamodb._schema import shard_of
from harel_store_dynamodb._seq import BaseClock, unpacked_seq
from harel_store_dynamodb._support import ATTEMPTS, BUSY_CODES, Plan, backoff, cancellation_error
from harel_store_dynamodb._values import Item
from harel_store_dynamodb._work import StoredWork, WorkHints, touch_action

WORK_ACTION = 0
"""Index of the work-row action in the enqueue's transaction."""
RELAY_ACTION = 1
"""Index of the relay item's ``Put``."""
FAILED = "ConditionalCheckFailed"

STORED, LANDED, MOVED, TAKEN = "stored", "landed", "moved", "taken"
"""What one attempt came to (:func:`_send`)."""


def enqueue_transaction(
    table: str, prepared: PreparedEnqueue, base: int, seen: StoredWork | None, shards: int = 1
) -> tuple[list[Action], Item, StoredWork]:
    """The two actions of one attempt (the work-row touch, the relay item's guarded ``Put``
    returning the stored item when its key is taken), the relay item, and the row once
    applied; ``PayloadTooLarge`` before anything is sent when the item cannot be stored."""
    target = prepared.target_id
    (item,) = relay_items(relays_only(target, (prepared.emit,)), base, 1, shard_of(target, shards))
    check_relay_item(item, f"the event enqueued to {target!r}")
    touch, after = touch_action(table, prepared.touch, seen, shards)
    relay = guarded_put(table, item)
    relay["Put"]["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
    return [touch, relay], item, after


def enqueue(
    table: str, clock: BaseClock, prepared: PreparedEnqueue, shards: int, work: WorkHints
) -> Plan:
    """Write ``prepared`` (module doc) and return its seq: stored once when it returns;
    nothing stored when it raises anything but ``StoreUnavailable`` (outcome open: re-send)."""
    target = prepared.target_id
    for _attempt in range(ATTEMPTS):
        base = clock.next()
        actions, item, after = enqueue_transaction(table, prepared, base, work.get(target), shards)
        params: dict[str, Any] = {"TransactItems": actions, "ClientRequestToken": new_token()}
        outcome = yield from _send(params, item, target, work)
        if outcome == STORED:
            work.put(target, after)
            return unpacked_seq(base, 0)
        if outcome == LANDED:
            work.drop(target)  # stored by an earlier send: the row may have moved on since
            return unpacked_seq(base, 0)
        # MOVED: rebuild the touch from the row DynamoDB returned; TAKEN: draw a fresh base
    raise StoreUnavailable(
        f"the enqueue to {target!r} kept colliding with other writers after {ATTEMPTS} "
        "attempts; nothing was written; retry"
    )


def _send(params: dict[str, Any], item: Item, target: str, work: WorkHints) -> Plan:
    """Send one attempt, the same request again while it is refused whole (busy) or
    unanswered, until answered: :data:`STORED` (by this send, no earlier one in doubt),
    :data:`LANDED` (stored, maybe by an earlier send), :data:`MOVED` (the work row moved: the
    hint now holds the stored row), :data:`TAKEN` (another process's entry holds the relay
    key), or the typed error."""
    doubt = False
    for resend in range(ATTEMPTS):
        try:
            yield Call("transact_write_items", params)
            return LANDED if doubt else STORED
        except TransactionCancelled as exc:
            doubt = doubt or exc.retried
            codes = exc.codes()
            if codes[RELAY_ACTION : RELAY_ACTION + 1] == [FAILED]:
                stored = exc.reasons[RELAY_ACTION].get("Item")
                if stored is not None and stored.get("e") == item["e"]:
                    return LANDED  # the entry under our key is ours: an earlier send landed
                return TAKEN
            if codes[WORK_ACTION : WORK_ACTION + 1] == [FAILED]:
                work.seen_item(target, exc.reasons[WORK_ACTION].get("Item"))
                return MOVED
            if not set(codes) & BUSY_CODES:
                raise cancellation_error(exc, f"the enqueue to {target!r}") from exc
        except TableNotFound:
            raise  # definite: nothing can be written to a missing table
        except ItemBusy as exc:
            doubt = doubt or exc.retried  # refused whole by this send; an earlier one may land
        except StoreUnavailable:
            doubt = True  # unanswered: the same request again (same ClientRequestToken)
        yield backoff(resend)
    if doubt:
        raise RequestInDoubt(
            f"the enqueue to {target!r} got no clear answer from DynamoDB after {ATTEMPTS} "
            "sends; it may or may not be stored: re-send it (the target's dedupe mark delivers "
            "the event once)"
        )
    raise StoreUnavailable(
        f"the enqueue to {target!r} was refused as busy {ATTEMPTS} times; nothing was "
        "written; retry"
    )
