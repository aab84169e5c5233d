"""Claims, written once for every backend: argument checks, the work rows a commit touches,
the claim order, and the budget that splits a claim's units over its executions.

Every store keeps one *work row* per group of due work — an execution id, or ``None`` for the
untargeted outbox entries — holding ``priority`` (0-4), ``ready_at`` (epoch seconds) and
``owner`` (``None`` when nobody holds the lease):

* free row: ``ready_at`` is a lower bound of the earliest due time of the group's units (a
  timer is due at its ``fire_at``; a relay unit — an outbox entry targeted at the id, a spawn
  intent the id wrote — is due at once, dated :func:`relay_due` of its write time).  A row
  may be *early* (its timer was cancelled or moved later): a claim that finds no due unit
  behind it repairs it.  It is never late: every commit that adds a unit lowers ``ready_at``
  to the unit's due time.
* leased row: ``ready_at`` is the lease's expiry and ``owner`` the holder, so an expired lease
  is ready again without anyone releasing it.

A row is ready when ``ready_at <= now``; ready rows are claimed in :func:`rank` order.  A
backend keeps an index that serves "ready rows of priority ``p`` by ``ready_at``" (five bounded
range reads, merged by :func:`claim_order`) or anything equivalent.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harel.model import Event
from harel.store.common.validate import check_count, check_id, check_now, show
from harel.store.contract import PRIORITY_AGING, Claim, Lease, OutboxEntry, SpawnEntry
from harel.store.errors import InvalidArgument, LeaseLost, StoreCorrupted

if TYPE_CHECKING:
    from harel.store.common.commit import PreparedCommit
    from harel.store.common.records import PreparedImport

__all__ = [
    "DAMAGED",
    "MAX_CLAIM_LIMIT",
    "MAX_LEASE",
    "PRIORITIES",
    "RELAY_SHIFT",
    "WorkRow",
    "WorkTouch",
    "check_claim",
    "check_list_leases",
    "check_release",
    "check_renew",
    "claim_order",
    "damage_of",
    "held_leases",
    "import_touches",
    "lease_lost",
    "leases_in_order",
    "next_ready",
    "outbox_or_damaged",
    "rank",
    "relay_due",
    "spawn_or_damaged",
    "take_units",
    "touch",
    "work_touches",
]

PRIORITIES = (4, 3, 2, 1, 0)
"""The priority tiers, highest first (``Execution.priority`` is 0-4)."""

MAX_CLAIM_LIMIT = 1000
"""The largest ``limit`` a claim accepts (units of work per claim)."""

MAX_LEASE = 86_400.0 * 7
"""The longest lease a claim or renewal grants (seconds)."""

RELAY_SHIFT = 2.0**42
"""How far before its write time a relay unit is dated in its work row (about 139,000 years):
relay work is due at once whatever clock the claimer passes as ``now`` (a test's fake clock at
0.0 included), keeps its write order, and goes before work that is only due by the clock."""


def relay_due(written_at: float) -> float:
    """The ``ready_at`` of relay work written at ``written_at`` (see :data:`RELAY_SHIFT`)."""
    return written_at - RELAY_SHIFT


@dataclass(frozen=True, slots=True)
class WorkRow:
    """One work row as a backend read it (see the module docstring)."""

    key: str | None
    priority: int
    ready_at: float
    owner: str | None = None


@dataclass(frozen=True, slots=True)
class WorkTouch:
    """What one write does to one work row: lower ``ready_at`` to ``due`` on a free row
    (insert the row when absent, with ``priority``), and set ``priority`` when ``own`` (the
    execution's own commit)."""

    key: str | None
    due: float
    priority: int
    own: bool


def touch(row: WorkRow | None, change: WorkTouch) -> WorkRow:
    """The row after ``change`` (the rule every backend applies in the same write)."""
    if row is None:
        return WorkRow(change.key, change.priority, change.due)
    priority = change.priority if change.own else row.priority
    if row.owner is not None:  # leased: the lease's expiry stays the row's ready time
        return WorkRow(row.key, priority, row.ready_at, row.owner)
    return WorkRow(row.key, priority, min(row.ready_at, change.due))


def rank(ready_at: float, priority: int) -> float:
    """Claim order: ready rows by ``ready_at - PRIORITY_AGING * priority``, lowest first.

    So a priority counts as ``PRIORITY_AGING`` seconds of waiting per level: higher priorities
    go first, oldest first within a priority, and work that has waited ``PRIORITY_AGING * d``
    seconds longer beats work ``d`` levels above it — no stream of high-priority work starves
    the rest for more than ``4 * PRIORITY_AGING`` seconds.
    """
    return ready_at - PRIORITY_AGING * priority


def claim_order(rows: Iterable[WorkRow]) -> list[WorkRow]:
    """``rows`` in claim order: by :func:`rank`, then untargeted first, then by key."""
    return sorted(rows, key=lambda row: (rank(row.ready_at, row.priority), row.key or ""))


def work_touches(prepared: PreparedCommit) -> list[WorkTouch]:
    """The work rows one commit touches, at most one per key, in a stable order.

    * the execution's own row when it arms a timer (due: the earliest ``fire_at`` it arms) or
      writes a spawn intent (due: ``committed_at``), with its own priority;
    * the row of each emit target (``None`` for untargeted emits), due ``committed_at``, with
      the emitter's priority when the commit creates the row (the target's own commits set its
      priority from then on).
    """
    own = prepared.execution_id
    changes: dict[str | None, WorkTouch] = {}
    arms = [op.fire_at for op in prepared.timers if op.action == "schedule"]
    relay = relay_due(prepared.committed_at)
    due = min(arms) if arms else math.inf
    if prepared.spawns:
        due = min(due, relay)
    if due != math.inf:
        changes[own] = WorkTouch(own, due, prepared.priority, True)
    for emit in prepared.emits:
        key = emit.target_id
        if key not in changes or changes[key].due > relay:
            changes[key] = WorkTouch(key, relay, prepared.priority, key == own)
    return list(changes.values())


def import_touches(prepared: PreparedImport) -> list[WorkTouch]:
    """The work rows an import writes: its own (timers, spawns) and each emit target's, relay
    units due at ``prepared_at``."""
    own, priority = prepared.execution_id, prepared.priority
    relay = relay_due(prepared.prepared_at)
    changes: dict[str | None, WorkTouch] = {}
    due = min((at for _, at in prepared.timers), default=math.inf)
    if prepared.spawns:
        due = min(due, relay)
    if due != math.inf:
        changes[own] = WorkTouch(own, due, priority, True)
    for emit in prepared.emits:
        key = emit.target_id
        if key not in changes or changes[key].due > relay:
            changes[key] = WorkTouch(key, relay, priority, True)
    return list(changes.values())


def next_ready(
    timer_fire_ats: Iterable[float], has_relay: bool, now: float, retry_at: float | None = None
) -> float | None:
    """A free row's ``ready_at`` from the units it still has (``None``: no unit, drop the row).

    Relay units are due at once (``relay_due(now)``); ``retry_at`` (from ``release``)
    postpones the row."""
    ready = min(timer_fire_ats, default=math.inf)
    if has_relay:
        ready = min(ready, relay_due(now))
    if ready == math.inf:
        return None
    return ready if retry_at is None else max(ready, retry_at)


def take_units(
    row: WorkRow,
    budget: int,
    now: float,
    timers: Sequence[tuple[str, float]],
    outbox: Sequence[OutboxEntry],
    spawns: Sequence[SpawnEntry],
    owner: str,
    expires_at: float,
) -> Claim | None:
    """The claim of ``row``'s due units within ``budget`` (``None``: it has no due unit).

    ``timers`` are the row's armed timers (any order), ``outbox`` and ``spawns`` its relay
    units in ``seq`` order.  Units go spawns first, then outbox entries, then due timers by
    ``(fire_at, path)``, cut at ``budget``.
    """
    due = sorted(((path, at) for path, at in timers if at <= now), key=lambda t: (t[1], t[0]))
    taken_spawns = tuple(spawns[:budget])
    budget -= len(taken_spawns)
    taken_outbox = tuple(outbox[:budget])
    budget -= len(taken_outbox)
    taken_timers = tuple(due[:budget])
    if not (taken_spawns or taken_outbox or taken_timers):
        return None
    return Claim(
        execution_id=row.key,
        owner=owner,
        expires_at=expires_at,
        priority=row.priority,
        timers=taken_timers,
        outbox=taken_outbox,
        spawns=taken_spawns,
    )


def held_leases(rows: Iterable[WorkRow], now: float, limit: int) -> list[Lease]:
    r"""``list_leases``' answer from work rows a backend read: the leased rows whose expiry
    (``ready_at``) is after ``now``, as :class:`Lease`\ s in :func:`leases_in_order`."""
    held = (
        Lease(execution_id=row.key, owner=row.owner, expires_at=row.ready_at)
        for row in rows
        if row.owner is not None and row.ready_at > now
    )
    return leases_in_order(held, limit)


DAMAGED = "harel.damaged-record"
"""The event kind (outbox) / context key (spawns) of a claimed unit whose stored record does
not decode (see :func:`outbox_or_damaged`)."""


def outbox_or_damaged(
    seq: int, group: str | None, decode: Callable[..., OutboxEntry], *args: Any
) -> OutboxEntry:
    """``decode(*args)``, or — when the stored record does not decode (``StoreCorrupted``) — a
    placeholder entry carrying the error, so one damaged record never fails a claim: the worker
    counts it as a failed attempt each time (:func:`damage_of`) and quarantines it like any
    poison unit, and the claim's other groups are served."""
    try:
        return decode(*args)
    except StoreCorrupted as err:
        event = Event(id=f"{DAMAGED}:{seq}", kind=DAMAGED, data={"error": str(err)})
        return OutboxEntry(seq, group, event)


def spawn_or_damaged(
    seq: int, group: str | None, decode: Callable[..., SpawnEntry], *args: Any
) -> SpawnEntry:
    """The spawn intent twin of :func:`outbox_or_damaged`."""
    try:
        return decode(*args)
    except StoreCorrupted as err:
        return SpawnEntry(seq, group or "", f"{DAMAGED}:{seq}", "", {DAMAGED: str(err)})


def damage_of(entry: OutboxEntry | SpawnEntry) -> str | None:
    """The decoding error an :func:`outbox_or_damaged` / :func:`spawn_or_damaged` placeholder
    carries (``None``: a real
    unit)."""
    if isinstance(entry, OutboxEntry):
        if entry.event.kind == DAMAGED:
            return str(entry.event.data.get("error", ""))
        return None
    found = entry.context.get(DAMAGED) if entry.root_path == "" else None
    return None if found is None else str(found)


def _check_lease(lease: object) -> float:
    seconds = check_now(lease, "lease")
    if not 0 < seconds <= MAX_LEASE:
        raise InvalidArgument(
            f"lease must be a number of seconds in (0, {MAX_LEASE:g}], got {show(lease)}"
        )
    return seconds


def _check_key(execution_id: object) -> str | None:
    return None if execution_id is None else check_id(execution_id)


def check_claim(
    owner: object, now: object, lease: object, limit: object
) -> tuple[str, float, float, int]:
    """``claim``'s arguments, checked: owner token, ``now``, lease seconds, unit limit."""
    count = check_count(limit, "limit")
    if count > MAX_CLAIM_LIMIT:
        raise InvalidArgument(f"limit must be at most {MAX_CLAIM_LIMIT}, got {count}")
    return check_id(owner, "owner"), check_now(now), _check_lease(lease), count


def check_list_leases(now: object, limit: object) -> tuple[float, int]:
    """``list_leases``' arguments, checked like ``claim``'s ``now`` and ``limit`` (the same
    messages); a bool or non-int ``limit`` is an :class:`InvalidArgument` too."""
    try:
        count = check_count(limit, "limit")
    except TypeError as exc:
        raise InvalidArgument(str(exc)) from None
    return check_now(now), count


def check_renew(
    owner: object, execution_id: object, now: object, lease: object
) -> tuple[str, str | None, float, float]:
    """``renew``'s arguments, checked."""
    return check_id(owner, "owner"), _check_key(execution_id), check_now(now), _check_lease(lease)


def check_release(
    owner: object, execution_id: object, retry_at: object
) -> tuple[str, str | None, float | None]:
    """``release``'s arguments, checked (``retry_at``: ``None`` or a point in time)."""
    at = None if retry_at is None else check_now(retry_at, "retry_at")
    return check_id(owner, "owner"), _check_key(execution_id), at


def leases_in_order(leases: Iterable[Lease], limit: int) -> list[Lease]:
    """The first ``limit`` of ``leases`` in ``list_leases`` order: by ``(expires_at,
    execution_id)``, the ``None`` group first among equal expiries (a merge of per-tier or
    per-shard reads, each already cut to ``limit``)."""
    return sorted(leases, key=_lease_order)[:limit]


def _lease_order(lease: Lease) -> tuple[float, bool, str]:
    return lease.expires_at, lease.execution_id is not None, lease.execution_id or ""


def lease_lost(row: WorkRow | None, key: str | None, owner: str, now: float | None) -> LeaseLost:
    """The :class:`LeaseLost` for ``owner`` given the row as stored (``now``: renewing)."""
    if row is None or row.owner is None:
        return LeaseLost(key, owner, "nobody holds it (released, never claimed, or purged)")
    if row.owner != owner:
        return LeaseLost(key, owner, f"it is held by {row.owner!r}", row.owner)
    return LeaseLost(key, owner, f"it expired at {row.ready_at!r} (now {now!r})", owner)
