"""The enqueue plan: a producer's one outbox entry, in one script call.

:data:`~harel_store_redis._scripts.ENQUEUE` appends the entry a commit writes for one emitted
event (:func:`~harel_store_redis._commit.emit_args`), indexes it in ``P own`` under the
target, applies the target's work-row touch and ``PUBLISH``\\ es the wake-up, as a commit with
work touches does (:func:`~harel_store_redis._touches.touch_args`); it never reads the target's
execution.  The script is not idempotent (a second run writes a second entry), so it is sent
once: a failure that may have come after the server ran it reaches the caller as
``StoreUnavailable`` (the entry may be stored), as the contract says.
"""

from __future__ import annotations

from typing import Any

from harel.store.author import PreparedEnqueue
from harel.store.errors import StoreCorrupted

from harel_store_redis._commit import emit_args, seq_exhausted
from harel_store_redis._keys import seq_of
from harel_store_redis._requests import DEFAULT_MAX_PAYLOAD_BYTES, Plan, guarded, run_script
from harel_store_redis._schema import Keys
from harel_store_redis._scripts import APPLIED, ENQUEUE, SEQ_EXHAUSTED
from harel_store_redis._shard_scripts import ENQUEUE_SHARDED
from harel_store_redis._touches import touch_args


def enqueue_request(
    keys: Keys, prepared: PreparedEnqueue
) -> tuple[tuple[bytes, ...], tuple[bytes, ...]]:
    """``(KEYS, ARGV)`` of the enqueue script: a commit's nine write keys for the target and
    the work keys; the entry's 4 emit items, the touch's 4 items and the wake-up channel."""
    args = emit_args(keys, prepared.emit) + touch_args(keys, [prepared.touch])
    return (*keys.write_keys(prepared.target_id), *keys.work_keys), tuple(args)


def enqueue_plan(
    keys: Keys,
    prepared: PreparedEnqueue,
    *,
    where: str,
    limit: int = DEFAULT_MAX_PAYLOAD_BYTES,
    shard: tuple[bytes, bytes] | None = None,
) -> Plan[int]:
    """Write ``prepared`` in ONE script call (one round trip, atomic) and return its ``seq``
    (``shard``: in the target's shard of the sharded layout, as for
    :func:`~harel_store_redis._commit.commit_plan`).

    A request over ``limit`` bytes raises ``PayloadTooLarge`` before anything is sent; a
    stream id that cannot be a seq and a plain ``StoreUnavailable`` mean nothing was written;
    a lost reply is a ``StoreUnavailable`` that leaves the outcome open.
    """
    command_keys, args = enqueue_request(keys, prepared)
    script = ENQUEUE
    if shard is not None:
        script, args = ENQUEUE_SHARDED, (*args, *shard)
    reply = yield from run_script(script, command_keys, args, retry_unavailable=False, limit=limit)
    return decide_enqueue(reply, where)


def decide_enqueue(reply: Any, where: str) -> int:
    """The seq the enqueue script's reply names, or its typed failure."""
    guarded(reply, where)
    if isinstance(reply, list) and reply:
        if reply[0] == APPLIED and len(reply) == 2 and isinstance(reply[1], bytes):
            return seq_of(reply[1])
        if reply[0] == SEQ_EXHAUSTED:
            raise seq_exhausted(where, "enqueue")
    raise StoreCorrupted(f"{where}: unexpected reply {reply!r} from the enqueue script")
