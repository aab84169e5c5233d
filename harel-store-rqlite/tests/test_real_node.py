"""Issue 17 §2: the test node fails the way a real rqlite node does, and the store copes.

Part one checks ``FakeRqlite`` itself against rqlite's documented (and coded) behaviour, one
test per point: the unified endpoint's transaction continues past a statement that fails to
prepare, BLOB-shaped string parameters, per-user permissions, unknown read levels, Raft
failures reported under HTTP 200, reads served while writes wait.  Part two checks the store on
such a node: commits stay all-or-nothing, BLOB-shaped ids round-trip, a user without the
``ready`` permission opens a store, ``linearizable`` is refused where a node would read it as
``weak``, every Raft failure is mapped (``CommitOutcomeUnknown`` exactly when the request may
have been applied), ``http://`` URLs are accepted.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from harel.conformance.suite import SyncAsAsync
from harel.model import Event, Execution
from harel.store import TimerOp
from harel.store.contract import AsyncExecutionStore
from harel.store.errors import (
    CommitOutcomeUnknown,
    StoreConfigError,
    StoreCorrupted,
    StoreUnavailable,
)
from harel_store_rqlite import AsyncRqliteStore, RqliteStore
from harel_testing.rqlite import (
    LEADERSHIP_LOST,
    SNAPSHOT_RESTORED,
    STORE_NOT_READY,
    TIMED_OUT_ENQUEUING,
    FakeRqlite,
    RaftError,
)

pytestmark = pytest.mark.anyio


@pytest.fixture(params=("sync", "async"))
def flavour(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def opener(flavour: str) -> AsyncIterator[Callable[..., Any]]:
    """``await opener(url, **knobs)``: a store of the test's flavour, closed afterwards."""
    opened: list[AsyncExecutionStore] = []

    async def open_(url: str, **knobs: Any) -> AsyncExecutionStore:
        store: AsyncExecutionStore
        if flavour == "sync":
            store = SyncAsAsync(RqliteStore(url, **knobs))
        else:
            store = await AsyncRqliteStore.open(url, **knobs)
        opened.append(store)
        return store

    yield open_
    for store in opened:
        await store.close()


def post(node: FakeRqlite, path: str, body: Any, auth: tuple[str, str] | None = None) -> Any:
    """POST ``body`` to the node behind any store's back; the decoded reply."""
    reply = httpx.post(f"{node.http_url}{path}", json=body, auth=auth, timeout=5)
    assert reply.status_code == 200, (reply.status_code, reply.text)
    return reply.json()


def rows(node: FakeRqlite, sql: str) -> list[list[Any]]:
    document = post(node, "/db/query?level=strong", [sql])
    return list(document["results"][0].get("values", []))


def new_exe(execution_id: str = "e1", **fields: Any) -> Execution:
    return Execution(id=execution_id, definition_id="def", **fields)


EVERYTHING: dict[str, Any] = {
    "emits": [(None, Event(id="o1", kind="A")), ("other", Event(id="o2", kind="B"))],
    "processed_event_id": "in-1",
    "timers": [TimerOp.schedule("/t", 5.5)],
    "spawns": [("child-1", "/r", {"n": 1}), ("child-2", "/r", {"n": 2})],
    "trace": {"event_kind": "Go"},
}


# -- part one: the node ----------------------------------------------------------------------------


def test_node_unified_transaction_continues_past_a_prepare_error(node: FakeRqlite) -> None:
    """rqlite's DB.Request: a statement that fails to prepare gets its error, the rest run and
    the transaction commits; an error while running rolls everything back and stops."""
    post(node, "/db/execute", [["CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL)"]])
    document = post(
        node,
        "/db/request?transaction",
        [
            ["INSERT INTO t (k, v) VALUES (1, 'a')"],
            ["INSERT INTO missing (k) VALUES (1)"],
            ["INSERT INTO t (k, nope) VALUES (2, 'b')"],
            ["INSERT INTO t (k, v) VALUES (3, 'c')"],
        ],
    )
    results = document["results"]
    assert len(results) == 4
    assert "no such table: missing" in results[1]["error"]
    assert "no column named nope" in results[2]["error"]
    assert "error" not in results[0] and "error" not in results[3]
    assert rows(node, "SELECT k FROM t ORDER BY k") == [[1], [3]]  # committed, minus the two

    runtime = post(
        node,
        "/db/request?transaction",
        [["INSERT INTO t (k, v) VALUES (4, 'd')"], ["INSERT INTO t (k, v) VALUES (4, 'again')"]],
    )["results"]
    assert len(runtime) == 2 and "UNIQUE constraint failed" in runtime[1]["error"]
    assert rows(node, "SELECT k FROM t ORDER BY k") == [[1], [3]]  # rolled back whole

    executed = post(
        node,
        "/db/execute?transaction",
        [["INSERT INTO t (k, v) VALUES (5, 'e')"], ["INSERT INTO missing (k) VALUES (1)"]],
    )["results"]
    assert "no such table" in executed[-1]["error"]
    assert rows(node, "SELECT k FROM t ORDER BY k") == [[1], [3]]  # /db/execute: all or nothing


def test_node_binds_blob_shaped_strings_as_blobs(tmp_path: Path) -> None:
    """rqlite 8.31+ binds ``X'…'`` strings as BLOBs and returns BLOBs base64-encoded."""
    for version, expected in (("v9.1.2", base64.b64encode(b"\xab").decode()), ("v8.30.0", None)):
        with FakeRqlite(tmp_path / f"{version}.db", version=version) as node:
            post(node, "/db/execute", [["CREATE TABLE t (v)"]])
            post(node, "/db/execute", [["INSERT INTO t (v) VALUES (?)", " x'ab' "]])
            post(node, "/db/execute", [["INSERT INTO t (v) VALUES (?)", "x'zz'"]])  # not hex
            values = [row[0] for row in rows(node, "SELECT v FROM t ORDER BY rowid")]
            assert values == [expected or " x'ab' ", "x'zz'"], version


def test_node_permissions_are_per_user(tmp_path: Path) -> None:
    """``/readyz`` needs ``ready``, ``/db/execute`` ``execute``, ``/db/query`` ``query``,
    ``/db/request`` both; a missing permission is a 401 with an empty body."""
    users = {"app": ("pw", {"query", "execute"}), "reader": ("pw", {"query"})}
    with FakeRqlite(tmp_path / "perms.db", users=users) as node:
        base = node.http_url
        app, reader = ("app", "pw"), ("reader", "pw")
        ready = httpx.get(f"{base}/readyz", auth=app)
        assert ready.status_code == 401 and ready.content == b""
        assert httpx.post(f"{base}/db/request", json=[["SELECT 1"]], auth=app).status_code == 200
        assert httpx.post(f"{base}/db/execute", json=[["SELECT 1"]], auth=reader).status_code == 401
        assert httpx.post(f"{base}/db/query", json=[["SELECT 1"]], auth=reader).status_code == 200
        wrong = httpx.post(f"{base}/db/query", json=[["SELECT 1"]], auth=("app", "no"))
        assert wrong.status_code == 401


def test_node_reads_an_unknown_level_as_weak(tmp_path: Path) -> None:
    """rqlite's LevelFromString: an unknown level is ``weak``, no error; ``linearizable`` is
    unknown before 8.32."""
    for version, linearizable in (("v9.1.2", "linearizable"), ("v8.31.0", "weak")):
        with FakeRqlite(tmp_path / f"{version}.db", version=version) as node:
            for level, used in (("bogus", "weak"), ("linearizable", linearizable)):
                reply = httpx.post(f"{node.http_url}/db/query?level={level}", json=[["SELECT 1"]])
                assert reply.status_code == 200
                assert reply.headers["x-rqlite-version"] == version
                assert node.take_requests()[-1].level == used, (version, level)


def test_node_reports_raft_failures_under_http_200(node: FakeRqlite) -> None:
    post(node, "/db/execute", [["CREATE TABLE t (v)"]])
    node.raft_errors += [RaftError(TIMED_OUT_ENQUEUING), RaftError(LEADERSHIP_LOST, applied=True)]
    for message in (TIMED_OUT_ENQUEUING, LEADERSHIP_LOST):
        document = post(node, "/db/execute", [["INSERT INTO t (v) VALUES (1)"]])
        assert document == {"error": message}
    assert rows(node, "SELECT count(*) FROM t") == [[1]]  # only the "applied" one landed
    node.reapply = True
    document = post(node, "/db/request", [["INSERT INTO t (v) VALUES (2)"]])
    assert document["results"][0]["rows_affected"] == 1
    assert rows(node, "SELECT count(*) FROM t") == [[3]]  # re-applied after a leader change


def test_node_serves_reads_while_writes_wait(node: FakeRqlite) -> None:
    post(node, "/db/execute", [["CREATE TABLE t (v)"], ["INSERT INTO t (v) VALUES (7)"]])
    with node.hold_writes():  # a write (or a strong read) would wait here
        reply = httpx.post(
            f"{node.http_url}/db/query?level=weak", json=[["SELECT v FROM t"]], timeout=5
        )
    assert reply.json()["results"][0]["values"] == [[7]]


# -- part two: the store on such a node ----------------------------------------------------------


def counts(node: FakeRqlite) -> dict[str, int]:
    tables = ("outbox", "spawns", "processed_events", "timers", "trace")
    return {table: rows(node, f"SELECT count(*) FROM {table}")[0][0] for table in tables}


async def test_a_table_dropped_after_open_never_leaves_a_partial_commit(
    node: FakeRqlite, opener: Callable[..., Any]
) -> None:
    """The issue's reproduction: ``outbox`` dropped behind the store's back; on a real node the
    old store stored the state, mark, timer and spawns and lost the events."""
    store = await opener(node.url)
    exe = new_exe()
    await store.commit(exe, [])
    post(node, "/db/execute", [["DROP TABLE outbox"]])
    with pytest.raises(StoreCorrupted, match="no such table: outbox"):
        await store.commit(exe, **EVERYTHING)
    assert exe.version == 1
    assert rows(node, "SELECT version FROM executions") == [[1]]
    for table in ("spawns", "processed_events", "timers", "trace"):
        assert rows(node, f"SELECT count(*) FROM {table}") == [[0]], table


async def test_a_column_missing_at_open_is_refused_before_any_write(
    node: FakeRqlite, opener: Callable[..., Any]
) -> None:
    await (await opener(node.url)).close()
    post(node, "/db/execute", [["ALTER TABLE spawns DROP COLUMN context"]])
    with pytest.raises(StoreCorrupted, match=r"no such column: context|has no column named"):
        await opener(node.url)


async def test_a_benign_schema_change_is_verified_and_the_commit_resent(
    node: FakeRqlite, opener: Callable[..., Any]
) -> None:
    store = await opener(node.url)
    exe = new_exe()
    await store.commit(exe, [])
    post(node, "/db/execute", [["CREATE TABLE unrelated (x)"]])  # bumps the schema cookie
    node.take_requests()
    await store.commit(exe, **EVERYTHING)
    assert exe.version == 2
    requests = [(r.path, r.query.split("&")[0]) for r in node.take_requests()]
    assert requests == [
        ("/db/request", "transaction"),  # tripped: rolled back whole
        ("/db/query", "transaction"),  # re-verified
        ("/db/request", "transaction"),  # re-sent
    ]
    assert counts(node) == {
        "outbox": 2,
        "spawns": 2,
        "processed_events": 1,
        "timers": 1,
        "trace": 1,
    }


BLOB_SHAPED = ("x'ab'", "X'00'", " x'CAFE' ", "x''")


async def test_blob_shaped_values_round_trip(node: FakeRqlite, opener: Callable[..., Any]) -> None:
    store = await opener(node.url)
    for n, text in enumerate(BLOB_SHAPED):
        exe = Execution(id=text, definition_id=text, context={"v": text})
        await store.commit(
            exe,
            [(text, Event(id=text, kind="K"))],
            processed_event_id=text,
            timers=[TimerOp.schedule(text, float(n))],
            spawns=[(text, text, {"v": text})],
            trace={"event_kind": text},
        )
        loaded = await store.load(text)
        assert loaded is not None and loaded.id == text and loaded.definition_id == text
        assert await store.is_processed(text, text)
    assert sorted(t[0] for t in await store.due_timers(100.0)) == sorted(BLOB_SHAPED)
    assert sorted(t[1] for t in await store.due_timers(100.0)) == sorted(BLOB_SHAPED)
    outbox = await store.pending_outbox()
    assert sorted(e.target_id or "" for e in outbox) == sorted(BLOB_SHAPED)
    assert sorted(e.event.id for e in outbox) == sorted(BLOB_SHAPED)
    spawns = await store.pending_spawns()
    assert sorted((s.parent_id, s.child_id, s.root_path) for s in spawns) == sorted(
        (t, t, t) for t in BLOB_SHAPED
    )
    page = await store.list_executions(definition_id="x'ab'")
    assert [summary.id for summary in page.items] == ["x'ab'"]
    record = await store.export_execution("X'00'")
    assert record is not None and record.timers == (("X'00'", 1.0),)
    stored_types = rows(node, "SELECT DISTINCT typeof(id) || typeof(definition_id) FROM executions")
    assert stored_types == [["texttext"]]


async def test_a_user_without_the_ready_permission_opens_a_store(
    tmp_path: Path, opener: Callable[..., Any]
) -> None:
    users = {"app": ("s3cret", {"query", "execute"})}
    with FakeRqlite(tmp_path / "perms.db", users=users) as node:
        store = await opener(f"rqlite://app:s3cret@127.0.0.1:{node.port}")
        await store.commit(new_exe(), [])
        assert (await store.load("e1")) is not None
        with pytest.raises(StoreConfigError, match="HTTP 401"):
            await opener(f"rqlite://app:wrong@127.0.0.1:{node.port}")


async def test_linearizable_is_refused_where_the_node_would_read_it_as_weak(
    tmp_path: Path, opener: Callable[..., Any]
) -> None:
    for version in ("v8.31.0", "v8.32.1", "unknown"):
        with FakeRqlite(tmp_path / f"{version}.db", version=version) as node:
            with pytest.raises(StoreConfigError, match=r"linearizable reads need rqlite 8\.32\.2"):
                await opener(node.url, level="linearizable")
            with pytest.raises(StoreConfigError):
                await opener(node.url, sweep_level="linearizable")
            await opener(node.url, level="strong", sweep_level="weak")  # every node knows them
    with FakeRqlite(tmp_path / "new.db", version="v9.1.2") as node:
        store = await opener(node.url, level="linearizable")
        await store.commit(new_exe(), [])
        node.take_requests()
        await store.load("e1")
        assert [r.level for r in node.take_requests()] == ["linearizable"]


@pytest.mark.parametrize("message", [TIMED_OUT_ENQUEUING, STORE_NOT_READY])
async def test_raft_failures_before_the_log_are_plain_unavailable(
    node: FakeRqlite, opener: Callable[..., Any], message: str
) -> None:
    store = await opener(node.url)
    exe = new_exe()
    await store.commit(exe, [])
    node.raft_errors.append(RaftError(message))
    with pytest.raises(StoreUnavailable, match=message) as raised:
        await store.commit(exe, **EVERYTHING)
    assert not isinstance(raised.value, CommitOutcomeUnknown)
    assert exe.version == 1 and counts(node)["outbox"] == 0
    await store.commit(exe, **EVERYTHING)  # a plain retry: nothing of the first was stored
    assert exe.version == 2 and counts(node)["outbox"] == 2


@pytest.mark.parametrize("message", [LEADERSHIP_LOST, SNAPSHOT_RESTORED])
@pytest.mark.parametrize("applied", [True, False])
async def test_raft_failures_while_committing_are_outcome_unknown(
    node: FakeRqlite, opener: Callable[..., Any], message: str, applied: bool
) -> None:
    store = await opener(node.url)
    exe = new_exe()
    await store.commit(exe, [])
    node.raft_errors.append(RaftError(message, applied=applied))
    with pytest.raises(CommitOutcomeUnknown, match=message.split()[0]) as raised:
        await store.commit(exe, **EVERYTHING)
    assert raised.value.expected == 1 and exe.version == 1
    await store.commit(exe, **EVERYTHING)  # the re-send the error asks for settles it
    assert exe.version == 2
    assert counts(node) == {
        "outbox": 2,
        "spawns": 2,
        "processed_events": 1,
        "timers": 1,
        "trace": 1,
    }  # once, whether the first attempt landed or not


async def test_a_request_reapplied_after_a_leadership_change_answers_success(
    node: FakeRqlite, opener: Callable[..., Any]
) -> None:
    """rqlite may forward the same request to a new leader again; the second application's CAS
    misses, and the receipt read in the same request says the commit was stored."""
    store = await opener(node.url)
    exe = new_exe()
    await store.commit(exe, [])
    node.reapply = True
    await store.commit(exe, **EVERYTHING)
    assert exe.version == 2 and counts(node)["outbox"] == 2


async def test_a_lost_reply_is_outcome_unknown_and_a_resend_settles_it(
    node: FakeRqlite, opener: Callable[..., Any]
) -> None:
    store = await opener(node.url)
    exe = new_exe()
    await store.commit(exe, [])
    node.drop_replies = True
    with pytest.raises(CommitOutcomeUnknown):
        await store.commit(exe, **EVERYTHING)
    node.drop_replies = False
    assert exe.version == 1
    await store.commit(exe, **EVERYTHING)
    assert exe.version == 2 and counts(node)["outbox"] == 2


def test_http_urls_are_aliases(node: FakeRqlite) -> None:
    for url in (node.http_url, f"https://127.0.0.1:{node.port}"):
        options = RqliteStore.unopened(url).options
        assert options.base_url == url
    with RqliteStore.from_url(node.http_url, connect_retries=0) as store:
        store.commit(new_exe(), [])
        assert store.load("e1") is not None


def test_request_bodies_carry_no_blob_shaped_parameter(node: FakeRqlite) -> None:
    """On the wire: a BLOB-shaped id travels as two halves, neither of them BLOB-shaped."""
    seen: list[Any] = []
    with RqliteStore(node.url) as store:
        send = store._client.request  # type: ignore[union-attr]

        def spy(method: str, url: str, **kwargs: Any) -> httpx.Response:
            if kwargs.get("content"):
                seen.extend(json.loads(kwargs["content"]))
            return send(method, url, **kwargs)

        store._client.request = spy  # type: ignore[union-attr,method-assign]
        store.commit(new_exe("x'ab'"), [])
    params = [value for statement in seen for value in statement[1:]]
    assert "x'ab'" not in params and "x" in params and "'ab'" in params
