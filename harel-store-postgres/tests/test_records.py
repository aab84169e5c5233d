"""Execution records on PostgreSQL: export in one statement, import in one call of
``harel_import``, round trips through a fresh schema, refusals and races; the state-only
commit's plain CAS ``UPDATE`` reporting the winner's version after a race; and commits that
waited for a rival's row lock re-checking the dedupe mark and the fence after it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from functools import partial
from typing import Any

import pytest
from harel.model import Event, Execution, Status
from harel.store.common.records import record_digest
from harel.store.contract import ExecutionRecord, OutboxEntry, SpawnEntry, TimerOp
from harel.store.errors import (
    AlreadyProcessed,
    ExecutionAlreadyExists,
    InvalidArgument,
    StoreConflict,
    StoreCorrupted,
)
from harel_store_postgres import AsyncPostgresStore, PostgresStore
from harel_store_postgres.testing import PostgresHarness


def _step(kind: str) -> dict[str, Any]:
    return {"event_kind": kind, "event_data": {}, "from_path": None, "to_path": "/a"}


@pytest.fixture
def other(pg_url: str) -> Iterator[PostgresHarness]:
    """A second fresh schema: where records are imported."""
    harness = PostgresHarness(pg_url, connect_retries=2, trace_max=3)
    yield harness
    harness.destroy()


def _populate(store: PostgresStore) -> Execution:
    """``p`` with marks, re-armed and cancelled timers, relays both ways, a trace beyond the
    ring (trace_max 3) and an appended step; an outbox entry for the unstored ``child``."""
    exe = Execution(id="p", definition_id="d", status=Status.RUNNING)
    store.commit(exe, [(None, Event(id="self-1", kind="A"))], timers=[TimerOp.schedule("/t", 5.0)])
    for n in range(4):
        store.commit(
            exe,
            [("p", Event(id=f"self-{n + 2}", kind="B")), ("child", Event(id=f"c{n}", kind="C"))],
            processed_event_id=f"in-{n}",
            timers=[TimerOp.schedule("/t", 7.5 + n), TimerOp.schedule(f"/x{n}", 1e9)],
            spawns=[("child", "/r", {"n": n})] if n < 2 else [],
            trace=_step(f"K{n}"),
        )
    store.commit(exe, [], timers=[TimerOp.cancel("/x0")], trace=_step("last"))
    store.append_trace("p", _step("appended"))
    store.ack_outbox(store.pending_outbox()[0].seq)  # self-1 delivered
    return exe


def test_export_holds_everything_in_order(harel_harness: PostgresHarness) -> None:
    store = PostgresStore.open(replace(harel_harness.options, trace_max=3))
    exe = _populate(store)
    record = store.export_execution("p")
    assert record is not None and record.execution == store.load("p")
    assert record.execution is not None and record.execution.version == exe.version == 6
    (summary,) = store.list_executions().items
    assert record.updated_at == summary.updated_at
    assert [event_id for event_id, _ in record.processed] == ["in-0", "in-1", "in-2", "in-3"]
    assert record.timers == (("/t", 10.5), ("/x1", 1e9), ("/x2", 1e9), ("/x3", 1e9))
    assert [entry.event.id for entry in record.outbox] == ["self-2", "self-3", "self-4", "self-5"]
    assert [entry.seq for entry in record.outbox] == sorted(entry.seq for entry in record.outbox)
    assert [(s.parent_id, s.child_id, s.context) for s in record.spawns] == [
        ("p", "child", {"n": 0}),
        ("p", "child", {"n": 1}),
    ]
    assert [(step["index"], step["event_kind"]) for step in record.trace] == [
        (3, "K3"),
        (4, "last"),
        (5, "appended"),
    ]
    relay_only = store.export_execution("child")
    assert relay_only is not None and relay_only.execution is None
    assert [entry.event.id for entry in relay_only.outbox] == ["c0", "c1", "c2", "c3"]
    assert not (relay_only.processed or relay_only.timers or relay_only.spawns)
    assert store.export_execution("nobody") is None
    store.close()


def test_import_into_a_fresh_schema_exports_the_same_record(
    harel_harness: PostgresHarness, other: PostgresHarness
) -> None:
    source = PostgresStore.open(replace(harel_harness.options, trace_max=3))
    _populate(source)
    records = [source.export_execution(execution_id) for execution_id in ("p", "child")]
    destination = other.open_sync()
    destination.save(Execution(id="first", definition_id="d"))  # seqs exist already
    destination.commit(Execution(id="z", definition_id="d"), [("z", Event(id="z1", kind="Z"))])
    for record in records:
        assert record is not None
        destination.import_execution(record)
    again = [destination.export_execution(execution_id) for execution_id in ("p", "child")]
    for before, after in zip(records, again, strict=True):
        assert before is not None and after is not None
        assert record_digest(after) == record_digest(before)
        assert after.updated_at == before.updated_at
        assert after.processed == before.processed and after.timers == before.timers
    imported = again[0]
    assert imported is not None and imported.execution is not None
    assert imported.execution.version == 6
    # new seqs, after the existing ones, in record order
    seqs = [entry.seq for entry in destination.pending_outbox()]
    assert seqs == sorted(seqs)
    assert [e.event.id for e in destination.pending_outbox()][:1] == ["z1"]
    # the store carries on: marks prune by their times, timers are due, the ring continues
    assert destination.due_timers(10.5) == [("p", "/t", 10.5)]
    assert destination.is_processed("p", "in-2")
    exe = imported.execution
    destination.commit(exe, [], trace=_step("after"))
    assert exe.version == 7
    assert [step["index"] for step in destination.read_trace("p")] == [4, 5, 6]
    for entry in destination.pending_spawns():
        destination.ack_spawn(entry.seq)
    assert destination.pending_spawns() == []
    source.close()


def test_import_of_a_stored_execution_writes_nothing(
    harel_harness: PostgresHarness, store: PostgresStore
) -> None:
    exe = Execution(id="a", definition_id="d")
    store.commit(exe, [(None, Event(id="e", kind="K"))], timers=[TimerOp.schedule("/t", 1.0)])
    before = harel_harness.footprint("a")
    record = store.export_execution("a")
    assert record is not None
    clone = replace(
        record,
        processed=(("new", 1.0),),
        outbox=(*record.outbox, OutboxEntry(99, "a", Event(id="more", kind="K"))),
        spawns=(SpawnEntry(1, "a", "kid", "/r", {}),),
    )
    with pytest.raises(ExecutionAlreadyExists):
        store.import_execution(clone)
    assert harel_harness.footprint("a") == before
    assert store.pending_spawns() == []


def test_relay_only_record_appends_without_condition(store: PostgresStore) -> None:
    entries = tuple(OutboxEntry(n, "kid", Event(id=f"e{n}", kind="K")) for n in (5, 2))
    record = ExecutionRecord(execution_id="kid", execution=None, outbox=entries)
    store.import_execution(record)
    store.import_execution(record)
    assert [e.event.id for e in store.pending_outbox()] == ["e2", "e5", "e2", "e5"]
    assert store.load("kid") is None


def test_invalid_record_is_refused_before_anything_is_sent(
    harel_harness: PostgresHarness, store: PostgresStore
) -> None:
    stray = OutboxEntry(1, "elsewhere", Event(id="e", kind="K"))
    record = ExecutionRecord(
        execution_id="a", execution=Execution(id="a", definition_id="d", version=1), outbox=(stray,)
    )
    with pytest.raises(InvalidArgument):
        store.import_execution(record)
    assert harel_harness.footprint("a") == [] and store.pending_outbox() == []


def test_two_importers_racing_one_wins(
    store: PostgresStore, harel_harness: PostgresHarness, together: Any
) -> None:
    exe = Execution(id="r", definition_id="d", version=3)
    record = ExecutionRecord(
        execution_id="r",
        execution=exe,
        updated_at=12.5,
        outbox=(OutboxEntry(1, "r", Event(id="e", kind="K")),),
        trace=({"index": 0, "event_kind": "K"},),
    )
    stores = [harel_harness.open_sync() for _ in range(4)]
    outcomes = together([partial(target.import_execution, record) for target in stores])
    assert sorted(type(outcome).__name__ for outcome in outcomes) == [
        "ExecutionAlreadyExists",
        "ExecutionAlreadyExists",
        "ExecutionAlreadyExists",
        "NoneType",
    ]
    assert [e.event.id for e in store.pending_outbox()] == ["e"]
    assert [step["index"] for step in store.read_trace("r")] == [0]


@pytest.mark.anyio
async def test_async_export_import(astore: AsyncPostgresStore, other: PostgresHarness) -> None:
    exe = Execution(id="x", definition_id="d")
    await astore.commit(exe, [(None, Event(id="e", kind="K"))], processed_event_id="in")
    record = await astore.export_execution("x")
    assert record is not None
    destination = await other.open_async()
    try:
        await destination.import_execution(record)
        with pytest.raises(ExecutionAlreadyExists):
            await destination.import_execution(record)
        again = await destination.export_execution("x")
        assert again is not None and record_digest(again) == record_digest(record)
    finally:
        await destination.close()


# -- the state-only commit (a plain CAS UPDATE) -------------------------------------------------


def test_state_only_commit_calls_no_function(
    store: PostgresStore, harel_harness: PostgresHarness
) -> None:
    """With ``harel_commit`` gone, a state-only commit still works (it is the plain CAS
    ``UPDATE``), bumps the version and the summary, and reports a lost CAS's stored version;
    a commit with side writes needs the function."""
    exe = Execution(id="s", definition_id="d")
    store.save(exe)
    signature = (
        "harel_commit(text, text, text, text, text, text, text, bigint, double precision, text, "
        "text[], text[], text[], text[], text[], text[], double precision[], text[], text, bigint, "
        "text, integer, text[], double precision[], integer[], boolean[], text, integer)"
    )
    schema = _quoted(harel_harness.schema)
    with harel_harness.connect(autocommit=True) as conn:
        conn.execute(f"ALTER FUNCTION {schema}.{signature} RENAME TO harel_commit_away")
        try:
            exe.status = Status.DONE
            exe.outcome = "ok"
            store.save(exe)
            store.save(exe)
            (summary,) = store.list_executions(status=[Status.DONE]).items
            assert (summary.version, summary.outcome) == (3, "ok")
            with pytest.raises(StoreConflict) as info:
                store.save(Execution(id="s", definition_id="d", version=1))
            assert (info.value.expected, info.value.found) == (1, 3)
            with pytest.raises(StoreCorrupted):
                store.commit(exe, [], processed_event_id="e")
            assert exe.version == 3
        finally:
            away = signature.replace("harel_commit", "harel_commit_away")
            conn.execute(f"ALTER FUNCTION {schema}.{away} RENAME TO harel_commit")
    store.purge("s")
    with pytest.raises(StoreConflict) as info:
        store.save(exe)
    assert info.value.found is None


def test_state_only_commit_losing_a_race_reports_the_winner(
    store: PostgresStore, harel_harness: PostgresHarness
) -> None:
    """A CAS that waits for a concurrent writer of the row and loses reports the version that
    writer committed (a locking read), not the one of its own snapshot."""
    exe = Execution(id="race", definition_id="d")
    store.save(exe)
    name = f"harel-race-{time.monotonic_ns()}"
    with harel_harness.connect() as winner:
        winner.execute(
            f"UPDATE {_quoted(harel_harness.schema)}.executions SET version = 2 WHERE id = 'race'"
        )
        outcome: list[BaseException] = []
        connect = {**harel_harness.options.connect, "application_name": name}
        loser = PostgresStore.open(replace(harel_harness.options, connect=connect))

        def lose() -> None:
            try:
                loser.save(exe)
            except BaseException as exc:
                outcome.append(exc)

        thread = threading.Thread(target=lose)
        thread.start()
        _wait_until_blocked(harel_harness, name)
        winner.commit()
        thread.join()
        loser.close()
    (error,) = outcome
    assert isinstance(error, StoreConflict) and (error.expected, error.found) == (1, 2)
    assert exe.version == 1


def _race(
    harness: PostgresHarness, rival_sql: tuple[str, ...], commit: Any
) -> BaseException | None:
    """Run ``rival_sql`` in a transaction that holds the row lock, start ``commit(store)`` on
    another connection, wait until it blocks on that lock, commit the rival: what the commit
    raised (``None``: it applied)."""
    name = f"harel-race-{time.monotonic_ns()}"
    outcome: list[BaseException | None] = []
    with harness.connect() as rival:
        for text in rival_sql:
            rival.execute(text.replace("{schema}", _quoted(harness.schema)))
        connect = {**harness.options.connect, "application_name": name}
        loser = PostgresStore.open(replace(harness.options, connect=connect))

        def run() -> None:
            try:
                commit(loser)
                outcome.append(None)
            except BaseException as exc:
                outcome.append(exc)

        thread = threading.Thread(target=run)
        thread.start()
        _wait_until_blocked(harness, name)
        rival.commit()
        thread.join()
        loser.close()
    (error,) = outcome
    return error


def test_a_commit_of_the_same_event_behind_a_rival_is_already_processed(
    store: PostgresStore, harel_harness: PostgresHarness
) -> None:
    """Two deliveries of one event on one version (READ COMMITTED): the second waits for the
    first's row lock; its snapshot predates the first's mark, but its CAS re-checks the version
    on the newest row, misses, and the miss's own read finds the mark: nothing written."""
    exe = Execution(id="race", definition_id="d")
    store.commit(exe, [])
    copy = store.load("race")
    assert copy is not None
    rival = (
        "UPDATE {schema}.executions SET version = 2 WHERE id = 'race'",
        "INSERT INTO {schema}.processed_events VALUES ('race', 'e', 1.0)",
    )
    error = _race(
        harel_harness,
        rival,
        lambda s: s.commit(
            copy, [(None, Event(kind="K"))], processed_event_id="e", trace=_step("X")
        ),
    )
    assert isinstance(error, AlreadyProcessed) and (error.expected, error.found) == (1, 2)
    assert copy.version == 1
    assert store.pending_outbox() == [] and store.read_trace("race") == []


@pytest.mark.parametrize("effects", [{}, {"trace": _step("X")}], ids=["state-only", "function"])
def test_a_fenced_commit_behind_a_rewrite_of_its_version_is_refused(
    store: PostgresStore, harel_harness: PostgresHarness, effects: dict[str, Any]
) -> None:
    """A rival that rewrote the row at the same version (another receipt, as a purge and
    re-create does) while this commit waited for its lock: the CAS re-checks the receipt on the
    newest row and misses (``StoreConflict`` with the same version), nothing written."""
    exe = Execution(id="race", definition_id="d")
    store.commit(exe, [])  # exe is now fenced by its receipt of version 1
    rival = ("UPDATE {schema}.executions SET receipts[2] = 'another' WHERE id = 'race'",)
    error = _race(harel_harness, rival, lambda s: s.commit(exe, [], **effects))
    assert isinstance(error, StoreConflict) and not isinstance(error, AlreadyProcessed)
    assert (error.expected, error.found, exe.version) == (1, 1, 1)
    assert store.read_trace("race") == []


def _quoted(schema: str) -> str:
    return '"' + schema.replace('"', '""') + '"'


def _wait_until_blocked(harness: PostgresHarness, application_name: str) -> None:
    """Poll the server until a backend of ``application_name`` waits for a lock."""
    deadline = time.monotonic() + 30
    with harness.connect(autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE application_name = %s AND wait_event_type = 'Lock'",
                (application_name,),
            ).fetchone()
            if row and row[0]:
                return
            time.sleep(0.01)
    raise AssertionError("the racing commit never waited for the row lock")
