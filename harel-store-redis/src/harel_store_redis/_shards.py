"""The sharded layout (layout 5): one store spread over N cluster slots, every commit still ONE
script in ONE slot.

**Where keys live.**  Shard ``i`` (0 <= i < N) has the keys of the single-slot layout under
the prefix ``P{<tag_i>}`` (:func:`shard_labels`: the tag's slot lies in the ``i``-th N-th of
the 16384 slots, so with the usual even split of slots the shards spread evenly over the
masters).  An execution lives in shard ``crc32(id) % N`` (:meth:`ShardMap.home`): its hash,
trace, summary row, listing-index entries, dedupe marks, timers, the spawn intents it writes
and its work row.  What a commit writes for *another* execution stays in the committing
execution's shard too: an emitted event's outbox entry, indexed under the target in that
shard's ``own``, and the target's work-row touch in that shard's work hash.  So a work group
(an execution, or ``None`` for the untargeted entries, whose home is shard 0) has its home row
in its own shard and possibly *remote rows* elsewhere, each for the relay entries there.
``P layout`` (``v`` 5, ``shards`` N) and ``P schema`` stay under the store's prefix, as does
the wake-up channel.

**Seqs.**  Each shard's writes take stream ids from the shard clock
(:mod:`harel_store_redis._shard_scripts`), a hybrid logical clock: above everything the shard
issued, above the *floor* the store object carries (the highest seq it has written or seen,
:class:`Floor`), never below the server's clock in microseconds.  The seq names its shard
in its low 6 bits, so ``ack_outbox`` / ``ack_spawn`` go straight to it.

**Sweeps and claims** read every shard.  Each shard's first call returns its *cut* and
stores it as its clock (every later entry there gets a higher seq); the cut of the operation
is the lowest of them, and only entries up to it are returned or claimed.  So the entries an
operation returns are exactly the lowest seqs among all that exist (nothing below the cut
can appear later), whatever order the shards were read in.  A claim:

1. one ``CLAIM_SCAN`` per shard: the cut, the ready rows (at most ``limit`` per tier, as the
   single-slot claim reads) with their unit counts; rows without units are repaired;
2. the rows merged per group in claim order (a group's rank is its best row's), groups chosen
   until their counts fill ``limit``; one ``CLAIM_TAKE`` per home shard of the chosen groups
   leases each at home — the home row is the lease, and a held one refuses;
3. one ``CLAIM_TAKE`` per other shard: the leased groups' entries there (up to the cut) with
   their rows marked leased, and rows of groups found held marked as held by the holder (so
   no scan keeps returning them);
4. in Python: each group's outbox entries merged by seq and cut by the budget (spawns,
   outbox, timers, as :func:`~harel.store.author.take_units`); a group left with nothing is
   released again.

``renew`` is the home row's; ``release``, ``purge`` and ``export`` visit the home shard, then
every other one (a group's remote rows and entries).  ``list_leases`` reads every shard's held
rows and keeps each group's home row (a remote row marked leased may show an older expiry).
"""

from __future__ import annotations

import contextlib
import math
import threading
import zlib
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from harel.store.author import (
    PreparedCommit,
    PreparedEnqueue,
    PreparedImport,
    WorkRow,
    check_id,
    lease_lost,
    leases_in_order,
    outbox_or_damaged,
    relay_due,
    spawn_or_damaged,
    take_units,
)
from harel.store.contract import (
    PRIORITY_AGING,
    Claim,
    ExecutionRecord,
    Lease,
    OutboxEntry,
    SpawnEntry,
)
from harel.store.errors import LeaseLost, StoreCorrupted

from harel_store_redis._claims import claim_keys, held_rows_plan, renew_plan, stored_row
from harel_store_redis._commit import commit_plan, new_token
from harel_store_redis._enqueue import enqueue_plan
from harel_store_redis._keys import group_key, hash_tag, seq_of, stream_id, text, untext
from harel_store_redis._records import export_plan, import_plan, outbox_entry, spawn_entry
from harel_store_redis._requests import Plan, guarded, number, run_script
from harel_store_redis._schema import Keys
from harel_store_redis._scripts import APPLIED, RELEASE
from harel_store_redis._shard_scripts import CLAIM_SCAN, CLAIM_TAKE, PENDING_SHARDED
from harel_store_redis._touches import group_member
from harel_store_redis._wake import channel

SLOTS = 16384
"""Redis Cluster's hash slots."""
SHARD_BITS = 6
"""Low bits of a sharded layout's seq that name the shard that wrote it."""
SHARD_MASK = (1 << SHARD_BITS) - 1


def crc16(data: bytes) -> int:
    """CRC-16/XMODEM, the checksum Redis Cluster takes a key's slot from."""
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
        crc &= 0xFFFF
    return crc


def key_slot(key: bytes) -> int:
    """The cluster slot of ``key`` (its hash tag's, when it has one)."""
    tag = hash_tag(key)
    return crc16(key if tag is None else tag) % SLOTS


@cache
def shard_labels(count: int) -> tuple[bytes, ...]:
    """The hash tags of ``count`` shards: for shard ``i`` the first ``b"<i>.<k>"`` (k = 0, 1,
    ...) whose slot lies in ``[i * 16384 // count, (i + 1) * 16384 // count)``, so that with
    slots split evenly over M masters (and ``count`` a multiple of M) each master serves
    ``count / M`` shards."""
    labels: list[bytes] = []
    for shard in range(count):
        low, high = shard * SLOTS // count, (shard + 1) * SLOTS // count
        k = 0
        while not low <= crc16(b"%d.%d" % (shard, k)) % SLOTS < high:
            k += 1
        labels.append(b"%d.%d" % (shard, k))
    return tuple(labels)


def shard_of(execution_id: str, count: int) -> int:
    """The shard an execution lives in: ``crc32`` of its id (UTF-8) modulo ``count``."""
    return zlib.crc32(text(execution_id)) % count


@dataclass(frozen=True, slots=True)
class ShardMap:
    """The ``count`` shards of a store: their key names and which one holds what."""

    base: Keys
    count: int
    shards: tuple[Keys, ...]
    numbers: tuple[bytes, ...]
    """Each shard's number as its scripts take it."""

    @classmethod
    def of(cls, base: Keys, count: int) -> ShardMap:
        """The shards of the store whose own keys are ``base``."""
        shards = tuple(
            Keys(base.prefix + b"{" + label + b"}", base=base.prefix)
            for label in shard_labels(count)
        )
        return cls(base, count, shards, tuple(b"%d" % n for n in range(count)))

    def home(self, execution_id: str) -> int:
        """The shard of ``execution_id``."""
        return shard_of(execution_id, self.count)

    def group_home(self, key: str | None) -> int:
        """The shard that holds work group ``key``'s lease (shard 0 for the untargeted)."""
        return 0 if key is None else self.home(key)

    def keys_of(self, execution_id: str) -> Keys:
        """The key names of the shard ``execution_id`` lives in."""
        return self.shards[self.home(execution_id)]

    def others(self, shard: int) -> list[int]:
        """Every shard but ``shard``."""
        return [n for n in range(self.count) if n != shard]

    def shard_of_seq(self, seq: int) -> int | None:
        """The shard that wrote the entry ``seq`` (``None``: no shard can have)."""
        shard = seq & SHARD_MASK
        return shard if shard < self.count else None


@dataclass
class Floor:
    """The highest seq a store object has written or seen (0: none yet): every write it sends
    takes ids above it, so its later entries sort after everything it observed, whichever
    shard wrote that (thread-safe)."""

    value: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def text(self) -> bytes:
        """The floor as a stream id (``b""``: none)."""
        found = stream_id(self.value) if self.value else None
        return found or b""

    def observe(self, seqs: Iterable[int]) -> None:
        """Raise the floor to the highest of ``seqs``."""
        top = max(seqs, default=0)
        if top > self.value:
            with self._lock:
                self.value = max(self.value, top)

    def observe_id(self, entry_id: bytes | None) -> None:
        """Raise the floor to the seq of a stream id a write replied with."""
        if entry_id:
            self.observe((seq_of(entry_id),))


def _tail(smap: ShardMap, shard: int, floor: Floor) -> tuple[bytes, bytes]:
    return smap.numbers[shard], floor.text()


# -- writes --------------------------------------------------------------------------------------


def commit_sharded(
    smap: ShardMap,
    floor: Floor,
    prepared: PreparedCommit,
    trace_max: int | None,
    *,
    where: str,
    limit: int,
) -> Plan[None]:
    """One commit, ONE script in the execution's shard (its emits, their targets' touches and
    its spawn intents included)."""
    shard = smap.home(prepared.execution_id)
    last = yield from commit_plan(
        smap.shards[shard],
        prepared,
        trace_max,
        where=where,
        limit=limit,
        shard=_tail(smap, shard, floor),
    )
    floor.observe_id(last)


def enqueue_sharded(
    smap: ShardMap, floor: Floor, prepared: PreparedEnqueue, *, where: str, limit: int
) -> Plan[int]:
    """One enqueue, ONE script in the target's shard; the entry's seq."""
    shard = smap.home(prepared.target_id)
    seq = yield from enqueue_plan(
        smap.shards[shard], prepared, where=where, limit=limit, shard=_tail(smap, shard, floor)
    )
    floor.observe((seq,))
    return seq


def import_sharded(
    smap: ShardMap, floor: Floor, prepared: PreparedImport, *, where: str, limit: int
) -> Plan[None]:
    """One record, ONE script in the execution's shard (its relays appended there)."""
    shard = smap.home(prepared.execution_id)
    last = yield from import_plan(
        smap.shards[shard],
        prepared,
        new_token(),
        where=where,
        limit=limit,
        shard=_tail(smap, shard, floor),
    )
    floor.observe_id(last)


# -- reads -------------------------------------------------------------------------------------


def export_sharded(smap: ShardMap, execution_id: str) -> Plan[ExecutionRecord | None]:
    """The record of ``execution_id``: its shard's export script, then the same script in
    every other shard for the outbox entries targeted at it there."""
    execution_id = check_id(execution_id)
    home = smap.home(execution_id)
    others = [smap.shards[shard] for shard in smap.others(home)]
    record: ExecutionRecord | None = yield from export_plan(smap.shards[home], execution_id, others)
    return record


def _sweep_cut(
    smap: ShardMap, floor: Floor, stream: str, limit: bytes, where: str
) -> Plan[tuple[int, list[tuple[int, list[bytes]]]]]:
    """Every shard's cut and first entries of ``stream`` (``outbox``/``spawns``); the lowest
    cut and the entries up to it, by seq."""
    cuts: list[int] = []
    entries: list[tuple[int, list[bytes]]] = []
    for keys in smap.shards:
        reply = yield from run_script(
            PENDING_SHARDED, (getattr(keys, stream), keys.work), (limit, floor.text())
        )
        guarded(reply, where)
        cuts.append(seq_of(reply[0]))
        entries += [(seq_of(entry_id), flat) for entry_id, flat in reply[1]]
    floor.observe(cuts)
    cut = min(cuts)
    return cut, sorted((entry for entry in entries if entry[0] <= cut), key=lambda e: e[0])


def pending_outbox_sharded(
    smap: ShardMap, floor: Floor, limit: bytes, count: int | None, where: str
) -> Plan[list[OutboxEntry]]:
    """The undelivered events, lowest seqs first, from every shard up to the sweep's cut."""
    _cut, entries = yield from _sweep_cut(smap, floor, "outbox", limit, where)
    return [outbox_entry(seq, flat) for seq, flat in entries[:count]]


def pending_spawns_sharded(
    smap: ShardMap, floor: Floor, limit: bytes, count: int | None, where: str
) -> Plan[list[SpawnEntry]]:
    """The uncreated children, lowest seqs first, from every shard up to the sweep's cut."""
    _cut, entries = yield from _sweep_cut(smap, floor, "spawns", limit, where)
    return [spawn_entry(seq, flat) for seq, flat in entries[:count]]


# -- claims ------------------------------------------------------------------------------------


@dataclass
class _Group:
    """What a claim found of one work group over the shards."""

    member: bytes
    key: str | None
    home: int
    ready_at: float = math.inf
    """Its earliest ready row's ``ready_at``, or its home row's when that holds a lease (an
    expired one: what the group's one row would hold in the single-slot layout, where the
    touches of a leased row keep its ``ready_at``)."""
    leased_home: bool = False
    oldest_priority: int = 0
    """The priority of that row (the group's when it has no home row)."""
    priority: int | None = None
    """The group's priority: its home row's (set by its own commits), once known."""
    units: int = 0
    seen: set[int] = field(default_factory=set)
    budget: int = 0
    held: WorkRow | None = None
    """The home row when someone holds the group's lease (nothing to take now)."""
    empty: list[int] = field(default_factory=list)
    """The shards where a ready row of the group had no unit."""

    @property
    def rank(self) -> float:
        """Claim order: the earliest ready_at, aged by the group's priority."""
        priority = self.oldest_priority if self.priority is None else self.priority
        return self.ready_at - PRIORITY_AGING * priority


def _scan_keys(keys: Keys) -> tuple[bytes, ...]:
    return (*keys.work_keys, keys.owned, keys.timer_at, keys.timers)


def _claimed(reply: Any, script: str, where: str) -> list[Any]:
    guarded(reply, where)
    if not isinstance(reply, list) or not reply or reply[0] != APPLIED:
        raise StoreCorrupted(f"{where}: unexpected reply {reply!r} from the {script} script")
    return reply


def _by_home(groups: Iterable[_Group]) -> dict[int, list[_Group]]:
    homes: dict[int, list[_Group]] = defaultdict(list)
    for group in groups:
        homes[group.home].append(group)
    return homes


def claim_sharded(
    smap: ShardMap,
    floor: Floor,
    owner: str,
    now: float,
    lease: float,
    limit: int,
    where: str,
) -> Plan[list[Claim]]:
    """Lease up to ``limit`` due units, grouped, over every shard (see the module docstring:
    one scan per shard, a peek at the home rows of groups found only elsewhere, one lease
    script per home shard involved, one per other shard)."""
    expires = now + lease
    cuts: list[int] = []
    groups: dict[bytes, _Group] = {}
    empty_rows: dict[int, list[bytes]] = defaultdict(list)
    # 1. every shard's cut and ready rows
    for shard, keys in enumerate(smap.shards):
        reply = yield from run_script(
            CLAIM_SCAN, _scan_keys(keys), (number(now), b"%d" % limit, floor.text())
        )
        reply = _claimed(reply, CLAIM_SCAN.name, where)
        cuts.append(seq_of(reply[1]))
        for member, raw_priority, score, units, holder in reply[2:]:
            group = groups.get(member)
            if group is None:
                key = group_key(member)
                group = groups[member] = _Group(member, key, smap.group_home(key))
            if not units:
                group.empty.append(shard)  # repaired, if the claim gets that far
            priority, ready_at = int(raw_priority), float(score)
            if shard == group.home:
                group.priority = priority
                if holder:
                    group.ready_at, group.leased_home = ready_at, True
            if ready_at < group.ready_at and not group.leased_home:
                group.ready_at, group.oldest_priority = ready_at, priority
            group.units += int(units)
            if units:
                group.seen.add(shard)
    floor.observe(cuts)
    if not groups:
        return []
    head = (number(now), number(expires), text(owner), stream_id(min(cuts)) or b"0-0")
    # the home rows of groups found only in other shards: their priority (or their lease)
    unknown = [group for group in groups.values() if group.priority is None]
    for home, members in sorted(_by_home(unknown).items()):
        items = [part for group in members for part in (b"p", group.member, b"", b"")]
        reply = yield from run_script(CLAIM_TAKE, claim_keys(smap.shards[home]), (*head, *items))
        for member, _code, raw in _claimed(reply, CLAIM_TAKE.name, where)[1:]:
            group = groups[member]
            row = stored_row(group.key, raw, where) if raw else None
            if row is not None:
                group.priority = row.priority
                if row.owner is not None and row.ready_at > now:
                    group.held = row
                elif row.owner is not None:
                    group.ready_at, group.leased_home = row.ready_at, True
    chosen: list[_Group] = []
    counted = 0
    for group in sorted(groups.values(), key=lambda g: (g.rank, g.member)):
        if counted >= limit:
            break
        # rows with nothing behind them in their shard, up to the budget's cut, are repaired
        # (re-dated or dropped, as the single-slot claim does), except a home row whose group
        # has units elsewhere: it holds the group's priority (and any lease)
        # (a home row holding an expired lease stands for the group as it is: its other rows
        # may be marked with a later expiry, after a renewal that shortened the lease)
        hollow = not group.units and not group.leased_home
        for shard in group.empty:
            if hollow or shard != group.home:
                empty_rows[shard].append(group.member)
        if hollow:
            continue
        if group.held is None:
            group.budget = limit - counted
            counted += group.units
        chosen.append(group)
    # 2. the leases, in each group's home shard
    taken: dict[bytes, list[Any]] = {}
    for home, members in sorted(_by_home(g for g in chosen if g.held is None).items()):
        items = []
        for group in members:
            priority = group.oldest_priority if group.priority is None else group.priority
            items += [b"h", group.member, b"%d" % priority, b"%d" % group.budget]
        reply = yield from run_script(CLAIM_TAKE, claim_keys(smap.shards[home]), (*head, *items))
        for item in _claimed(reply, CLAIM_TAKE.name, where)[1:]:
            group = groups[item[0]]
            if item[1] == 1:
                taken[item[0]] = item
            else:
                group.held = stored_row(group.key, item[2], where)
    # 3. the other shards: the leased groups' entries there, the held groups' rows hidden
    remote: dict[bytes, list[Any]] = defaultdict(list)
    for shard in range(smap.count):
        items = [part for member in empty_rows[shard] for part in (b"z", member, b"", b"")]
        for group in chosen:
            if group.home == shard:
                continue
            if group.member in taken:
                priority = taken[group.member][2]
                items += [b"r", group.member, priority, b"%d" % group.budget]
            elif group.held is not None and group.held.owner and shard in group.seen:
                row = group.held
                items += [b"x", group.member, text(row.owner or ""), number(row.ready_at)]
        if not items:
            continue
        reply = yield from run_script(CLAIM_TAKE, claim_keys(smap.shards[shard]), (*head, *items))
        for item in _claimed(reply, CLAIM_TAKE.name, where)[1:]:
            if item[1] == 2:
                remote[item[0]] += item[2]
    # 4. the claims, in claim order, cut by the budget
    claims: list[Claim] = []
    budget = limit
    empty: list[str | None] = []
    for group in chosen:
        item = taken.get(group.member)
        if item is None:
            continue
        key = group.key
        _member, _code, priority, _before, timers, outbox, spawns = item
        entries = [
            outbox_or_damaged(seq_of(entry_id), key, outbox_entry, seq_of(entry_id), flat)
            for entry_id, flat in [*outbox, *remote.get(group.member, [])]
        ]
        entries.sort(key=lambda entry: entry.seq)
        row = WorkRow(key, int(priority), expires, owner)
        claim = take_units(
            row,
            budget,
            now,
            [(untext(path), float(at)) for path, at in zip(timers[::2], timers[1::2], strict=True)],
            entries,
            [
                spawn_or_damaged(seq_of(entry_id), key, spawn_entry, seq_of(entry_id), flat)
                for entry_id, flat in spawns
            ],
            owner,
            expires,
        )
        if claim is None:
            empty.append(key)
            continue
        claims.append(claim)
        budget -= claim.units
    for key in empty:  # leased with nothing left to take (entries past the cut, or the budget)
        with contextlib.suppress(LeaseLost):
            yield from release_sharded(smap, owner, key, None, now, where)
    return claims


def renew_sharded(
    smap: ShardMap, owner: str, key: str | None, now: float, lease: float, where: str
) -> Plan[float]:
    """Extend the lease: the group's home row alone (remote rows marked with the old expiry
    are marked again by the next claim that finds them ready)."""
    expires: float = yield from renew_plan(
        smap.shards[smap.group_home(key)], owner, key, now, lease, where
    )
    return expires


def leases_sharded(smap: ShardMap, now: float, limit: int, where: str) -> Plan[list[Lease]]:
    """The leases held at ``now`` over every shard, in ``list_leases`` order: one read-only
    script per shard, keeping the rows of groups whose home is that shard.  A tier whose first
    ``count`` held rows held fewer than ``limit`` home rows is read again with twice the count
    (remote rows of groups leased elsewhere took the places), so the merge is exact."""
    found: list[Lease] = []
    for shard, keys in enumerate(smap.shards):
        count = limit
        while True:
            held = yield from held_rows_plan(keys, now, count, where)
            home = [
                (tier, lease)
                for tier, lease in held.rows
                if smap.group_home(lease.execution_id) == shard
            ]
            per_tier = Counter(tier for tier, _ in home)
            if all(per_tier[tier] >= limit for tier in held.full):
                break
            count *= 2
        found += [lease for _, lease in home]
    return leases_in_order(found, limit)


def release_sharded(
    smap: ShardMap, owner: str, key: str | None, retry_at: float | None, now: float, where: str
) -> Plan[None]:
    """Give ``owner``'s lease back: a look at the home row first (``LeaseLost``, nothing
    changed, when ``owner`` does not hold it), then the group's row in every other shard
    re-dated (not before ``retry_at``) or dropped, then the home row re-dated from what is
    left in every shard (or dropped): one script per shard, plus the look."""
    home = smap.group_home(key)
    keys = smap.shards[home]
    member = group_member(keys, key)
    retry = b"" if retry_at is None else number(retry_at)
    relay_at = number(relay_due(now))
    head = (number(now), relay_at, text(owner), b"0-0")
    reply = yield from run_script(CLAIM_TAKE, claim_keys(keys), (*head, b"p", member, b"", b""))
    (_member, _code, raw), *_ = _claimed(reply, CLAIM_TAKE.name, where)[1:]
    row = stored_row(key, raw, where) if raw else None
    if row is None or row.owner != owner:
        raise lease_lost(row, key, owner, None)
    elsewhere = b"0"
    for shard in smap.others(home):
        reply = yield from run_script(
            CLAIM_TAKE, claim_keys(smap.shards[shard]), (*head, b"f", member, retry, relay_at)
        )
        for item in _claimed(reply, CLAIM_TAKE.name, where)[1:]:
            if item[2] == 1:
                elsewhere = b"1"
    args = (member, text(owner), number(now), retry, relay_at, channel(keys), elsewhere)
    reply = yield from run_script(RELEASE, claim_keys(keys), args, retry_unavailable=False)
    if not isinstance(guarded(reply, where), list) or not reply or reply[0] != APPLIED:
        row = stored_row(key, reply[1] if len(reply) > 1 else None, where)
        raise lease_lost(row, key, owner, None)


def home_keys(smap: ShardMap, execution_id: object) -> Keys:
    """The shard keys of an execution id (checked first, as the single-slot plans do)."""
    return smap.keys_of(check_id(execution_id))


def all_keys(smap: ShardMap) -> Sequence[Keys]:
    """Every shard's key names, in shard order."""
    return smap.shards
