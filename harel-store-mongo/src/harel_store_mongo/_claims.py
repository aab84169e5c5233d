"""Claims on MongoDB: the work rows (collection ``work``) and the plans of ``claim``,
``renew`` and ``release``, the touches every commit and import writes, and the layout-4
backfill.  Imports no driver.

**Work rows** ``{_id: group, priority, ready_at, owner, tn}`` (``_id`` ``""``: the untargeted
group) follow harel-core's rules (:mod:`harel.store.common.claims`); ``tn`` counts the touches.

**Touches ride around the commit, not in it.**  A commit is one write of the execution's own
document, while the rows it touches live in ``work`` (an emit touches another group's row), and
a standalone server has no multi-document transaction.  So a commit with touches applies them
(:func:`~harel_store_mongo._operations.touch_plan`: one upsert, or one unordered ``bulk_write`` of
upserts for several rows) *before* its write and once more *after* it succeeded:

* before: a row is never missing for stored work, whatever fails later.  When the commit then
  fails (a lost CAS, an unavailable server, a crash) the rows are merely early, which is
  harmless: the next claim that finds no due unit behind a row repairs it.  A commit the
  store refuses (``StoreConflict``, ``AlreadyProcessed``) deletes the rows its touch inserted,
  each only while exactly as inserted (:func:`~harel_store_mongo._operations.untouch_plan`);
* after: a claim (or a release) that read the group while the commit was on its way saw no
  unit and may have dropped or re-dated the row in between; the second touch puts it back.
  Every repair is conditional on the row being exactly as read, touch count included, so a
  repair racing the second touch loses.  The second touch never fails the stored commit (a
  failure is logged): the row can then only be missing if a claim raced that very commit *and*
  the second touch failed.

A state-only commit touches nothing and sends nothing extra; a re-sent commit recognised by its
receipt writes no document again (its touches are re-applied: idempotent, they only lower).

**A claim**: one ``find`` per priority tier on index ``work_ready`` (``ready_at <= now``, at most
``limit`` rows, by ``(ready_at, _id)``), merged in :func:`~harel.store.author.claim_order`; then
per row while the unit budget lasts one ``aggregate`` reading the group's units and one write:
the lease, a ``find_one_and_update`` filtered on the row as read (its ``ready_at``, which is
``<= now``, and its ``owner``: atomic on the row, so of racing claimers exactly one leases it
and the others skip it), or the repair of an early row (``delete_one`` / ``update_one`` on the
row as read, touch count included).  ``renew`` is one ``find_one_and_update``
(+1 read of the row when it raises ``LeaseLost``); ``release`` reads the row and the units and
writes once (re-read when the row moved meanwhile).  ``list_leases`` is one ``find`` per tier
on the same index (``owner`` set, ``ready_at > now``), merged, writing nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from harel.store.author import (
    PRIORITIES,
    WorkRow,
    claim_order,
    held_leases,
    lease_lost,
    next_ready,
    take_units,
)
from harel.store.contract import Claim, Lease, OutboxEntry, SpawnEntry
from harel.store.errors import StoreCorrupted, StoreUnavailable

from harel_store_mongo import _requests as rq
from harel_store_mongo._operations import (
    Plan,
    outbox_entry,
    relay_entries,
    spawn_entry,
    timer_pairs,
)
from harel_store_mongo._schema import UNTARGETED
from harel_store_mongo._seq import SeqSource

RELEASE_ATTEMPTS = 5
"""How often ``release`` re-reads a row that moved between its read and its write."""

Units = tuple[list[tuple[str, float]], list[OutboxEntry], list[SpawnEntry]]


# -- reading rows and units -----------------------------------------------------------------------


def row_of(doc: Any) -> tuple[WorkRow, Any]:
    """A stored work row and its touch count."""
    key = doc.get("_id") if isinstance(doc, dict) else None
    fields = doc if isinstance(doc, dict) else {}
    priority, ready_at, owner = fields.get("priority"), fields.get("ready_at"), fields.get("owner")
    if (
        not isinstance(key, str)
        or isinstance(priority, bool)
        or not isinstance(priority, int)
        or isinstance(ready_at, bool)
        or not isinstance(ready_at, (int, float))
        or not (owner is None or isinstance(owner, str))
    ):
        raise StoreCorrupted(
            f"the work row {doc!r:.120} is unreadable; delete it (db.work.deleteOne) and the "
            "next commit of its execution writes it again"
        )
    row = WorkRow(None if key == UNTARGETED else key, priority, float(ready_at), owner)
    return row, doc.get("tn")


def units_of(docs: Iterable[dict[str, Any]], key: str | None) -> Units:
    """A group's units from :func:`~harel_store_mongo._requests.units_request`'s reply:
    timers (any order), outbox entries and spawn intents by seq.  Unreadable entries are
    logged and skipped, as the relay sweeps do."""
    docs = list(docs)
    own = [doc for doc in docs if key is not None and doc.get("_id") == key]
    outbox = relay_entries(docs, "outbox", outbox_entry)
    spawns = relay_entries(own, "spawns", spawn_entry)
    timers = [pair for doc in own for pair in timer_pairs(doc)]
    return timers, sorted(outbox, key=lambda e: e.seq), sorted(spawns, key=lambda e: e.seq)


def units_plan(key: str | None, seqs: SeqSource | None = None) -> Plan[Units]:
    """Read one group's units (one ``aggregate``); ``seqs`` observes the seqs read (the
    entries, and the ``seq_hi`` of every document holding them)."""
    docs = yield rq.units_request(key)
    if seqs is not None:
        seqs.observe(docs)
    return units_of(docs, key)


def _changed(result: Any) -> bool:
    """Whether a conditional ``update_one`` / ``delete_one`` matched its row."""
    count = getattr(result, "deleted_count", None)
    if count is None:
        count = getattr(result, "matched_count", 0)
    return bool(count)


# -- the contract ---------------------------------------------------------------------------------


def claim_plan(
    owner: str, now: float, lease: float, limit: int, seqs: SeqSource | None = None
) -> Plan[list[Claim]]:
    """Lease up to ``limit`` due units, grouped by execution, in claim order (arguments
    checked by ``PlanStore``).  Each row's lease is atomic; racing claimers get disjoint
    groups.  ``seqs`` observes the seqs of the units read."""
    rows: list[WorkRow] = []
    counts: dict[str | None, Any] = {}
    for priority in PRIORITIES:
        for doc in (yield rq.ready_request(priority, now, limit)):
            row, count = row_of(doc)
            if row.key not in counts:  # a touch may move a row to another tier meanwhile
                counts[row.key] = count
                rows.append(row)
    claims: list[Claim] = []
    budget = limit
    expires_at = now + lease
    for row in claim_order(rows):
        if not budget:
            break
        timers, outbox, spawns = yield from units_plan(row.key, seqs)
        claim = take_units(row, budget, now, timers, outbox, spawns, owner, expires_at)
        if claim is None:  # an early row: nothing is due behind it
            ready = next_ready((at for _, at in timers), False, now)
            yield rq.settle_request(row, counts[row.key], ready)
            continue
        if (yield rq.lease_request(row, expires_at, owner)) is None:
            continue  # another claimer leased it (or repaired it) first
        claims.append(claim)
        budget -= claim.units
    return claims


def renew_plan(owner: str, key: str | None, now: float, lease: float) -> Plan[float]:
    """Extend ``owner``'s unexpired lease to ``now + lease``; else ``LeaseLost``."""
    expires_at = now + lease
    if (yield rq.renew_request(key, owner, now, expires_at)) is not None:
        return expires_at
    doc = yield rq.read_work(key)
    raise lease_lost(None if doc is None else row_of(doc)[0], key, owner, now)


def release_plan(owner: str, key: str | None, retry_at: float | None, now: float) -> Plan[None]:
    """Give ``owner``'s lease back (expired is fine); the row is re-dated from what is left
    (not before ``retry_at``) or dropped when nothing is; ``LeaseLost`` for anyone else."""
    for _ in range(RELEASE_ATTEMPTS):
        doc = yield rq.read_work(key)
        row, count = (None, None) if doc is None else row_of(doc)
        if row is None or row.owner != owner:
            raise lease_lost(row, key, owner, None)
        timers, outbox, spawns = yield from units_plan(key)
        ready = next_ready((at for _, at in timers), bool(outbox or spawns), now, retry_at)
        if _changed((yield rq.settle_request(row, count, ready))):
            return
    raise StoreUnavailable(f"release({key!r}) kept racing with writes to its work row; retry")


def leases_plan(now: float, limit: int) -> Plan[list[Lease]]:
    """The leases held at ``now`` in ``list_leases`` order, at most ``limit`` (arguments
    checked by ``PlanStore``): one ``find`` per priority tier, merged; nothing written."""
    rows: list[WorkRow] = []
    for priority in PRIORITIES:
        rows += [row_of(doc)[0] for doc in (yield rq.held_request(priority, now, limit))]
    return held_leases(rows, now, limit)
