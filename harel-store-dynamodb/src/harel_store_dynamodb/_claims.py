"""``claim`` / ``renew`` / ``release`` as plans over the work rows of :mod:`._work`.

* claim: one GSI1 ``Query`` per priority tier and shard (``W<p>.<n>``, ``g1s <= key(now)``,
  ``Limit`` = the claim's limit, plus the ties of a shard's last entry), merged in
  :func:`~harel.store.author.claim_order`; then, per row while the unit budget lasts, a
  conditional ``UpdateItem`` leases it (the row must still sit in the tier and ready time the
  index showed: of racing claimers exactly one wins a row), the group's units are read
  (its timers: one consistent ``Query`` of its partition; the outbox entries targeted at it:
  one ``Query`` per ``O`` shard; the spawn intents it wrote: one ``Query`` of its ``S``
  shard), and :func:`~harel.store.author.take_units` builds the claim.  An early row (nothing
  due) is repaired (re-dated or deleted) under the ``wv`` its lease returned; a commit that
  touched it meanwhile makes the claim read its units again.
* renew: one conditional ``UpdateItem`` (holder, unexpired).
* release: a consistent ``GetItem``, the group's units, one ``PutItem``/``DeleteItem`` under
  the ``wv`` it read (a commit in between: read the units again).
* list_leases: per priority tier and shard, GSI1 pages of the rows dated after ``now``
  (``g1s > key(now)``, ``Limit`` = the limit), their rows read from the table (one consistent
  ``BatchGetItem`` per page: the index does not project the holder ``ow``), until ``limit``
  held rows are found or the partition ends; merged, nothing written.  The free rows dated
  after ``now`` before the ``limit``-th lease (all of them in a partition holding fewer) are
  read too (no index holds the leased rows alone; projecting ``ow`` would take a new index, a
  layout change).
"""

from __future__ import annotations

import math
import time

from harel.store.author import (
    PRIORITIES,
    WorkRow,
    claim_order,
    held_leases,
    lease_lost,
    leases_in_order,
    next_ready,
    outbox_or_damaged,
    relay_due,
    spawn_or_damaged,
    take_units,
)
from harel.store.contract import Claim, Lease, OutboxEntry
from harel.store.errors import StoreUnavailable

from harel_store_dynamodb._items import read_outbox_entry, read_relay_entries, read_spawn_entry
from harel_store_dynamodb._requests import Call, ConditionFailed
from harel_store_dynamodb._schema import G1P, G1S, OUTBOX, PK, SK, exe_pk, index_partitions
from harel_store_dynamodb._support import (
    ATTEMPTS,
    Plan,
    batch_get,
    first_up_to,
    gsi1_query,
    query_all,
    send_retrying_busy,
    targeted_relay_items,
    written_spawn_items,
)
from harel_store_dynamodb._values import Expr, Item, as_str, exact_float, float_key, n, s
from harel_store_dynamodb._work import (
    StoredWork,
    WorkHints,
    expand_bundle,
    guarded_put,
    is_bundle,
    new_stamp,
    read_indexed,
    read_work,
    work_key,
    work_partition,
)

RELAY_SETTLE = 2.0
"""Seconds a relay unit may take to show in GSI1 (eventually consistent on AWS): a row found
empty whose relay date (:func:`~harel.store.author.relay_due`) is less than this old by this
process's clock is put back as it was instead of dropped, so a unit written just before is
never orphaned (the next claim looks again)."""


def ready_rows(table: str, now: float, limit: int, shards: int) -> Plan:
    """Up to ``limit`` ready rows of each priority tier (exact over the shards), in claim
    order, and the keys of the ready touch bundles (:mod:`._work`)."""
    cut = float_key(now)
    found: list[WorkRow] = []
    bundles: list[Item] = []
    for priority in PRIORITIES:
        tier: list[WorkRow] = []
        for partition in index_partitions(f"W{priority}", shards):
            for item in (yield from first_up_to(table, partition, cut, limit)):
                if is_bundle(item):
                    bundles.append({PK: item[PK], SK: item[SK]})
                else:
                    tier.append(read_indexed(item))
        tier.sort(key=lambda row: (row.ready_at, row.key or ""))
        found.extend(tier[:limit])
    return claim_order(found), bundles


def leases(table: str, shards: int, now: float, limit: int) -> Plan:
    """The leases held at ``now`` in ``list_leases`` order, at most ``limit`` (arguments
    checked by ``PlanStore``; module doc)."""
    held: list[Lease] = []
    for priority in PRIORITIES:
        for partition in index_partitions(f"W{priority}", shards):
            held += yield from _held_in(table, partition, now, limit)
    return leases_in_order(held, limit)


def _held_in(table: str, partition: str, now: float, limit: int) -> Plan:
    """At least the first ``limit`` held rows of one GSI1 work partition dated after ``now``
    (every one when it holds fewer), as :class:`Lease` values, in no particular order."""
    e = Expr()
    params = gsi1_query(
        table, partition, limit, e, f" AND {e.name(G1S)} > {e.value(s(float_key(now)))}"
    )
    found: list[Lease] = []
    while len(found) < limit:
        reply = yield Call("query", params)
        keys = [
            {PK: item[PK], SK: item[SK]} for item in reply.get("Items", []) if not is_bundle(item)
        ]
        items = (yield from batch_get(table, keys, "list_leases")) if keys else []
        found += held_leases((read_work(item).row for item in items), now, limit)
        start = reply.get("LastEvaluatedKey")
        if not start:
            break
        params = {**params, "ExclusiveStartKey": start}
    return found


def group_units(table: str, key: str | None, shards: int) -> Plan:
    """The units of a group: its armed timers, the outbox entries targeted at it and the spawn
    intents it wrote (relays in ``seq`` order); for ``None`` the untargeted outbox entries."""
    outbox: list[OutboxEntry] = []
    if key is None:
        items = []
        for partition in index_partitions(OUTBOX, shards):
            items.extend((yield from query_all(gsi1_query(table, partition, None))))
    else:
        items = yield from targeted_relay_items(table, key, shards)
    for item in items:
        for seq, _slot, entry in read_relay_entries(item):
            read = outbox_or_damaged(seq, key, read_outbox_entry, seq, entry)
            if read.target_id == key:
                outbox.append(read)
    outbox.sort(key=lambda entry: entry.seq)
    if key is None:
        return [], outbox, []
    e = Expr()
    timer_items = yield from query_all(
        {
            "TableName": table,
            # timer sort keys are t:<path> / T:<sha256>; marks (p:) between are filtered out
            "KeyConditionExpression": (
                f"{e.name(PK)} = {e.value(exe_pk(key))} AND "
                f"{e.name(SK)} BETWEEN {e.value(s('T:'))} AND {e.value(s('t;'))}"
            ),
            "FilterExpression": f"attribute_exists({e.name('ph')})",
            "ProjectionExpression": f"{e.name('ph')}, {e.name('fa')}",
            "ConsistentRead": True,
            **e.args(),
        }
    )
    what = f"a timer of {key!r}"
    timers = [
        (as_str(item, "ph", what), exact_float(as_str(item, "fa", what), what))
        for item in timer_items
    ]
    spawns = [
        spawn_or_damaged(seq, key, read_spawn_entry, seq, key, entry)
        for item in (yield from written_spawn_items(table, key, shards))
        for seq, _slot, entry in read_relay_entries(item)
    ]
    spawns.sort(key=lambda entry: entry.seq)
    return timers, outbox, spawns


def _lease(
    table: str, row: WorkRow, owner: str, expires: float, hints: WorkHints, shards: int
) -> Plan:
    """Lease ``row`` if it still is what the index showed; the stored row, or ``None``."""
    e = Expr()
    params = {
        "TableName": table,
        "Key": work_key(row.key),
        "UpdateExpression": (
            f"SET {e.name('fa')} = {e.value(s(repr(expires)))}, "
            f"{e.name(G1S)} = {e.value(s(float_key(expires)))}, "
            f"{e.name('ow')} = {e.value(s(owner))}, {e.name('wv')} = {e.value(n(new_stamp()))}"
        ),
        "ConditionExpression": (
            f"{e.name(G1P)} = {e.value(s(work_partition(row.priority, row.key, shards)))} "
            f"AND {e.name('fa')} = {e.value(s(repr(row.ready_at)))}"
        ),
        "ReturnValues": "ALL_NEW",
        **e.args(),
    }
    try:
        reply = yield from send_retrying_busy(Call("update_item", params))
    except ConditionFailed:
        return None  # taken, re-dated or dropped since the index showed it
    stored = read_work(reply.get("Attributes", {}))
    hints.put(row.key, stored)
    return stored


def _settle(
    table: str, stored: StoredWork, ready: float | None, hints: WorkHints, shards: int
) -> Plan:
    """Put the row back free at ``ready`` (``None``: delete it) if it is still ``stored``:
    ``(True, None)``, else ``(False, the row as it is now)``."""
    row = stored.row
    if ready is None:
        e = Expr()
        call = Call(
            "delete_item",
            {
                "TableName": table,
                "Key": work_key(row.key),
                "ConditionExpression": f"{e.name('wv')} = {e.value(n(stored.wv))}",
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                **e.args(),
            },
        )
        after = None
    else:
        after = StoredWork(WorkRow(row.key, row.priority, ready), new_stamp())
        call = Call("put_item", guarded_put(table, after, stored, shards))
    try:
        yield from send_retrying_busy(call)
    except ConditionFailed as exc:
        current = None if exc.item is None else read_work(exc.item)
        hints.put(row.key, current)
        return False, current
    hints.put(row.key, after)
    return True, None


def claim(
    table: str, hints: WorkHints, shards: int, owner: str, now: float, lease: float, limit: int
) -> Plan:
    """Lease up to ``limit`` due units, grouped (module doc)."""
    rows, bundles = yield from ready_rows(table, now, limit, shards)
    if bundles:  # a fan-out's touches: apply them, then read the rows they made ready
        for key in bundles:
            yield from expand_bundle(table, key, hints, shards)
        rows, _more = yield from ready_rows(table, now, limit, shards)
    claims: list[Claim] = []
    budget, expires = limit, now + lease
    for row in rows:
        if not budget:
            break
        try:
            got = yield from _claim_row(table, row, owner, now, expires, budget, hints, shards)
        except StoreUnavailable:
            if not claims:
                raise
            break  # DynamoDB stopped answering midway: hand out what is leased already
        if got is not None:
            claims.append(got)
            budget -= got.units
    return claims


def _claim_row(
    table: str,
    row: WorkRow,
    owner: str,
    now: float,
    expires: float,
    budget: int,
    hints: WorkHints,
    shards: int,
) -> Plan:
    """Lease one ready row and take its due units (``None``: lost to a racer, or early)."""
    stored = yield from _lease(table, row, owner, expires, hints, shards)
    for _ in range(ATTEMPTS):
        if stored is None:
            return None
        timers, outbox, spawns = yield from group_units(table, row.key, shards)
        got = take_units(stored.row, budget, now, timers, outbox, spawns, owner, expires)
        if got is not None:
            return got
        ready = next_ready((at for _, at in timers), False, now)
        if relay_due(time.time() - RELAY_SETTLE) < row.ready_at < relay_due(time.time() + 1):
            ready = min(math.inf if ready is None else ready, row.ready_at)  # may lag: keep
        done, current = yield from _settle(table, stored, ready, hints, shards)
        if done or current is None or current.row.owner != owner:
            return None
        stored = current  # a commit touched the leased row meanwhile: look again
    return None


def renew(
    table: str, hints: WorkHints, owner: str, key: str | None, now: float, lease: float
) -> Plan:
    """Extend ``owner``'s unexpired lease of ``key`` to ``now + lease`` (one request)."""
    expires = now + lease
    e = Expr()
    params = {
        "TableName": table,
        "Key": work_key(key),
        "UpdateExpression": (
            f"SET {e.name('fa')} = {e.value(s(repr(expires)))}, "
            f"{e.name(G1S)} = {e.value(s(float_key(expires)))}, "
            f"{e.name('wv')} = {e.value(n(new_stamp()))}"
        ),
        "ConditionExpression": (
            f"{e.name('ow')} = {e.value(s(owner))} AND {e.name(G1S)} > {e.value(s(float_key(now)))}"
        ),
        "ReturnValues": "ALL_NEW",
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        **e.args(),
    }
    try:
        reply = yield from send_retrying_busy(Call("update_item", params))
    except ConditionFailed as exc:
        row = None if exc.item is None else read_work(exc.item).row
        raise lease_lost(row, key, owner, now) from None
    hints.put(key, read_work(reply.get("Attributes", {})))
    return expires


def release(
    table: str,
    hints: WorkHints,
    shards: int,
    owner: str,
    key: str | None,
    retry_at: float | None,
    now: float,
) -> Plan:
    """Give ``owner``'s lease of ``key`` back, re-dating the row from what is left."""
    reply = yield Call(
        "get_item", {"TableName": table, "Key": work_key(key), "ConsistentRead": True}
    )
    item = reply.get("Item")
    stored = None if item is None else read_work(item)
    for _ in range(ATTEMPTS):
        if stored is None or stored.row.owner != owner:
            raise lease_lost(None if stored is None else stored.row, key, owner, None)
        timers, outbox, spawns = yield from group_units(table, key, shards)
        ready = next_ready((at for _, at in timers), bool(outbox or spawns), now, retry_at)
        done, stored = yield from _settle(table, stored, ready, hints, shards)
        if done:
            return
    raise StoreUnavailable(f"the release of {key!r} kept racing commits to it; retry")


__all__ = ["claim", "group_units", "leases", "ready_rows", "release", "renew"]
