"""The Redis layout version (create, upgrade 1, 2 or 3 -> 4, refuse newer) and export/import of
execution records, against the shared server under random prefixes."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import partial
from typing import Any

import pytest
import redis
from harel.model import Event, Execution, Status
from harel.store.common.claims import relay_due
from harel.store.common.records import record_digest
from harel.store.contract import ExecutionRecord, OutboxEntry, TimerOp
from harel.store.errors import (
    ExecutionAlreadyExists,
    InvalidArgument,
    SchemaVersionError,
    StoreConflict,
    StoreUnavailable,
)
from harel_store_redis import RedisStore, _plan, _records, _scripts
from harel_store_redis._errors import translate
from harel_store_redis._keys import UNTARGETED, owner_prefix
from harel_store_redis._requests import Command
from harel_store_redis._schema import written_by
from harel_store_redis.testing import RedisHarness

pytestmark = pytest.mark.anyio


def new_exe(execution_id: str, **fields: Any) -> Execution:
    return Execution(id=execution_id, definition_id="flow", **fields)


def ev(event_id: str) -> Event:
    return Event(id=event_id, kind="Go")


def step(kind: str = "Go") -> dict[str, Any]:
    return {"event_kind": kind, "event_data": {}, "actions": [], "context_out": {}}


def dataset(harness: RedisHarness) -> dict[bytes, Any]:
    return harness.dump()


def all_at_once(calls: list[Callable[[], Any]]) -> list[Any]:
    """Run ``calls`` in threads released together by a barrier: each one's value or error."""
    barrier = threading.Barrier(len(calls))

    def run(call: Callable[[], Any]) -> Any:
        barrier.wait()
        try:
            return call()
        except Exception as exc:
            return exc

    with ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(run, calls))


@pytest.fixture
def other_harness(redis_url: str) -> Iterator[RedisHarness]:
    """A second, empty namespace (the destination of an import)."""
    harness = RedisHarness(redis_url)
    yield harness
    harness.destroy()


def client_of(harness: RedisHarness) -> redis.Redis:
    return redis.Redis(**harness.options.client_kwargs())


def populate(store: RedisStore, execution_id: str = "rec:1") -> Execution:
    """An execution with every kind of record: relays targeted at it and at an id not yet
    stored, a mark, timers armed, re-armed and cancelled, spawns, a trace beyond the ring."""
    exe = new_exe(execution_id, status=Status.RUNNING)
    store.commit(exe, [(execution_id, ev("self-1")), ("ghost", ev("g1")), (None, ev("u"))])
    store.commit(
        exe,
        [(execution_id, ev("self-2"))],
        processed_event_id="in-1",
        timers=(TimerOp.schedule("/a", 5.0), TimerOp.schedule("/b", -0.0)),
        spawns=[("kid-1", "/r", {"n": 1}), ("kid-2", "/r", {})],
        trace=step("One"),
    )
    store.commit(exe, [], timers=(TimerOp.schedule("/a", 7.5), TimerOp.cancel("/b")))
    for n in range(4):
        store.commit(exe, [], trace=step(f"S{n}"))
    store.append_trace(execution_id, step("Extra"))
    return exe


# -- layout version ---------------------------------------------------------------------------


def layout_of(harness: RedisHarness) -> tuple[dict[bytes, bytes], bytes | None]:
    with client_of(harness) as client:
        return client.hgetall(harness.keys.layout), client.get(harness.keys.schema)


def untargeted_members(client: redis.Redis, harness: RedisHarness) -> list[bytes]:
    """The ``P own`` members of the untargeted outbox entries (layout 4 indexes them)."""
    found = client.zrangebylex(
        harness.keys.owned, b"[" + UNTARGETED, b"(" + UNTARGETED[:-1] + b"\x02"
    )
    return list(found)


def as_layout_3(harness: RedisHarness) -> None:
    """Turn a namespace into what layout 3 wrote: no work rows (``P work``, ``P ready:<p>``),
    the untargeted outbox entries not in ``P own``; ``P layout`` and ``P schema`` say 3."""
    with client_of(harness) as client:
        client.delete(*harness.keys.work_keys)
        if stale := untargeted_members(client, harness):
            client.zrem(harness.keys.owned, *stale)
        client.hset(harness.keys.layout, mapping={"v": "3", "by": "harel-store-redis 0.1.0"})
        client.set(harness.keys.schema, b"3")


def without_claims(data: dict[bytes, Any], harness: RedisHarness) -> dict[bytes, Any]:
    """``data`` without what layout 4 added (the work keys, the untargeted ``P own`` members)."""
    kept = {key: value for key, value in data.items() if key not in harness.keys.work_keys}
    owned = harness.keys.owned
    if owned in kept:
        kept[owned] = [(m, score) for m, score in kept[owned] if not m.startswith(UNTARGETED)]
    return kept


def as_layout_2(harness: RedisHarness) -> None:
    """Turn a namespace into what layout 2 wrote: layout 3's keys, and each execution hash
    holds ``c`` (the token of its last commit) instead of the receipts ``k0`` .. ``k7``;
    ``P layout`` and ``P schema`` say version 2."""
    as_layout_3(harness)
    with client_of(harness) as client:
        for key in client.scan_iter(match=harness.keys.prefix + b"x:*"):
            receipts = [field for field in client.hkeys(key) if field.startswith(b"k")]
            if receipts:
                client.hdel(key, *receipts)
            client.hset(key, b"c", b"0123456789abcdef0123456789abcdef")
        client.hset(harness.keys.layout, mapping={"v": "2", "by": "harel-store-redis 0.1.0"})
        client.set(harness.keys.schema, b"2")


def as_layout_1(harness: RedisHarness) -> None:
    """Turn a namespace into what release 1 of the layout wrote: its data keys are the same
    as layout 2's; it kept its version in ``P schema`` alone, with no ``P layout``."""
    as_layout_2(harness)
    with client_of(harness) as client:
        client.delete(harness.keys.layout)
        client.set(harness.keys.schema, b"1")


def test_a_new_namespace_records_the_version_and_the_release(harel_harness: RedisHarness) -> None:
    harel_harness.open_sync().close()
    layout, schema = layout_of(harel_harness)
    assert layout == {b"v": b"4", b"by": written_by()} and schema == b"4"
    assert written_by().startswith(b"harel-store-redis")


def test_a_layout_1_namespace_is_upgraded_in_place_and_keeps_its_data(
    harel_harness: RedisHarness,
) -> None:
    store = harel_harness.open_sync()
    exe = populate(store)
    before = store.export_execution(exe.id)
    store.close()
    as_layout_1(harel_harness)
    data_before = dataset(harel_harness)
    store = harel_harness.open_sync()
    assert layout_of(harel_harness) == ({b"v": b"4", b"by": written_by()}, b"4")
    after = without_claims(dataset(harel_harness), harel_harness)
    del after[harel_harness.keys.layout], data_before[harel_harness.keys.schema]
    del after[harel_harness.keys.schema]
    assert after == data_before  # the version record and layout 4's work rows only
    claimed = {c.execution_id for c in store.claim("w", 4e9, limit=1000)}
    assert claimed == {exe.id, "ghost", None}  # the backfilled work rows
    exported = store.export_execution(exe.id)
    assert before is not None and exported is not None
    assert record_digest(exported) == record_digest(before)
    loaded = store.load(exe.id)  # a copy of the upgraded store (the one held before is fenced)
    assert loaded is not None
    store.commit(loaded, [], trace=step("After"))  # and the store goes on from there
    assert store.read_trace(exe.id)[-1]["index"] == before.trace[-1]["index"] + 1
    store.close()


def test_two_openers_racing_on_a_layout_1_namespace_both_succeed(
    harel_harness: RedisHarness,
) -> None:
    harel_harness.open_sync().close()
    as_layout_1(harel_harness)
    client = client_of(harel_harness)

    def execute(request: Command) -> Any:
        send: Callable[..., Any] = client.execute_command
        with translate("test"):
            return send(*request.wire)

    # opener A reads layout 1 and is about to upgrade when opener B opens (and upgrades)
    slow = _plan.open_plan(harel_harness.keys, "A")
    request = next(slow)
    while request.wire[:2] != ("EVALSHA", _scripts.UPGRADE.sha):
        request = slow.send(execute(request))
    harel_harness.open_sync().close()
    assert layout_of(harel_harness)[0][b"v"] == b"4"
    with pytest.raises(StopIteration):
        slow.send(execute(request))  # A finds the upgrade done and opens
    client.close()

    as_layout_1(harel_harness)  # and for real, from threads released together
    opened = all_at_once([harel_harness.open_sync for _ in range(4)])
    assert all(isinstance(store, RedisStore) for store in opened), opened
    for store in opened:
        store.close()
    assert layout_of(harel_harness)[0][b"v"] == b"4"


def test_a_newer_layout_is_refused_naming_both_versions_before_anything_is_written(
    harel_harness: RedisHarness,
) -> None:
    store = harel_harness.open_sync()
    store.save(new_exe("e1"))
    store.close()
    with client_of(harel_harness) as client:
        client.hset(harel_harness.keys.layout, mapping={"v": "6", "by": "harel-store-redis 9.1.0"})
        client.set(harel_harness.keys.schema, b"6")
    before = dataset(harel_harness)
    with pytest.raises(SchemaVersionError) as info:
        harel_harness.open_sync()
    message = str(info.value)
    assert "layout version 6" in message and "reads version 5" in message
    assert "harel-store-redis 9.1.0" in message
    assert "pip install 'harel-store-redis>=9.1.0'" in message
    assert dataset(harel_harness) == before


def test_a_release_reading_only_the_version_1_record_sees_the_new_version(
    harel_harness: RedisHarness,
) -> None:
    # layout 1's reader did GET <P>schema and refused anything but "1", naming what it found
    harel_harness.open_sync().close()
    assert layout_of(harel_harness)[1] == b"4"


def test_a_layout_2_namespace_is_upgraded_in_place_and_gets_receipts_from_its_next_commit(
    harel_harness: RedisHarness,
) -> None:
    store = harel_harness.open_sync()
    exe = populate(store)
    before = store.export_execution(exe.id)
    store.close()
    as_layout_2(harel_harness)
    data_before = dataset(harel_harness)
    store = harel_harness.open_sync()
    assert layout_of(harel_harness) == ({b"v": b"4", b"by": written_by()}, b"4")
    after = without_claims(dataset(harel_harness), harel_harness)
    for key in (harel_harness.keys.layout, harel_harness.keys.schema):
        del after[key], data_before[key]
    assert after == data_before  # no execution rewritten: the version records only
    exported = store.export_execution(exe.id)
    assert before is not None and exported is not None
    assert record_digest(exported) == record_digest(before)
    # a copy committed before the hashes lost their receipts fails its fence (no receipt can
    # match it; a process opening an old layout holds loaded copies, which carry no fence)
    old_copy, unfenced = exe, dataset(harel_harness)
    with pytest.raises(StoreConflict) as info:
        store.commit(old_copy, [], trace=step("Fenced"))
    assert (info.value.expected, info.value.found) == (old_copy.version, old_copy.version)
    assert dataset(harel_harness) == unfenced  # nothing written
    loaded = store.load(old_copy.id)
    assert loaded is not None
    exe = loaded
    # the next commit writes its receipt; a re-send of it (after a rival) is recognised
    rival = store.load(exe.id)
    assert rival is not None
    version = exe.version
    store.commit(exe, [(None, ev("after-upgrade"))], trace=step("After"))
    rival.context = {"by": "rival"}
    with pytest.raises(StoreConflict):
        store.commit(rival, [])  # stale copy: the version moved on
    rival = store.load(exe.id)
    assert rival is not None
    store.commit(rival, [])
    exe.version = version
    store.commit(exe, [(None, ev("after-upgrade"))], trace=step("After"))
    assert exe.version == version + 1
    outbox = [entry.event.id for entry in store.pending_outbox()]
    assert outbox.count("after-upgrade") == 1
    with client_of(harel_harness) as client:
        record = client.hgetall(harel_harness.keys.execution(exe.id))
    mine, rivals = record[b"k%d" % ((version + 1) % 8)], record[b"k%d" % ((version + 2) % 8)]
    assert len(mine) == len(rivals) == 32 and mine != rivals  # one receipt per version
    assert b"c" in record  # layout 2's field stays, unused
    store.close()


def test_a_layout_3_namespace_gets_work_rows_for_its_timers_outbox_and_spawns(
    harel_harness: RedisHarness,
) -> None:
    store = harel_harness.open_sync()
    exe = populate(store)  # timer /a at 7.5; outbox to itself, to "ghost", untargeted; 2 spawns
    store.commit(new_exe("late", priority=4), [], timers=(TimerOp.schedule("/x", 3e9),))
    store.close()
    as_layout_3(harel_harness)
    started = time.time()
    store = harel_harness.open_sync()
    assert layout_of(harel_harness) == ({b"v": b"4", b"by": written_by()}, b"4")
    keys = harel_harness.keys
    with client_of(harel_harness) as client:
        work = client.hgetall(keys.work)
        assert client.zrange(keys.ready_0, 0, -1, withscores=True)[-1] == (
            owner_prefix("late"),
            3e9,
        )
        assert len(untargeted_members(client, harel_harness)) == 1  # indexed by the upgrade
    assert work[owner_prefix("late")] == b"0 3000000000.0 "  # earliest timer, priority 0
    relay_at = float(work[owner_prefix(exe.id)].split()[1])  # relays: due at once
    assert relay_due(started) <= relay_at <= relay_due(time.time())
    claims = {c.execution_id: c for c in store.claim("w", 10.0, limit=1000)}
    assert set(claims) == {exe.id, "ghost", None}  # "late" is not due yet
    mine = claims[exe.id]
    assert [e.event.id for e in mine.outbox] == ["self-1", "self-2"]
    assert [s.child_id for s in mine.spawns] == ["kid-1", "kid-2"]
    assert mine.timers == (("/a", 7.5),)
    assert [e.event.id for e in claims["ghost"].outbox] == ["g1"]
    [untargeted] = claims[None].outbox
    assert untargeted.event.id == "u" and untargeted.target_id is None
    store.ack_outbox(untargeted.seq)  # the ack drops the member the upgrade added
    with client_of(harel_harness) as client:
        assert untargeted_members(client, harel_harness) == []
    later = {c.execution_id for c in store.claim("w", 3e9, limit=1000)}
    assert later == {exe.id, "ghost", "late"}  # leases expired; the acked group is gone
    store.close()


def test_foreign_or_unversioned_namespaces_are_refused(harel_harness: RedisHarness) -> None:
    store = harel_harness.open_sync()
    store.save(new_exe("e1"))
    store.close()
    with client_of(harel_harness) as client:
        client.delete(harel_harness.keys.layout)
        client.set(harel_harness.keys.schema, b"banana")
        with pytest.raises(SchemaVersionError, match="not a version number"):
            harel_harness.open_sync()
        client.delete(harel_harness.keys.schema)
        with pytest.raises(SchemaVersionError, match="no layout version"):
            harel_harness.open_sync()


# -- records ----------------------------------------------------------------------------------


def test_export_holds_everything_stored_for_the_id(harel_harness: RedisHarness) -> None:
    store = harel_harness.open_sync()
    store.trace_max = 3
    exe = populate(store)
    record = store.export_execution(exe.id)
    assert record is not None and record.execution is not None
    assert record.execution.version == exe.version == 7
    summary = store.list_executions().items[0]
    assert record.updated_at == summary.updated_at
    assert [event_id for event_id, _ in record.processed] == ["in-1"]
    assert record.timers == (("/a", 7.5),)
    assert [entry.event.id for entry in record.outbox] == ["self-1", "self-2"]
    assert [entry.seq for entry in record.outbox] == sorted(e.seq for e in record.outbox)
    assert [(s.child_id, s.context) for s in record.spawns] == [("kid-1", {"n": 1}), ("kid-2", {})]
    assert [s["index"] for s in record.trace] == [3, 4, 5]
    ghost = store.export_execution("ghost")
    assert ghost is not None and ghost.execution is None and ghost.updated_at is None
    assert [entry.event.id for entry in ghost.outbox] == ["g1"]
    assert store.export_execution("nobody") is None
    store.close()


def test_export_then_import_elsewhere_keeps_every_record(
    harel_harness: RedisHarness, other_harness: RedisHarness
) -> None:
    source, destination = harel_harness.open_sync(), other_harness.open_sync()
    exe = populate(source)
    destination.commit(new_exe("before"), [("x", ev("old"))])  # relays already there
    for execution_id in (exe.id, "ghost"):
        record = source.export_execution(execution_id)
        assert record is not None
        destination.import_execution(record)
        again = destination.export_execution(execution_id)
        assert again is not None and record_digest(again) == record_digest(record)
        assert again.updated_at == record.updated_at
        assert again.processed == record.processed and again.timers == record.timers
    imported = destination.export_execution(exe.id)
    assert imported is not None
    # relays: new seqs, in record order, after the destination's own
    pending = [(entry.target_id, entry.event.id) for entry in destination.pending_outbox()]
    assert pending == [("x", "old"), (exe.id, "self-1"), (exe.id, "self-2"), ("ghost", "g1")]
    assert destination.due_timers(8.0) == [(exe.id, "/a", 7.5)]
    assert destination.is_processed(exe.id, "in-1")
    ((_, recorded_at),) = imported.processed
    assert destination.prune_processed(recorded_at) == 0
    assert destination.prune_processed(recorded_at + 1) == 1
    # the store goes on: the next commit, the next trace index, acks of imported relays
    loaded = destination.load(exe.id)
    assert loaded is not None and loaded.version == exe.version
    destination.commit(loaded, [], trace=step("Next"))
    assert destination.read_trace(exe.id)[-1]["index"] == imported.trace[-1]["index"] + 1
    for entry in destination.pending_spawns():
        destination.ack_spawn(entry.seq)
    assert destination.pending_spawns() == []
    source.close()
    destination.close()


def test_import_of_a_stored_execution_changes_nothing(harel_harness: RedisHarness) -> None:
    store = harel_harness.open_sync()
    exe = populate(store)
    record = store.export_execution(exe.id)
    assert record is not None
    before = dataset(harel_harness)
    with pytest.raises(ExecutionAlreadyExists):
        store.import_execution(replace(record, outbox=(), spawns=()))
    with pytest.raises(ExecutionAlreadyExists):
        store.import_execution(record)
    assert dataset(harel_harness) == before
    with pytest.raises(InvalidArgument):  # refused before anything is sent
        store.import_execution(replace(record, execution_id="other"))
    assert dataset(harel_harness) == before
    store.close()


def test_two_importers_racing_one_wins(
    harel_harness: RedisHarness, other_harness: RedisHarness
) -> None:
    source = harel_harness.open_sync()
    record = source.export_execution(populate(source).id)
    assert record is not None
    stores = [other_harness.open_sync() for _ in range(4)]
    outcomes = all_at_once([partial(store.import_execution, record) for store in stores])
    assert outcomes.count(None) == 1  # one import wins, the others are refused
    assert sum(isinstance(o, ExecutionAlreadyExists) for o in outcomes) == len(stores) - 1
    assert len(stores[0].pending_outbox()) == len(record.outbox)  # written once
    for store in (source, *stores):
        store.close()


async def test_the_async_store_exports_and_imports_too(
    harel_harness: RedisHarness, other_harness: RedisHarness
) -> None:
    source = harel_harness.open_sync()
    record = source.export_execution(populate(source).id)
    source.close()
    assert record is not None
    destination = await other_harness.open_async()
    try:
        await destination.import_execution(record)
        again = await destination.export_execution(record.execution_id)
        assert again is not None and record_digest(again) == record_digest(record)
        with pytest.raises(ExecutionAlreadyExists):
            await destination.import_execution(record)
    finally:
        await destination.close()


def test_an_import_whose_reply_was_lost_recognises_its_own_landing(
    harel_harness: RedisHarness,
) -> None:
    store = harel_harness.open_sync()
    record = ExecutionRecord(
        execution_id="solo", execution=new_exe("solo", version=3), updated_at=1.5
    )
    prepared = store._prepare_import(record)
    token = b"import-token"
    plan = _records.import_plan(store._keys, prepared, token, where="test", limit=10**9)
    request = next(plan)
    with client_of(harel_harness) as client:
        send: Callable[..., Any] = client.execute_command
        first = send(*request.wire)  # it landed, but the reply is "lost"
        assert first == [_scripts.APPLIED]
        again = plan.throw(StoreUnavailable("reply lost"))
        with pytest.raises(StopIteration):
            plan.send(send(*again.wire))  # no ExecutionAlreadyExists
    relays_only = _records.import_plan(
        store._keys,
        store._prepare_import(
            ExecutionRecord(
                execution_id="t", execution=None, outbox=(OutboxEntry(1, "t", ev("e")),)
            )
        ),
        token,
        where="test",
        limit=10**9,
    )
    next(relays_only)
    with pytest.raises(StoreUnavailable, match="may or may not"):
        relays_only.throw(StoreUnavailable("reply lost"))  # appending twice is not safe
    store.close()
