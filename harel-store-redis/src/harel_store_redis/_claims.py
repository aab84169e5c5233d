"""The plans of ``claim``, ``renew``, ``release`` and ``list_leases``: one script call each.

Work rows live in ``P work`` (group member -> ``"<priority> <repr(ready_at)> <owner>"``) and
``P ready:0`` .. ``P ready:4`` (group member scored by ``ready_at``), the group member being
the execution's owner prefix or :data:`~harel_store_redis._keys.UNTARGETED`; commits and
imports touch them in their own script (:func:`~harel_store_redis._touches.touch_args`),
``purge`` drops the id's row.  A claim is :data:`~harel_store_redis._scripts.CLAIM`: the
bounded reads of the five tiers, the merge in claim order, each group's units found through
``P own`` and the leases written, all in one call; Python turns its reply into ``Claim``
objects with :func:`~harel.store.author.take_units` (the same cut the script made).
``list_leases`` is :data:`~harel_store_redis._scripts.LEASES`, which writes nothing: each
tier's first held rows (holder set, dated after ``now``), merged here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harel.store.author import (
    WorkRow,
    lease_lost,
    leases_in_order,
    outbox_or_damaged,
    relay_due,
    spawn_or_damaged,
    take_units,
)
from harel.store.contract import PRIORITY_AGING, Claim, Lease
from harel.store.errors import StoreCorrupted

from harel_store_redis._keys import group_key, seq_of, text, untext
from harel_store_redis._records import outbox_entry, spawn_entry
from harel_store_redis._requests import Plan, guarded, number, run_script
from harel_store_redis._schema import Keys
from harel_store_redis._scripts import APPLIED, CLAIM, LEASES, RELEASE, RENEW
from harel_store_redis._touches import group_member
from harel_store_redis._wake import channel


def claim_keys(keys: Keys) -> tuple[bytes, ...]:
    """``KEYS`` of the claim and release scripts: the work hash, the five ready zsets, then
    ``P own``, ``P timer-at``, ``P timers``, ``P outbox``, ``P spawns``."""
    return (*keys.work_keys, keys.owned, keys.timer_at, keys.timers, keys.outbox, keys.spawns)


def _applied(reply: Any, script: str, where: str) -> bool:
    guarded(reply, where)
    if not isinstance(reply, list) or not reply or reply[0] not in (0, APPLIED):
        raise StoreCorrupted(f"{where}: unexpected reply {reply!r} from the {script} script")
    return bool(reply[0] == APPLIED)


def stored_row(key: str | None, raw: Any, where: str) -> WorkRow | None:
    """The work row ``key`` as a script read it (``None``: absent); StoreCorrupted if
    unreadable."""
    if raw is None:
        return None
    try:
        priority, ready_at, holder = bytes(raw).split(b" ", 2)
        return WorkRow(key, int(priority), float(ready_at), untext(holder) or None)
    except (TypeError, ValueError) as exc:
        raise StoreCorrupted(
            f"{where}: the work row {raw[:80]!r} cannot be read ({exc}); something else wrote "
            "under this prefix"
        ) from exc


def claim_plan(
    keys: Keys, owner: str, now: float, lease: float, limit: int, where: str
) -> Plan[list[Claim]]:
    """Lease up to ``limit`` due units, grouped, to ``owner`` until ``now + lease``: one
    script (checked arguments, as ``PlanStore.claim`` passes them)."""
    expires = now + lease
    args = (number(now), number(expires), text(owner), b"%d" % limit, number(PRIORITY_AGING))
    reply = yield from run_script(CLAIM, claim_keys(keys), args)
    if not _applied(reply, CLAIM.name, where):
        raise StoreCorrupted(f"{where}: unexpected reply {reply!r} from the claim script")
    claims: list[Claim] = []
    budget = limit
    for member, priority, timers, outbox, spawns in reply[1:]:
        group = group_key(member)
        row = WorkRow(group, int(priority), expires, owner)
        claim = take_units(
            row,
            budget,
            now,
            [(untext(path), float(at)) for path, at in zip(timers[::2], timers[1::2], strict=True)],
            [
                outbox_or_damaged(seq_of(entry_id), group, outbox_entry, seq_of(entry_id), flat)
                for entry_id, flat in outbox
            ],
            [
                spawn_or_damaged(seq_of(entry_id), group, spawn_entry, seq_of(entry_id), flat)
                for entry_id, flat in spawns
            ],
            owner,
            expires,
        )
        if claim is None:
            raise StoreCorrupted(f"{where}: the claim script leased {member!r} with no unit")
        claims.append(claim)
        budget -= claim.units
    return claims


def renew_plan(
    keys: Keys, owner: str, key: str | None, now: float, lease: float, where: str
) -> Plan[float]:
    """Extend ``owner``'s unexpired lease on ``key`` to ``now + lease`` (returned); else
    ``LeaseLost`` with the row as stored."""
    expires = now + lease
    args = (group_member(keys, key), text(owner), number(now), number(expires))
    reply = yield from run_script(RENEW, keys.work_keys, args)
    if _applied(reply, RENEW.name, where):
        return expires
    raise lease_lost(stored_row(key, reply[1] if len(reply) > 1 else None, where), key, owner, now)


def release_plan(
    keys: Keys, owner: str, key: str | None, retry_at: float | None, now: float, where: str
) -> Plan[None]:
    """Give ``owner``'s lease on ``key`` back; the row is re-dated from what is left (not
    before ``retry_at``) or dropped.  Not re-sent after a failure (a landed release re-sent
    would answer ``LeaseLost``)."""
    retry = b"" if retry_at is None else number(retry_at)
    relay_at = number(relay_due(now))
    args = (group_member(keys, key), text(owner), number(now), retry, relay_at, channel(keys))
    reply = yield from run_script(RELEASE, claim_keys(keys), args, retry_unavailable=False)
    if _applied(reply, RELEASE.name, where):
        return
    row = stored_row(key, reply[1] if len(reply) > 1 else None, where)
    raise lease_lost(row, key, owner, None)


@dataclass(frozen=True, slots=True)
class HeldRows:
    """One :data:`~harel_store_redis._scripts.LEASES` reply: the held rows found, each with
    its priority tier, and the tiers that stopped at the count asked for (they may hold
    more)."""

    rows: list[tuple[int, Lease]]
    full: frozenset[int]


def held_rows_plan(keys: Keys, now: float, count: int, where: str) -> Plan[HeldRows]:
    """Each tier's first ``count`` held rows at ``now``: one read-only script."""
    reply = guarded(
        (yield from run_script(LEASES, keys.work_keys, (number(now), b"%d" % count))), where
    )
    try:
        code, flags, *rows = reply
        if code != APPLIED:
            raise ValueError(code)
        held = [
            (
                int(priority),
                Lease(execution_id=group_key(member), owner=untext(holder), expires_at=float(at)),
            )
            for member, priority, at, holder in rows
        ]
    except (TypeError, ValueError) as exc:
        raise StoreCorrupted(
            f"{where}: unexpected reply {reply!r:.200} from the leases script"
        ) from exc
    return HeldRows(held, frozenset(tier for tier, flag in enumerate(flags) if flag))


def leases_plan(keys: Keys, now: float, limit: int, where: str) -> Plan[list[Lease]]:
    """The leases held at ``now`` in ``list_leases`` order, at most ``limit`` (arguments
    checked by ``PlanStore``): one read-only script."""
    held = yield from held_rows_plan(keys, now, limit, where)
    return leases_in_order((lease for _, lease in held.rows), limit)
