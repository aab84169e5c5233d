"""What only the libSQL backend can show: the driver's quirks handled (wide ints, NUL, lock waits
that would hold the GIL), statements per operation counted on the real driver, the
transaction shape, libSQL's failures mapped to typed errors, hostile ids stored exactly, and
the server / replica modes' URLs, retries and secret redaction (no sqld can run here: those
modes are exercised only up to "the server cannot be reached").  The contract itself is the
conformance kit's job.

Never open a file that a libSQL connection has open with the stdlib ``sqlite3`` module in the
same process: two SQLite copies in one process do not see each other's POSIX locks.  Raw
access below goes through libSQL, or through ``sqlite3`` only after every libSQL connection
to the file is closed.
"""

from __future__ import annotations

import asyncio
import socket
import sqlite3
import time
import traceback
from pathlib import Path
from typing import Any

import libsql  # type: ignore[import-untyped]
import pytest
from harel.model import Event, Execution, Status
from harel.registry import (
    open_async_store,
    open_store,
    store_from_env,
    store_settings_from_env,
)
from harel.store import TimerOp
from harel.store.common.limits import MAX_INT
from harel.store.common.sql import SCHEMA_VERSION, Statement
from harel.store.common.sql.testing import full_commit_args
from harel.store.errors import (
    AlreadyProcessed,
    HarnessUnavailable,
    InvalidIdentifier,
    InvalidPayload,
    InvalidStoreURL,
    StoreConfigError,
    StoreConflict,
    StoreCorrupted,
    StoreError,
    StoreNotFound,
    StoreUnavailable,
)
from harel_store_libsql import AsyncLibsqlStore, LibsqlStore
from harel_store_libsql._driver import execute
from harel_store_libsql._legacy import url_from_env
from harel_store_libsql._options import make_options
from harel_store_libsql._spec import parse_libsql_url
from harel_store_libsql.testing import harness_from_url

TABLES = ("executions", "outbox", "processed_events", "timers", "spawns", "trace")
TOKEN = "t0k3n-S3CRET-value"


def raw(path: Path) -> Any:
    """A libSQL connection of its own (autocommit) on ``path``."""
    return libsql.connect(str(path), isolation_level=None, timeout=5.0)


def table_counts(path: Path) -> dict[str, int]:
    conn = raw(path)
    try:
        return {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchall()[0][0] for t in TABLES}
    finally:
        conn.close()


def sync_of(store: LibsqlStore | AsyncLibsqlStore) -> LibsqlStore:
    return store.store if isinstance(store, AsyncLibsqlStore) else store


class Counting:
    """The store's real driver connection, recording every statement sent through it."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.sent: list[str] = []

    def execute(self, sql: str, params: Any = ()) -> Any:
        self.sent.append(sql)
        return self.conn.execute(sql, params)

    @property
    def in_transaction(self) -> bool:
        return bool(self.conn.in_transaction)

    def rollback(self) -> None:
        self.conn.rollback()

    def close(self) -> None:
        self.conn.close()

    def verbs(self) -> list[str]:
        verbs = [sql.split()[0] for sql in self.sent]
        self.sent.clear()
        return verbs


@pytest.fixture
def counted(store: LibsqlStore) -> Counting:
    counting = Counting(store._conn)
    store._conn = counting
    return counting


def free_port() -> int:
    """A loopback port nothing listens on (connections are refused at once)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


# -- schema and connection -----------------------------------------------------------------------


def test_schema_version_row_wal_and_no_driver_busy_wait(store: LibsqlStore, db_path: Path) -> None:
    conn = raw(db_path)
    assert conn.execute("SELECT singleton, version FROM harel_schema").fetchall() == [
        (1, SCHEMA_VERSION)
    ]
    assert conn.execute("PRAGMA journal_mode").fetchall() == [("wal",)]
    conn.close()
    own = store._conn
    # the store waits for locks itself (sleeping without the GIL), never inside the driver
    assert own.execute("PRAGMA busy_timeout").fetchall() == [(0,)]
    assert own.isolation_level is None and not own.in_transaction


def test_a_libsql_file_is_a_sqlite_file_of_the_same_layout(db_path: Path) -> None:
    with LibsqlStore(str(db_path)) as store:
        store.commit(*full_commit_args(Execution(id="e", definition_id="d"), "a"))
    conn = sqlite3.connect(str(db_path))  # every libSQL connection is closed: safe
    try:
        assert conn.execute("SELECT version FROM harel_schema").fetchall() == [(SCHEMA_VERSION,)]
        assert conn.execute("SELECT id, version FROM executions").fetchall() == [("e", 1)]
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        conn.close()


def test_memory_database_works_without_wal() -> None:
    with LibsqlStore(":memory:") as store:
        assert store._conn.execute("PRAGMA journal_mode").fetchall() == [("memory",)]
        exe = Execution(definition_id="d")
        store.save(exe)
        assert store.load(exe.id) == exe


def test_closed_store_raises_store_error_not_a_driver_panic(db_path: Path) -> None:
    store = LibsqlStore(str(db_path))
    store.close()
    store.close()  # idempotent
    with pytest.raises(StoreError, match="closed"):
        store.load("x")
    store.refresh()  # a no-op, even closed


def test_a_lost_cas_refreshes_the_replica_once_whichever_path_sent_it(
    store: LibsqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A conflict pulls the primary's changes (a no-op off a replica) exactly once: from the
    state-only statement the store runs itself, and from a commit the plan runs whole."""
    import harel_store_libsql.sync as sync_module

    pulls: list[Any] = []
    monkeypatch.setattr(sync_module, "refresh", lambda conn, options: pulls.append(conn))
    exe = Execution(id="e", definition_id="d")
    store.save(exe)
    stale = store.load("e")
    assert stale is not None
    exe.context["n"] = 1
    store.commit(exe, [])
    for args in (([],), ([], "ev")):
        stale.context["n"] = 2
        with pytest.raises(StoreConflict):
            store.commit(stale, *args)
    assert pulls == [store._conn, store._conn]
    store.commit(exe, [])
    assert len(pulls) == 2, "no pull after a commit that applied"


# -- statements per operation and the transaction shape ------------------------------------------


def test_statements_per_commit_shape(store: LibsqlStore, counted: Counting) -> None:
    exe = Execution(id="e", definition_id="d")
    store.save(exe)
    assert counted.verbs() == ["INSERT"]  # a state-only write: one autocommit statement
    store.save(exe)
    assert counted.verbs() == ["UPDATE"]  # the document-only CAS (its own copy) applied
    store.commit(*full_commit_args(exe, "a"))
    # the CAS, 2 outbox rows, the mark, the spawn, the timer, trace append + trim, 3 work rows
    assert counted.verbs() == [
        "BEGIN",
        "UPDATE",
        *["INSERT"] * 6,
        "DELETE",
        *["INSERT"] * 3,
        "COMMIT",
    ]
    assert counted.conn.in_transaction is False
    stale = Execution(id="e", definition_id="d", version=1)
    with pytest.raises(StoreConflict):
        store.commit(*full_commit_args(stale, "b"))
    # both CAS forms miss: no side write, then the found version
    assert counted.verbs() == ["BEGIN", "UPDATE", "UPDATE", "COMMIT", "SELECT"]
    assert counted.sent == []


def test_statements_of_refused_commits(
    store: LibsqlStore, counted: Counting, db_path: Path
) -> None:
    """An already-recorded event id and a stale kept copy are refused by the CAS statements
    the happy path sends (their conditions are the CAS's own): no read before them, no side
    write, and the read after the miss tells ``AlreadyProcessed`` from ``StoreConflict``."""
    exe = Execution(id="e", definition_id="d")
    store.commit(*full_commit_args(exe, "a"))
    counted.verbs()
    before = table_counts(db_path)
    with pytest.raises(AlreadyProcessed) as caught:
        store.commit(*full_commit_args(exe, "a"))  # the same event id again, from version 1
    assert (caught.value.event_id, caught.value.found, exe.version) == ("a-in", 1, 1)
    assert counted.verbs() == ["BEGIN", "UPDATE", "UPDATE", "COMMIT", "SELECT"]
    assert table_counts(db_path) == before
    store.save(exe)
    assert counted.verbs() == ["UPDATE"]  # the happy path of a kept (fenced) copy: unchanged
    store.purge("e", force=True)
    again = Execution(id="e", definition_id="d")
    store.save(again)
    store.save(again)  # re-created, at the version the old copy kept
    counted.verbs()
    with pytest.raises(StoreConflict) as fenced:
        store.save(exe)
    assert type(fenced.value) is StoreConflict and fenced.value.found == exe.version == 2
    assert counted.verbs() == ["UPDATE", "UPDATE", "SELECT"]  # both CAS forms, the read
    loaded = store.load("e")
    assert loaded is not None and loaded.version == 2
    assert counted.sent == ["SELECT data FROM executions WHERE id = ?"]


def test_statements_per_other_operation(store: LibsqlStore, counted: Counting) -> None:
    assert store.claim("w", time.time()) == []  # nothing due: the probe alone, no write
    assert counted.verbs() == ["SELECT"]
    exe = Execution(id="e", definition_id="d", status=Status.DONE)
    store.commit(*full_commit_args(exe, "a"))
    counted.verbs()
    one_select = (
        lambda: store.load("e"),
        lambda: store.load_for_event("e", "a-in"),
        lambda: store.is_processed("e", "a-in"),
        lambda: store.pending_outbox(),
        lambda: store.pending_spawns(),
        lambda: store.due_timers(10.0),
        lambda: store.read_trace("e"),
        lambda: store.list_executions(status=[Status.DONE, Status.FAILED]),
    )
    for read in one_select:
        read()
        assert counted.verbs() == ["SELECT"]
    store.ack_outbox(1)
    store.ack_spawn(1)
    store.delete_timer("e", "p", 1.0)
    assert counted.verbs() == ["DELETE"] * 3  # one autocommit statement each
    store.append_trace("e", {"a": 1})
    assert counted.verbs() == ["BEGIN", "INSERT", "DELETE", "COMMIT"]
    assert store.prune_processed(time.time() + 10, batch_size=1) == 1
    assert counted.verbs() == ["DELETE", "DELETE"]  # batches until a short one
    claims = store.claim("w", time.time() + 10)
    # e's and the untargeted group's units were acknowledged above: their rows are dropped
    assert [claim.execution_id for claim in claims] == ["t"]
    # the probe, then one transaction: the units, the leases, the drop of empty rows
    assert counted.verbs() == ["SELECT", "BEGIN", "SELECT", "UPDATE", "DELETE", "COMMIT"]
    assert store.renew("w", "t", time.time(), lease=5.0) > 0
    assert counted.verbs() == ["UPDATE"]
    store.release("w", "t")
    assert counted.verbs() == ["BEGIN", "DELETE", "UPDATE", "COMMIT"]
    assert store.enqueue("t", Event(id="q", kind="K")) > 0  # the seq: the insert's RETURNING
    assert counted.verbs() == ["BEGIN", "INSERT", "INSERT", "COMMIT"]  # the outbox, the work row
    assert store.purge("e") is True
    assert counted.verbs() == ["BEGIN", *["DELETE"] * 7, "COMMIT"]  # the tables, the work row


# -- failed statements leave nothing -------------------------------------------------------------

POISON = (
    "CREATE TRIGGER poison BEFORE INSERT ON outbox WHEN NEW.event LIKE '%poison%' "
    "BEGIN SELECT RAISE(ABORT, 'poisoned row'); END"
)


@pytest.mark.anyio
async def test_failed_side_write_rolls_back_everything(store: LibsqlStore, db_path: Path) -> None:
    base = Execution(id="old", definition_id="d")
    store.save(base)
    before = table_counts(db_path)
    holder = raw(db_path)
    holder.execute(POISON)
    holder.close()
    poisoned = [(None, Event(id="fine", kind="Fine")), (None, Event(id="x", kind="poison"))]
    torn = Execution(id="torn", definition_id="d")
    with pytest.raises(StoreError, match="poisoned row"):
        store.commit(torn, poisoned, "torn-in", (TimerOp.schedule("p", 1.0),), (), {"a": 1})
    assert torn.version == 0 and not store._conn.in_transaction
    with pytest.raises(StoreError, match="poisoned row"):
        store.commit(base, poisoned, "upd-in")
    assert base.version == 1
    assert table_counts(db_path) == before
    other = Execution(id="other", definition_id="d")
    store.commit(other, [(None, Event(id="ok", kind="Ok"))], "ok-in")
    assert [e.event.id for e in store.pending_outbox()] == ["ok"]
    assert store.load("torn") is None and store.load("old") == base

    async with await AsyncLibsqlStore.open(str(db_path)) as astore:
        with pytest.raises(StoreError, match="poisoned row"):
            await astore.commit(torn, [(None, Event(kind="poison"))], "in")
        assert torn.version == 0
        await astore.commit(torn, [])
        assert torn.version == 1
        after = table_counts(db_path)
        with pytest.raises(StoreError, match="poisoned row"):  # an enqueue is all-or-nothing too
            await astore.enqueue("fresh", Event(id="p", kind="poison"), priority=4)
        assert table_counts(db_path) == after


# -- libSQL's failures as typed errors -----------------------------------------------------------


@pytest.mark.anyio
async def test_a_file_that_is_not_a_database_is_reported_as_corrupted(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_bytes(b"these are my notes, not a database\n" * 200)
    with pytest.raises(StoreCorrupted, match=r"notes\.db"):
        LibsqlStore(str(path))
    with pytest.raises(StoreCorrupted, match=r"notes\.db"):
        await AsyncLibsqlStore.open(str(path))


def test_unopenable_path_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(StoreUnavailable, match="directory"):
        LibsqlStore(str(tmp_path / "missing" / "x.db"))


def test_disk_full_is_retryable_and_leaves_the_store_usable(store: LibsqlStore) -> None:
    exe = Execution(id="e", definition_id="d")
    store.save(exe)
    conn = store._conn
    pages = conn.execute("PRAGMA page_count").fetchall()[0][0]
    conn.execute(f"PRAGMA max_page_count = {pages}").fetchall()
    exe.context["big"] = "x" * 200_000
    with pytest.raises(StoreUnavailable, match="full") as info:
        store.commit(exe, [(None, Event(kind="K"))])
    assert info.value.retryable and exe.version == 1 and not conn.in_transaction
    conn.execute("PRAGMA max_page_count = 1073741823").fetchall()
    store.commit(exe, [(None, Event(kind="K"))])
    assert exe.version == 2 and len(store.pending_outbox()) == 1


@pytest.mark.anyio
async def test_a_lock_wait_does_not_freeze_the_event_loop(db_path: Path) -> None:
    """The driver's own busy wait holds the GIL (an event loop beside it stops: 2 ticks in
    0.5 s were measured); the store's wait sleeps without it, so the loop keeps running."""
    astore = await AsyncLibsqlStore.open(str(db_path), busy_timeout_ms=10_000)
    holder = raw(db_path)
    holder.execute("BEGIN IMMEDIATE")
    waiting = asyncio.ensure_future(astore.save(Execution(id="e", definition_id="d")))
    ticks = 0
    started = time.monotonic()
    while time.monotonic() - started < 0.4:
        await asyncio.sleep(0.005)
        ticks += 1
    assert not waiting.done()  # still waiting for the lock
    holder.execute("ROLLBACK")
    holder.close()
    await waiting
    assert ticks >= 20, f"the event loop ran only {ticks} times in 0.4 s"
    await astore.close()


def test_values_the_driver_cannot_bind_are_typed_errors(store: LibsqlStore) -> None:
    run = lambda value: execute(store._conn, store.options, Statement("SELECT ?", (value,)))  # noqa: E731
    with pytest.raises(InvalidPayload, match="cannot bind"):
        run("lone \ud800")
    with pytest.raises(InvalidPayload, match="NUL"):
        run("a\x00b")
    with pytest.raises(InvalidIdentifier):
        store.load("lone \ud800 surrogate")  # refused by the shared validation first
    with pytest.raises(StoreError, match="syntax error"):
        execute(store._conn, store.options, Statement("SELEC 1"))


# -- values stored exactly -----------------------------------------------------------------------


def test_wide_ints_are_stored_exactly(store: LibsqlStore, db_path: Path) -> None:
    """The driver binds ints beyond 32 bits as floats; the store sends them as text."""
    for version in (2**31 - 1, 2**31 + 1, 2**53 + 1, MAX_INT - 2):
        exe = Execution(id=f"v{version}", definition_id="d", version=0)
        store.save(exe)
        conn = store._conn
        conn.execute("UPDATE executions SET version = ? WHERE id = ?", (str(version), exe.id))
        loaded = store.load(exe.id)
        assert loaded is not None
        loaded.version = version
        store.save(loaded)  # the CAS compares and writes the wide versions
        assert loaded.version == version + 1
        assert store.list_executions(limit=MAX_INT).items[-1].version == version + 1
        with pytest.raises(StoreConflict) as lost:
            stale = loaded.model_copy(update={"version": version})
            store.save(stale)
        assert lost.value.found == version + 1
    seq = 3_000_000_001
    store._conn.execute(
        "INSERT INTO outbox (seq, target_id, event) VALUES (?, NULL, ?)",
        (str(seq), Event(id="wide", kind="K").model_dump_json()),
    )
    assert [e.seq for e in store.pending_outbox(limit=MAX_INT)] == [seq]
    store.ack_outbox(seq)
    assert store.pending_outbox() == []
    store.close()
    conn = sqlite3.connect(str(db_path))  # the store is closed: safe to read with sqlite3
    try:
        rows = conn.execute(
            "SELECT version, typeof(version) FROM executions ORDER BY id"
        ).fetchall()
    finally:
        conn.close()
    assert sorted(rows) == sorted(
        (v + 1, "integer") for v in (2**31 - 1, 2**31 + 1, 2**53 + 1, MAX_INT - 2)
    )


HOSTILE_IDS = [
    "a:b",
    "{x}",
    "a.b.c",
    "$set",
    "100%_\\*?[",
    'it\'s "quoted"',
    "".join(chr(plane * 0x10000 + 0x4E2D) for plane in range(17) if plane not in (14, 15, 16))
    + "\U000e0041\U000f0041\U0010fffd",
    "é" * 512,  # exactly the 1024-byte limit
    "\u2028\ufeff\u200d",
]


def test_hostile_ids_round_trip_and_are_stored_byte_exact(
    store: LibsqlStore, db_path: Path
) -> None:
    for n, execution_id in enumerate(HOSTILE_IDS):
        exe = Execution(id=execution_id, definition_id=execution_id, context={"n": n})
        store.commit(
            exe,
            [(execution_id, Event(id=f"out-{n}", kind="K"))],
            execution_id,
            (TimerOp.schedule(execution_id, float(n)),),
            ((f"child-{n}", execution_id, {}),),
            {"id": execution_id},
        )
        assert store.load(execution_id) == exe
        assert store.load_for_event(execution_id, execution_id) == (exe, True)
        page = store.list_executions(definition_id=execution_id)
        assert [s.id for s in page.items] == [execution_id]
        assert (execution_id, execution_id, float(n)) in store.due_timers(100.0)
        store.delete_timer(execution_id, execution_id, float(n))
    for bad in ("nul\x00inside", "x" * 65_536, "é" * 513):
        with pytest.raises(InvalidIdentifier):
            store.save(Execution(id=bad, definition_id="d"))
    store.close()
    conn = sqlite3.connect(str(db_path))  # every libSQL connection is closed: safe
    try:
        stored = {row[0] for row in conn.execute("SELECT id FROM executions")}
        marks = {row[0] for row in conn.execute("SELECT event_id FROM processed_events")}
    finally:
        conn.close()
    assert stored == set(HOSTILE_IDS) == marks


# -- concurrency ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_two_async_stores_race_on_one_file_losers_leave_nothing(db_path: Path) -> None:
    first = await AsyncLibsqlStore.open(str(db_path))
    second = await AsyncLibsqlStore.open(str(db_path))
    await first.save(Execution(id="hot", definition_id="d"))

    stores = [first if i % 2 else second for i in range(12)]
    copies = await asyncio.gather(*(store.load("hot") for store in stores))  # all at version 1

    async def contender(store: AsyncLibsqlStore, copy: Execution | None, i: int) -> str:
        assert copy is not None
        try:
            await store.commit(*full_commit_args(copy, f"c{i}"))
        except StoreConflict:
            return "lost"
        return f"c{i}"

    pairs = enumerate(zip(stores, copies, strict=True))
    results = await asyncio.gather(*(contender(store, copy, i) for i, (store, copy) in pairs))
    winners = [r for r in results if r != "lost"]
    assert len(winners) == 1
    outbox = {e.event.id for e in await first.pending_outbox()}
    assert outbox == {f"{winners[0]}-out", f"{winners[0]}-t"}
    await first.close()
    await second.close()


# -- URLs, modes and secrets ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "database", "knobs"),
    [
        ("libsql+file:///relative.db", "relative.db", {}),
        ("libsql+file:////abs/path.db", "/abs/path.db", {}),
        ("libsql+file:////abs/with%20space.db", "/abs/with space.db", {}),
        ("libsql+file:///:memory:", ":memory:", {}),
        ("libsql+file://:memory:", ":memory:", {}),
        (
            "libsql+file:///x.db?busy_timeout_ms=250&synchronous=normal&trace_max=7",
            "x.db",
            {"busy_timeout_ms": 250, "synchronous": "NORMAL", "trace_max": 7},
        ),
        (
            f"libsql+file:///r.db?sync_url=https://db.example.com&auth_token={TOKEN}"
            "&sync_interval=2.5",
            "r.db",
            {"sync_url": "https://db.example.com", "auth_token": TOKEN, "sync_interval": 2.5},
        ),
        ("libsql://db.example.com", "https://db.example.com", {}),
        (
            f"libsql://db.example.com:443/?authToken={TOKEN}",
            "https://db.example.com:443",
            {"auth_token": TOKEN},
        ),
        ("libsql://127.0.0.1:8080?tls=false", "http://127.0.0.1:8080", {}),
        ("libsql://[::1]:8080?tls=0&trace_max=0", "http://[::1]:8080", {"trace_max": 0}),
    ],
)
def test_url_forms(url: str, database: str, knobs: dict[str, Any]) -> None:
    assert parse_libsql_url(url) == (database, knobs)
    make_options(database, **knobs)  # every form is one the constructor accepts


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("libsql+file:///x.db?cache=big", "cache"),
        ("libsql+file:///x.db?synchronus=FULL", r"did you mean synchronous\?"),
        ("libsql+file:///x.db?tls=false", "tls is for libsql:// server URLs"),
        ("libsql+file:///x.db?busy_timeout_ms=soon", "busy_timeout_ms"),
        ("libsql+file:///x.db?synchronous=OFF", "synchronous"),
        ("libsql+file://host/x.db", "host"),
        ("libsql+file://", "no database"),
        ("libsql+file:///x.db?auth_token=" + TOKEN, "local file takes none"),
        ("libsql+file:///:memory:?sync_url=https://h", "needs a local file"),
        ("libsql+file:///x.db?sync_interval=3", "needs sync_url"),
        ("libsql+file:///x.db?sync_url=ftp://h", "libsql://, https:// or http://"),
        (f"libsql+file:///x.db?sync_url=https://u:{TOKEN}@h", "credentials"),
        ("libsql://", "no server"),
        ("libsql://host/db", "path"),
        ("libsql://host?busy_timeout_ms=5", "busy_timeout_ms"),
        (f"libsql://user:{TOKEN}@host", "credentials"),
        (f"libsql://host?auth_token={TOKEN}&authToken={TOKEN}", "given twice"),
        ("libsql://host?tls=maybe", "tls"),
        ("sqlite:///x.db", "is not a libsql:// URL"),
        ("x.db", "not a store URL"),
    ],
)
def test_bad_urls_are_refused_without_the_token(url: str, message: str) -> None:
    with pytest.raises(InvalidStoreURL, match=message) as info:
        LibsqlStore.from_url(url)
    assert TOKEN not in str(info.value) and TOKEN not in repr(info.value)


def test_constructor_refuses_what_a_mode_cannot_use() -> None:
    with pytest.raises(ValueError, match="local file or replica only"):
        make_options("https://db.example.com", busy_timeout_ms=5)
    with pytest.raises(ValueError, match="neither a local file"):
        make_options("ftp://db.example.com")
    with pytest.raises(TypeError, match="unknown"):
        make_options("a.db", colour="red")
    with pytest.raises(ValueError, match="value not shown"):
        make_options("https://h", auth_token="has space " + TOKEN)
    with pytest.raises(ValueError, match="sync_interval"):
        make_options("r.db", sync_url="https://h", sync_interval=0)


def assert_no_token(error: BaseException) -> None:
    text = "".join(traceback.format_exception(error))
    assert TOKEN not in text and TOKEN not in repr(error)


def test_options_and_stores_never_show_the_token(tmp_path: Path) -> None:
    options = make_options("https://db.example.com", auth_token=TOKEN)
    assert TOKEN not in repr(options) and TOKEN not in options.where
    assert options.mode == "server" and options.secrets == (TOKEN,)
    replica = make_options(str(tmp_path / "r.db"), sync_url="https://h", auth_token=TOKEN)
    assert replica.mode == "replica" and TOKEN not in repr(replica) + replica.where


@pytest.mark.anyio
async def test_an_unreachable_server_is_retried_then_unavailable_without_the_token() -> None:
    port = free_port()
    url = f"libsql://127.0.0.1:{port}?tls=false&auth_token={TOKEN}"
    started = time.monotonic()
    with pytest.raises(StoreUnavailable, match="after 3 attempt") as info:
        LibsqlStore.from_url(url, connect_retries=2, retry_delay=0.01)
    assert time.monotonic() - started < 5
    assert_no_token(info.value)
    with pytest.raises(StoreUnavailable, match="after 2 attempt") as ainfo:
        await AsyncLibsqlStore.from_url(url, connect_retries=1, retry_delay=0.01)
    assert_no_token(ainfo.value)
    with pytest.raises(StoreUnavailable) as direct:
        LibsqlStore(f"http://127.0.0.1:{port}", auth_token=TOKEN)
    assert "cannot be reached" in str(direct.value)
    assert_no_token(direct.value)
    with pytest.raises(StoreUnavailable) as registry:
        open_store(url, connect_retries=0)
    assert_no_token(registry.value)
    with pytest.raises(StoreUnavailable):
        await open_async_store(url, connect_retries=0)


def test_an_unreachable_replica_primary_is_unavailable_without_the_token(tmp_path: Path) -> None:
    replica = tmp_path / "replica.db"
    url = f"libsql+file:///{replica}?sync_url=http://127.0.0.1:{free_port()}&auth_token={TOKEN}"
    with pytest.raises(StoreUnavailable, match="replica") as info:
        LibsqlStore.from_url(url, connect_retries=0)
    assert_no_token(info.value)


def test_from_url_relative_absolute_and_knobs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with LibsqlStore.from_url("libsql+file:///rel.db?busy_timeout_ms=1234&synchronous=NORMAL") as s:
        assert s.options.busy_timeout_ms == 1234
        assert s._conn.execute("PRAGMA synchronous").fetchall() == [(1,)]  # NORMAL
    assert (tmp_path / "rel.db").exists()
    with LibsqlStore.from_url(f"libsql+file:///{tmp_path / 'abs.db'}", trace_max=5) as s:
        assert s.trace_max == 5
        assert s._conn.execute("PRAGMA synchronous").fetchall() == [(2,)]  # FULL
    with open_store(f"libsql+file:///{tmp_path / 'reg.db'}") as s:  # type: ignore[attr-defined]
        assert isinstance(s, LibsqlStore)
    with pytest.raises(InvalidStoreURL, match="colour"):
        LibsqlStore.from_url("libsql+file:///:memory:", colour="red")


@pytest.mark.anyio
async def test_async_from_url_refresh_and_close(tmp_path: Path) -> None:
    store = await AsyncLibsqlStore.from_url(f"libsql+file:///{tmp_path}/a.db?synchronous=EXTRA")
    exe = Execution(definition_id="d")
    await store.save(exe)
    await store.refresh()  # not a replica: nothing to pull
    assert (await store.load(exe.id)) == exe
    store.trace_max = 3
    assert store.store.trace_max == 3 and store.options.synchronous == "EXTRA"
    assert "a.db" in repr(store)
    await store.close()
    await store.close()
    with pytest.raises(StoreError, match="closed"):
        await store.load(exe.id)


# -- legacy environment --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "url"),
    [
        ({}, None),
        ({"STM_LIBSQL_DB": "app.db"}, "libsql+file:///app.db"),
        ({"STM_LIBSQL_DB": "/srv/app.db"}, "libsql+file:////srv/app.db"),
        (
            {
                "STM_LIBSQL_DB": "replica.db",
                "STM_LIBSQL_SYNC_URL": "libsql://db.example.com",
                "STM_LIBSQL_AUTH_TOKEN": TOKEN,
            },
            f"libsql+file:///replica.db?sync_url=libsql%3A%2F%2Fdb.example.com&auth_token={TOKEN}",
        ),
        ({"STM_LIBSQL_DB": "libsql://db.example.com"}, "libsql://db.example.com"),
        (
            {"STM_LIBSQL_DB": "http://127.0.0.1:8080", "STM_LIBSQL_AUTH_TOKEN": TOKEN},
            f"libsql://127.0.0.1:8080?tls=false&auth_token={TOKEN}",
        ),
    ],
)
def test_legacy_variables(env: dict[str, str], url: str | None) -> None:
    found = url_from_env(env)
    assert found == url
    if found is not None:
        parse_libsql_url(found)  # a URL the backend opens


def test_legacy_variables_reach_the_registry(tmp_path: Path) -> None:
    env = {"STM_STORE_BACKEND": "libsql", "STM_LIBSQL_DB": str(tmp_path / "legacy.db")}
    settings = store_settings_from_env(env)
    assert settings.backend == "libsql" and settings.source == "STM_LIBSQL_DB"
    with store_from_env(environ=env) as store:  # type: ignore[attr-defined]
        assert isinstance(store, LibsqlStore) and store.options.mode == "file"
    replica = {**env, "STM_LIBSQL_SYNC_URL": "https://h", "STM_LIBSQL_AUTH_TOKEN": TOKEN}
    assert TOKEN not in repr(store_settings_from_env(replica))


def test_legacy_variables_refuse_half_configurations() -> None:
    with pytest.raises(StoreConfigError, match="STM_LIBSQL_DB"):
        url_from_env({"STM_LIBSQL_AUTH_TOKEN": TOKEN})
    with pytest.raises(StoreConfigError, match="local replica file"):
        url_from_env({"STM_LIBSQL_DB": "https://h", "STM_LIBSQL_SYNC_URL": "https://h"})


# -- harness -------------------------------------------------------------------------------------


def test_harness_from_url_uses_a_fresh_file_and_refuses_servers(tmp_path: Path) -> None:
    user_file = tmp_path / "user.db"
    with LibsqlStore(str(user_file)) as mine:
        mine.save(Execution(id="precious", definition_id="d"))
    harness = harness_from_url(f"libsql+file:///{user_file}?busy_timeout_ms=77", tmp_path / "w")
    assert harness.open_sync().load("precious") is None
    assert harness.options.busy_timeout_ms == 77 and harness.path != user_file
    harness.destroy()
    for url in (
        f"libsql://db.example.com?auth_token={TOKEN}",
        f"libsql+file:///r.db?sync_url=https://h&auth_token={TOKEN}",
    ):
        with pytest.raises(HarnessUnavailable, match="local files only") as info:
            harness_from_url(url, tmp_path / "w")
        assert_no_token(info.value)


# -- read-only opens (create=False) create nothing ------------------------------------------------


def test_list_on_a_missing_file_says_so_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from harel.cli import main

    path = tmp_path / "typo.db"
    code = main(["list", "--store", f"libsql+file:///{path}"])
    err = capsys.readouterr().err
    assert code == 2 and "there is no libsql store at libsql+file:///" in err
    assert "nothing was created" in err
    assert list(tmp_path.iterdir()) == []


def test_create_false_leaves_a_file_without_the_layout_untouched(tmp_path: Path) -> None:
    empty, foreign = tmp_path / "empty.db", tmp_path / "foreign.db"
    empty.touch()
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE notes (x)")
    before = foreign.read_bytes()
    for path in (empty, foreign):
        with pytest.raises(StoreNotFound, match="there is no libsql store"):
            open_store(f"libsql+file:///{path}", create=False)
    assert empty.stat().st_size == 0 and foreign.read_bytes() == before


def test_create_false_opens_a_store_once_created(tmp_path: Path) -> None:
    url = f"libsql+file:///{tmp_path / 'app.db'}"
    open_store(url).close()
    store = open_store(url, create=False)
    try:
        assert store.list_executions().items == []
    finally:
        store.close()
    open_store("libsql+file:///:memory:", create=False).close()  # nothing to find or create


def test_create_false_on_an_unreachable_server_or_primary_is_unavailable(tmp_path: Path) -> None:
    port = free_port()
    with pytest.raises(StoreUnavailable) as info:
        open_store(
            f"libsql://127.0.0.1:{port}?tls=false&auth_token={TOKEN}",
            create=False,
            connect_retries=0,
        )
    assert_no_token(info.value)
    replica = tmp_path / "replica.db"
    url = f"libsql+file:///{replica}?sync_url=http://127.0.0.1:{port}&connect_retries=0"
    with pytest.raises(StoreUnavailable):
        open_store(url, create=False)
    assert not replica.exists()
