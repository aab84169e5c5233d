"""The layout version check on open, and the in-place upgrade from layout 1.

The meta item (``pk=meta, sk=schema``) records ``schema`` (the layout version) and
``written_by`` (the release that wrote it).  :func:`settle_layout` asks
:func:`harel.store.common.schema_verdict` what to do and does it:

* ``create`` — put the meta item under ``attribute_not_exists`` (a racing opener's item wins;
  it is read back and judged again);
* ``ready`` — nothing;
* ``upgrade`` (from 1) — every execution item that still has layout 1's commit token ``ct``
  gets it moved to its version's receipt (``SET k<v % 8> = ct REMOVE ct``, conditional on the
  item's ``v`` and ``ct`` being what the scan saw, so a commit that landed meanwhile simply
  wins), then the meta item goes 1 → 2 under ``schema = 1``.  Each step is idempotent, so
  several processes may upgrade at once, and an interrupted upgrade is finished by the next
  open;
* a newer layout raises :class:`~harel.store.errors.SchemaVersionError` (both versions, the
  writer, the pip line) before anything is written.
"""

from __future__ import annotations

import contextlib

from harel.store.common import release_of, schema_verdict

from harel_store_dynamodb._requests import Call, ConditionFailed
from harel_store_dynamodb._schema import (
    DISTRIBUTION,
    EXE_SK,
    META_KEY,
    PK,
    SCHEMA_VERSION,
    SK,
    UPGRADES,
    receipt_attribute,
    stored_layout,
)
from harel_store_dynamodb._support import Plan
from harel_store_dynamodb._values import Expr, Item, n, s

ROUNDS = 3
"""How many times a lost race on the meta item is read back and judged again."""


def settle_layout(table: str) -> Plan:
    """Create, accept or upgrade the table's layout (module doc)."""
    written_by = release_of(DISTRIBUTION)
    for _ in range(ROUNDS):
        reply = yield Call(
            "get_item", {"TableName": table, "Key": META_KEY, "ConsistentRead": True}
        )
        found, writer = stored_layout(reply.get("Item"))
        verdict = schema_verdict(
            found,
            current=SCHEMA_VERSION,
            upgrades=UPGRADES,
            where=f"DynamoDB table {table!r}",
            distribution=DISTRIBUTION,
            written_by=writer,
        )
        if verdict == "ready":
            return
        if verdict == "upgrade":
            yield from move_commit_tokens(table)
        e = Expr()
        condition = (
            f"attribute_not_exists({e.name(PK)})"
            if found is None
            else f"{e.name('schema')} = {e.value(n(found))}"
        )
        with contextlib.suppress(ConditionFailed):  # another opener got there first: judge again
            yield Call(
                "put_item",
                {
                    "TableName": table,
                    "Item": {**META_KEY, "schema": n(SCHEMA_VERSION), "written_by": s(written_by)},
                    "ConditionExpression": condition,
                    **e.args(),
                },
            )
            return
    raise AssertionError("unreachable: the meta item settles within a few rounds")


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
