"""What only the SQLite backend can show: its file layout and upgrade, query plans (indexes
asserted with EXPLAIN QUERY PLAN), statements per commit, transaction safety when a statement
fails, SQLite's error codes mapped to typed errors, cancellation of the async twin, lock
handling, URLs and the harness.  The contract itself is the conformance kit's job."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from harel.model import Event, Execution, Status
from harel.store import TimerOp
from harel.store.common.listing import encode_cursor, listing_query
from harel.store.common.sql import SCHEMA_VERSION, Statement
from harel.store.common.sql.testing import (
    TABLES,
    VERSION_1,
    full_commit_args,
    raw,
    table_counts,
)
from harel.store.errors import (
    InvalidIdentifier,
    InvalidPayload,
    InvalidStoreURL,
    SchemaVersionError,
    StoreConflict,
    StoreCorrupted,
    StoreError,
    StoreUnavailable,
)
from harel_store_sqlite import AsyncSqliteStore, SqliteStore
from harel_store_sqlite._spec import parse_sqlite_url
from harel_store_sqlite.testing import SqliteHarness, harness_from_url


def connection(store: SqliteStore | AsyncSqliteStore) -> sqlite3.Connection:
    """The store's own connection (for PRAGMAs, EXPLAIN and test triggers)."""
    sync = store.store if isinstance(store, AsyncSqliteStore) else store
    assert sync._conn is not None
    return sync._conn


# -- schema --------------------------------------------------------------------------------------


def test_a_file_store_runs_in_wal_mode(store: SqliteStore, db_path: Path) -> None:
    conn = raw(db_path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_foreign_executions_table_is_refused(db_path: Path) -> None:
    conn = raw(db_path)
    conn.execute("CREATE TABLE executions (id TEXT PRIMARY KEY, data TEXT)")
    conn.close()
    with pytest.raises(SchemaVersionError, match="no harel_schema"):
        SqliteStore(str(db_path))


def version_1_file(path: Path) -> Execution:
    """A version-1 database holding one DONE execution with a mark, an outbox row, a trace."""
    exe = Execution(id="old", definition_id="d", status=Status.DONE, version=1)
    conn = raw(path)
    conn.executescript(VERSION_1)
    conn.execute(
        "INSERT INTO executions VALUES ('old', 'd', 'DONE', NULL, NULL, NULL, 1, ?)",
        (exe.model_dump_json(),),
    )
    conn.execute("INSERT INTO processed_events VALUES ('old', 'ev-old')")
    event = Event(kind="K").model_dump_json()
    conn.execute("INSERT INTO outbox (target_id, event) VALUES ('old', ?)", (event,))
    conn.execute("INSERT INTO trace VALUES ('old', 0, '{\"a\": 1}')")
    conn.close()
    return exe


def test_a_version_1_file_is_upgraded_in_place(db_path: Path) -> None:
    exe = version_1_file(db_path)
    before = time.time()
    with SqliteStore(str(db_path)) as store:
        assert store.load("old") == exe
        assert store.is_processed("old", "ev-old")
        summary = store.list_executions().items[0]
        assert summary.updated_at is None  # unknown for rows written by version 1
        # marks of unknown age count from the upgrade: pruning "before now" keeps them
        assert store.prune_processed(before - 1) == 0
        assert store.prune_processed(time.time() + 1) == 1
        assert store.purge("old") is True
        assert table_counts(db_path) == dict.fromkeys(TABLES, 0)
    conn = raw(db_path)
    assert conn.execute("SELECT version FROM harel_schema").fetchall() == [(SCHEMA_VERSION,)]
    indexes = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    assert {"processed_events_age", "outbox_target", "spawns_parent"} <= indexes
    conn.close()
    SqliteStore(str(db_path)).close()  # reopening an upgraded file changes nothing


def test_concurrent_openers_upgrade_once(db_path: Path) -> None:
    version_1_file(db_path)
    barrier = threading.Barrier(6)
    outcomes: list[object] = []

    def opener() -> None:
        barrier.wait()
        try:
            with SqliteStore(str(db_path), busy_timeout_ms=20_000) as store:
                outcomes.append(store.load("old") is not None)
        except BaseException as exc:  # reported below
            outcomes.append(exc)

    threads = [threading.Thread(target=opener) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert outcomes == [True] * 6
    conn = raw(db_path)
    columns = [row[1] for row in conn.execute("PRAGMA table_info(processed_events)")]
    assert columns == ["execution_id", "event_id", "processed_at"]
    conn.close()


def _writer_holding_the_file(path: Path) -> sqlite3.Connection:
    """A rollback-journal file with a writer in an open write transaction (a RESERVED lock)."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("CREATE TABLE other (x)")
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT INTO other VALUES (1)")
    return conn


def test_switching_a_busy_file_to_wal_waits_for_the_writer(db_path: Path) -> None:
    # SQLite refuses the WAL switch at once (no busy handler) while another connection holds
    # a write lock; the open waits for it like any busy wait instead of failing at once
    writer = _writer_holding_the_file(db_path)
    threading.Timer(0.2, writer.execute, args=("COMMIT",)).start()
    with SqliteStore(str(db_path), busy_timeout_ms=20_000) as store:
        assert connection(store).execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    writer.close()


def test_switching_to_wal_gives_up_after_the_busy_timeout(db_path: Path) -> None:
    writer = _writer_holding_the_file(db_path)
    try:
        with pytest.raises(StoreUnavailable, match="locked"):
            SqliteStore(str(db_path), busy_timeout_ms=100)
    finally:
        writer.execute("COMMIT")
        writer.close()


def test_memory_store_has_no_wal_and_works() -> None:
    with SqliteStore(":memory:") as s:
        assert connection(s).execute("PRAGMA journal_mode").fetchone()[0] == "memory"
        exe = Execution(definition_id="d")
        s.save(exe)
        assert s.load(exe.id) == exe


def test_closed_store_raises_store_error(db_path: Path) -> None:
    s = SqliteStore(str(db_path))
    s.close()
    s.close()  # idempotent
    with pytest.raises(StoreError, match="closed"):
        s.load("x")


# -- query plans ---------------------------------------------------------------------------------


def explain(store: SqliteStore, statement: Statement) -> list[str]:
    rows = connection(store).execute("EXPLAIN QUERY PLAN " + statement.sql, statement.params)
    return [row[3] for row in rows.fetchall()]


def first_statement(operation: Any) -> Statement:
    statement = next(operation)
    operation.close()
    assert isinstance(statement, Statement)
    return statement


def assert_index_served(details: list[str], table: str) -> None:
    text = " | ".join(details)
    for detail in details:
        # a full SCAN of the table (with no index) would read every row
        assert not (detail.startswith(f"SCAN {table}") and "INDEX" not in detail), text
    assert "INDEX" in text or "PRIMARY KEY" in text, text


@pytest.fixture
def populated(store: SqliteStore) -> SqliteStore:
    conn = connection(store)
    conn.execute("BEGIN")
    for i in range(400):
        conn.execute(
            "INSERT INTO executions (id, definition_id, status, outcome, active_path, parent_id,"
            " version, data, updated_at) VALUES (?, ?, ?, NULL, NULL, ?, 1, '{}', ?)",
            (f"e{i:04d}", "ab"[i % 2], list(Status)[i % 7].value, None if i % 3 else "p", i),
        )
        conn.execute(
            "INSERT INTO timers VALUES (?, 'p', ?, ?)", (f"e{i:04d}", float(i), repr(float(i)))
        )
        conn.execute("INSERT INTO processed_events VALUES (?, ?, ?)", (f"e{i:04d}", "ev", i))
        conn.execute("INSERT INTO outbox (target_id, event) VALUES (?, '{}')", (f"e{i:04d}",))
        conn.execute(
            "INSERT INTO spawns (parent_id, child_id, root_path, context) "
            "VALUES (?, 'c', '', '{}')",
            (f"e{i:04d}",),
        )
    conn.execute("COMMIT")
    conn.execute("ANALYZE")
    return store


@pytest.mark.parametrize(
    ("operation", "table", "index"),
    [
        ("due_timers", "timers", "timers_due"),
        ("prune_processed", "processed_events", "processed_events_age"),
        ("list_leases", "work", "work_ready"),
    ],
)
def test_sweeps_walk_their_index_without_sorting(
    populated: SqliteStore, operation: str, table: str, index: str
) -> None:
    """``due_timers(now, limit)``, each ``prune_processed`` batch and ``list_leases(now,
    limit)`` (one range per priority tier): a range scan, no sort."""
    plan = getattr(populated._plan, operation)(10.0, 5)
    details = explain(populated, first_statement(plan))
    assert_index_served(details, table)
    assert any(index in d for d in details), details
    assert not any("TEMP B-TREE" in d for d in details), details


def test_relay_reads_walk_the_seq_key_in_order(populated: SqliteStore) -> None:
    for operation, table in (
        (populated._plan.pending_outbox(10), "outbox"),
        (populated._plan.pending_spawns(10), "spawns"),
    ):
        details = explain(populated, first_statement(operation))
        # the seq is the rowid: an in-order walk that stops after LIMIT rows, no sort
        assert details == [f"SCAN {table}"], details


def test_every_purge_delete_is_index_served(populated: SqliteStore) -> None:
    operation = populated._plan.purge("e0007", True)
    assert next(operation) == Statement("BEGIN IMMEDIATE")
    expected = {
        "processed_events": "PRIMARY KEY",
        "timers": "PRIMARY KEY",
        "outbox": "outbox_target",
        "spawns": "spawns_parent",
        "trace": "PRIMARY KEY",
        "work": "PRIMARY KEY",
        "executions": "sqlite_autoindex_executions_1",
    }
    for table, index in expected.items():
        statement = operation.send(None)
        assert isinstance(statement, Statement)
        assert statement.sql.startswith(f"DELETE FROM {table} ")
        details = explain(populated, statement)
        own = [d for d in details if d.split()[1:2] == [table]]  # SEARCH/SCAN <table>
        assert any(index in d for d in own), details
        assert_index_served(details, table)
    operation.close()


@pytest.mark.parametrize(
    ("filters", "index"),
    [
        ({"definition_id": "a"}, "executions_definition"),
        ({"status": [Status.DONE]}, "executions_status"),
        ({"definition_id": "a", "status": [Status.DONE]}, "executions_definition_status"),
        (
            {"definition_id": "a", "status": [Status.DONE, Status.FAILED]},
            "executions_definition_status",
        ),
        ({"status": [Status.DONE, Status.RUNNING, Status.FAILED]}, "executions_status"),
        ({"roots_only": True}, "executions_roots"),
        ({"roots_only": True, "status": [Status.DONE]}, "executions_roots_status"),
        (
            {"roots_only": True, "status": [Status.DONE, Status.FAILED]},
            "executions_roots_status",
        ),
        ({"roots_only": True, "definition_id": "a"}, "executions_roots_definition"),
        (
            {"roots_only": True, "definition_id": "a", "status": [Status.DONE]},
            "executions_roots_definition_status",
        ),
    ],
)
@pytest.mark.parametrize("cursor", [None, encode_cursor("e0100")])
def test_listing_is_index_served(
    populated: SqliteStore, filters: dict[str, Any], index: str, cursor: str | None
) -> None:
    operation = populated._plan.list_executions(
        listing_query(
            status=filters.get("status"),
            definition_id=filters.get("definition_id"),
            roots_only=filters.get("roots_only", False),
            limit=10,
            cursor=cursor,
        )
    )
    details = explain(populated, first_statement(operation))
    assert_index_served(details, "executions")
    assert any(index in d for d in details), details


# -- statements per commit -----------------------------------------------------------------------


def test_a_commit_is_one_transaction_of_one_statement_per_row(store: SqliteStore) -> None:
    executed: list[str] = []
    connection(store).set_trace_callback(executed.append)
    exe = Execution(id="e", definition_id="d")
    store.commit(*full_commit_args(exe, "a"))
    verbs = [sql.split()[0] for sql in executed]
    # BEGIN, the CAS, 2 outbox rows, the mark, the spawn, the timer, trace append + trim, the
    # three work rows it touches (its own, the target's, the untargeted group's), COMMIT
    assert verbs == ["BEGIN", *["INSERT"] * 7, "DELETE", *["INSERT"] * 3, "COMMIT"]
    executed.clear()
    store.load("e")
    store.ack_outbox(1)
    assert [sql.split()[0] for sql in executed] == ["SELECT", "DELETE"]  # one statement each


def test_a_kept_copy_sends_the_cas_its_summary_allows(store: SqliteStore) -> None:
    """The copy this store wrote sends the document-only CAS while its summary is the stored
    one; a changed summary column takes the narrow CAS (unindexed ones) or the narrow then
    the full one (an indexed one), each an autocommit statement, and what is read back is
    what was committed."""
    exe = Execution(id="e", definition_id="d")
    store.save(exe)
    executed: list[str] = []
    connection(store).set_trace_callback(executed.append)
    exe.active_path, exe.outcome = "Main.A", "half"  # not indexed: the narrow CAS applies
    store.commit(exe, [])
    assert len(executed) == 1 and executed[0].startswith("UPDATE executions SET outcome")
    executed.clear()
    exe.status = Status.RUNNING  # indexed: the narrow CAS misses, the full one applies
    store.commit(exe, [])
    assert [sql.split(" SET ")[0] for sql in executed] == ["UPDATE executions"] * 2
    assert "status = " in executed[1].split(" WHERE ")[0]
    executed.clear()
    exe.context["n"] = 1  # the summary is the stored one again: the document-only CAS
    store.commit(exe, [])
    assert len(executed) == 1 and executed[0].startswith("UPDATE executions SET version")
    loaded = store.load("e")
    assert loaded == exe and loaded.version == 4
    summary = store.list_executions(status=[Status.RUNNING]).items[0]
    assert (summary.active_path, summary.outcome, summary.version) == ("Main.A", "half", 4)


def test_a_failing_first_statement_is_mapped_like_any_other(store: SqliteStore) -> None:
    """The state-only statement the store runs itself hands its error to the plan: the same
    typed error as a commit the plan runs whole, and ``exe.version`` restored."""
    exe = Execution(id="e", definition_id="d")
    store.save(exe)
    connection(store).execute("PRAGMA query_only = ON")
    errors = []
    for args in (([],), ([], "ev")):  # state-only (the store's first statement), then the plan's
        exe.context["n"] = len(errors)
        with pytest.raises(StoreError) as raised:
            store.commit(exe, *args)
        errors.append(type(raised.value))
        assert exe.version == 1
    assert errors[0] is errors[1]
    connection(store).execute("PRAGMA query_only = OFF")
    store.commit(exe, [])
    assert exe.version == 2 and store.load("e") == exe


def test_a_state_only_commit_is_one_update_rewriting_no_index(store: SqliteStore) -> None:
    exe = Execution(id="e", definition_id="d")
    store.save(exe)
    executed: list[str] = []
    connection(store).set_trace_callback(executed.append)
    exe.context["n"] = 1
    store.commit(exe, [])
    # no BEGIN/COMMIT: one autocommit statement, naming no indexed column in SET; the copy
    # this store wrote, with its summary unchanged, sets and checks no summary column at all
    assert len(executed) == 1 and executed[0].startswith("UPDATE executions SET version")
    assigned, conditions = executed[0].split(" WHERE ")
    summary = ("status", "definition_id", "parent_id", "outcome", "active_path")
    assert not any(f"{c} =" in assigned for c in summary)
    assert not any(c in conditions for c in summary)
    executed.clear()
    loaded = store.load("e")  # a loaded copy: the narrow CAS checks the indexed columns
    assert loaded is not None
    loaded.context["n"] = 2
    executed.clear()
    store.commit(loaded, [])
    assert len(executed) == 1 and executed[0].startswith("UPDATE executions SET outcome")
    assigned = executed[0].split(" WHERE ")[0]
    assert not any(f"{c} =" in assigned for c in ("status", "definition_id", "parent_id"))
    assert "AND status = " in executed[0]
    exe = loaded
    executed.clear()
    exe.status = Status.RUNNING  # an indexed column changes: the narrow CAS misses, the full
    store.commit(exe, [], "ev")  # one writes it, inside the side writes' transaction
    verbs = [sql.split()[0] for sql in executed]
    assert verbs == ["BEGIN", "UPDATE", "UPDATE", "INSERT", "COMMIT"]
    assert "status = " in executed[2].split(" WHERE ")[0]
    assert store.list_executions(status=[Status.RUNNING]).items[0].version == 4
    stale = store.load("e")
    assert stale is not None
    store.commit(exe, [])
    stale.context["lost"] = True
    with pytest.raises(StoreConflict) as info:  # both CAS forms miss: the found version
        store.commit(stale, [])
    assert info.value.found == 5 and stale.version == 4


# -- failed statements leave nothing -------------------------------------------------------------

POISON = (
    "CREATE TRIGGER poison BEFORE INSERT ON outbox WHEN NEW.event LIKE '%poison%' "
    "BEGIN SELECT RAISE(ABORT, 'poisoned row'); END"
)


def test_failed_commit_leaves_nothing_and_next_commit_publishes_no_leftovers(
    store: SqliteStore, db_path: Path
) -> None:
    base = Execution(id="old", definition_id="d")
    store.save(base)
    before = table_counts(db_path)
    raw(db_path).execute(POISON)
    poisoned = [(None, Event(id="fine", kind="Fine")), (None, Event(id="x", kind="poison"))]

    torn = Execution(id="torn", definition_id="d")
    with pytest.raises(StoreError, match="poisoned row"):
        store.commit(torn, poisoned, "torn-in", (TimerOp.schedule("p", 1.0),), (), {"a": 1})
    assert torn.version == 0
    with pytest.raises(StoreError, match="poisoned row"):
        store.commit(base, poisoned, "upd-in")
    assert base.version == 1
    assert table_counts(db_path) == before
    assert not connection(store).in_transaction

    other = Execution(id="other", definition_id="d")
    store.commit(other, [(None, Event(id="ok", kind="Ok"))], "ok-in")
    assert [e.event.id for e in store.pending_outbox()] == ["ok"]
    assert store.load("torn") is None and not store.is_processed("torn", "torn-in")
    assert store.load("old") == base and store.due_timers(10.0) == []


@pytest.mark.anyio
async def test_async_failed_commit_leaves_nothing(astore: AsyncSqliteStore, db_path: Path) -> None:
    raw(db_path).execute(POISON)
    torn = Execution(id="torn", definition_id="d")
    with pytest.raises(StoreError, match="poisoned row"):
        await astore.commit(torn, [(None, Event(kind="poison"))], "in")
    assert torn.version == 0
    other = Execution(id="other", definition_id="d")
    await astore.commit(other, [(None, Event(id="ok", kind="Ok"))])
    assert [e.event.id for e in await astore.pending_outbox()] == ["ok"]
    assert table_counts(db_path) == {**dict.fromkeys(TABLES, 0), "executions": 1, "outbox": 1}


# -- SQLite's failures as typed errors -----------------------------------------------------------


def test_disk_full_is_retryable_and_leaves_the_store_usable(store: SqliteStore) -> None:
    exe = Execution(id="e", definition_id="d")
    store.save(exe)
    conn = connection(store)
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages}")
    exe.context["big"] = "x" * 200_000
    with pytest.raises(StoreUnavailable, match="full") as info:
        store.commit(exe, [(None, Event(kind="K"))])
    assert info.value.retryable and exe.version == 1 and not conn.in_transaction
    conn.execute("PRAGMA max_page_count = 1073741823")
    store.commit(exe, [(None, Event(kind="K"))])
    assert exe.version == 2 and len(store.pending_outbox()) == 1


@pytest.mark.anyio
async def test_a_file_that_is_not_a_database_is_reported_as_corrupted(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_bytes(b"these are my notes, not a database\n" * 200)
    with pytest.raises(StoreCorrupted, match=r"notes\.db"):
        SqliteStore(str(path))
    with pytest.raises(StoreCorrupted, match=r"notes\.db"):
        await AsyncSqliteStore.open(str(path))


def test_a_damaged_document_is_reported_naming_the_execution(
    store: SqliteStore, db_path: Path
) -> None:
    store.save(Execution(id="ok", definition_id="d"))
    store.save(Execution(id="bad", definition_id="d"))
    raw(db_path).execute("UPDATE executions SET data = '{\"truncated' WHERE id = 'bad'")
    with pytest.raises(StoreCorrupted, match="'bad'"):
        store.load("bad")
    assert store.load("ok") is not None


def test_driver_errors_never_escape(store: SqliteStore) -> None:
    with pytest.raises(InvalidIdentifier):
        store.load("lone \ud800 surrogate")
    with pytest.raises(InvalidIdentifier):
        store.is_processed("e", "\udfff")
    with pytest.raises(TypeError):
        store.load(["not", "an", "id"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="seq"):
        store.ack_outbox(2**63)
    with pytest.raises(ValueError, match="now"):
        store.due_timers(10**400)
    exe = Execution(id="e", definition_id="d", context={"n": 2**64})
    with pytest.raises(InvalidPayload):
        store.save(exe)
    assert exe.version == 0 and store.load("e") is None


# -- cancellation of the async twin (issue: a cancelled commit left BEGIN IMMEDIATE open) --------


@pytest.mark.anyio
async def test_cancelled_commits_leave_no_transaction_and_a_telling_version(
    astore: AsyncSqliteStore, db_path: Path
) -> None:
    """The issue's reproduction, at every early point: cancel ``commit`` after 0..4
    ``sleep(0)``; afterwards no transaction is open, another connection commits at once,
    and ``exe.version`` says whether the step is stored; a retry never doubles it."""
    other = SqliteStore(str(db_path), busy_timeout_ms=0)  # would fail at once on a held lock
    exe = Execution(id="victim", definition_id="d", context={"n": 0})
    landed = 0
    for attempt in range(120):
        version = exe.version
        exe.context["n"] = attempt
        task = asyncio.ensure_future(
            astore.commit(exe, [(None, Event(id=f"out-{attempt}", kind="K"))], f"in-{attempt}")
        )
        for _ in range(attempt % 5):
            await asyncio.sleep(0)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        stored = other.load("victim")
        if exe.version == version + 1:
            landed += 1
            assert stored is not None and stored.version == exe.version
            assert stored.context["n"] == attempt
        else:
            assert exe.version == version
            assert (stored.version if stored else 0) == version
            assert not other.is_processed("victim", f"in-{attempt}")
        assert not connection(astore).in_transaction
        other.save(Execution(id=f"bystander-{attempt}", definition_id="d"))
    assert len(other.pending_outbox()) == landed  # nothing doubled, nothing lost
    await astore.commit(exe, [])  # still usable
    other.close()


@pytest.mark.anyio
async def test_cancel_during_the_transaction_waits_for_its_outcome(
    astore: AsyncSqliteStore, db_path: Path
) -> None:
    """Cancelled while the commit's transaction is open, the caller gets CancelledError only
    once the commit has finished: here it landed, so ``exe.version`` is bumped."""
    entered, release = threading.Event(), threading.Event()

    def block() -> int:
        entered.set()
        release.wait(timeout=30)
        return 1

    conn = connection(astore)
    conn.create_function("harel_test_block", 0, block)
    conn.execute(
        "CREATE TEMP TRIGGER pause AFTER INSERT ON outbox BEGIN SELECT harel_test_block(); END"
    )
    victim = Execution(id="victim", definition_id="d")
    task = asyncio.ensure_future(astore.commit(*full_commit_args(victim, "v")))
    await asyncio.to_thread(entered.wait, 30)  # inside the transaction, not committed
    task.cancel()
    await asyncio.sleep(0.01)
    assert not task.done()  # waiting for the outcome, not abandoning the transaction
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert victim.version == 1
    conn.execute("DROP TRIGGER temp.pause")
    assert (await astore.load("victim")) == victim
    assert len(await astore.pending_outbox()) == 2


# -- concurrency ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_async_conflicting_tasks_losers_leave_nothing(astore: AsyncSqliteStore) -> None:
    await astore.save(Execution(id="hot", definition_id="d"))

    async def contender(i: int) -> str:
        copy = await astore.load("hot")
        assert copy is not None
        await asyncio.sleep(0)  # let every contender load version 1 first
        copy.context["winner"] = i
        try:
            await astore.commit(*full_commit_args(copy, f"c{i}"))
        except StoreConflict as exc:
            assert (exc.expected, exc.found, copy.version) == (1, 2, 1)
            return "lost"
        return f"c{i}"

    results = await asyncio.gather(*(contender(i) for i in range(20)))
    winners = [r for r in results if r != "lost"]
    assert len(winners) == 1
    winner = winners[0]
    assert {e.event.id for e in await astore.pending_outbox()} == {f"{winner}-out", f"{winner}-t"}
    assert [s.child_id for s in await astore.pending_spawns()] == [f"{winner}-child"]


# -- locks ---------------------------------------------------------------------------------------


# -- URLs and knobs ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "path", "knobs"),
    [
        ("sqlite:///relative.db", "relative.db", {}),
        ("sqlite:///dir/rel.db", "dir/rel.db", {}),
        ("sqlite:////abs/path.db", "/abs/path.db", {}),
        ("sqlite:////abs/with%20space.db", "/abs/with space.db", {}),
        ("sqlite:///:memory:", ":memory:", {}),
        ("sqlite://:memory:", ":memory:", {}),
        (
            "sqlite:///x.db?busy_timeout_ms=250&synchronous=normal&trace_max=7",
            "x.db",
            {"busy_timeout_ms": 250, "synchronous": "NORMAL", "trace_max": 7},
        ),
    ],
)
def test_url_forms(url: str, path: str, knobs: dict[str, Any]) -> None:
    assert parse_sqlite_url(url) == (path, knobs)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("sqlite:///x.db?cache=big", "cache"),
        ("sqlite:///x.db?busy_timeout_ms=soon", "busy_timeout_ms"),
        ("sqlite:///x.db?busy_timeout_ms=-1", "busy_timeout_ms"),
        ("sqlite:///x.db?synchronous=OFF", "synchronous"),
        ("postgresql:///x.db", "not a sqlite"),
        ("sqlite://host/x.db", "host"),
        ("sqlite://", "no database"),
        ("sqlite:///", "no database"),
        ("x.db", "not a store URL"),
    ],
)
def test_bad_urls(url: str, message: str) -> None:
    with pytest.raises(InvalidStoreURL, match=message):
        SqliteStore.from_url(url)


def test_from_url_relative_absolute_and_knobs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with SqliteStore.from_url("sqlite:///rel.db?busy_timeout_ms=1234&synchronous=NORMAL") as s:
        assert connection(s).execute("PRAGMA busy_timeout").fetchone()[0] == 1234
        assert connection(s).execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    assert (tmp_path / "rel.db").exists()
    target = tmp_path / "sub" / "abs.db"
    target.parent.mkdir()
    with SqliteStore.from_url(f"sqlite:///{target}", trace_max=5) as s:
        assert s.trace_max == 5
        assert connection(s).execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    with pytest.raises(InvalidStoreURL, match="colour"):
        SqliteStore.from_url("sqlite:///:memory:", colour="red")


def test_unopenable_path_is_reported(tmp_path: Path) -> None:
    with pytest.raises(StoreUnavailable, match="directory"):
        SqliteStore(str(tmp_path / "missing" / "x.db"))


@pytest.mark.anyio
async def test_async_from_url_and_close(tmp_path: Path) -> None:
    store = await AsyncSqliteStore.from_url(f"sqlite:///{tmp_path}/a.db?synchronous=EXTRA")
    exe = Execution(definition_id="d")
    await store.save(exe)
    assert (await store.load(exe.id)) == exe
    store.trace_max = 3
    assert store.store.trace_max == 3 and store.options.synchronous == "EXTRA"
    await store.close()
    await store.close()
    with pytest.raises(StoreError, match="closed"):
        await store.load(exe.id)
    with pytest.raises(InvalidStoreURL):
        await AsyncSqliteStore.from_url("sqlite:///a.db?nope=1")


# -- harness -------------------------------------------------------------------------------------


def test_harness_url_survives_awkward_paths(tmp_path: Path) -> None:
    folder = tmp_path / "a dir #1 ?x=%20"
    folder.mkdir()
    harness = SqliteHarness(folder / "kit.db", busy_timeout_ms=77)
    harness.open_sync().save(Execution(id="e", definition_id="d"))
    path, knobs = parse_sqlite_url(harness.url())
    assert Path(path) == (folder / "kit.db").resolve() and knobs["busy_timeout_ms"] == 77
    harness.destroy()


@pytest.mark.parametrize("url", ["sqlite:///:memory:", "sqlite:///{user}?busy_timeout_ms=77"])
def test_harness_from_url_uses_a_fresh_file(tmp_path: Path, url: str) -> None:
    user_file = tmp_path / "user.db"
    with SqliteStore(str(user_file)) as mine:
        mine.save(Execution(id="precious", definition_id="d"))
    workdir = tmp_path / "work"
    harness = harness_from_url(url.format(user=user_file), workdir)
    store = harness.open_sync()
    assert store.load("precious") is None
    assert harness.path.parent == workdir and harness.path != user_file
    if "77" in url:
        assert harness.options.busy_timeout_ms == 77
    harness.destroy()
    with SqliteStore(str(user_file)) as mine:
        assert mine.load("precious") is not None
