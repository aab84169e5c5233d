"""Behaviour specific to the SQLite backend: schema, files across processes, query plans,
transaction safety, concurrency, URLs and lock handling."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from harel.model import Event, Execution, Status
from harel.store import TimerOp
from harel.store.common import encode_cursor
from harel.store.errors import (
    InvalidPayload,
    InvalidStoreURL,
    SchemaVersionError,
    StoreConflict,
    StoreError,
    StoreUnavailable,
)
from harel_store_sqlite import AsyncSqliteStore, SqliteStore
from harel_store_sqlite import _plan as plan
from harel_store_sqlite._options import parse_sqlite_url
from harel_store_sqlite._schema import SCHEMA_VERSION
from harel_store_sqlite.testing import SqliteHarness, harness_from_url


def raw(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(str(path), isolation_level=None)


def table_counts(path: Path) -> dict[str, int]:
    conn = raw(path)
    try:
        tables = ("executions", "outbox", "processed_events", "timers", "spawns", "trace")
        return {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in tables}
    finally:
        conn.close()


def full_commit_args(exe: Execution, tag: str) -> tuple[Any, ...]:
    """A commit touching every table."""
    return (
        exe,
        [(None, Event(id=f"{tag}-out", kind="Out")), ("t", Event(id=f"{tag}-t", kind="T"))],
        f"{tag}-in",
        (TimerOp.schedule("p", 1.0),),
        ((f"{tag}-child", "r", {"k": tag}),),
        {"event_kind": tag},
    )


# -- schema --------------------------------------------------------------------------------------


def test_schema_version_row_written_at_creation(store: SqliteStore, db_path: Path) -> None:
    conn = raw(db_path)
    assert conn.execute("SELECT singleton, version FROM harel_schema").fetchall() == [
        (1, SCHEMA_VERSION)
    ]
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_reopen_keeps_data_and_schema(db_path: Path) -> None:
    exe = Execution(id="x", definition_id="d")
    with SqliteStore(str(db_path)) as first:
        first.save(exe)
    with SqliteStore(str(db_path)) as second:
        assert second.load("x") == exe
    assert table_counts(db_path)["executions"] == 1


@pytest.mark.anyio
async def test_wrong_schema_version_is_refused(store: SqliteStore, db_path: Path) -> None:
    store.close()
    conn = raw(db_path)
    conn.execute("UPDATE harel_schema SET version = ?", (SCHEMA_VERSION + 41,))
    conn.close()
    with pytest.raises(SchemaVersionError, match=f"version {SCHEMA_VERSION + 41}"):
        SqliteStore(str(db_path))
    with pytest.raises(SchemaVersionError):
        await AsyncSqliteStore.open(str(db_path))


def test_foreign_executions_table_is_refused(db_path: Path) -> None:
    conn = raw(db_path)
    conn.execute("CREATE TABLE executions (id TEXT PRIMARY KEY, data TEXT)")
    conn.close()
    with pytest.raises(SchemaVersionError, match="no harel_schema"):
        SqliteStore(str(db_path))


def test_memory_store_has_no_wal_and_works() -> None:
    with SqliteStore(":memory:") as s:
        assert s._conn is not None
        assert s._conn.execute("PRAGMA journal_mode").fetchone()[0] == "memory"
        exe = Execution(definition_id="d")
        s.save(exe)
        assert s.load(exe.id) == exe
    assert SqliteStore.capabilities.persistent and SqliteStore.capabilities.multi_process


def test_closed_store_raises_store_error(db_path: Path) -> None:
    s = SqliteStore(str(db_path))
    s.close()
    s.close()  # idempotent
    with pytest.raises(StoreError, match="closed"):
        s.load("x")


# -- other processes -----------------------------------------------------------------------------

CHILD_READ = """
import json, sys
from harel_store_sqlite import SqliteStore
s = SqliteStore(sys.argv[1])
exe = s.load("shared")
print(json.dumps({"version": exe.version, "context": exe.context,
                  "outbox": [e.event.kind for e in s.pending_outbox()],
                  "processed": s.is_processed("shared", "ev-1")}))
"""

CHILD_WRITE = """
import sys
from harel.model import Event
from harel.store import TimerOp
from harel_store_sqlite import SqliteStore
s = SqliteStore(sys.argv[1])
exe = s.load("shared")
exe.context["by"] = "child"
s.commit(exe, [(None, Event(kind="FromChild"))], "ev-2", (TimerOp.schedule("t", 2.5),))
s.close()
"""


def run_child(code: str, path: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code, str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_another_process_reads_and_writes_the_file(store: SqliteStore, db_path: Path) -> None:
    exe = Execution(id="shared", definition_id="d", context={"by": "parent"})
    store.commit(exe, [(None, Event(kind="FromParent"))], "ev-1")

    seen = json.loads(run_child(CHILD_READ, db_path))
    assert seen == {
        "version": 1,
        "context": {"by": "parent"},
        "outbox": ["FromParent"],
        "processed": True,
    }

    run_child(CHILD_WRITE, db_path)
    back = store.load("shared")
    assert back is not None and back.version == 2 and back.context == {"by": "child"}
    assert [e.event.kind for e in store.pending_outbox()] == ["FromParent", "FromChild"]
    assert store.is_processed("shared", "ev-2")
    assert store.due_timers(3.0) == [("shared", "t", 2.5)]
    with pytest.raises(StoreConflict) as info:  # our copy is stale now
        store.save(exe)
    assert (info.value.expected, info.value.found) == (1, 2)


# -- query plans ---------------------------------------------------------------------------------


def explain(store: SqliteStore, statement: plan.Statement) -> list[str]:
    assert store._conn is not None
    rows = store._conn.execute("EXPLAIN QUERY PLAN " + statement.sql, statement.params)
    return [row[3] for row in rows.fetchall()]


def assert_index_served(details: list[str], table: str) -> None:
    text = " | ".join(details)
    for detail in details:
        # a full SCAN of the table (with no index) would read every row
        assert not (detail.startswith(f"SCAN {table}") and "INDEX" not in detail), text
    assert "INDEX" in text or "PRIMARY KEY" in text, text


@pytest.fixture
def populated(store: SqliteStore) -> SqliteStore:
    assert store._conn is not None
    conn = store._conn
    conn.execute("BEGIN")
    for i in range(400):
        conn.execute(
            "INSERT INTO executions VALUES (?, ?, ?, NULL, NULL, ?, 1, '{}')",
            (f"e{i:04d}", "ab"[i % 2], list(Status)[i % 7].value, None if i % 3 else "p"),
        )
        conn.execute(
            "INSERT INTO timers VALUES (?, 'p', ?, ?)", (f"e{i:04d}", float(i), repr(float(i)))
        )
    conn.execute("COMMIT")
    conn.execute("ANALYZE")
    return store


def test_due_timers_uses_the_fire_at_index(populated: SqliteStore) -> None:
    details = explain(populated, plan.due_timers_statement(10.0, 5))
    assert_index_served(details, "timers")
    assert any("timers_due" in d for d in details), details
    assert not any("TEMP B-TREE" in d for d in details), details


def test_relay_reads_walk_the_seq_key_in_order(populated: SqliteStore) -> None:
    for statement, table in (
        (plan.pending_outbox_statement(10), "outbox"),
        (plan.pending_spawns_statement(10), "spawns"),
    ):
        details = explain(populated, statement)
        # the seq is the rowid: an in-order walk that stops after LIMIT rows, no sort
        assert details == [f"SCAN {table}"], details


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
    ],
)
@pytest.mark.parametrize("cursor", [None, encode_cursor("e0100")])
def test_listing_is_index_served(
    populated: SqliteStore, filters: dict[str, Any], index: str, cursor: str | None
) -> None:
    _query, statement = plan.listing_plan(
        status=filters.get("status"),
        definition_id=filters.get("definition_id"),
        roots_only=filters.get("roots_only", False),
        limit=10,
        cursor=cursor,
    )
    assert statement is not None
    details = explain(populated, statement)
    assert_index_served(details, "executions")
    assert any(index in d for d in details), details


def test_listing_values_are_bound_not_spliced() -> None:
    evil = "x' OR '1'='1"
    _query, statement = plan.listing_plan(
        status=[Status.DONE, Status.FAILED],
        definition_id=evil,
        roots_only=True,
        limit=3,
        cursor=encode_cursor(evil),
    )
    assert statement is not None
    assert evil not in statement.sql and "DONE" not in statement.sql
    assert statement.sql.count("?") == len(statement.params)
    assert evil in statement.params and "DONE" in statement.params


# -- failed commits leave nothing ----------------------------------------------------------------


def break_after_cas(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every commit fail with an IntegrityError after its CAS and some effects ran."""
    real = plan.commit_plan

    def failing(prepared: Any, trace_max: int | None) -> plan.CommitPlan:
        steps = real(prepared, trace_max)
        poison = plan.Statement("INSERT INTO outbox (target_id, event) VALUES (?, NULL)", ("x",))
        return plan.CommitPlan(steps.prepared, steps.cas, steps.found, (*steps.effects, poison))

    monkeypatch.setattr(plan, "commit_plan", failing)


def test_failed_commit_leaves_nothing_and_next_commit_publishes_no_leftovers(
    store: SqliteStore, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = Execution(id="old", definition_id="d")
    store.save(base)
    empty_but_base = table_counts(db_path)

    with monkeypatch.context() as patch:
        break_after_cas(patch)
        torn = Execution(id="torn", definition_id="d")
        with pytest.raises(sqlite3.IntegrityError):
            store.commit(*full_commit_args(torn, "torn"))
        assert torn.version == 0
        with pytest.raises(sqlite3.IntegrityError):
            store.commit(*full_commit_args(base, "upd"))
        assert base.version == 1
    assert table_counts(db_path) == empty_but_base
    assert store._conn is not None and not store._conn.in_transaction

    # the next, unrelated commit must publish only its own rows
    other = Execution(id="other", definition_id="d")
    store.commit(other, [(None, Event(id="ok", kind="Ok"))], "ok-in")
    assert [e.event.id for e in store.pending_outbox()] == ["ok"]
    assert store.load("torn") is None and not store.is_processed("torn", "torn-in")
    assert store.load("old") == base and store.due_timers(10.0) == []
    assert store.pending_spawns() == [] and store.read_trace("old") == []
    assert table_counts(db_path) == {
        **empty_but_base,
        "executions": 2,
        "outbox": 1,
        "processed_events": 1,
    }


def test_encode_error_restores_version_and_writes_nothing(
    store: SqliteStore, db_path: Path
) -> None:
    exe = Execution(id="e", definition_id="d")
    store.save(exe)
    exe.context["bad"] = object()
    with pytest.raises(InvalidPayload):
        store.commit(exe, [(None, Event(kind="X"))])
    assert exe.version == 1
    with pytest.raises(InvalidPayload):
        store.commit(exe.model_copy(update={"context": {}}), [], trace={"bad": object()})
    assert table_counts(db_path)["outbox"] == 0
    assert store.load("e") is not None and store.load("e").version == 1  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_async_failed_commit_leaves_nothing(
    astore: AsyncSqliteStore, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as patch:
        break_after_cas(patch)
        torn = Execution(id="torn", definition_id="d")
        with pytest.raises(sqlite3.IntegrityError):
            await astore.commit(*full_commit_args(torn, "torn"))
        assert torn.version == 0
    other = Execution(id="other", definition_id="d")
    await astore.commit(other, [(None, Event(id="ok", kind="Ok"))])
    assert [e.event.id for e in await astore.pending_outbox()] == ["ok"]
    assert await astore.load("torn") is None
    counts = table_counts(db_path)
    assert counts == {
        "executions": 1,
        "outbox": 1,
        "processed_events": 0,
        "timers": 0,
        "spawns": 0,
        "trace": 0,
    }


# -- concurrency ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_async_tasks_on_different_executions_all_land(astore: AsyncSqliteStore) -> None:
    async def one(i: int) -> None:
        exe = Execution(id=f"x{i:02d}", definition_id="d")
        await astore.commit(*full_commit_args(exe, f"x{i:02d}"))
        exe.context["second"] = True
        await astore.commit(exe, [(None, Event(id=f"x{i:02d}-again", kind="Again"))])

    await asyncio.gather(*(one(i) for i in range(50)))
    for i in range(50):
        loaded = await astore.load(f"x{i:02d}")
        assert loaded is not None and loaded.version == 2 and loaded.context == {"second": True}
        assert await astore.is_processed(f"x{i:02d}", f"x{i:02d}-in")
        assert [s["event_kind"] for s in await astore.read_trace(f"x{i:02d}")] == [f"x{i:02d}"]
    outbox = await astore.pending_outbox()
    assert len(outbox) == 150
    assert {e.event.id for e in outbox} == {
        f"x{i:02d}-{suffix}" for i in range(50) for suffix in ("out", "t", "again")
    }
    assert len(await astore.pending_spawns()) == 50
    assert len(await astore.due_timers(5.0)) == 50


@pytest.mark.anyio
async def test_async_conflicting_tasks_losers_leave_nothing(astore: AsyncSqliteStore) -> None:
    await astore.save(Execution(id="hot", definition_id="d"))
    bystanders = [Execution(id=f"b{i}", definition_id="d") for i in range(20)]

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

    async def bystander(exe: Execution) -> str:
        await astore.commit(exe, [(None, Event(id=f"{exe.id}-ev", kind="B"))])
        return "bystander"

    results = await asyncio.gather(
        *(contender(i) for i in range(20)), *(bystander(b) for b in bystanders)
    )
    winners = [r for r in results if r.startswith("c")]
    assert len(winners) == 1 and results.count("lost") == 19
    winner = winners[0]
    hot = await astore.load("hot")
    assert hot is not None and hot.version == 2 and hot.context["winner"] == int(winner[1:])
    kinds = {e.event.id for e in await astore.pending_outbox()}
    assert kinds == {f"{winner}-out", f"{winner}-t"} | {f"b{i}-ev" for i in range(20)}
    assert [s.child_id for s in await astore.pending_spawns()] == [f"{winner}-child"]
    assert [s["event_kind"] for s in await astore.read_trace("hot")] == [winner]
    for i in range(20):
        assert await astore.is_processed("hot", f"c{i}-in") == (f"c{i}" == winner)
        assert await astore.load(f"b{i}") is not None


def test_threads_share_one_sync_store(store: SqliteStore) -> None:
    errors: list[BaseException] = []

    def worker(t: int) -> None:
        try:
            for i in range(20):
                exe = Execution(id=f"t{t}-{i}", definition_id="d")
                store.commit(exe, [(None, Event(kind="K"))], f"t{t}-{i}")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(store.pending_outbox()) == 120
    assert len(store.list_executions(limit=500).items) == 120


def test_two_stores_on_one_file_second_writer_conflicts(db_path: Path) -> None:
    with SqliteStore(str(db_path)) as one, SqliteStore(str(db_path)) as two:
        one.save(Execution(id="e", definition_id="d"))
        a, b = one.load("e"), two.load("e")
        assert a is not None and b is not None
        one.commit(a, [(None, Event(kind="A"))])
        with pytest.raises(StoreConflict) as info:
            two.commit(b, [(None, Event(kind="B"))])
        assert (info.value.expected, info.value.found, b.version) == (1, 2, 1)
        assert [e.event.kind for e in two.pending_outbox()] == ["A"]
        # concurrent first inserts of one id: the second is a conflict, not an integrity error
        one.save(Execution(id="new", definition_id="d"))
        with pytest.raises(StoreConflict) as first:
            two.save(Execution(id="new", definition_id="d"))
        assert (first.value.expected, first.value.found) == (0, 1)


# -- locks ---------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_locked_database_raises_store_unavailable(db_path: Path) -> None:
    sync_store = SqliteStore(str(db_path), busy_timeout_ms=30)
    async_store = await AsyncSqliteStore.open(str(db_path), busy_timeout_ms=30)
    exe = Execution(id="e", definition_id="d")
    sync_store.save(exe)
    holder = raw(db_path)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StoreUnavailable, match="busy_timeout_ms") as info:
            sync_store.commit(exe, [(None, Event(kind="Blocked"))])
        assert info.value.retryable and exe.version == 1
        with pytest.raises(StoreUnavailable):
            await async_store.commit(exe, [(None, Event(kind="Blocked"))])
        assert exe.version == 1
        with pytest.raises(StoreUnavailable):
            sync_store.ack_outbox(1)
        assert sync_store.load("e") is not None  # WAL: readers are not blocked
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    sync_store.commit(exe, [(None, Event(kind="Later"))])
    await async_store.commit(exe, [])
    assert exe.version == 3
    assert [e.event.kind for e in await async_store.pending_outbox()] == ["Later"]
    sync_store.close()
    await async_store.close()


# -- URLs and knobs ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "path", "knobs"),
    [
        ("sqlite:///relative.db", "relative.db", {}),
        ("sqlite:///dir/rel.db", "dir/rel.db", {}),
        ("sqlite:////abs/path.db", "/abs/path.db", {}),
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
        assert s._conn is not None
        assert s._conn.execute("PRAGMA busy_timeout").fetchone()[0] == 1234
        assert s._conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    assert (tmp_path / "rel.db").exists()
    target = tmp_path / "sub" / "abs.db"
    target.parent.mkdir()
    with SqliteStore.from_url(f"sqlite:///{target}", trace_max=5) as s:
        assert s.trace_max == 5
        assert s._conn is not None
        assert s._conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL by default
    assert target.exists()
    with pytest.raises(InvalidStoreURL, match="colour"):
        SqliteStore.from_url("sqlite:///:memory:", colour="red")


def test_unopenable_path_is_reported(tmp_path: Path) -> None:
    with pytest.raises(StoreUnavailable, match="directory"):
        SqliteStore(str(tmp_path / "missing" / "x.db"))


@pytest.mark.anyio
async def test_async_from_url(tmp_path: Path) -> None:
    store = await AsyncSqliteStore.from_url(f"sqlite:///{tmp_path}/a.db?synchronous=EXTRA")
    exe = Execution(definition_id="d")
    await store.save(exe)
    assert (await store.load(exe.id)) == exe
    await store.close()
    await store.close()
    with pytest.raises(StoreError, match="closed"):
        await store.load(exe.id)
    memory = await AsyncSqliteStore.from_url("sqlite:///:memory:")
    assert await memory.load("nothing") is None
    await memory.close()
    with pytest.raises(InvalidStoreURL):
        await AsyncSqliteStore.from_url("sqlite:///a.db?nope=1")


# -- harness -------------------------------------------------------------------------------------


def assert_empty_dir(path: Path) -> None:
    assert list(path.iterdir()) == []


@pytest.mark.anyio
async def test_harness_reopens_one_file_and_destroys_it(tmp_path: Path) -> None:
    harness = SqliteHarness(tmp_path / "h.db")
    first = harness.open_sync()
    first.save(Execution(id="e", definition_id="d"))
    second = await harness.open_async()
    assert await second.load("e") is not None
    third = harness.open_sync()
    assert third.load("e") is not None
    harness.destroy()
    assert_empty_dir(tmp_path)
    with pytest.raises(StoreError, match="closed"):
        first.load("e")


@pytest.mark.parametrize("url", ["sqlite:///:memory:", "sqlite:///{user}?busy_timeout_ms=77"])
def test_harness_from_url_uses_a_fresh_file(tmp_path: Path, url: str) -> None:
    user_file = tmp_path / "user.db"
    with SqliteStore(str(user_file)) as mine:
        mine.save(Execution(id="precious", definition_id="d"))
    workdir = tmp_path / "work"
    harness = harness_from_url(url.format(user=user_file), workdir)
    store = harness.open_sync()
    assert store.load("precious") is None
    assert store.list_executions().items == []
    assert harness.path.parent == workdir and harness.path != user_file
    if "77" in url:
        assert harness.busy_timeout_ms == 77
    harness.destroy()
    with SqliteStore(str(user_file)) as mine:
        assert mine.load("precious") is not None


def test_plugin_module_imports_no_driver() -> None:
    code = (
        "import sys, harel_store_sqlite._plugin as p;"
        "print(sorted(m for m in ('sqlite3', 'aiosqlite', '_sqlite3') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.anyio
async def test_cancelled_async_commit_rolls_back(
    astore: AsyncSqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task cancelled mid-transaction leaves nothing, and the store keeps working."""
    entered, release = threading.Event(), threading.Event()

    def block() -> int:
        entered.set()
        release.wait(timeout=30)
        return 1

    assert astore._conn is not None
    await astore._conn.create_function("harel_test_block", 0, block)
    real = plan.commit_plan

    def blocking(prepared: Any, trace_max: int | None) -> plan.CommitPlan:
        steps = real(prepared, trace_max)
        pause = plan.Statement("SELECT harel_test_block()")
        return plan.CommitPlan(steps.prepared, steps.cas, steps.found, (*steps.effects, pause))

    victim = Execution(id="victim", definition_id="d")
    with monkeypatch.context() as patch:
        patch.setattr(plan, "commit_plan", blocking)
        task = asyncio.ensure_future(astore.commit(*full_commit_args(victim, "v")))
        await asyncio.to_thread(entered.wait, 30)  # the CAS and effects ran, not committed
        task.cancel()
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert victim.version == 0
    other = Execution(id="other", definition_id="d")
    await astore.commit(other, [(None, Event(id="ok", kind="Ok"))])
    assert await astore.load("victim") is None
    assert [e.event.id for e in await astore.pending_outbox()] == ["ok"]
    assert await astore.pending_spawns() == [] and await astore.due_timers(10.0) == []
