"""What the kit cannot state about the PostgreSQL store: round trips counted on the wire, the
query plans of every sweep and listing, claims (their plans on tables never analysed, SKIP
LOCKED, racing claimers), the data model, and its failure modes (server down at
start, server stopped mid-run, cancelled commits, hostile ids and schema names)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from harel.conformance.proxy import CountingProxy
from harel.model import Event, Execution, Status
from harel.store.common.listing import listing_query
from harel.store.common.sql.requests import Statement
from harel.store.contract import ExecutionRecord, OutboxEntry, TimerOp
from harel.store.errors import (
    AlreadyProcessed,
    ExecutionAlreadyExists,
    InvalidIdentifier,
    StoreConfigError,
    StoreConflict,
    StoreError,
    StoreUnavailable,
)
from harel_store_postgres import AsyncPostgresStore, PostgresStore
from harel_store_postgres._claims import claim_statement
from harel_store_postgres._conn import Renderer
from harel_store_postgres._listing import listing_statement
from harel_store_postgres._plan import PLAN as plan
from harel_store_postgres._plan import Plan
from harel_store_postgres._schema import SCHEMA_VERSION
from harel_store_postgres.testing import PostgresHarness

FAR = 1e18
LATER = 4e9
"""A ``now`` at which every timer and relay unit the tests write is due (a lease from it is
still a distinct float, unlike one from FAR)."""


def _step(kind: str = "Go") -> dict[str, Any]:
    return {"event_kind": kind, "event_data": {}, "from_path": None, "to_path": "/a"}


def _with_host(url: str, host: str, port: int) -> str:
    """``url`` pointed at another host:port, credentials, database and query kept."""
    parts = urlsplit(url)
    userinfo = parts.netloc.rpartition("@")[0]
    netloc = (f"{userinfo}@" if userinfo else "") + f"{host}:{port}"
    return urlunsplit(parts._replace(netloc=netloc))


def _target(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or 5432


@pytest.fixture
def proxy(pg_url: str) -> Iterator[CountingProxy]:
    with CountingProxy(*_target(pg_url)) as counting:
        yield counting


@pytest.fixture
def proxied(pg_url: str, proxy: CountingProxy) -> Iterator[PostgresHarness]:
    """A harness whose stores talk to the server through the counting proxy."""
    harness = PostgresHarness(_with_host(pg_url, proxy.host, proxy.port), connect_retries=2)
    yield harness
    harness.destroy()


# -- round trips --------------------------------------------------------------------------------


def _shapes() -> list[tuple[str, dict[str, Any]]]:
    """Every commit shape the engine produces, each applied to a stored execution."""
    return [
        ("state only (save)", {}),
        ("emit", {"emits": [(None, Event(id="e", kind="K"))]}),
        ("dedupe mark", {"processed_event_id": "in"}),
        (
            "timer schedule + cancel",
            {"timers": (TimerOp.schedule("/a", 5.0), TimerOp.cancel("/b"))},
        ),
        ("spawn", {"spawns": [("child", "/r", {"k": 1})]}),
        ("trace step", {"trace": _step()}),
        (
            "everything",
            {
                "emits": [("t", Event(id="e2", kind="K")), (None, Event(id="e3", kind="K"))],
                "processed_event_id": "in-2",
                "timers": (TimerOp.schedule("/a", 6.0), TimerOp.schedule("/c", 7.0)),
                "spawns": [("c1", "/r", {}), ("c2", "/s", {"x": [1]})],
                "trace": _step(),
            },
        ),
        ("fan-out of 150 spawns", {"spawns": [(f"k{i}", "/r", {"i": i}) for i in range(150)]}),
    ]


def _operations(store: Any, exe: Execution) -> list[tuple[str, Callable[[], Any]]]:
    """Every other contract method, after the commits (``store`` sync or async)."""
    return [
        ("load", lambda: store.load(exe.id)),
        ("load_for_event", lambda: store.load_for_event(exe.id, "in")),
        ("is_processed", lambda: store.is_processed(exe.id, "in")),
        ("pending_outbox", lambda: store.pending_outbox(limit=100)),
        ("ack_outbox", lambda: store.ack_outbox(1)),
        ("pending_spawns", lambda: store.pending_spawns(limit=100)),
        ("ack_spawn", lambda: store.ack_spawn(1)),
        ("due_timers", lambda: store.due_timers(FAR, limit=100)),
        ("delete_timer", lambda: store.delete_timer(exe.id, "/a", 6.0)),
        ("read_trace", lambda: store.read_trace(exe.id)),
        ("append_trace", lambda: store.append_trace(exe.id, _step())),
        ("list_executions", lambda: store.list_executions(limit=10)),
        ("list 2 statuses", lambda: store.list_executions(status=[Status.DONE, Status.PENDING])),
        ("prune_processed", lambda: store.prune_processed(0.0)),
        ("export_execution", lambda: store.export_execution(exe.id)),
        ("import_execution (relays)", lambda: store.import_execution(_RELAYS)),
        ("import_execution (refused)", lambda: _refused_import(store, exe)),
        ("enqueue", lambda: store.enqueue(exe.id, Event(id="q", kind="K"), priority=2)),
        ("claim", lambda: store.claim("rt-worker", LATER, limit=1000)),
        ("renew", lambda: store.renew("rt-worker", exe.id, LATER)),
        ("release", lambda: store.release("rt-worker", exe.id)),
        ("purge (force)", lambda: store.purge(exe.id, force=True)),
    ]


_RELAYS = ExecutionRecord(
    execution_id="relay", execution=None, outbox=(OutboxEntry(1, "relay", Event(kind="K")),)
)


def _refused_import(store: Any, exe: Execution) -> Any:
    """Import ``exe`` again (refused, ``ExecutionAlreadyExists``), sync or async."""
    record = ExecutionRecord(execution_id=exe.id, execution=exe)

    def check(error: BaseException | None) -> None:
        assert isinstance(error, ExecutionAlreadyExists), error

    if isinstance(store, PostgresStore):
        try:
            store.import_execution(record)
        except ExecutionAlreadyExists as exc:
            return check(exc)
        return check(None)

    async def refused() -> None:
        try:
            await store.import_execution(record)
        except ExecutionAlreadyExists as exc:
            return check(exc)
        return check(None)

    return refused()


ROUND_TRIPS: dict[str, dict[str, int]] = {}
"""What the round-trip tests measured, by flavour (printed for the README with -s)."""


def _report(flavour: str, measured: dict[str, int]) -> None:
    ROUND_TRIPS[flavour] = measured
    print(f"\nround trips per operation ({flavour}):")
    for name, count in measured.items():
        print(f"  {name:28s} {count}")


def test_round_trips_sync(proxied: PostgresHarness, proxy: CountingProxy) -> None:
    store = proxied.open_sync()
    measured: dict[str, int] = {}
    exe = Execution(id="rt", definition_id="d")
    proxy.reset()
    store.commit(exe, [])
    measured["commit: insert (version 0)"] = proxy.round_trips
    for name, shape in _shapes():
        proxy.reset()
        store.commit(exe, shape.pop("emits", []), **shape)
        measured[f"commit: {name}"] = proxy.round_trips
    stale = Execution(id="rt", definition_id="d", version=1)
    proxy.reset()
    with pytest.raises(StoreConflict):
        store.commit(stale, [(None, Event(kind="Lost"))])
    measured["commit: lost CAS"] = proxy.round_trips
    proxy.reset()
    with pytest.raises(StoreConflict):
        store.save(stale)
    measured["commit: lost CAS, state only"] = proxy.round_trips
    for name, call in _operations(store, exe):
        proxy.reset()
        call()
        measured[name] = proxy.round_trips
    store.close()
    _report("sync", measured)
    lost_state_only = measured.pop("commit: lost CAS, state only")
    assert lost_state_only == 2  # the CAS, then (only when it lost) the found version
    assert all(n == 1 for n in measured.values()), measured


@pytest.mark.anyio
async def test_round_trips_async(proxied: PostgresHarness, proxy: CountingProxy) -> None:
    store = await proxied.open_async()
    measured: dict[str, int] = {}
    exe = Execution(id="rt", definition_id="d")
    proxy.reset()
    await store.commit(exe, [])
    measured["commit: insert (version 0)"] = proxy.round_trips
    for name, shape in _shapes():
        proxy.reset()
        await store.commit(exe, shape.pop("emits", []), **shape)
        measured[f"commit: {name}"] = proxy.round_trips
    for name, call in _operations(store, exe):
        proxy.reset()
        await call()
        measured[name] = proxy.round_trips
    await store.close()
    _report("async", measured)
    assert all(n == 1 for n in measured.values()), measured


_SIDE: dict[str, Any] = {
    "timers": (TimerOp.schedule("/late", 7.0),),
    "spawns": [("rt-child", "/r", {})],
    "trace": _step(),
}
"""Side writes a refused commit carries (and must not write)."""


def test_refusals_cost_the_commits_one_round_trip_sync(
    proxied: PostgresHarness, proxy: CountingProxy
) -> None:
    """``AlreadyProcessed`` and the fence's ``StoreConflict`` are decided inside the commit's
    one statement: a refused commit costs what an applied one does (a state-only commit that
    is refused, like any state-only CAS it lost, adds the read of the version it lost to)."""
    store = proxied.open_sync()
    try:
        measured: dict[str, int] = {}
        exe = Execution(id="rt", definition_id="d", status=Status.DONE)
        store.commit(exe, [])
        stale = store.load("rt")
        assert stale is not None
        proxy.reset()
        store.commit(exe, [(None, Event(kind="K"))], processed_event_id="e-1", **_SIDE)
        measured["applied, with mark"] = proxy.round_trips
        proxy.reset()
        with pytest.raises(AlreadyProcessed):
            store.commit(exe, [(None, Event(kind="K"))], processed_event_id="e-1", **_SIDE)
        measured["already processed"] = proxy.round_trips
        proxy.reset()
        with pytest.raises(AlreadyProcessed):  # an out-of-date copy: still "already"
            store.commit(stale, [], processed_event_id="e-1", **_SIDE)
        measured["already processed, stale copy"] = proxy.round_trips
        store.purge("rt")  # re-created up to the same version: exe's fence no longer holds
        new = Execution(id="rt", definition_id="d", status=Status.DONE)
        store.commit(new, [])
        store.commit(new, [])
        proxy.reset()
        with pytest.raises(StoreConflict) as fenced:
            store.commit(exe, [(None, Event(kind="K"))], processed_event_id="e-2", **_SIDE)
        measured["fenced"] = proxy.round_trips
        assert not isinstance(fenced.value, AlreadyProcessed) and fenced.value.found == 2
        proxy.reset()
        with pytest.raises(StoreConflict):
            store.save(exe)
        measured["fenced, state only"] = proxy.round_trips
        assert (exe.version, new.version) == (2, 2)
        assert len(store.pending_outbox()) == 1  # the applied commit's (untargeted: kept)
        assert store.pending_spawns() == [] and store.due_timers(FAR) == []
        assert store.read_trace("rt") == []
    finally:
        store.close()
    _report("refusals, sync", measured)
    assert measured.pop("fenced, state only") == 2  # the CAS, then the found version
    assert all(n == 1 for n in measured.values()), measured


@pytest.mark.anyio
async def test_refusals_cost_the_commits_one_round_trip_async(
    proxied: PostgresHarness, proxy: CountingProxy
) -> None:
    store = await proxied.open_async()
    try:
        measured: dict[str, int] = {}
        exe = Execution(id="rt", definition_id="d", status=Status.DONE)
        await store.commit(exe, [], processed_event_id="e-1")
        proxy.reset()
        with pytest.raises(AlreadyProcessed):
            await store.commit(exe, [(None, Event(kind="K"))], processed_event_id="e-1", **_SIDE)
        measured["already processed"] = proxy.round_trips
        await store.purge("rt")
        await store.commit(Execution(id="rt", definition_id="d"), [])
        proxy.reset()
        with pytest.raises(StoreConflict) as fenced:
            await store.commit(exe, [], processed_event_id="e-2", **_SIDE)
        measured["fenced"] = proxy.round_trips
        assert not isinstance(fenced.value, AlreadyProcessed) and fenced.value.found == 1
        assert await store.pending_outbox() == [] and await store.due_timers(FAR) == []
    finally:
        await store.close()
    _report("refusals, async", measured)
    assert all(n == 1 for n in measured.values()), measured


# -- query plans --------------------------------------------------------------------------------

ROWS = 20_000


@pytest.fixture
def big(harel_harness: PostgresHarness) -> Iterator[psycopg.Connection[Any]]:
    """A schema holding ROWS executions, timers, outbox/spawn entries and marks, analysed."""
    store = harel_harness.open_sync()
    store.close()
    schema = psycopg.sql.Identifier(harel_harness.schema)
    statements = [
        # mostly finished children of one definition; 1% rare definition, 2% roots,
        # 1% RUNNING, 1% FAILED: the filters a dashboard asks for are the selective ones
        "INSERT INTO {s}.executions SELECT 'exe-' || lpad(g::text, 6, '0'), "
        "CASE WHEN g %% 100 = 7 THEN 'def-rare' ELSE 'def-common' END, "
        "CASE g %% 100 WHEN 3 THEN 'RUNNING' WHEN 4 THEN 'FAILED' ELSE 'DONE' END, NULL, NULL, "
        "CASE WHEN g %% 50 IN (0, 3) THEN NULL ELSE 'exe-000001' END, 1, g, '{{}}' "
        "FROM generate_series(1, %s) g",
        "INSERT INTO {s}.timers SELECT 'exe-' || lpad(g::text, 6, '0'), '/t', g::float8 "
        "FROM generate_series(1, %s) g",
        "INSERT INTO {s}.outbox (target_id, event) SELECT 'exe-' || lpad(g::text, 6, '0'), '{{}}' "
        "FROM generate_series(1, %s) g",
        "INSERT INTO {s}.spawns (parent_id, child_id, root_path, context) "
        "SELECT 'exe-' || lpad(g::text, 6, '0'), 'c', '/r', '{{}}' FROM generate_series(1, %s) g",
        "INSERT INTO {s}.processed_events SELECT 'exe-' || lpad(g::text, 6, '0'), 'ev', g "
        "FROM generate_series(1, %s) g",
        "INSERT INTO {s}.trace SELECT 'exe-' || lpad((g %% 100)::text, 6, '0'), g, '{{}}' "
        "FROM generate_series(1, %s) g",
    ]
    with harel_harness.connect(autocommit=True) as conn:
        for text in statements:
            conn.execute(psycopg.sql.SQL(text).format(s=schema), (ROWS,))
        conn.execute(psycopg.sql.SQL("ANALYZE {s}.executions").format(s=schema))
        for table in ("timers", "outbox", "spawns", "processed_events", "trace"):
            conn.execute(
                psycopg.sql.SQL("ANALYZE {s}.{t}").format(s=schema, t=psycopg.sql.Identifier(table))
            )
        yield conn


def _nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):
        yield from _nodes(child)


def _explain(
    conn: psycopg.Connection[Any], schema: str, statement: Any
) -> tuple[set[str], set[str]]:
    """The node types and the index names of ``statement``'s plan."""
    sql = Renderer(schema)(statement.sql)
    row = conn.execute(b"EXPLAIN (FORMAT JSON) " + sql, statement.params).fetchone()
    assert row is not None
    document = row[0] if isinstance(row[0], list) else json.loads(row[0])
    nodes = list(_nodes(document[0]["Plan"]))
    return {n["Node Type"] for n in nodes}, {n["Index Name"] for n in nodes if "Index Name" in n}


def _first(operation: Plan[Any]) -> Any:
    """The first statement an operation sends."""
    return next(operation)


def _listing(**filters: Any) -> Any:
    query = listing_query(
        status=filters.get("status"),
        definition_id=filters.get("definition_id"),
        roots_only=filters.get("roots_only", False),
        limit=100,
        cursor=None,
    )
    return listing_statement(query)


PLANS: list[tuple[str, Callable[[], Any], set[str], bool]] = [
    # (what, its statement, the indexes that may serve it, whether the index gives the order)
    ("due_timers", lambda: _first(plan.due_timers(5000.0, 100)), {"timers_due"}, True),
    ("pending_outbox", lambda: _first(plan.pending_outbox(100)), {"outbox_pkey"}, True),
    ("pending_spawns", lambda: _first(plan.pending_spawns(100)), {"spawns_pkey"}, True),
    ("list: all", lambda: _listing(), {"executions_pkey"}, True),
    (
        "list: definition",
        lambda: _listing(definition_id="def-rare"),
        {"executions_definition", "executions_definition_status"},
        True,
    ),
    ("list: one status", lambda: _listing(status=[Status.RUNNING]), {"executions_status"}, True),
    (
        "list: two statuses",
        lambda: _listing(status=[Status.RUNNING, Status.FAILED]),
        {"executions_status"},
        True,
    ),
    (
        "list: definition + status",
        lambda: _listing(definition_id="def-rare", status=[Status.DONE]),
        {"executions_definition_status", "executions_definition"},
        True,
    ),
    ("list: roots", lambda: _listing(roots_only=True), {"executions_roots"}, True),
    (
        "list: roots + status",
        lambda: _listing(roots_only=True, status=[Status.RUNNING]),
        {"executions_roots_status"},
        True,
    ),
    (
        "prune_processed batch",
        lambda: _first(plan.prune_processed(100.0, 50)),
        {"processed_age"},
        True,
    ),
    ("load", lambda: _first(plan.load("exe-000042")), {"executions_pkey"}, True),
    (
        "is_processed",
        lambda: _first(plan.is_processed("exe-000042", "ev")),
        {"processed_events_pkey"},
        True,
    ),
    # every part of the record of one id by its index (the relays' small sets sorted by seq)
    (
        "export_execution",
        lambda: _first(plan.export_execution("exe-000042")),
        {"executions_pkey", "outbox_target_seq", "spawns_parent_seq", "trace_pkey", "timers_pkey"},
        False,
    ),
    # a ring holds at most trace_max rows: sorting them after the index lookup is bounded
    ("read_trace", lambda: _first(plan.read_trace("exe-000042")), {"trace_pkey"}, False),
    (
        "delete_timer",
        lambda: _first(plan.delete_timer("exe-000042", "/t", 42.0)),
        {"timers_pkey", "timers_due"},
        True,
    ),
]


@pytest.mark.parametrize(("name", "make", "allowed", "ordered"), PLANS, ids=[p[0] for p in PLANS])
def test_query_plan_uses_an_index(
    big: psycopg.Connection[Any],
    harel_harness: PostgresHarness,
    name: str,
    make: Callable[[], Any],
    allowed: set[str],
    ordered: bool,
) -> None:
    """Each sweep, listing and probe reads an index range on a table of ROWS rows."""
    nodes, indexes = _explain(big, harel_harness.schema, make())
    assert "Seq Scan" not in nodes, (name, nodes)
    assert indexes & allowed, (name, indexes, nodes)
    if ordered:
        assert "Sort" not in nodes, f"{name}: the index should deliver the order ({nodes})"


@pytest.mark.parametrize(
    ("table", "column", "index"),
    [
        ("outbox", "target_id", "outbox_target_seq"),
        ("spawns", "parent_id", "spawns_parent_seq"),
        ("processed_events", "execution_id", "processed_events_pkey"),
        ("timers", "execution_id", "timers_pkey"),
        ("trace", "execution_id", "trace_pkey"),
    ],
)
def test_purge_deletes_use_indexes(
    big: psycopg.Connection[Any],
    harel_harness: PostgresHarness,
    table: str,
    column: str,
    index: str,
) -> None:
    """The statements inside ``harel_purge`` find an execution's rows by index."""
    statement = Statement(f"DELETE FROM {{schema}}.{table} WHERE {column} = %s", ("exe-000042",))
    nodes, indexes = _explain(big, harel_harness.schema, statement)
    assert "Seq Scan" not in nodes and index in indexes, (nodes, indexes)


# -- claims -------------------------------------------------------------------------------------

CLAIM_ROWS = 100_000


def _claim_plans(conn: psycopg.Connection[Any], schema: str) -> list[dict[str, Any]]:
    """The plans of every statement one ``harel_claim`` call runs inside the function (auto_explain,
    nested statements, sent back as notices)."""
    notices: list[str] = []
    conn.add_notice_handler(lambda diagnostic: notices.append(diagnostic.message_primary or ""))
    for setting in (
        "LOAD 'auto_explain'",
        "SET auto_explain.log_min_duration = 0",
        "SET auto_explain.log_nested_statements = on",
        "SET auto_explain.log_format = json",
        "SET auto_explain.log_level = notice",
    ):
        conn.execute(setting)
    statement = claim_statement("explainer", 5000.0, 5030.0, 100)
    conn.execute(Renderer(schema)(statement.sql), statement.params)
    conn.execute("SET auto_explain.log_min_duration = -1")
    plans = []
    for text in notices:
        if "{" in text:
            plans.append(json.loads(text[text.index("{") :])["Plan"])
    return plans


@pytest.fixture
def unanalysed(pg_url: str) -> Iterator[PostgresHarness]:
    """A new schema (never a reused one: its tables have no statistics at all)."""
    harness = PostgresHarness(pg_url, connect_retries=2)
    yield harness
    harness.destroy()


def test_claim_reads_indexes_on_a_table_never_analysed(unanalysed: PostgresHarness) -> None:
    """100k executions with a work row and a timer each, plus relays, in tables that were
    never analysed (autovacuum off for them): every statement ``harel_claim`` runs reads an
    index, and each tier read is an ordered index scan of ``work_ready`` under its row locks
    (it stops after ``limit`` rows: no Seq Scan, no bitmap, no sort of the tier)."""
    unanalysed.open_sync().close()
    schema = psycopg.sql.Identifier(unanalysed.schema)
    fill = [
        "INSERT INTO {s}.work SELECT 'exe-' || g, g %% 5, g::float8, NULL "
        "FROM generate_series(1, %s) g",
        "INSERT INTO {s}.timers SELECT 'exe-' || g, '/t', g::float8 FROM generate_series(1, %s) g",
        "INSERT INTO {s}.outbox (target_id, event) SELECT CASE WHEN g %% 10 = 0 THEN NULL "
        "ELSE 'exe-' || g END, '{{}}' FROM generate_series(1, %s) g",
        "INSERT INTO {s}.spawns (parent_id, child_id, root_path, context) "
        "SELECT 'exe-' || g, 'c', '/r', '{{}}' FROM generate_series(1, %s) g",
    ]
    with unanalysed.connect(autocommit=True) as conn:
        for table in ("work", "timers", "outbox", "spawns"):
            name = psycopg.sql.Identifier(table)
            off = "ALTER TABLE {s}.{t} SET (autovacuum_enabled = false)"
            conn.execute(psycopg.sql.SQL(off).format(s=schema, t=name))
        for text in fill:
            conn.execute(psycopg.sql.SQL(text).format(s=schema), (CLAIM_ROWS,))
        analysed = conn.execute(
            "SELECT count(*) FROM pg_stat_user_tables WHERE schemaname = %s "
            "AND (last_analyze IS NOT NULL OR last_autoanalyze IS NOT NULL)",
            (unanalysed.schema,),
        ).fetchone()
        assert analysed == (0,)
        custom = _claim_plans(conn, unanalysed.schema)
        # the pool's long-lived sessions run the function's statements on cached generic plans
        conn.execute("SET plan_cache_mode = force_generic_plan")
        generic = _claim_plans(conn, unanalysed.schema)
    for plans in (custom, generic):
        _assert_claim_plans(plans)


def _assert_claim_plans(plans: list[dict[str, Any]]) -> None:
    scans = [
        (node["Node Type"], node.get("Relation Name"), node.get("Index Name"))
        for plan in plans
        for node in _nodes(plan)
        if "Relation Name" in node
    ]
    assert scans, "auto_explain reported no plan"
    assert not [scan for scan in scans if scan[0] in ("Seq Scan", "Bitmap Heap Scan")], scans
    (tiers,) = [plan for plan in plans if any(n["Node Type"] == "LockRows" for n in _nodes(plan))]
    read = {(n["Node Type"], n.get("Index Name")) for n in _nodes(tiers) if "Relation Name" in n}
    assert read == {("Index Scan", "work_ready")}, read
    locks = [node for node in _nodes(tiers) if node["Node Type"] == "LockRows"]
    assert [child["Node Type"] for lock in locks for child in lock["Plans"]] == ["Index Scan"]
    relays = {scan[2] for scan in scans if scan[1] in ("outbox", "spawns")}
    assert relays <= {"outbox_target_seq", "spawns_parent_seq"} and relays, scans


def _due_timers(store: PostgresStore, ids: list[str]) -> None:
    for execution_id in ids:
        exe = Execution(id=execution_id, definition_id="d")
        store.commit(exe, [], timers=(TimerOp.schedule("/t", 1.0),))


def test_a_claim_skips_rows_another_transaction_holds(
    store: PostgresStore, harel_harness: PostgresHarness
) -> None:
    """FOR UPDATE SKIP LOCKED: rows locked by another transaction (a claimer mid-call) are
    passed over, not waited for; they are claimable once it ends."""
    ids = [f"skip-{n:02d}" for n in range(12)]
    _due_timers(store, ids)
    held = ids[:4]
    query = psycopg.sql.SQL("SELECT key FROM {}.work WHERE key = ANY (%s) FOR UPDATE").format(
        psycopg.sql.Identifier(harel_harness.schema)
    )
    with ThreadPoolExecutor(max_workers=1) as pool, harel_harness.connect() as holder:
        assert len(holder.execute(query, (held,)).fetchall()) == 4
        try:
            claimed = pool.submit(store.claim, "w1", 10.0, limit=100).result(timeout=60)
        finally:
            holder.rollback()
    assert sorted(str(claim.execution_id) for claim in claimed) == ids[4:]
    assert sorted(str(c.execution_id) for c in store.claim("w2", 10.0, limit=100)) == held


def test_racing_claimers_on_many_connections_split_the_work(
    store: PostgresStore, together: Any
) -> None:
    """Four claimers at once over one pool: every group goes to exactly one of them."""
    ids = [f"race-{n:02d}" for n in range(40)]
    _due_timers(store, ids)
    results = together([lambda n=n: store.claim(f"w{n}", 10.0, limit=10) for n in range(4)])
    assert all(isinstance(result, list) for result in results), results
    groups = [str(claim.execution_id) for result in results for claim in result]
    assert sorted(groups) == ids  # disjoint (no group twice) and nothing left behind
    assert store.claim("late", 10.0, limit=100) == []


# -- data model ---------------------------------------------------------------------------------


def test_layout_and_schema_version(store: PostgresStore, harel_harness: PostgresHarness) -> None:
    """The tables, key collations and column types the README describes, and the version row."""
    with harel_harness.connect() as conn:
        columns = {
            (table, column): (kind, collation)
            for table, column, kind, collation in conn.execute(
                "SELECT table_name, column_name, data_type, collation_name "
                "FROM information_schema.columns WHERE table_schema = %s",
                (harel_harness.schema,),
            )
        }
        version = conn.execute(
            psycopg.sql.SQL("SELECT version FROM {}.harel_schema").format(
                psycopg.sql.Identifier(harel_harness.schema)
            )
        ).fetchall()
    assert version == [(SCHEMA_VERSION,)]
    assert columns[("timers", "fire_at")] == ("double precision", None)
    assert columns[("executions", "data")] == ("text", None)
    assert columns[("executions", "version")][0] == "bigint"
    for key in (("executions", "id"), ("timers", "path"), ("processed_events", "event_id")):
        assert columns[key] == ("text", "C"), key


def test_fire_at_keeps_every_bit_in_the_column(
    store: PostgresStore, harel_harness: PostgresHarness
) -> None:
    """``double precision`` holds -0.0 and subnormals exactly (the envelope may normalise -0.0,
    the column does not need it)."""
    schema = psycopg.sql.Identifier(harel_harness.schema)
    values = [-0.0, 5e-324, 2.0**53 + 1.0, 0.1 + 0.2, 1700000000.1234567, -1.5e308]
    with harel_harness.connect(autocommit=True) as conn:
        for n, value in enumerate(values):
            conn.execute(
                psycopg.sql.SQL("INSERT INTO {}.timers VALUES ('x', %s, %s)").format(schema),
                (f"/{n}", value),
            )
    due = {path: value for _, path, value in store.due_timers(FAR)}
    for n, value in enumerate(values):
        assert repr(due[f"/{n}"]) == repr(value)


def test_definition_filter_is_exact_on_the_column(store: PostgresStore) -> None:
    for definition in ("order", "order-v2", "ord%", "ord_r", "ORDER"):
        store.save(Execution(id=f"id-{definition}", definition_id=definition))
    page = store.list_executions(definition_id="order")
    assert [item.id for item in page.items] == ["id-order"]
    assert [i.id for i in store.list_executions(definition_id="ord%").items] == ["id-ord%"]


def test_listing_order_is_code_point_order(store: PostgresStore) -> None:
    """The ``"C"`` collation sorts like Python does, whatever the database's locale."""
    ids = ["a", "B", "b", "é", "Z", "_", "~", "😀", "中", "a-b", "a_b", "ab"]
    for execution_id in ids:
        store.save(Execution(id=execution_id, definition_id="d"))
    seen: list[str] = []
    cursor = None
    while True:
        page = store.list_executions(limit=5, cursor=cursor)
        seen.extend(item.id for item in page.items)
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == sorted(ids)


def test_summary_carries_updated_at(store: PostgresStore) -> None:
    before = time.time()
    store.save(Execution(id="u", definition_id="d"))
    (summary,) = store.list_executions().items
    assert summary.updated_at is not None and before - 1 <= summary.updated_at <= time.time() + 1


# -- hostile ids --------------------------------------------------------------------------------

EVERY_PLANE = "".join(chr(plane * 0x10000 + 0x4E2D) for plane in range(17))
"""One code point from each of the 17 Unicode planes (all valid UTF-8; most unassigned)."""

HOSTILE = [
    "colon:id",
    "{brace}",
    "dot.id",
    "$dollar",
    "per%cent_",
    "quote'single\"double",
    "back\\slash",
    "semi;--comment",
    "$harel$ body end",
    EVERY_PLANE,
    "\U0001f600" * 256,  # exactly 1024 UTF-8 bytes, incompressible in an index
]


@pytest.mark.parametrize("hostile", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_ids_round_trip(
    store: PostgresStore, harel_harness: PostgresHarness, hostile: str
) -> None:
    """Hostile text in every key column at once (ids at the 1 KiB limit included) round-trips,
    is matched exactly, and purge removes all of it."""
    exe = Execution(id=hostile, definition_id=hostile, status=Status.DONE)
    store.commit(
        exe,
        [(hostile, Event(id=hostile, kind="K"))],
        processed_event_id=hostile,
        timers=(TimerOp.schedule(hostile, 1.5),),
        spawns=[(hostile, hostile, {hostile: hostile})],
        trace=_step(hostile),
    )
    store.save(Execution(id=hostile[:-1] or "x", definition_id="other"))
    loaded = store.load(hostile)
    assert loaded is not None and loaded.id == hostile and loaded.definition_id == hostile
    assert store.load_for_event(hostile, hostile)[1] is True
    assert store.due_timers(FAR) == [(hostile, hostile, 1.5)]
    assert [i.id for i in store.list_executions(definition_id=hostile).items] == [hostile]
    assert store.pending_spawns()[0].context == {hostile: hostile}
    assert store.read_trace(hostile)[0]["event_kind"] == hostile
    assert store.purge(hostile) is True
    assert harel_harness.footprint(hostile) == []


def _rows(harness: PostgresHarness) -> int:
    schema = psycopg.sql.Identifier(harness.schema)
    total = 0
    with harness.connect() as conn:
        for table in ("executions", "outbox", "spawns", "processed_events", "timers", "trace"):
            query = psycopg.sql.SQL("SELECT count(*) FROM {}.{}").format(
                schema, psycopg.sql.Identifier(table)
            )
            row = conn.execute(query).fetchone()
            total += row[0] if row else 0
    return total


@pytest.mark.parametrize(
    "where",
    ["id", "definition_id", "event", "target", "child", "timer", "parent_id"],
)
@pytest.mark.parametrize(
    "bad",
    ["nul\x00inside", "x" * 65536, "\U0001f600" * 16384, "lone\ud800"],
    ids=["nul", "64k-ascii", "64k-plane1", "surrogate"],
)
def test_unstorable_ids_are_refused_before_writing(
    store: PostgresStore, harel_harness: PostgresHarness, where: str, bad: str
) -> None:
    """NUL (PostgreSQL text cannot hold it), lone surrogates and ids over 1 KiB are refused
    with InvalidIdentifier before anything is sent; the store keeps working."""
    exe = Execution(id="ok", definition_id="d")
    args: dict[str, Any] = {"emits": []}
    if where == "id":
        exe = Execution(id=bad, definition_id="d")
    elif where == "definition_id":
        exe = Execution(id="ok", definition_id=bad)
    elif where == "parent_id":
        exe = Execution(id="ok", definition_id="d", parent_id=bad)
    elif where == "event":
        args["processed_event_id"] = bad
    elif where == "target":
        args["emits"] = [(bad, Event(kind="K"))]
    elif where == "child":
        args["spawns"] = [(bad, "/r", {})]
    else:
        args["timers"] = (TimerOp.schedule(bad, 1.0),)
    with pytest.raises(InvalidIdentifier):
        store.commit(exe, **args)
    assert exe.version == 0
    assert _rows(harel_harness) == 0
    with pytest.raises(InvalidIdentifier):
        store.load(bad)
    store.save(Execution(id="after", definition_id="d"))
    assert store.load("after") is not None


def test_hostile_schema_name(pg_url: str) -> None:
    """Any schema name is quoted as an identifier: quotes, dollars, semicolons, Unicode."""
    harness = PostgresHarness(pg_url, schema='we"ird $$ sch;ema 🙂 $harel$')
    try:
        store = harness.open_sync()
        exe = Execution(id="a", definition_id="d")
        store.commit(
            exe, [(None, Event(kind="K"))], trace=_step(), timers=(TimerOp.schedule("/t", 1.0),)
        )
        assert store.load("a") is not None and store.read_trace("a")[0]["index"] == 0
        store.close()
        again = PostgresStore.from_url(harness.url())
        assert again.options.schema == harness.schema
        assert again.load("a") is not None
        again.close()
    finally:
        harness.destroy()


# -- schema creation ----------------------------------------------------------------------------


def test_many_workers_create_one_schema_at_once(pg_url: str, together: Any) -> None:
    """Eight stores opening a fresh schema together: one creates it under the advisory lock,
    every one of them works."""
    harness = PostgresHarness(pg_url)
    stores = together([harness.open_sync] * 8)
    try:
        assert all(isinstance(store, PostgresStore) for store in stores), stores
        for n, store in enumerate(stores):
            store.save(Execution(id=f"w{n}", definition_id="d"))
        assert len(stores[0].list_executions().items) == 8
    finally:
        for store in stores:
            if isinstance(store, PostgresStore):
                store.close()
        harness.destroy()


def test_newer_layout_is_refused(harel_harness: PostgresHarness) -> None:
    from harel.store.errors import SchemaVersionError

    harel_harness.open_sync().close()
    with harel_harness.connect(autocommit=True) as conn:
        conn.execute(
            psycopg.sql.SQL("UPDATE {}.harel_schema SET version = 99").format(
                psycopg.sql.Identifier(harel_harness.schema)
            )
        )
    with pytest.raises(SchemaVersionError, match="99"):
        harel_harness.open_sync()


# -- failure modes ------------------------------------------------------------------------------


class _RefusingServer:
    """A loopback port that accepts connections and closes them at once, counting attempts
    (a server that is not ready yet, as seen by the client)."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.attempts = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self.attempts += 1
            client.close()

    def close(self) -> None:
        self._listener.close()


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_unreachable_server_bounded_retries_then_store_unavailable(flavour: str) -> None:
    server = _RefusingServer()
    url = f"postgresql://postgres:s3cret-pw@127.0.0.1:{server.port}/test?connect_timeout=2"
    started = time.monotonic()
    try:
        with pytest.raises(StoreUnavailable) as info:
            if flavour == "sync":
                PostgresStore.from_url(url, connect_retries=3, retry_delay=0.05)
            else:
                asyncio.run(AsyncPostgresStore.from_url(url, connect_retries=3, retry_delay=0.05))
    finally:
        server.close()
    assert server.attempts == 4  # the first try and three retries
    assert time.monotonic() - started < 10
    assert "4 attempt" in str(info.value)
    chain = f"{info.value!r} {info.value} {info.value.__cause__}"
    assert "s3cret-pw" not in chain


def test_wrong_database_is_not_retried(pg_url: str) -> None:
    """What waiting cannot fix (an unknown database) fails at once with a config error."""
    started = time.monotonic()
    with pytest.raises(StoreConfigError, match="does not exist"):
        PostgresStore.from_url(
            urlunsplit(urlsplit(pg_url)._replace(path="/harel_no_such_db")),
            connect_retries=5,
            retry_delay=1.0,
        )
    assert time.monotonic() - started < 5


def test_from_url_waits_for_a_server_that_starts_later(own_server: Any) -> None:
    own_server.stop()
    timer = threading.Timer(1.5, own_server.start)
    timer.start()
    try:
        store = PostgresStore.from_url(own_server.url, connect_retries=8, retry_delay=0.25)
    finally:
        timer.join()
    store.save(Execution(id="late", definition_id="d"))
    assert store.load("late") is not None
    store.close()


def _eventually(call: Callable[[], Any], seconds: float = 30.0) -> Any:
    """``call()`` once it stops raising StoreUnavailable (the server is back)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return call()
        except StoreUnavailable:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_server_stopped_mid_run_sync(own_server: Any) -> None:
    """Down: typed retryable errors, version restored, nothing half-written.  Back: the same
    store object carries on."""
    url = f"{own_server.url}?schema=midrun_sync&pool_timeout=2&pool_max=3"
    store = PostgresStore.from_url(url, connect_retries=0)
    exe = Execution(id="m", definition_id="d")
    store.commit(exe, [(None, Event(id="e1", kind="K"))], trace=_step())
    own_server.stop()
    try:
        with pytest.raises(StoreUnavailable):
            store.commit(exe, [(None, Event(id="lost", kind="K"))], processed_event_id="p")
        assert exe.version == 1
        with pytest.raises(StoreUnavailable):
            store.load("m")
    finally:
        own_server.start()
    loaded = _eventually(lambda: store.load("m"))
    assert loaded is not None and loaded.version == 1
    assert [e.event.id for e in store.pending_outbox()] == ["e1"]
    assert store.is_processed("m", "p") is False
    store.commit(exe, [(None, Event(id="e2", kind="K"))], trace=_step())
    assert exe.version == 2
    assert [t["index"] for t in store.read_trace("m")] == [0, 1]
    store.close()


def test_server_stopped_mid_run_async(own_server: Any) -> None:
    async def scenario() -> None:
        url = f"{own_server.url}?schema=midrun_async&pool_timeout=2&pool_max=3"
        store = await AsyncPostgresStore.from_url(url, connect_retries=0)
        exe = Execution(id="m", definition_id="d")
        await store.commit(exe, [(None, Event(id="e1", kind="K"))])
        await asyncio.to_thread(own_server.stop)
        try:
            with pytest.raises(StoreUnavailable):
                await store.commit(exe, [(None, Event(id="lost", kind="K"))])
            assert exe.version == 1
        finally:
            await asyncio.to_thread(own_server.start)
        deadline = time.monotonic() + 30
        while True:
            try:
                loaded = await store.load("m")
                break
            except StoreUnavailable:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.2)
        assert loaded is not None and loaded.version == 1
        assert [e.event.id for e in await store.pending_outbox()] == ["e1"]
        await store.commit(exe, [(None, Event(id="e2", kind="K"))])
        assert exe.version == 2
        await store.close()

    asyncio.run(scenario())


def test_connections_cut_mid_run_by_the_proxy(pg_url: str) -> None:
    """Every connection severed (a network cut): typed error, then the store recovers."""
    with CountingProxy(*_target(pg_url)) as proxy:
        harness = PostgresHarness(_with_host(pg_url, proxy.host, proxy.port), pool_timeout=2)
        store = harness.open_sync()
        exe = Execution(id="cut", definition_id="d")
        store.save(exe)
        for sock in list(proxy._sockets):  # sever every open connection (both directions)
            with contextlib.suppress(OSError):  # some are closed already
                sock.shutdown(socket.SHUT_RDWR)
        time.sleep(0.1)
        store.save(exe)  # dead pooled connections are dropped without a round trip
        assert exe.version == 2
        store.close()
        harness.destroy()


def test_no_connection_left_in_a_transaction(pg_url: str, harel_harness: PostgresHarness) -> None:
    """After conflicts, refused input, a purge refusal and errors, every pooled connection of
    the store is idle (never 'idle in transaction')."""
    from harel.store.errors import ExecutionActive

    store = PostgresStore.open(harel_harness.options.with_schema(harel_harness.schema))
    name = f"harel-clean-{os.getpid()}-{time.monotonic_ns()}"
    tagged = PostgresHarness(
        _with_host(pg_url, *_target(pg_url))
        + f"{'&' if '?' in pg_url else '?'}application_name={name}",
        schema=harel_harness.schema,
    )
    other = tagged.open_sync()
    exe = Execution(id="c", definition_id="d")
    other.save(exe)
    stale = Execution(id="c", definition_id="d")
    for _ in range(3):
        with pytest.raises(StoreConflict):
            other.save(stale)
        with pytest.raises(ExecutionActive):
            other.purge("c")
        with pytest.raises(InvalidIdentifier):
            other.load("nul\x00")
    with harel_harness.connect() as conn:
        states = conn.execute(
            "SELECT state FROM pg_stat_activity WHERE application_name = %s", (name,)
        ).fetchall()
    assert states and all(state == "idle" for (state,) in states), states
    other.close()
    store.close()


@pytest.mark.anyio
async def test_cancelled_commit_in_flight_lands_and_says_so(
    pg_url: str,
) -> None:
    """Cancelled while its statement is on the wire, a commit waits for the outcome: the step
    is stored, ``exe.version`` is bumped, and ``CancelledError`` is raised afterwards."""
    harness = PostgresHarness(pg_url)
    harness.open_sync().close()  # the layout, made without the slow proxy
    with CountingProxy(*_target(pg_url), delay=0.15) as proxy:
        slow = PostgresHarness(_with_host(pg_url, proxy.host, proxy.port), schema=harness.schema)
        store = await slow.open_async()
        try:
            exe = Execution(id="x", definition_id="d")
            task = asyncio.ensure_future(store.commit(exe, [(None, Event(id="e", kind="K"))]))
            await asyncio.sleep(0.05)  # the statement is in flight through the slow proxy
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert exe.version == 1
            loaded = await store.load("x")
            assert loaded is not None and loaded.version == 1
            assert [e.event.id for e in await store.pending_outbox()] == ["e"]
            # cancelled at once: whatever happened, exe.version tells it
            fresh = Execution(id="y", definition_id="d")
            task = asyncio.ensure_future(store.commit(fresh, []))
            await asyncio.sleep(0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert (await store.load("y") is not None) == (fresh.version == 1)
            await store.commit(fresh, [])
            assert fresh.version in (1, 2)
        finally:
            await store.close()
            harness.destroy()


@pytest.mark.anyio
async def test_cancellation_storm_keeps_the_outcome_rule(astore: AsyncPostgresStore) -> None:
    """Commits cancelled at random points: each one is either stored with the version bumped
    or absent with the version restored, and the store keeps working."""
    import random

    rng = random.Random(8)
    for n in range(60):
        exe = Execution(id=f"s{n}", definition_id="d")
        task = asyncio.ensure_future(
            astore.commit(exe, [(None, Event(id=f"e{n}", kind="K"))], processed_event_id="p")
        )
        for _ in range(rng.randrange(6)):
            await asyncio.sleep(0)
        if rng.random() < 0.5:
            await asyncio.sleep(rng.random() / 500)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        loaded = await astore.load(exe.id)
        assert (loaded is not None) == (exe.version == 1), (n, exe.version, loaded)
        assert await astore.is_processed(exe.id, "p") == (exe.version == 1)
    outbox = {entry.event.id for entry in await astore.pending_outbox()}
    stored = {item.id for item in (await astore.list_executions(limit=1000)).items}
    assert outbox == {f"e{n[1:]}" for n in stored}
    with pytest.raises(StoreError):
        await astore.append_trace("nobody", _step())
