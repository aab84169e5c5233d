"""Claims on PostgreSQL: the work touches a write sends, and the statements and replies of
``claim``, ``renew`` and ``release`` (driver-free, like the plan).

Every work row lives in ``work`` (layout version 4): key = the execution id, or
:data:`~harel_store_postgres._schema.UNTARGETED` (``""``) for the untargeted outbox entries.
Each of the three operations is ONE statement, a call of a PL/pgSQL function
(``harel_claim``, ``harel_renew``, ``harel_release``: :mod:`harel_store_postgres._schema`),
so each is one round trip and one transaction.  ``list_leases`` is one plain ``SELECT`` of the
held rows (:data:`_LEASES`), locking nothing.  Lease expiries are computed here
(``now + lease``, by this process) and travel as bound values, so what a :class:`Claim` says
and what the row holds are the same float.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from harel.store.author import (
    PRIORITIES,
    WorkRow,
    WorkTouch,
    decode_event,
    lease_lost,
    outbox_or_damaged,
    relay_due,
    spawn_or_damaged,
    take_units,
)
from harel.store.author.sql import Result, Statement
from harel.store.contract import PRIORITY_AGING, Claim, Lease, OutboxEntry, SpawnEntry
from harel.store.errors import StoreCorrupted

from harel_store_postgres._rows import first_row, spawn_context
from harel_store_postgres._schema import UNTARGETED

WorkArrays = tuple[list[str], list[float], list[int], list[bool]]
"""``harel_commit``'s / ``harel_import``'s work parameters: keys, dues, priorities, owns."""

_CLAIM = (
    "SELECT o_key, o_priority, o_timer_paths, o_timer_fire_at, o_outbox_seqs, o_outbox_events, "
    "o_spawn_seqs, o_spawn_children, o_spawn_roots, o_spawn_contexts FROM {schema}.harel_claim("
    "%s::text, %s::float8, %s::float8, %s::int, %s::float8, %s::int[])"
)

_RENEW = (
    "SELECT o_done, o_priority, o_ready_at, o_owner "
    "FROM {schema}.harel_renew(%s::text, %s::text, %s::float8, %s::float8)"
)

_RELEASE = (
    "SELECT o_done, o_priority, o_ready_at, o_owner "
    "FROM {schema}.harel_release(%s::text, %s::text, %s::float8, %s::float8)"
)

_LEASES = (
    "SELECT h.key, h.owner, h.ready_at FROM unnest(%s::int[]) AS t (tier) CROSS JOIN LATERAL ("
    "SELECT w.key, w.owner, w.ready_at FROM {schema}.work AS w "
    "WHERE w.priority = t.tier AND w.ready_at > %s::float8 AND w.owner IS NOT NULL "
    "ORDER BY w.ready_at, w.key LIMIT %s::int) AS h "
    "ORDER BY h.ready_at, h.key LIMIT %s::int"
)
"""The held rows (a leased row's ``ready_at`` is its expiry): per priority tier a range scan
of index ``work_ready`` (``priority, ready_at, key``) from ``now`` that stops after ``limit``
held rows, the tiers merged by ``(ready_at, key)`` (``key COLLATE "C"``: the untargeted group's
``""`` first among equal expiries).  The scan also walks the free rows dated after ``now``
(work due later, e.g. future timers) up to the tier's ``limit``-th lease, or to the tier's end
when it holds fewer: no index holds the leased rows alone, and adding one would take a layout
version."""


def stored_key(key: str | None) -> str:
    """A group's key in the ``work`` table (``None``, the untargeted group: ``""``)."""
    return UNTARGETED if key is None else key


def work_arrays(touches: Iterable[WorkTouch]) -> WorkArrays:
    """The touches as the functions' four parallel arrays, sorted by stored key: every write
    locks the work rows it shares with another in the same order (no deadlock)."""
    ordered = sorted(touches, key=lambda change: stored_key(change.key))
    return (
        [stored_key(change.key) for change in ordered],
        [change.due for change in ordered],
        [change.priority for change in ordered],
        [change.own for change in ordered],
    )


def claim_statement(owner: str, now: float, expires: float, limit: int) -> Statement:
    """The one call of ``harel_claim`` (arguments checked by the store)."""
    return Statement(_CLAIM, (owner, now, expires, limit, PRIORITY_AGING, list(PRIORITIES)))


def claims_from(result: Result, owner: str, now: float, expires: float) -> list[Claim]:
    """The claims ``harel_claim`` returned, in claim order, decoded (a relay record that does
    not decode becomes a placeholder unit: :func:`~harel.store.author.outbox_or_damaged`)."""
    return [_claim(row, owner, now, expires) for row in result.rows]


def _outbox(seq: int, group: str | None, text: str) -> OutboxEntry:
    return OutboxEntry(seq, group, decode_event(text, what=f"outbox entry {seq}"))


def _spawn(seq: int, parent: str, child: str, root: str, text: str) -> SpawnEntry:
    return SpawnEntry(seq, parent, child, root, spawn_context(text, seq))


def _claim(row: Sequence[Any], owner: str, now: float, expires: float) -> Claim:
    key, priority, paths, fire_ats, outbox_seqs, events, spawn_seqs, children, roots = row[:9]
    group = None if key == UNTARGETED else str(key)
    timers = list(zip(paths, map(float, fire_ats), strict=True))
    outbox = [
        outbox_or_damaged(int(seq), group, _outbox, int(seq), group, text)
        for seq, text in zip(outbox_seqs, events, strict=True)
    ]
    spawns = [
        spawn_or_damaged(int(seq), group, _spawn, int(seq), str(group), child, root, text)
        for seq, child, root, text in zip(spawn_seqs, children, roots, row[9], strict=True)
    ]
    units = len(timers) + len(outbox) + len(spawns)
    work = WorkRow(group, int(priority), expires, owner)
    claim = take_units(work, units, now, timers, outbox, spawns, owner, expires)
    if claim is None or claim.units != units:
        raise StoreCorrupted(f"harel_claim returned a group without due units ({group!r})")
    return claim


def leases_statement(now: float, limit: int) -> Statement:
    """The one ``SELECT`` of ``list_leases`` (arguments checked by the store)."""
    return Statement(_LEASES, (list(PRIORITIES), now, limit, limit))


def leases_from(result: Result) -> list[Lease]:
    """The leases :data:`_LEASES` returned, in its order."""
    return [
        Lease(
            execution_id=None if key == UNTARGETED else str(key),
            owner=str(owner),
            expires_at=float(ready_at),
        )
        for key, owner, ready_at in result.rows
    ]


def renew_statement(owner: str, key: str | None, now: float, expires: float) -> Statement:
    """The one call of ``harel_renew``."""
    return Statement(_RENEW, (owner, stored_key(key), now, expires))


def release_statement(owner: str, key: str | None, retry_at: float | None, now: float) -> Statement:
    """The one call of ``harel_release`` (``now``: this process's clock, which dates the relay
    units left: :func:`~harel.store.author.relay_due`)."""
    return Statement(_RELEASE, (owner, stored_key(key), retry_at, relay_due(now)))


def check_lease(result: Result, owner: str, key: str | None, now: float | None) -> None:
    """``LeaseLost`` (from the row as the function found it) unless it renewed/released;
    ``now``: the renewal's time (``None`` for a release)."""
    done, priority, ready_at, holder = first_row(result)
    if done:
        return
    row = None if priority is None else WorkRow(key, int(priority), float(ready_at), holder)
    raise lease_lost(row, key, owner, now)
