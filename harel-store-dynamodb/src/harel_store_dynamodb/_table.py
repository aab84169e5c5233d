"""Opening a table: find (or create and wait for) it, check its key layout, then settle its
layout version with the shared open flow (:class:`DynamoOpen`'s steps), upgrading layouts 1 to
3 in place.

The meta item (``pk=meta, sk=schema``) records ``schema`` (the layout version) and
``written_by`` (the release that wrote it).  The flow asks
:func:`harel.store.author.schema_verdict` what to do, and the steps do it without a lock (every
write to the meta item is conditional; one that loses to another opener probes again, up to
:data:`ROUNDS` times):

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
import threading
import time
from typing import Any

from harel.store.author import (
    OpenRaced,
    OpenSteps,
    SchemaVerdict,
    Stored,
    WorkTouch,
    open_flow,
    relay_due,
    release_of,
)
from harel.store.errors import SchemaVersionError, StoreConfigError, StoreUnavailable

from harel_store_dynamodb._items import read_outbox_entry, read_relay_entries
from harel_store_dynamodb._requests import Call, ConditionFailed, Pause, TableInUse, TableNotFound
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
    is_active,
    layout_problems,
    receipt_attribute,
    shard_of,
    stored_layout,
    stored_shards,
    table_definition,
)
from harel_store_dynamodb._support import Plan, gsi1_query, query_all
from harel_store_dynamodb._values import Expr, Item, as_str, exact_float, n, s
from harel_store_dynamodb._work import WorkHints, apply_touch

TABLE_WAIT_SECONDS = 300.0
"""How long a created table may take to become ACTIVE."""
CheckKey = tuple[str, str, str, int | None]
"""What a table check is valid for: ``(table, endpoint, region, id of an injected client)``."""
_CHECKED: dict[CheckKey, int] = {}
"""Tables this process has found ready and laid out for this release, with their index shard
count: keyed by table, endpoint and region (the same name elsewhere is another table) and, for
a client the caller injected, that client (it may reach anything)."""
_CHECKED_LOCK = threading.Lock()


def open_table(
    table: str,
    create_table: bool,
    key: CheckKey,
    requested_shards: int | None = None,
    poll: float = 1.0,
) -> Plan:
    """Find (or create and wait for) the table, check its layout and schema version; the plan
    returns the table's index shard count (recorded in its meta item).

    Done once per ``key`` (:data:`CheckKey`) per process: later stores opened over a table
    this process has checked send nothing (a ``requested_shards`` that differs from the
    table's is still refused, with :class:`~harel.store.errors.StoreConfigError`).
    """
    shards = _CHECKED.get(key)
    if shards is None:
        shards = yield from _check_table(table, create_table, poll, requested_shards)
        with _CHECKED_LOCK:
            _CHECKED[key] = shards
    check_shards(table, requested_shards, shards)
    return shards


def _check_table(table: str, create_table: bool, poll: float, requested: int | None) -> Plan:
    description: dict[str, Any] = {}
    try:
        description = (yield Call("describe_table", {"TableName": table}))["Table"]
    except TableNotFound:
        if not create_table:
            raise StoreConfigError(
                f"DynamoDB table {table!r} does not exist: create it (see the README for the "
                "layout) or open the store with create_table=true"
            ) from None
        with contextlib.suppress(TableInUse):
            yield Call("create_table", table_definition(table))
    waited = 0.0
    while not is_active(description):
        if waited >= TABLE_WAIT_SECONDS:
            raise StoreUnavailable(
                f"DynamoDB table {table!r} is not ACTIVE after {TABLE_WAIT_SECONDS:.0f} s"
            )
        if description:
            yield Pause(poll)
            waited += poll
        try:
            description = (yield Call("describe_table", {"TableName": table}))["Table"]
        except TableNotFound:
            description = {}
            yield Pause(poll)
            waited += poll
    problems = layout_problems(description)
    if problems:
        raise StoreConfigError(
            f"DynamoDB table {table!r} is not laid out for harel: {'; '.join(problems)}; "
            "use another table name (create_table=true creates it)"
        )
    steps = DynamoOpen(table, requested)
    yield from open_flow(steps)
    return steps.shards


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


class DynamoOpen(OpenSteps):
    """DynamoDB's steps of the shared open flow (see the module docstring); after it,
    :attr:`shards` is the table's index shard count."""

    current = SCHEMA_VERSION
    upgrades = UPGRADES
    distribution = DISTRIBUTION
    rounds = ROUNDS

    def __init__(self, table: str, requested: int | None) -> None:
        self.table, self.requested = table, requested
        self.where = f"DynamoDB table {table!r}"
        self.item: Item | None = None
        self.shards: int | None = None

    def probe(self) -> Plan:
        reply = yield Call(
            "get_item", {"TableName": self.table, "Key": META_KEY, "ConsistentRead": True}
        )
        self.item = reply.get("Item")
        return Stored(*stored_layout(self.item))

    def verdict(self, found: Stored) -> SchemaVerdict:
        verdict = super().verdict(found)
        self.shards = stored_shards(self.item)
        if self.shards is not None:
            check_shards(self.table, self.requested, self.shards)
        if verdict == "ready" and self.shards is None:
            raise SchemaVersionError(
                f"the meta item of DynamoDB table {self.table!r} records layout "
                f"{SCHEMA_VERSION} without index_shards: it was not written by harel"
            )
        return verdict

    def create(self) -> Plan:
        yield from ()
        self.shards = self.requested or DEFAULT_INDEX_SHARDS

    def upgrade(self, version: int) -> Plan:
        if self.shards is None:
            if not (yield from _record_shards(self.table, version, self.requested)):
                raise OpenRaced  # another upgrader recorded its count first: judge again
            self.shards = self.requested or DEFAULT_INDEX_SHARDS
        if version == 1:
            yield from move_commit_tokens(self.table)
        if version in (1, 2):
            yield from move_index_entries(self.table, self.shards)
        yield from backfill_work(self.table, self.shards, time.time())

    def record(self, found: Stored) -> Plan:
        e = Expr()
        if found.version is None:
            condition = f"attribute_not_exists({e.name(PK)})"
        else:
            condition = (
                f"{e.name('schema')} = {e.value(n(found.version))} AND "
                f"{e.name('index_shards')} = {e.value(n(self.shards or 0))}"
            )
        item = {
            **META_KEY,
            "schema": n(SCHEMA_VERSION),
            "written_by": s(release_of(DISTRIBUTION)),
            "index_shards": n(self.shards or 0),
        }
        try:
            yield Call(
                "put_item",
                {
                    "TableName": self.table,
                    "Item": item,
                    "ConditionExpression": condition,
                    **e.args(),
                },
            )
        except ConditionFailed:
            raise OpenRaced from None  # another opener got there first: judge again


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
