"""Retention plans: ``purge`` (everything one execution owns) and ``prune_processed``.

``purge`` reads the execution's partition consistently, plus the pending relay entries that
belong to it (GSI1 ``O``/``S`` with a filter), and deletes them in transactions of at most 100
actions: the first one deletes the execution item, conditioned on its version (a racing commit
makes purge read again).  ``prune_processed`` queries GSI1 ``P`` by age and deletes each batch
in transactions of at most 100 deletes conditioned on the mark's age.
"""

from __future__ import annotations

from typing import Any

from harel.store.author import check_flag, check_id, check_prune
from harel.store.contract import FINISHED
from harel.store.errors import ExecutionActive, StoreUnavailable

from harel_store_dynamodb import _support as plans
from harel_store_dynamodb._commit import MAX_ACTIONS
from harel_store_dynamodb._cursor import CursorCache
from harel_store_dynamodb._items import Action, read_relay_entries
from harel_store_dynamodb._requests import Call, TransactionCancelled
from harel_store_dynamodb._schema import (
    EXE_SK,
    G1P,
    G1S,
    GSI1,
    MARKS,
    OUTBOX,
    PK,
    SK,
    SPAWNS,
    exe_key,
    exe_pk,
    index_partitions,
)
from harel_store_dynamodb._support import Plan
from harel_store_dynamodb._values import Expr, Item, as_str, float_key, opt_str, s
from harel_store_dynamodb._work import WORK_SK


def purge(table: str, cache: CursorCache, execution_id: str, force: bool, shards: int = 1) -> Plan:
    """Remove the execution and everything it owns; ExecutionActive unless finished/forced."""
    execution_id = check_id(execution_id)
    force = check_flag(force, "force")
    existed = False
    for _attempt in range(plans.ATTEMPTS):
        e = Expr()
        owned = yield from plans.query_all(
            {
                "TableName": table,
                "KeyConditionExpression": f"{e.name(PK)} = {e.value(exe_pk(execution_id))}",
                "ConsistentRead": True,
                "ProjectionExpression": ", ".join(e.name(a) for a in (PK, SK, "v", "st")),
                **e.args(),
            }
        )
        exe = next((i for i in owned if i[SK]["S"] == EXE_SK), None)
        if exe is not None and not force:
            status = as_str(exe, "st", f"execution {execution_id!r}")
            if status not in {value.value for value in FINISHED}:
                raise ExecutionActive(execution_id, status)
        relay_actions = yield from _relay_purge_actions(table, execution_id, shards)
        actions: list[Action] = []
        if exe is not None:
            e = Expr()
            actions.append(
                {
                    "Delete": {
                        "TableName": table,
                        "Key": exe_key(execution_id),
                        "ConditionExpression": f"{e.name('v')} = {e.value(exe['v'])}",
                        **e.args(),
                    }
                }
            )
        actions.extend(  # the work row first: it goes in the same transaction as the execution
            {"Delete": {"TableName": table, "Key": {PK: i[PK], SK: i[SK]}}}
            for i in sorted(owned, key=lambda i: i[SK]["S"] != WORK_SK)
            if i[SK]["S"] != EXE_SK
        )
        actions.extend(relay_actions)
        try:
            for start in range(0, len(actions), MAX_ACTIONS):
                yield Call(
                    "transact_write_items",
                    {"TransactItems": actions[start : start + MAX_ACTIONS]},
                )
                if start == 0 and exe is not None:
                    existed = True
        except TransactionCancelled as exc:
            if "ConditionalCheckFailed" in exc.codes():
                continue  # a commit or an ack raced the purge: read again
            raise plans.cancellation_error(exc, f"the purge of {execution_id!r}") from exc
        cache.drop(execution_id)
        return existed
    raise StoreUnavailable(f"the purge of {execution_id!r} kept racing other writers; retry")


def _relay_purge_actions(table: str, execution_id: str, shards: int) -> Plan:
    """Actions removing the outbox entries targeted at ``execution_id`` and its spawns."""
    actions: list[Action] = []
    for kind in (OUTBOX, SPAWNS):
        if kind == OUTBOX:
            items = yield from plans.targeted_relay_items(table, execution_id, shards)
        else:
            items = yield from plans.written_spawn_items(table, execution_id, shards)
        for item in items:
            key = {PK: item[PK], SK: item[SK]}
            entries = read_relay_entries(item)
            mine = [
                slot
                for _seq, slot, entry in entries
                if kind == SPAWNS or opt_str(entry, "t") == execution_id
            ]
            if not mine:
                continue
            if len(mine) == len(entries):
                actions.append({"Delete": {"TableName": table, "Key": key}})
                continue
            u = Expr()
            removes = ", ".join(f"{u.name('e')}.{u.name(slot)}" for slot in mine)
            targets = u.value({"SS": [execution_id]})
            count = f"{u.name('n')} = {u.name('n')} - {u.value({'N': str(len(mine))})}"
            actions.append(
                {
                    "Update": {
                        "TableName": table,
                        "Key": key,
                        "UpdateExpression": (
                            f"REMOVE {removes} SET {count} DELETE {u.name('tg')} {targets}"
                        ),
                        "ConditionExpression": f"attribute_exists({u.name(PK)})",
                        **u.args(),
                    }
                }
            )
    return actions


def prune_processed(table: str, older_than: object, batch_size: object, shards: int = 1) -> Plan:
    """Drop dedupe marks recorded before ``older_than`` (batches of conditional deletes, shard
    by shard)."""
    threshold, batch = check_prune(older_than, batch_size)
    cut = s(float_key(threshold))
    total = 0
    for partition in index_partitions(MARKS, shards):
        total += yield from _prune_shard(table, partition, cut, batch)
    return total


def _prune_shard(table: str, partition: str, cut: dict[str, str], batch: int) -> Plan:
    """Drop one shard's marks older than ``cut`` (a ``Query`` per batch)."""
    total = 0
    while True:
        e = Expr()
        params: dict[str, Any] = {
            "TableName": table,
            "IndexName": GSI1,
            "KeyConditionExpression": (
                f"{e.name(G1P)} = {e.value(s(partition))} AND {e.name(G1S)} < {e.value(cut)}"
            ),
            "Limit": plans.page(batch),
        }
        params.update(e.args())
        reply = yield Call("query", params)
        keys = [{PK: item[PK], SK: item[SK]} for item in reply.get("Items", [])]
        deleted = 0
        for start in range(0, len(keys), MAX_ACTIONS):
            deleted += yield from _delete_marks(table, keys[start : start + MAX_ACTIONS], cut)
        total += deleted
        if deleted == 0 or (len(keys) < batch and not reply.get("LastEvaluatedKey")):
            return total


def _delete_marks(table: str, keys: list[Item], cut: dict[str, str]) -> Plan:
    for attempt in range(plans.ATTEMPTS):
        if not keys:
            return 0
        e = Expr()
        condition = f"{e.name(G1S)} < {e.value(cut)}"
        actions = [
            {
                "Delete": {
                    "TableName": table,
                    "Key": key,
                    "ConditionExpression": condition,
                    **e.args(),
                }
            }
            for key in keys
        ]
        try:
            yield Call("transact_write_items", {"TransactItems": actions})
        except TransactionCancelled as exc:
            codes = exc.codes()
            if "ConditionalCheckFailed" in codes:
                keys = [
                    k
                    for k, code in zip(keys, codes, strict=True)
                    if code != "ConditionalCheckFailed"
                ]
                continue
            if set(codes) & plans.BUSY_CODES and attempt + 1 < plans.ATTEMPTS:
                yield plans.backoff(attempt)
                continue
            raise plans.cancellation_error(exc, "prune_processed") from exc
        return len(keys)
    return 0
