"""The upgrade of a single-slot namespace (layout 1-4) to the sharded layout (5) in place:
opening it with ``?shards=N`` on a single Redis server (a cluster never holds both layouts'
keys under one prefix: the single-slot one needs a hash-tagged prefix, the sharded one a
prefix without braces).

Steps, each atomic and idempotent, so several openers may run the upgrade at once and a crash
leaves a namespace the next opener finishes (every opener of a namespace being upgraded,
``?shards=`` or not, finishes it first):

1. layout 1-3 are upgraded to 4 as always; ``P layout`` records the target shard count (a
   layout 4 record with ``shards``: an upgrade in progress);
2. every relay entry, outbox then spawn intents, each stream in its order, moves to its
   group's home shard with a new seq (one script per entry: :data:`MIGRATE_RELAY`), so the
   seqs keep the old order;
3. once both old streams are empty, every execution (the ids of ``P sum``) is exported from the
   old keys, imported into its shard (an import another opener already made is kept) and
   purged from the old keys: its version, marks, timers, trace and listing row move whole;
4. the old keys left (empty streams, work rows) are deleted and the record becomes layout 5.

Leases do not survive it: stop the workers (and every writer of an older release, which
would keep writing the old keys) before upgrading.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time

from harel.store.author import prepare_import, relay_due
from harel.store.errors import ExecutionAlreadyExists, StoreConfigError, StoreCorrupted

from harel_store_redis._keys import UNTARGETED, untext
from harel_store_redis._records import export_plan, purge_plan
from harel_store_redis._requests import Command, Plan, guarded, number, run_script
from harel_store_redis._schema import Keys, written_by
from harel_store_redis._scripts import PENDING
from harel_store_redis._shard_scripts import LAYOUT_MIGRATE, MIGRATE_RELAY, SUMMARY_IDS
from harel_store_redis._shards import Floor, ShardMap, import_sharded

log = logging.getLogger("harel_store_redis")

BATCH = 100
"""Relay entries read (and executions listed) per request of the upgrade."""


def to_sharded_plan(keys: Keys, count: int, floor: Floor, where: str, limit: int) -> Plan[None]:
    """Move a layout 4 namespace (possibly half-upgraded already) into ``count`` shards; the
    record says layout 5 at the end (``StoreConfigError`` when another shard count is being
    upgraded to)."""
    version, marked = guarded(
        (yield from run_script(LAYOUT_MIGRATE, (keys.layout,), (b"mark", b"%d" % count, b""))),
        where,
    )
    if version == b"5":
        return  # another opener finished it
    if version != b"4" or marked is None:
        raise StoreCorrupted(f"{where}: the sharded upgrade found layout {version!r}")
    if int(marked) != count:
        raise StoreConfigError(
            f"{where} is being upgraded to the sharded layout with {int(marked)} shards, not "
            f"{count}: open it with ?shards={int(marked)} to finish the upgrade"
        )
    log.info("upgrading %s to the sharded layout with %d shards", where, count)
    shards = ShardMap.of(keys, count)
    relay_at = number(relay_due(time.time()))
    yield from _move_relays(keys, shards, floor, relay_at, where)
    yield from _move_executions(keys, shards, floor, where, limit)
    leftovers = (
        keys.outbox,
        keys.spawns,
        keys.owned,
        keys.marks,
        keys.timers,
        keys.timer_at,
        keys.summaries,
        *keys.work_keys,
    )
    yield Command(("DEL", *leftovers))
    version, _ = guarded(
        (
            yield from run_script(
                LAYOUT_MIGRATE, (keys.layout,), (b"done", b"%d" % count, written_by())
            )
        ),
        where,
    )
    if version != b"5":
        raise StoreCorrupted(f"{where}: the sharded upgrade left layout {version!r}")
    yield Command(("SET", keys.schema, b"5"))


def _move_relays(
    keys: Keys, shards: ShardMap, floor: Floor, relay_at: bytes, where: str
) -> Plan[None]:
    """Step 2: both old streams emptied into the shards, in order."""
    for stream, tag in (("outbox", b"o"), ("spawns", b"s")):
        old = getattr(keys, stream)
        while True:
            batch = yield from run_script(PENDING, (old,), (b"%d" % BATCH,))
            if not batch:
                break
            for entry_id, flat in batch:
                fields = dict(zip(flat[::2], flat[1::2], strict=True))
                owner = fields.get(b"t") if tag == b"o" else fields.get(b"p")
                shard = 0 if owner is None else shards.home(untext(owner))
                there = shards.shards[shard]
                reply = yield from run_script(
                    MIGRATE_RELAY,
                    (
                        old,
                        keys.owned,
                        keys.work,
                        getattr(there, stream),
                        there.owned,
                        *there.work_keys,
                    ),
                    (entry_id, tag, UNTARGETED, relay_at, shards.numbers[shard], floor.text()),
                )
                floor.observe_id(guarded(reply, where)[1] or None)


def _move_executions(
    keys: Keys, shards: ShardMap, floor: Floor, where: str, limit: int
) -> Plan[None]:
    """Step 3: every execution exported, imported into its shard, purged from the old keys."""
    while True:
        found = yield from run_script(SUMMARY_IDS, (keys.summaries,), (b"%d" % BATCH,))
        if not found:
            return
        for raw_id in found:
            execution_id = untext(raw_id)
            record = yield from export_plan(keys, execution_id)
            if record is not None and record.execution is not None:
                state = dataclasses.replace(record, outbox=(), spawns=())
                prepared = prepare_import(state, trace_max=None)
                # ExecutionAlreadyExists: another opener moved it (its old copy goes below)
                with contextlib.suppress(ExecutionAlreadyExists):
                    yield from import_sharded(shards, floor, prepared, where=where, limit=limit)
            yield from purge_plan(keys, execution_id, True, where)
