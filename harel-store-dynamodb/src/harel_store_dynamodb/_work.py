"""Work rows (claims, layout 4): one item per group of due work, leased by ``claim``.

The row of execution ``id`` is ``pk = x:<id>, sk = w`` (in the execution's partition, so purge
finds it with everything else); the untargeted group's is ``pk = x:`` (no execution id is
empty).  Attributes: ``pr`` (priority), ``fa`` (exact ``repr`` of ``ready_at``), ``ow`` (the
lease holder, absent on a free row) and ``wv`` (a fresh random 63-bit stamp on every write
of the row, so a row deleted and made again never shows an old stamp).  GSI1
indexes it under ``W<priority>.<shard>`` (the shard of the id, ``""`` for the untargeted group)
sorted by the order-preserving key of ``ready_at``: a claim reads "ready rows of priority
``p``" as one ``Query`` per tier and shard.

DynamoDB cannot compute ``min(ready_at, due)`` in an update, so a commit's touches are
``Put`` actions of the row as :func:`harel.store.author.touch` makes it from the row this
store last saw (a per-store hint, :class:`WorkHints`; unknown: assumed absent), each guarded by
``wv`` being what was seen (``attribute_not_exists`` for an absent row).  A refused guard
returns the stored row (``ALL_OLD``) and the commit is rebuilt from it.  Since every write of
a row changes ``wv``, a claim's repair and a release (which read the group's units, then write
the row) are conditioned on ``wv``: a commit that added a unit in between makes them read
again, so no unit is ever left without a ready row.

A commit touching more than :data:`INLINE_TOUCHES` rows (a fan-out emitting to many
executions) writes its own row inline and the others as *touch bundles*: items keyed by its
relay base (``b:<base>``, ``sk = W:<n>``) listing the touches, indexed like a work row of the
commit's priority ready at ``committed_at``, inside the same transaction.  The next claim that
sees a bundle applies its touches (the same guarded ``Put`` per row) and deletes it, then reads
the ready rows again: a fan-out's work is never lost, it becomes claimable one claim later.
"""

from __future__ import annotations

import random
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from harel.store.author import WorkRow, WorkTouch, touch
from harel.store.errors import StoreCorrupted, StoreUnavailable

from harel_store_dynamodb._requests import Call, ConditionFailed
from harel_store_dynamodb._schema import G1P, G1S, PK, SK, index_partition, shard_of
from harel_store_dynamodb._seq import relay_pk
from harel_store_dynamodb._support import ATTEMPTS, Plan, send_retrying_busy
from harel_store_dynamodb._values import (
    Expr,
    Item,
    exact_float,
    float_key,
    item_size,
    n,
    opt_str,
    s,
)

WORK_SK = "w"
"""Sort key of a work row (after the timers ``t:``, before the trace ``x``)."""
WORK = "W"
"""GSI1 kind prefix of work rows: ``W<priority>.<shard>``."""
HINTS = 4096
INLINE_TOUCHES = 24
"""A commit writes up to this many touches inline; beyond, all but its own row's are bundled."""
BUNDLE_PREFIX = "b:"
"""Partition prefix of touch bundles (``b:<base, 12 hex>``)."""
BUNDLE_BYTES = 300 * 1024
"""A touch bundle is closed once its entries reach this size (an item holds 400 KB)."""


@dataclass(frozen=True, slots=True)
class StoredWork:
    """A work row as stored, with its write stamp ``wv``."""

    row: WorkRow
    wv: int


def new_stamp() -> int:
    """A fresh write stamp (``wv``) for a work row."""
    return random.getrandbits(63)


def work_pk(key: str | None) -> str:
    """The partition of the work row of ``key`` (``None``: the untargeted group)."""
    return "x:" + (key or "")


def work_key(key: str | None) -> Item:
    """The table key of the work row of ``key``."""
    return {PK: s(work_pk(key)), SK: s(WORK_SK)}


def work_partition(priority: int, key: str | None, shards: int) -> str:
    """The GSI1 partition of a row: its priority tier and the shard of its key."""
    return index_partition(f"{WORK}{priority}", shard_of(key or "", shards))


def work_item(stored: StoredWork, shards: int) -> Item:
    """The item of a work row."""
    row = stored.row
    item: Item = {
        **work_key(row.key),
        "pr": n(row.priority),
        "fa": s(repr(row.ready_at)),
        "wv": n(stored.wv),
        G1P: s(work_partition(row.priority, row.key, shards)),
        G1S: s(float_key(row.ready_at)),
    }
    if row.owner is not None:
        item["ow"] = s(row.owner)
    return item


def key_of(item: Item) -> str | None:
    """The group of a work item (from its partition key)."""
    pk = str(item.get(PK, {}).get("S", ""))
    if not pk.startswith("x:"):
        raise StoreCorrupted(f"work item {pk[:60]!r} is not in an execution partition")
    return pk[2:] or None


def read_work(item: Item) -> StoredWork:
    """The row a full work item holds."""
    key = key_of(item)
    what = f"the work row of {key!r}"
    try:
        priority, wv = int(item["pr"]["N"]), int(item["wv"]["N"])
    except (KeyError, TypeError, ValueError):
        raise StoreCorrupted(f"{what} has no integer pr/wv") from None
    ready = exact_float(str(item.get("fa", {}).get("S", "")), what)
    return StoredWork(WorkRow(key, priority, ready, opt_str(item, "ow")), wv)


def read_indexed(item: Item) -> WorkRow:
    """The row a GSI1 entry shows (key, priority from the partition, ``ready_at``)."""
    key = key_of(item)
    what = f"the work index entry of {key!r}"
    partition = str(item.get(G1P, {}).get("S", ""))
    try:
        priority = int(partition[len(WORK) :].split(".", 1)[0])
    except ValueError:
        raise StoreCorrupted(f"{what} sits in partition {partition[:40]!r}") from None
    return WorkRow(key, priority, exact_float(str(item.get("fa", {}).get("S", "")), what))


def guarded_put(table: str, stored: StoredWork, seen: StoredWork | None, shards: int) -> Any:
    """A ``Put`` of ``stored`` under the condition that the row is still ``seen``."""
    e = Expr()
    if seen is None:
        condition = f"attribute_not_exists({e.name(PK)})"
    else:
        condition = f"{e.name('wv')} = {e.value(n(seen.wv))}"
    return {
        "TableName": table,
        "Item": work_item(stored, shards),
        "ConditionExpression": condition,
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        **e.args(),
    }


def touch_action(
    table: str, change: WorkTouch, seen: StoredWork | None, shards: int
) -> tuple[dict[str, Any], StoredWork]:
    """The transaction action of one touch from the row as ``seen`` (module doc) and the row
    once applied: a guarded ``Put``, or only a ``ConditionCheck`` of ``wv`` when the touch
    leaves a free row as it is (so many writers emitting to one ready group do not write, and
    do not conflict on, its row)."""
    row = touch(None if seen is None else seen.row, change)
    if seen is not None and seen.row.owner is None and row == seen.row:
        e = Expr()
        check = {
            "TableName": table,
            "Key": work_key(row.key),
            "ConditionExpression": f"{e.name('wv')} = {e.value(n(seen.wv))}",
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            **e.args(),
        }
        return {"ConditionCheck": check}, seen
    after = StoredWork(row, new_stamp())
    return {"Put": guarded_put(table, after, seen, shards)}, after


class WorkHints:
    """The work rows this store last saw, by group (a hint, bounded, thread-safe);
    ``get`` answers ``None`` (assume absent) for an unknown group."""

    def __init__(self, size: int = HINTS) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._rows: OrderedDict[str | None, StoredWork | None] = OrderedDict()

    def get(self, key: str | None) -> StoredWork | None:
        """The row last seen for ``key`` (``None``: absent or unknown)."""
        with self._lock:
            return self._rows.get(key)

    def put(self, key: str | None, stored: StoredWork | None) -> None:
        """Remember the row of ``key`` (``None``: it is absent)."""
        with self._lock:
            self._rows[key] = stored
            self._rows.move_to_end(key)
            while len(self._rows) > self._size:
                self._rows.popitem(last=False)

    def drop(self, key: str | None) -> None:
        """Forget the row of ``key`` (unknown again)."""
        with self._lock:
            self._rows.pop(key, None)

    def seen_item(self, key: str | None, item: Item | None) -> None:
        """Remember the row a refusal returned (``None``: the row is absent)."""
        self.put(key, None if item is None else read_work(item))


def split_touches(changes: list[WorkTouch], own: str) -> tuple[list[WorkTouch], list[WorkTouch]]:
    """The touches a write makes inline and the ones it bundles (module doc)."""
    if len(changes) <= INLINE_TOUCHES:
        return changes, []
    return [c for c in changes if c.key == own], [c for c in changes if c.key != own]


def bundle_items(
    base: int, bundled: list[WorkTouch], priority: int, writer: str, shards: int
) -> list[Item]:
    """The touch bundles of one write (keyed by its relay ``base``), each indexed as a work
    row of ``priority`` in the ``writer``'s shard, ready at its earliest touch's ``due`` (so
    it is claimable no later than any row it lowers)."""
    groups: list[list[Any]] = []
    size = 0
    for change in bundled:
        entry = {
            "M": {
                "k": {"NULL": True} if change.key is None else s(change.key),
                "d": s(repr(change.due)),
                "p": n(change.priority),
                "o": {"BOOL": change.own},
            }
        }
        entry_size = item_size({"e": entry})
        if not groups or size + entry_size > BUNDLE_BYTES:
            groups.append([])
            size = 0
        groups[-1].append(entry)
        size += entry_size
    items = []
    for number, entries in enumerate(groups):
        at = min(float(entry["M"]["d"]["S"]) for entry in entries)
        items.append(
            {
                PK: s(BUNDLE_PREFIX + relay_pk(base)[2:]),
                SK: s(f"W:{number:02x}"),
                "fa": s(repr(at)),
                "wt": {"L": entries},
                G1P: s(work_partition(priority, writer, shards)),
                G1S: s(float_key(at)),
            }
        )
    return items


def is_bundle(item: Item) -> bool:
    """Whether a GSI1 work entry is a touch bundle (not a work row)."""
    return str(item.get(PK, {}).get("S", "")).startswith(BUNDLE_PREFIX)


def read_bundle(item: Item) -> list[WorkTouch]:
    """The touches a bundle item lists."""
    touches = []
    for value in item.get("wt", {}).get("L", []):
        entry = value.get("M", {})
        key = None if "NULL" in entry.get("k", {}) else opt_str(entry, "k")
        try:
            priority, own = int(entry["p"]["N"]), bool(entry["o"]["BOOL"])
        except (KeyError, TypeError, ValueError):
            raise StoreCorrupted(f"touch bundle {item.get(PK)!r} holds a bad entry") from None
        due = exact_float(str(entry.get("d", {}).get("S", "")), "a touch bundle entry")
        touches.append(WorkTouch(key, due, priority, own))
    return touches


def apply_touch(table: str, change: WorkTouch, hints: WorkHints, shards: int) -> Plan:
    """Apply one touch on its own (a guarded ``Put``, rebuilt from the stored row until its
    guard holds)."""
    for _ in range(ATTEMPTS):
        action, after = touch_action(table, change, hints.get(change.key), shards)
        if "Put" not in action:
            return  # the row already is what the touch makes it
        try:
            yield from send_retrying_busy(Call("put_item", action["Put"]))
        except ConditionFailed as exc:
            hints.seen_item(change.key, exc.item)  # the row moved: rebuild from the truth
            continue
        hints.put(change.key, after)
        return
    raise StoreUnavailable(f"the work row of {change.key!r} kept moving; retry")


def expand_bundle(table: str, key: Item, hints: WorkHints, shards: int) -> Plan:
    """Apply a touch bundle's touches, then delete it (both idempotent: racing claimers may
    expand one bundle twice)."""
    reply = yield Call("get_item", {"TableName": table, "Key": key, "ConsistentRead": True})
    item = reply.get("Item")
    if item is None:
        return  # another claimer expanded it
    for change in read_bundle(item):
        yield from apply_touch(table, change, hints, shards)
    yield from send_retrying_busy(Call("delete_item", {"TableName": table, "Key": key}))
