"""The layout version check on open, and the in-place upgrades from layouts 1 and 2.

The meta item (``pk=meta, sk=schema``) records ``schema`` (the layout version) and
``written_by`` (the release that wrote it).  :func:`settle_layout` asks
:func:`harel.store.author.schema_verdict` what to do and does it:

* ``create`` — put the meta item under ``attribute_not_exists`` (a racing opener's item wins;
  it is read back and judged again);
* ``ready`` — nothing;
* ``upgrade`` (from 2, or 1) — first the shard count (the ``index_shards`` knob, or
  :data:`._schema.DEFAULT_INDEX_SHARDS`) is recorded on the meta item under
  ``attribute_not_exists(index_shards)``, so concurrent upgraders agree on one count (a loser
  adopts the winner's, or is refused if it asked for another).  From 1, every execution
  item that still has layout 1's commit token ``ct`` gets it moved to its version's receipt
  (``SET k<v % 8> = ct REMOVE ct``, conditional on the
  item's ``v`` and ``ct`` being what the scan saw, so a commit that landed meanwhile simply
  wins).  Then a consistent ``Scan`` finds every GSI1 entry still under a constant partition
  (``L``, ``T``, ``O``, ``S``, ``P``) and moves it to its shard (``SET g1p = <kind>.<n>``
  under ``g1p = <kind>``; ``n`` from the execution id: the item's own for an execution, a mark
  or a timer, the parent's for a spawn intent; an outbox item, whose writer is not stored,
  hashes its own key — any stable choice works, the sweeps read every shard).  Then (3 → 4)
  the work rows of claims are backfilled (:func:`backfill_work`).  Last, the meta item goes
  to 4 under ``schema = <found>``.  Each step is idempotent, so
  several processes may upgrade at once, and an interrupted upgrade is finished by the next
  open;
* a newer layout raises :class:`~harel.store.errors.SchemaVersionError` (both versions, the
  writer, the pip line) before anything is written.
"""

from __future__ import annotations

import contextlib
import math
import time

from harel.store.author import WorkTouch, relay_due, release_of, schema_verdict
from harel.store.errors import SchemaVersionError, StoreConfigError

from harel_store_dynamodb._items import read_outbox_entry, read_relay_entries
from harel_store_dynamodb._requests import Call, ConditionFailed
from harel_store_dynamodb._schema import (
    DEFAULT_INDEX_SHARDS,
    DISTRIBUTION,
    EXE_SK,
    G1P,
    INDEX_KINDS,
    META_KEY,
    OUTBOX,
    PK,
    SCHEMA_VERSION,
    SK,
    SPAWNS,
    TIMERS,
    UPGRADES,
    index_partition,
    index_partitions,
    receipt_attribute,
    shard_of,
    stored_layout,
    stored_shards,
)
from harel_store_dynamodb._support import Plan, gsi1_query, query_all
from harel_store_dynamodb._values import Expr, Item, as_str, exact_float, n, s
from harel_store_dynamodb._work import WorkHints, apply_touch

ROUNDS = 3
"""How many times a lost race on the meta item is read back and judged again."""


def check_shards(table: str, requested: int | None, stored: int) -> None:
    """Refuse a store asking for another shard count than the table records."""
    if requested is not None and requested != stored:
        raise StoreConfigError(
            f"DynamoDB table {table!r} is laid out with index_shards={stored}, not "
            f"{requested}: open it without index_shards (or with {stored}); changing the "
            "count of an existing table is not supported"
        )


def settle_layout(table: str, requested: int | None = None) -> Plan:
    """Create, accept or upgrade the table's layout (module doc); returns its shard count."""
    written_by = release_of(DISTRIBUTION)
    for _ in range(ROUNDS):
        reply = yield Call(
            "get_item", {"TableName": table, "Key": META_KEY, "ConsistentRead": True}
        )
        item = reply.get("Item")
        found, writer = stored_layout(item)
        verdict = schema_verdict(
            found,
            current=SCHEMA_VERSION,
            upgrades=UPGRADES,
            where=f"DynamoDB table {table!r}",
            distribution=DISTRIBUTION,
            written_by=writer,
        )
        shards = stored_shards(item)
        if shards is not None:
            check_shards(table, requested, shards)
        if verdict == "ready":
            if shards is None:
                raise SchemaVersionError(
                    f"the meta item of DynamoDB table {table!r} records layout "
                    f"{SCHEMA_VERSION} without index_shards: it was not written by harel"
                )
            return shards
        e = Expr()
        if verdict == "upgrade":
            if shards is None:
                recorded = yield from _record_shards(table, found, requested)
                if not recorded:
                    continue  # another upgrader recorded its count first: judge again
                shards = requested or DEFAULT_INDEX_SHARDS
            if found == 1:
                yield from move_commit_tokens(table)
            if found in (1, 2):
                yield from move_index_entries(table, shards)
            yield from backfill_work(table, shards, time.time())
            condition = (
                f"{e.name('schema')} = {e.value(n(found or 0))} AND "
                f"{e.name('index_shards')} = {e.value(n(shards))}"
            )
        else:  # create
            shards = requested or DEFAULT_INDEX_SHARDS
            condition = f"attribute_not_exists({e.name(PK)})"
        with contextlib.suppress(ConditionFailed):  # another opener got there first: judge again
            yield Call(
                "put_item",
                {
                    "TableName": table,
                    "Item": {
                        **META_KEY,
                        "schema": n(SCHEMA_VERSION),
                        "written_by": s(written_by),
                        "index_shards": n(shards),
                    },
                    "ConditionExpression": condition,
                    **e.args(),
                },
            )
            return shards
    raise AssertionError("unreachable: the meta item settles within a few rounds")


def _record_shards(table: str, found: int | None, requested: int | None) -> Plan:
    """Record the shard count of an upgrade on the meta item (still at layout ``found``);
    ``False`` when another upgrader recorded one first."""
    e = Expr()
    try:
        yield Call(
            "update_item",
            {
                "TableName": table,
                "Key": META_KEY,
                "UpdateExpression": (
                    f"SET {e.name('index_shards')} = "
                    f"{e.value(n(requested or DEFAULT_INDEX_SHARDS))}"
                ),
                "ConditionExpression": (
                    f"{e.name('schema')} = {e.value(n(found or 0))} AND "
                    f"attribute_not_exists({e.name('index_shards')})"
                ),
                **e.args(),
            },
        )
    except ConditionFailed:
        return False
    return True


def move_index_entries(table: str, shards: int) -> Plan:
    """Layout 2 → 3: every GSI1 entry under a constant partition moves to its shard."""
    e = Expr()
    kinds = ", ".join(e.value(s(kind)) for kind in INDEX_KINDS)
    params = {
        "TableName": table,
        "FilterExpression": f"{e.name(G1P)} IN ({kinds})",
        "ProjectionExpression": ", ".join(e.name(a) for a in (PK, SK, G1P, "pa")),
        "ConsistentRead": True,
        **e.args(),
    }
    while True:
        reply = yield Call("scan", params)
        for item in reply.get("Items", []):
            yield from _move_entry(table, item, shards)
        start = reply.get("LastEvaluatedKey")
        if not start:
            return
        params = {**params, "ExclusiveStartKey": start}


def entry_owner(item: Item) -> str:
    """The key an index entry's shard is drawn from (module doc)."""
    kind, pk = str(item[G1P]["S"]), str(item[PK]["S"])
    if pk.startswith("x:"):
        return pk[2:]
    if kind == SPAWNS and "pa" in item:
        return str(item["pa"]["S"])
    return pk


def _move_entry(table: str, item: Item, shards: int) -> Plan:
    kind = item[G1P]["S"]
    target = index_partition(kind, shard_of(entry_owner(item), shards))
    e = Expr()
    with contextlib.suppress(ConditionFailed):  # gone meanwhile (acked, deleted) or moved
        yield Call(
            "update_item",
            {
                "TableName": table,
                "Key": {PK: item[PK], SK: item[SK]},
                "UpdateExpression": f"SET {e.name(G1P)} = {e.value(s(target))}",
                "ConditionExpression": f"{e.name(G1P)} = {e.value(s(kind))}",
                **e.args(),
            },
        )


def backfill_work(table: str, shards: int, now: float) -> Plan:
    """Layout 3 → 4: a work row for every group with work — the executions with armed timers
    (ready at their earliest ``fire_at``), the targets of pending outbox entries (the
    untargeted group too) and the writers of pending spawn intents (relay work, dated
    ``relay_due(now)``) — at priority 0 (their next commit sets theirs).  Read from the GSI1
    ``T``, ``O`` and ``S`` shards (no table scan); each row is written with the commit's touch
    rule under its ``wv`` guard, so rerunning the step, or racing a 4-layout writer, stays
    exact."""
    due: dict[str | None, float] = {}
    for partition in index_partitions(TIMERS, shards):
        for item in (yield from query_all(gsi1_query(table, partition, None))):
            what = "a timer being backfilled"
            key = as_str(item, "xi", what)
            due[key] = min(due.get(key, math.inf), exact_float(as_str(item, "fa", what), what))
    for partition in index_partitions(OUTBOX, shards):
        for item in (yield from query_all(gsi1_query(table, partition, None))):
            for seq, _slot, entry in read_relay_entries(item):
                target = read_outbox_entry(seq, entry).target_id
                due[target] = min(due.get(target, math.inf), relay_due(now))
    for partition in index_partitions(SPAWNS, shards):
        for item in (yield from query_all(gsi1_query(table, partition, None))):
            parent = as_str(item, "pa", "a spawn item being backfilled")
            due[parent] = min(due.get(parent, math.inf), relay_due(now))
    hints = WorkHints()
    for group, at in due.items():  # a 4-layout writer's row is merged with, not overwritten
        yield from apply_touch(table, WorkTouch(group, at, 0, False), hints, shards)


def move_commit_tokens(table: str) -> Plan:
    """Layout 1 → 2: each execution item's ``ct`` becomes its version's receipt."""
    e = Expr()
    params = {
        "TableName": table,
        "FilterExpression": (
            f"{e.name(SK)} = {e.value(s(EXE_SK))} AND attribute_exists({e.name('ct')})"
        ),
        "ProjectionExpression": ", ".join(e.name(a) for a in (PK, SK, "v", "ct")),
        "ConsistentRead": True,
        **e.args(),
    }
    while True:
        reply = yield Call("scan", params)
        for item in reply.get("Items", []):
            yield from _move_one(table, item)
        start = reply.get("LastEvaluatedKey")
        if not start:
            return
        params = {**params, "ExclusiveStartKey": start}


def _move_one(table: str, item: Item) -> Plan:
    version = int(item["v"]["N"])
    e = Expr()
    with contextlib.suppress(ConditionFailed):  # a commit or another upgrader moved it on
        yield Call(
            "update_item",
            {
                "TableName": table,
                "Key": {PK: item[PK], SK: item[SK]},
                "UpdateExpression": (
                    f"SET {e.name(receipt_attribute(version))} = {e.name('ct')} "
                    f"REMOVE {e.name('ct')}"
                ),
                "ConditionExpression": (
                    f"{e.name('v')} = {e.value(n(version))} AND "
                    f"{e.name('ct')} = {e.value(item['ct'])}"
                ),
                **e.args(),
            },
        )
