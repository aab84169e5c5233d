"""Layout versions on a real server: a version-1, -2, -3 and -4 schema (built by hand, with
rows) upgraded in place on open (version 4 writing the work rows of what they hold, version 5
the commit's own dedupe and fence), concurrent openers of an old schema, and a newer layout
refused before anything is written."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from harel.store.common.claims import relay_due
from harel.store.common.records import record_digest
from harel.store.common.schema_version import release_of
from harel.store.contract import TimerOp
from harel.store.errors import AlreadyProcessed, SchemaVersionError, StoreConflict
from harel_store_postgres import PostgresStore
from harel_store_postgres._conn import Renderer
from harel_store_postgres._schema import (
    SCHEMA_VERSION,
    UPGRADE_TO_2,
    UPGRADE_TO_3,
    UPGRADE_TO_4,
    V1_DDL,
)
from harel_store_postgres.testing import PostgresHarness

_DOCUMENT = '{"id":"old","definition_id":"d","status":"RUNNING","active_path":"/a","version":4}'
_V1_ROWS: tuple[tuple[str, tuple[Any, ...]], ...] = (
    ("INSERT INTO {schema}.harel_schema (singleton, version) VALUES (true, 1)", ()),
    (
        "INSERT INTO {schema}.executions VALUES (%s, 'd', 'RUNNING', NULL, '/a', NULL, 4, %s, %s)",
        ("old", 1700000000.5, _DOCUMENT),
    ),
    (
        "INSERT INTO {schema}.outbox (target_id, event) VALUES ('old', %s), ('old', %s)",
        ('{"id":"e1","kind":"K"}', '{"id":"e2","kind":"K"}'),
    ),
    ("INSERT INTO {schema}.processed_events VALUES ('old', 'in', %s)", (1700000000.25,)),
    ("INSERT INTO {schema}.timers VALUES ('old', '/a', %s)", (1700000100.0,)),
    ("INSERT INTO {schema}.trace VALUES ('old', 7, %s)", ('{"event_kind":"Go"}',)),
)
"""Rows of every table, written as the previous release stored them."""

_CLAIM_FUNCTIONS = ("harel_claim", "harel_release", "harel_renew")
"""What version 4 adds (harel_commit, harel_import and harel_purge are replaced)."""


@pytest.fixture
def version_1(pg_url: str) -> Iterator[PostgresHarness]:
    """A fresh schema holding layout version 1, as the previous release wrote it, with rows."""
    harness = PostgresHarness(pg_url, connect_retries=2)
    render = Renderer(harness.schema)
    with harness.connect() as conn, conn.transaction():
        for statement, params in (*[(ddl, ()) for ddl in V1_DDL], *_V1_ROWS):
            conn.execute(render(statement), params)
    yield harness
    harness.destroy()


def _layout(harness: PostgresHarness) -> dict[str, Any]:
    """The schema's version row, functions, columns of harel_schema and row counts."""
    with harness.connect() as conn:
        row = conn.execute(
            psycopg.sql.SQL("SELECT to_jsonb(s) FROM {}.harel_schema AS s").format(
                psycopg.sql.Identifier(harness.schema)
            )
        ).fetchone()
        functions = conn.execute(
            "SELECT p.proname FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace "
            "WHERE n.nspname = %s ORDER BY p.proname",
            (harness.schema,),
        ).fetchall()
        counts = {}
        for table in ("executions", "outbox", "processed_events", "timers", "trace"):
            query = psycopg.sql.SQL("SELECT count(*) FROM {}.{}").format(
                psycopg.sql.Identifier(harness.schema), psycopg.sql.Identifier(table)
            )
            counted = conn.execute(query).fetchone()
            counts[table] = counted[0] if counted else None
    return {
        "row": row[0] if row else None,
        "functions": [name for (name,) in functions],
        "counts": counts,
    }


def test_version_1_is_upgraded_in_place_with_its_data(version_1: PostgresHarness) -> None:
    before = _layout(version_1)
    assert before["row"] == {"singleton": True, "version": 1}
    assert "harel_import" not in before["functions"]
    store = version_1.open_sync()
    after = _layout(version_1)
    assert after["row"] == {
        "singleton": True,
        "version": SCHEMA_VERSION,
        "written_by": release_of("harel-store-postgres"),
    }
    assert after["functions"] == sorted([*before["functions"], "harel_import", *_CLAIM_FUNCTIONS])
    assert after["counts"] == before["counts"]
    loaded = store.load("old")
    assert loaded is not None and (loaded.version, loaded.active_path) == (4, "/a")
    assert [e.event.id for e in store.pending_outbox()] == ["e1", "e2"]
    assert store.is_processed("old", "in") and store.due_timers(2e9) == [("old", "/a", 1.7000001e9)]
    assert [step["index"] for step in store.read_trace("old")] == [7]
    record = store.export_execution("old")  # needs nothing new; import needs harel_import
    assert record is not None and record.processed == (("in", 1700000000.25),)
    store.purge("old", force=True)
    store.import_execution(record)
    imported = store.export_execution("old")
    assert imported is not None and record_digest(imported) == record_digest(record)
    store.save(loaded)  # the upgraded store commits as usual
    assert loaded.version == 5
    store.close()
    again = version_1.open_sync()  # opening again: ready, nothing rewritten
    assert _layout(version_1)["row"] == after["row"]
    again.close()


def test_concurrent_openers_of_version_1_all_succeed(
    version_1: PostgresHarness, together: Any
) -> None:
    opened = together([version_1.open_sync] * 4)
    try:
        assert all(isinstance(store, PostgresStore) for store in opened), opened
        layout = _layout(version_1)
        assert layout["row"]["version"] == SCHEMA_VERSION
        assert layout["functions"].count("harel_import") == 1
        for store in opened:
            loaded = store.load("old")
            assert loaded is not None and loaded.version == 4
    finally:
        for store in opened:
            if isinstance(store, PostgresStore):
                store.close()


@pytest.mark.parametrize("writer", [None, "harel-store-postgres 9.9.0"])
def test_newer_layout_is_refused_before_anything_is_written(
    harel_harness: PostgresHarness, writer: str | None
) -> None:
    harel_harness.open_sync().close()
    schema = psycopg.sql.Identifier(harel_harness.schema)
    with harel_harness.connect(autocommit=True) as conn:
        conn.execute(
            psycopg.sql.SQL("UPDATE {}.harel_schema SET version = 99, written_by = %s").format(
                schema
            ),
            (writer,),
        )
        conn.execute(psycopg.sql.SQL("DROP FUNCTION {}.harel_import").format(schema))
    before = _layout(harel_harness)
    with pytest.raises(SchemaVersionError) as info:
        harel_harness.open_sync()
    message = str(info.value)
    assert "version 99" in message and f"reads version {SCHEMA_VERSION}" in message
    if writer is None:
        assert "pip install --upgrade harel-store-postgres" in message
    else:
        assert writer in message and "pip install 'harel-store-postgres>=9.9.0'" in message
    assert _layout(harel_harness) == before  # no function recreated, no version rewritten


@pytest.fixture
def version_2(pg_url: str) -> Iterator[PostgresHarness]:
    """A fresh schema holding layout version 2 (the previous release's), with rows."""
    harness = PostgresHarness(pg_url, connect_retries=2)
    render = Renderer(harness.schema)
    rows = (
        (
            "INSERT INTO {schema}.harel_schema (singleton, version, written_by) "
            "VALUES (true, 2, 'harel-store-postgres 0.1.0')",
            (),
        ),
        *_V1_ROWS[1:],
    )
    with harness.connect() as conn, conn.transaction():
        for statement, params in (*[(ddl, ()) for ddl in V1_DDL + UPGRADE_TO_2], *rows):
            conn.execute(render(statement), params)
    yield harness
    harness.destroy()


def _commit_signatures(harness: PostgresHarness) -> list[str]:
    with harness.connect() as conn:
        rows = conn.execute(
            "SELECT pg_get_function_identity_arguments(p.oid) FROM pg_proc AS p "
            "JOIN pg_namespace AS n ON n.oid = p.pronamespace "
            "WHERE n.nspname = %s AND p.proname = 'harel_commit'",
            (harness.schema,),
        ).fetchall()
    return [args for (args,) in rows]


def test_version_2_is_upgraded_in_place_to_receipts(version_2: PostgresHarness) -> None:
    before = _layout(version_2)
    assert before["row"]["version"] == 2
    (old_signature,) = _commit_signatures(version_2)
    assert "p_token" not in old_signature
    store = version_2.open_sync()
    try:
        after = _layout(version_2)
        assert after["row"]["version"] == SCHEMA_VERSION == 5
        assert after["functions"] == sorted([*before["functions"], *_CLAIM_FUNCTIONS])
        assert after["counts"] == before["counts"]
        (signature,) = _commit_signatures(version_2)  # the old one is gone, not overloaded
        assert "p_token text" in signature and "p_slot integer" in signature
        assert "p_work_keys text[]" in signature
        loaded = store.load("old")
        assert loaded is not None and loaded.version == 4
        # a row written before the upgrade has no receipts: a commit of it stores them
        copy = store.load("old")
        assert copy is not None
        loaded.context = {"after": "upgrade"}
        store.commit(loaded, [], trace={"event_kind": "Go"})
        loaded.version = 4  # re-sent, as after CommitOutcomeUnknown: recognised
        store.commit(loaded, [], trace={"event_kind": "Go"})
        assert loaded.version == 5
        assert [step["index"] for step in store.read_trace("old")] == [7, 8]
        store.save(loaded)
        loaded.version = 5
        store.save(loaded)  # the state-only path keeps receipts too
        assert loaded.version == 6
        with pytest.raises(StoreConflict):
            store.save(copy)
    finally:
        store.close()


def test_a_foreign_schema_is_refused_before_anything_is_written(pg_url: str) -> None:
    """A schema with an ``executions`` table but no version table (the reference
    implementation's layout, or another application's) is refused, not built over."""
    harness = PostgresHarness(pg_url, connect_retries=2)
    schema = psycopg.sql.Identifier(harness.schema)
    try:
        with harness.connect(autocommit=True) as conn:
            conn.execute(psycopg.sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(schema))
            conn.execute(
                psycopg.sql.SQL(
                    "CREATE TABLE {}.executions (id text PRIMARY KEY, data text, version int)"
                ).format(schema)
            )
        with pytest.raises(SchemaVersionError, match="no harel_schema version table"):
            harness.open_sync()
        with harness.connect() as conn:
            tables = conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
                (harness.schema,),
            ).fetchall()
        assert tables == [("executions",)]
    finally:
        harness.destroy()


@pytest.fixture
def version_3(pg_url: str) -> Iterator[PostgresHarness]:
    """A fresh schema holding layout version 3 (the previous release's: no work table), with
    timers, outbox entries (targeted and not) and spawn intents waiting."""
    harness = PostgresHarness(pg_url, connect_retries=2)
    render = Renderer(harness.schema)
    rows: tuple[tuple[str, tuple[Any, ...]], ...] = (
        (
            "INSERT INTO {schema}.harel_schema (singleton, version, written_by) "
            "VALUES (true, 3, 'harel-store-postgres 0.1.0')",
            (),
        ),
        (
            "INSERT INTO {schema}.executions VALUES (%s, 'd', 'RUNNING', NULL, '/a', NULL, 1, "
            "1.0, %s, NULL)",
            ("t2", '{"id":"t2","definition_id":"d","status":"RUNNING","version":1}'),
        ),
        ("INSERT INTO {schema}.timers VALUES ('t1', '/a', 100.0), ('t1', '/b', 50.0)", ()),
        ("INSERT INTO {schema}.timers VALUES ('t2', '/x', 1e12)", ()),
        (
            "INSERT INTO {schema}.outbox (target_id, event) "
            "VALUES ('b', %s), (NULL, %s), ('b', %s)",
            ('{"id":"e1","kind":"K"}', '{"id":"e2","kind":"K"}', '{"id":"e3","kind":"K"}'),
        ),
        (
            "INSERT INTO {schema}.spawns (parent_id, child_id, root_path, context) "
            "VALUES ('p', 'c1', '/r', '{{}}'), ('p', 'c2', '/r', '{{}}')",
            (),
        ),
    )
    with harness.connect() as conn, conn.transaction():
        steps = V1_DDL + UPGRADE_TO_2 + UPGRADE_TO_3
        for statement, params in (*[(ddl, ()) for ddl in steps], *rows):
            conn.execute(render(statement), params)
    yield harness
    harness.destroy()


def _work(harness: PostgresHarness) -> list[tuple[Any, ...]]:
    with harness.connect() as conn:
        query = psycopg.sql.SQL("SELECT key, priority, ready_at, owner FROM {}.work ORDER BY key")
        return conn.execute(query.format(psycopg.sql.Identifier(harness.schema))).fetchall()


def test_version_3_is_upgraded_with_work_rows_for_what_it_holds(version_3: PostgresHarness) -> None:
    before = _layout(version_3)
    assert before["row"]["version"] == 3 and "harel_claim" not in before["functions"]
    opened_at = time.time()
    store = version_3.open_sync()
    try:
        after = _layout(version_3)
        assert after["row"]["version"] == SCHEMA_VERSION == 5
        assert after["counts"] == before["counts"]
        work = _work(version_3)
        relay = [row for row in work if row[0] in ("", "b", "p")]
        assert [(key, priority, owner) for key, priority, _, owner in relay] == [
            ("", 0, None),
            ("b", 0, None),
            ("p", 0, None),
        ]
        (upgraded_at,) = {ready_at for _, _, ready_at, _ in relay}  # one upgrade time
        assert relay_due(opened_at) <= upgraded_at <= relay_due(time.time())
        assert [row for row in work if row[0] not in ("", "b", "p")] == [
            ("t1", 0, 50.0, None),  # the earliest timer of each execution
            ("t2", 0, 1e12, None),
        ]
        claims = store.claim("w", 1000.0, lease=30.0, limit=100)
        # relay groups first (due at once), by key; then t1's due timers; t2 is not due
        assert [claim.execution_id for claim in claims] == [None, "b", "p", "t1"]
        untargeted, targeted, parent, timers = claims
        assert [entry.event.id for entry in untargeted.outbox] == ["e2"]
        assert [entry.event.id for entry in targeted.outbox] == ["e1", "e3"]
        assert [entry.child_id for entry in parent.spawns] == ["c1", "c2"]
        assert timers.timers == (("/b", 50.0), ("/a", 100.0))
        assert store.claim("w2", 1000.0, lease=30.0, limit=100) == []  # all leased
        # the upgraded commit keeps the rows: an own commit sets the priority and the due time
        exe = store.load("t2")
        assert exe is not None
        exe.priority = 3
        store.commit(exe, [], timers=(TimerOp.schedule("/y", 10.0),))
        (claim,) = store.claim("w3", 1000.0, lease=30.0, limit=100)
        assert (claim.execution_id, claim.priority, claim.timers) == ("t2", 3, (("/y", 10.0),))
    finally:
        store.close()


@pytest.fixture
def version_4(pg_url: str) -> Iterator[PostgresHarness]:
    """A fresh schema holding layout version 4 (the previous release's: no dedupe or fence in
    the commit), with an execution, its dedupe mark, a timer and its leased work row."""
    harness = PostgresHarness(pg_url, connect_retries=2)
    render = Renderer(harness.schema)
    rows: tuple[tuple[str, tuple[Any, ...]], ...] = (
        (
            "INSERT INTO {schema}.harel_schema (singleton, version, written_by) "
            "VALUES (true, 4, 'harel-store-postgres 0.1.0')",
            (),
        ),
        (
            "INSERT INTO {schema}.executions VALUES (%s, 'd', 'RUNNING', NULL, '/a', NULL, 4, "
            "1.0, %s, NULL)",
            ("old", _DOCUMENT),
        ),
        ("INSERT INTO {schema}.processed_events VALUES ('old', 'in', 1.0)", ()),
        ("INSERT INTO {schema}.timers VALUES ('old', '/a', 100.0)", ()),
        ("INSERT INTO {schema}.work VALUES ('old', 2, 500.0, 'w')", ()),
    )
    with harness.connect() as conn, conn.transaction():
        steps = V1_DDL + UPGRADE_TO_2 + UPGRADE_TO_3 + UPGRADE_TO_4
        for statement, params in (*[(ddl, ()) for ddl in steps], *rows):
            conn.execute(render(statement), params)
    yield harness
    harness.destroy()


def test_version_4_is_upgraded_to_the_commits_own_dedupe(version_4: PostgresHarness) -> None:
    before = _layout(version_4)
    assert before["row"]["version"] == 4
    (old_signature,) = _commit_signatures(version_4)
    assert "p_base" not in old_signature
    work = _work(version_4)
    store = version_4.open_sync()
    try:
        after = _layout(version_4)
        assert after["row"]["version"] == SCHEMA_VERSION == 5
        assert after["functions"] == before["functions"]
        assert after["counts"] == before["counts"]
        assert _work(version_4) == work  # no backfill: version 4 kept the work rows
        (signature,) = _commit_signatures(version_4)  # the old one is gone, not overloaded
        assert "p_base text, p_base_slot integer" in signature and "OUT o_marked" in signature
        loaded = store.load("old")
        assert loaded is not None and loaded.version == 4
        loaded.context = {"again": True}
        with pytest.raises(AlreadyProcessed):  # the mark the older release recorded
            store.commit(loaded, [], processed_event_id="in", trace={"event_kind": "Go"})
        assert loaded.version == 4 and store.read_trace("old") == []
        store.commit(loaded, [], processed_event_id="next")
        store.save(loaded)  # fenced now: its own receipt holds
        assert loaded.version == 6
    finally:
        store.close()
