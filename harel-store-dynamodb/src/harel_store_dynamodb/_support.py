"""What every plan shares: the plan type, retry bounds, query paging, cancellation mapping."""

from __future__ import annotations

import random
from collections.abc import Generator
from typing import Any

from harel.store.errors import InvalidPayload, PayloadTooLarge, StoreError, StoreUnavailable

from harel_store_dynamodb._requests import Call, ItemBusy, Pause, Request, TransactionCancelled
from harel_store_dynamodb._schema import (
    G1P,
    G1S,
    GSI1,
    OUTBOX,
    SPAWNS,
    index_partition,
    index_partitions,
    shard_of,
)
from harel_store_dynamodb._values import Expr, Item, s

Plan = Generator[Request, Any, Any]
"""A sans-IO operation: yields :class:`Call`/:class:`Pause`, is sent each reply."""

ATTEMPTS = 6
"""Bound on optimistic retries inside one operation (cursor races, base collisions, busy items)."""
BUSY_CODES = frozenset(
    {
        "TransactionConflict",
        "ThrottlingError",
        "ProvisionedThroughputExceeded",
        "RequestLimitExceeded",
    }
)
"""Cancellation reasons that go away with a retry."""
QUERY_PAGE = 1000
"""The most items one ``Query`` asks for (larger limits page on with ``ExclusiveStartKey``)."""


def page(wanted: int) -> int:
    """A ``Limit`` DynamoDB accepts: between 1 and :data:`QUERY_PAGE`."""
    return max(1, min(wanted, QUERY_PAGE))


def backoff(attempt: int) -> Pause:
    """The pause before retry ``attempt`` (exponential, capped at 0.5 s, jittered)."""
    return Pause(min(0.02 * 2**attempt, 0.5) * random.uniform(0.5, 1.0))


def cancellation_error(exc: TransactionCancelled, what: str) -> StoreError:
    """The typed error for a cancelled transaction whose reasons are not a lost CAS."""
    codes = sorted(set(exc.codes()) - {"None"})
    reasons = ", ".join(codes) or "no reason given"
    if set(codes) & BUSY_CODES:
        return StoreUnavailable(f"DynamoDB cancelled {what} ({reasons}); retry with backoff")
    messages = " ".join(str(r.get("Message", "")) for r in exc.reasons if r.get("Code") != "None")
    if "ItemCollectionSizeLimitExceeded" in codes or (
        "ValidationError" in codes and "size" in messages.lower()
    ):
        return PayloadTooLarge(f"DynamoDB refused {what}: a size limit was exceeded ({messages})")
    if "ValidationError" in codes:
        return InvalidPayload(f"DynamoDB refused {what}: {messages or reasons}")
    return StoreError(f"DynamoDB cancelled {what} ({reasons})")


def query_all(params: dict[str, Any]) -> Plan:
    """Every item of a ``Query``, following ``LastEvaluatedKey``."""
    items: list[Item] = []
    while True:
        reply = yield Call("query", params)
        items.extend(reply.get("Items", []))
        start = reply.get("LastEvaluatedKey")
        if not start:
            return items
        params = {**params, "ExclusiveStartKey": start}


def gsi1_query(
    table: str, partition: str, limit: int | None, e: Expr | None = None, extra: str = ""
) -> dict[str, Any]:
    """A GSI1 query of one partition (a shard's: ``"O.2"``); ``extra`` adds key terms built
    on ``e``."""
    e = e if e is not None else Expr()
    params: dict[str, Any] = {
        "TableName": table,
        "IndexName": GSI1,
        "KeyConditionExpression": f"{e.name(G1P)} = {e.value(s(partition))}" + extra,
    }
    if limit is not None:
        params["Limit"] = page(limit)
    params.update(e.args())
    return params


BATCH_GET_KEYS = 100
"""The most keys one ``BatchGetItem`` takes."""


def batch_get(table: str, keys: list[Item], what: str) -> Plan:
    """The stored items of ``keys`` (consistent ``BatchGetItem`` calls of up to
    :data:`BATCH_GET_KEYS` keys; the keys DynamoDB leaves unprocessed are sent again after a
    backoff, a bounded number of times), in no particular order; ``what`` names the read in
    the ``StoreUnavailable`` raised when DynamoDB keeps throttling it."""
    found: list[Item] = []
    for start in range(0, len(keys), BATCH_GET_KEYS):
        request: dict[str, Any] = {
            table: {"Keys": keys[start : start + BATCH_GET_KEYS], "ConsistentRead": True}
        }
        for attempt in range(ATTEMPTS * 3):
            reply = yield Call("batch_get_item", {"RequestItems": request})
            found.extend(reply.get("Responses", {}).get(table, []))
            request = reply.get("UnprocessedKeys") or {}
            if not request:
                break
            yield backoff(attempt)
        else:
            raise StoreUnavailable(
                f"DynamoDB kept throttling {what} on table {table!r}; retry later"
            )
    return found


def send_retrying_busy(call: Call) -> Plan:
    """Send ``call``, sending it again (after a backoff, at most :data:`ATTEMPTS` times) while
    DynamoDB refuses it whole as busy (:class:`ItemBusy`: ``TransactionConflictException`` or
    throttling); the last refusal propagates as that ``StoreUnavailable``.  For idempotent
    single-item writes (acks, timer deletes)."""
    for attempt in range(ATTEMPTS):
        try:
            return (yield call)
        except ItemBusy:
            if attempt + 1 == ATTEMPTS:
                raise
            yield backoff(attempt)
    raise AssertionError("unreachable")


def targeted_relay_items(table: str, execution_id: str, shards: int) -> Plan:
    """The outbox items holding an entry targeted at ``execution_id``: any execution may have
    written one, so every ``O`` shard is queried (filtered by the item's target set)."""
    items: list[Item] = []
    for partition in index_partitions(OUTBOX, shards):
        e = Expr()
        params = gsi1_query(table, partition, None, e)
        params["FilterExpression"] = f"contains({e.name('tg')}, {e.value(s(execution_id))})"
        params.update(e.args())
        items.extend((yield from query_all(params)))
    return items


def written_spawn_items(table: str, execution_id: str, shards: int) -> Plan:
    """The spawn items ``execution_id`` wrote: they sit in its own ``S`` shard."""
    e = Expr()
    partition = index_partition(SPAWNS, shard_of(execution_id, shards))
    params = gsi1_query(table, partition, None, e)
    params["FilterExpression"] = f"{e.name('pa')} = {e.value(s(execution_id))}"
    params.update(e.args())
    return (yield from query_all(params))


def first_up_to(table: str, partition: str, cut: str, limit: int | None) -> Plan:
    """The GSI1 entries of one partition with ``g1s <= cut``: its first ``limit`` by ``g1s``
    and every entry tied with the last of them (the index orders ties by table key, which is
    not the order callers merge by), so a merge over partitions cut to ``limit`` is exact."""
    e = Expr()
    params = gsi1_query(table, partition, limit, e, f" AND {e.name(G1S)} <= {e.value(s(cut))}")
    items: list[Item] = []
    while True:
        reply = yield Call("query", params)
        items.extend(reply.get("Items", []))
        start = reply.get("LastEvaluatedKey")
        if not start:
            return items
        if limit is not None and len(items) >= limit and items:
            t = Expr()
            last = s(str(items[-1][G1S]["S"]))
            tie = gsi1_query(table, partition, None, t, f" AND {t.name(G1S)} = {t.value(last)}")
            tie["ExclusiveStartKey"] = start
            items.extend((yield from query_all(tie)))
            return items
        params = {**params, "ExclusiveStartKey": start}
