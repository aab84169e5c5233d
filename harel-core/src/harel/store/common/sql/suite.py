"""Tests every file-backed SQL-family backend runs (SQLite, libSQL), written once.

A backend's test module collects them with ``from harel.store.common.sql.suite import *`` and
its ``conftest.py`` provides the ``sql_backend`` fixture (a
:class:`~harel.store.common.sql.testing.FileBackend`). They check what the shared layout and the
one-connection store guarantee beyond the conformance kit: the layout version and its writer
recorded at creation, version-2 and version-3 files (written by earlier releases) upgraded in
place with their data readable and re-sent commits recognised after the upgrade, a version-4
file upgraded with work rows backfilled for its timers, outbox entries and spawn intents (a
claim returns that work), a newer layout
refused before anything is written, two processes upgrading one file at once, threads sharing
one store, and records moved between files.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from contextlib import closing
from pathlib import Path

import pytest

from harel.model import Event, Execution, Status
from harel.registry import open_store
from harel.store.common.claims import relay_due
from harel.store.common.records import record_digest
from harel.store.common.schema_version import release_of
from harel.store.common.sql.schema import SCHEMA_VERSION
from harel.store.common.sql.testing import (
    RECEIPT_COLUMNS,
    VERSION_3_INDEXES,
    VERSION_5_INDEXES,
    FileBackend,
    column_names,
    full_commit_args,
    index_names,
    raw,
    schema_row,
    table_counts,
    version_2_file,
    version_3_file,
    version_4_file,
)
from harel.store.errors import (
    ExecutionAlreadyExists,
    SchemaVersionError,
    StoreError,
    StoreUnavailable,
)

__all__ = [
    "test_a_newer_layout_is_refused_before_anything_is_written",
    "test_a_version_2_file_is_upgraded_in_place",
    "test_a_version_3_file_is_upgraded_in_place",
    "test_a_version_4_file_is_upgraded_with_its_work_claimable",
    "test_harness_reopens_one_file_and_destroys_it",
    "test_layout_version_and_writer_are_recorded_at_creation",
    "test_locked_database_waits_then_raises_store_unavailable",
    "test_records_move_between_files_whole_and_once",
    "test_threads_share_one_sync_store",
    "test_two_processes_open_a_version_2_file_at_once",
]


def test_layout_version_and_writer_are_recorded_at_creation(
    sql_backend: FileBackend, tmp_path: Path
) -> None:
    path = tmp_path / "new.db"
    sql_backend.open(str(path)).close()
    assert schema_row(path) == (1, SCHEMA_VERSION, release_of(sql_backend.distribution))
    assert SCHEMA_VERSION == 5 and index_names(path) >= VERSION_3_INDEXES | VERSION_5_INDEXES
    assert column_names(path, "executions")[-len(RECEIPT_COLUMNS) :] == list(RECEIPT_COLUMNS)


def test_a_version_2_file_is_upgraded_in_place(sql_backend: FileBackend, tmp_path: Path) -> None:
    path = tmp_path / "v2.db"
    exe = version_2_file(path)
    with closing(sql_backend.open(str(path))) as store:
        assert store.load("old") == exe
        record = store.export_execution("old")
        assert record is not None and record.execution == exe and record.updated_at == 50.0
        assert record.processed == (("ev-old", 40.0),) and record.timers == (("a.b", 99.5),)
        assert [entry.event.id for entry in record.outbox] == ["out-old"]
        assert [(s.child_id, s.context) for s in record.spawns] == [("kid", {"k": 1})]
        assert [step["index"] for step in record.trace] == [4, 5]
        page = store.list_executions(status=[Status.RUNNING], roots_only=True)
        assert [summary.id for summary in page.items] == ["old"]
        store.commit(exe, [(None, Event(kind="K"))], "ev-new", trace={"a": 3})
        assert exe.version == 4 and store.read_trace("old")[-1]["index"] == 6
        exe.status = Status.DONE
        store.commit(exe, [])
        assert store.list_executions(status=[Status.RUNNING], roots_only=True).items == []
    assert schema_row(path) == (1, SCHEMA_VERSION, release_of(sql_backend.distribution))
    assert index_names(path) >= VERSION_3_INDEXES
    assert set(RECEIPT_COLUMNS) <= set(column_names(path, "executions"))
    sql_backend.open(str(path)).close()  # reopening an upgraded file changes nothing
    assert schema_row(path)[1] == SCHEMA_VERSION


def test_a_version_3_file_is_upgraded_in_place(sql_backend: FileBackend, tmp_path: Path) -> None:
    path = tmp_path / "v3.db"
    exe = version_3_file(path)
    assert schema_row(path) == (1, 3, "harel-store-sqlite 0.2.0")
    with closing(sql_backend.open(str(path))) as store:
        assert store.load("old") == exe
        assert [entry.event.id for entry in store.pending_outbox()] == ["out-old"]
        assert [step["index"] for step in store.read_trace("old")] == [4, 5]
        args = ([(None, Event(id="once", kind="K"))], "ev-new")
        store.commit(exe, *args)
        exe.version = 3  # as after an unknown outcome: the same commit, sent again
        store.commit(exe, *args)  # recognised by its receipt: success, nothing written again
        assert exe.version == 4
        assert [entry.event.id for entry in store.pending_outbox()] == ["out-old", "once"]
    assert schema_row(path) == (1, SCHEMA_VERSION, release_of(sql_backend.distribution))
    columns = column_names(path, "executions")
    assert columns[-len(RECEIPT_COLUMNS) :] == list(RECEIPT_COLUMNS)
    assert index_names(path) >= VERSION_3_INDEXES
    layout = _layout(path)
    sql_backend.open(str(path)).close()  # idempotent: reopening changes nothing
    assert _layout(path) == layout and schema_row(path)[1] == SCHEMA_VERSION


def test_a_version_4_file_is_upgraded_with_its_work_claimable(
    sql_backend: FileBackend, tmp_path: Path
) -> None:
    path = tmp_path / "v4.db"
    version_4_file(path)
    assert schema_row(path)[:2] == (1, 4)
    before = time.time()
    sql_backend.open(str(path)).close()  # the upgrade backfills the work rows
    after = time.time()
    assert schema_row(path) == (1, SCHEMA_VERSION, release_of(sql_backend.distribution))
    assert index_names(path) >= VERSION_5_INDEXES
    conn = raw(path)
    try:
        rows = conn.execute("SELECT key, priority, ready_at, owner FROM work ORDER BY key")
        work = {key: (priority, ready_at, owner) for key, priority, ready_at, owner in rows}
    finally:
        conn.close()
    # t2 at its earliest timer; old (a timer at 99.5 and relay work) and '' (untargeted) at
    # relay_due of the upgrade's time
    assert set(work) == {"", "old", "t2"} and work["t2"] == (0, 5.0, None)
    for key in ("", "old"):
        assert relay_due(before) <= work[key][1] <= relay_due(after) and work[key][2] is None
    layout = _layout(path)
    with closing(sql_backend.open(str(path))) as store:
        claims = store.claim("w", 1000.0, lease=30.0, limit=100)
        assert [claim.execution_id for claim in claims] == [None, "old", "t2"]
        untargeted, old, t2 = claims
        assert [(entry.target_id, entry.event.id) for entry in untargeted.outbox] == [
            (None, "bcast-old")
        ]
        assert old.timers == (("a.b", 99.5),)
        assert [entry.event.id for entry in old.outbox] == ["out-old"]
        assert [(spawn.child_id, spawn.parent_id) for spawn in old.spawns] == [("kid", "old")]
        assert t2.timers == (("y", 5.0), ("x", 7.0)) and t2.priority == 0
        assert store.claim("w2", 1000.0, lease=30.0) == []  # every group leased by w
    assert _layout(path) == layout  # reopening an upgraded file changes no schema


def _layout(path: Path) -> list[tuple[str, str, str]]:
    conn = raw(path)
    try:
        return conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall()
    finally:
        conn.close()


@pytest.mark.anyio
async def test_a_newer_layout_is_refused_before_anything_is_written(
    sql_backend: FileBackend, tmp_path: Path
) -> None:
    path = tmp_path / "newer.db"
    version_2_file(path)
    conn = raw(path)
    conn.execute("ALTER TABLE harel_schema ADD COLUMN written_by TEXT")
    writer = f"{sql_backend.distribution} 9.0"
    conn.execute("UPDATE harel_schema SET version = 99, written_by = ?", (writer,))
    layout = conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall()
    conn.close()
    counts = table_counts(path)
    with pytest.raises(SchemaVersionError) as info:
        sql_backend.open(str(path))
    message = str(info.value)
    assert "version 99" in message and f"version {SCHEMA_VERSION}" in message
    assert writer in message and f"pip install '{sql_backend.distribution}>=9.0'" in message
    with pytest.raises(SchemaVersionError, match="version 99"):
        await sql_backend.aopen(str(path))
    conn = raw(path)
    assert conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall() == (
        layout
    )
    conn.close()
    assert table_counts(path) == counts and schema_row(path) == (1, 99, writer)


_OPENER = textwrap.dedent(
    """
    import pathlib, sys, time
    from harel.registry import open_store
    go = pathlib.Path(sys.argv[2])
    while not go.exists():
        time.sleep(0.001)
    store = open_store(sys.argv[1], busy_timeout_ms=30000)
    print(store.load("old").version)
    store.close()
    """
)


def test_two_processes_open_a_version_2_file_at_once(
    sql_backend: FileBackend, tmp_path: Path
) -> None:
    path, go = tmp_path / "shared.db", tmp_path / "go"
    version_2_file(path)
    url = sql_backend.url(path)
    openers = [
        subprocess.Popen(
            [sys.executable, "-c", _OPENER, url, str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    go.touch()
    outcomes = [opener.communicate(timeout=120) for opener in openers]
    assert [opener.returncode for opener in openers] == [0, 0], outcomes
    assert [out.strip() for out, _ in outcomes] == ["3", "3"]
    assert schema_row(path)[1] == SCHEMA_VERSION and index_names(path) >= VERSION_3_INDEXES


def test_threads_share_one_sync_store(sql_backend: FileBackend, tmp_path: Path) -> None:
    errors: list[BaseException] = []
    store = sql_backend.open(str(tmp_path / "threads.db"))

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
    store.close()


def test_records_move_between_files_whole_and_once(
    sql_backend: FileBackend, tmp_path: Path
) -> None:
    source, target = tmp_path / "source.db", tmp_path / "target.db"
    with closing(sql_backend.open(str(source), trace_max=2)) as store:
        exe = Execution(id="e", definition_id="d")
        for tag in ("a", "b", "c"):
            store.commit(*full_commit_args(exe, tag))
        record = store.export_execution("e")
        relays = store.export_execution("t")  # only outbox entries target it
    assert record is not None and relays is not None and relays.execution is None
    assert len(record.trace) == 2 and len(record.outbox) == 0 and len(relays.outbox) == 3
    with closing(sql_backend.open(str(target), trace_max=2)) as store:
        store.commit(Execution(id="first", definition_id="d"), [(None, Event(kind="K"))])
        store.import_execution(record)
        store.import_execution(relays)
        moved = store.export_execution("e")
        assert moved is not None and record_digest(moved) == record_digest(record)
        moved_relays = store.export_execution("t")
        assert moved_relays is not None and record_digest(moved_relays) == record_digest(relays)
        assert [entry.seq for entry in moved_relays.outbox] == [2, 3, 4]  # after the existing
        spawns = store.pending_spawns()
        with pytest.raises(ExecutionAlreadyExists):
            store.import_execution(record)  # refused whole: no mark, timer, spawn or step
        again = store.export_execution("e")
        assert again is not None and record_digest(again) == record_digest(record)
        assert store.pending_spawns() == spawns


@pytest.mark.anyio
async def test_harness_reopens_one_file_and_destroys_it(
    sql_backend: FileBackend, tmp_path: Path
) -> None:
    harness = sql_backend.harness(tmp_path / "h.db")
    first = harness.open_sync()
    first.save(Execution(id="e", definition_id="d"))
    second = await harness.open_async()
    assert await second.load("e") is not None
    assert harness.footprint("e") == ["execution"]
    url = harness.url()
    assert url is not None
    with closing(open_store(url)) as by_url:
        assert by_url.load("e") is not None
    harness.destroy()
    assert not any(tmp_path.iterdir())  # noqa: ASYNC240 - a tiny local directory
    with pytest.raises(StoreError, match="closed"):
        first.load("e")
    with pytest.raises(StoreError, match="closed"):
        await second.load("e")


@pytest.mark.anyio
async def test_locked_database_waits_then_raises_store_unavailable(
    sql_backend: FileBackend, tmp_path: Path
) -> None:
    path = tmp_path / "locked.db"
    sync_store = sql_backend.open(str(path), busy_timeout_ms=50)
    async_store = await sql_backend.aopen(str(path), busy_timeout_ms=50)
    exe = Execution(id="e", definition_id="d")
    sync_store.save(exe)
    holder = sql_backend.raw(path)  # the backend's own driver: one SQLite copy per process
    holder.execute("BEGIN IMMEDIATE")
    try:
        started = time.monotonic()
        with pytest.raises(StoreUnavailable, match="50 ms") as info:
            sync_store.commit(exe, [(None, Event(kind="Blocked"))])
        assert time.monotonic() - started >= 0.05  # it did wait
        assert info.value.retryable and exe.version == 1
        with pytest.raises(StoreUnavailable):
            await async_store.commit(exe, [(None, Event(kind="Blocked"))])
        assert exe.version == 1
        with pytest.raises(StoreUnavailable):
            sync_store.ack_outbox(1)
        with pytest.raises(StoreUnavailable):
            await async_store.purge("e", force=True)
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
