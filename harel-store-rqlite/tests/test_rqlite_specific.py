"""What the kit cannot state about rqlite: requests per operation (counted by the node and on
the wire), leader redirects, waiting for a leader, a node that is unreachable, stopped or
fails after committing, lost CASes that leave nothing (byte-identical losers included), async
calls cancelled before and after their request went out, per-statement errors, hostile ids,
the password never printed, and the indexes behind sweeps.

Every test here runs against fake rqlite nodes (``harel_testing.rqlite``), which
it starts, stops, de-leads and redirects; none of them runs against a real rqlite.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pytest
from harel.conformance.proxy import CountingProxy
from harel.conformance.suite import SyncAsAsync
from harel.model import Event, Execution, Status
from harel.registry import open_store
from harel.store import TimerOp
from harel.store.author import BackendSpec
from harel.store.common.codec import encode_execution
from harel.store.common.schema_version import release_of
from harel.store.common.sql import SCHEMA_VERSION
from harel.store.common.sql.testing import (
    VERSION_3_INDEXES,
    VERSION_5_INDEXES,
    index_names,
    schema_row,
    table_counts,
    version_2_file,
    version_4_file,
)
from harel.store.contract import AsyncExecutionStore
from harel.store.errors import (
    AlreadyProcessed,
    CommitOutcomeUnknown,
    InvalidIdentifier,
    InvalidStoreURL,
    LeaseLost,
    SchemaVersionError,
    StoreConfigError,
    StoreConflict,
    StoreCorrupted,
    StoreError,
    StoreUnavailable,
)
from harel_store_rqlite import AsyncRqliteStore, RqliteStore
from harel_store_rqlite._plan import rqlite_plan
from harel_store_rqlite.testing import RqliteHarness, harness_from_url
from harel_testing.rqlite import FakeRqlite

pytestmark = pytest.mark.anyio

FLAVOURS = ("sync", "async")


@pytest.fixture(params=FLAVOURS)
def flavour(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def opener(flavour: str) -> AsyncIterator[Callable[..., Any]]:
    """``await opener(url, **knobs)``: a store of the test's flavour, closed afterwards."""
    opened: list[AsyncExecutionStore] = []

    async def open_(url: str, *, retry: bool = False, **knobs: Any) -> AsyncExecutionStore:
        """One attempt (the constructor / ``open``), or ``from_url`` with ``retry``."""
        store: AsyncExecutionStore
        if flavour == "sync":
            sync = RqliteStore.from_url(url, **knobs) if retry else RqliteStore(url, **knobs)
            store = SyncAsAsync(sync)
        elif retry:
            store = await AsyncRqliteStore.from_url(url, **knobs)
        else:
            store = await AsyncRqliteStore.open(url, **knobs)
        opened.append(store)
        return store

    yield open_
    for store in opened:
        await store.close()


def paths(node: FakeRqlite) -> list[str]:
    """The requests the node received since the last call, as ``PATH?QUERY`` strings."""
    return [f"{r.method} {r.path}?{r.query}".rstrip("?") for r in node.take_requests()]


def new_exe(execution_id: str = "e1", **fields: Any) -> Execution:
    return Execution(id=execution_id, definition_id="def", **fields)


EVERYTHING: dict[str, Any] = {
    "emits": [(None, Event(id="o1", kind="A")), ("other", Event(id="o2", kind="B"))],
    "processed_event_id": "in-1",
    "timers": [TimerOp.schedule("/t", 5.5), TimerOp.cancel("/u")],
    "spawns": [("child-1", "/r", {"n": 1}), ("child-2", "/r", {"n": 2})],
    "trace": {"event_kind": "Go"},
}
SHAPES: dict[str, dict[str, Any]] = {
    "state only": {"emits": []},
    "emits": {"emits": EVERYTHING["emits"]},
    "dedupe mark": {"emits": [], "processed_event_id": "in-1"},
    "timers": {"emits": [], "timers": EVERYTHING["timers"]},
    "spawns": {"emits": [], "spawns": EVERYTHING["spawns"]},
    "trace": {"emits": [], "trace": EVERYTHING["trace"]},
    "everything": EVERYTHING,
}
COMMIT = "POST /db/request?transaction&level=strong"

# -- requests per operation ----------------------------------------------------------------------


@pytest.mark.parametrize("shape", sorted(SHAPES))
async def test_every_commit_shape_is_one_request(
    node: FakeRqlite, opener: Callable[..., Any], shape: str
) -> None:
    store = await opener(node.url)
    exe = new_exe()
    paths(node)
    await store.commit(exe, **SHAPES[shape])  # insert
    assert paths(node) == [COMMIT]
    await store.commit(exe, **{**SHAPES[shape], "processed_event_id": None})  # update
    assert paths(node) == [COMMIT]
    stale = new_exe(version=1)
    with pytest.raises(StoreConflict) as lost:  # a lost CAS, found version included
        await store.commit(stale, **SHAPES[shape])
    assert (lost.value.expected, lost.value.found, stale.version) == (1, 2, 1)
    assert paths(node) == [COMMIT]


async def test_refused_commits_are_one_request_that_writes_nothing(
    node: FakeRqlite, opener: Callable[..., Any]
) -> None:
    """An already-recorded event id and a stale kept copy (the execution purged and
    re-created at its version) are refused by the commit's one request: its CAS carries the
    conditions, its guarded side writes match nothing, its found read classifies."""
    store = await opener(node.url)
    exe = new_exe()
    await store.commit(exe, **EVERYTHING)
    counts = table_counts(node.path)
    paths(node)
    with pytest.raises(AlreadyProcessed) as caught:
        await store.commit(exe, **EVERYTHING)  # the same event id, from the stored version
    assert (caught.value.event_id, caught.value.found, exe.version) == ("in-1", 1, 1)
    assert paths(node) == [COMMIT] and table_counts(node.path) == counts
    await store.commit(exe, [])  # the kept copy goes on: version 2
    await store.purge("e1", force=True)
    newer = new_exe()
    await store.commit(newer, [])
    await store.commit(newer, [])
    counts = table_counts(node.path)
    paths(node)
    shapes: tuple[dict[str, Any], ...] = (
        {"emits": []},
        {**EVERYTHING, "processed_event_id": "in-2"},
    )
    for shape in shapes:
        with pytest.raises(StoreConflict) as fenced:
            await store.commit(exe, **shape)
        assert type(fenced.value) is StoreConflict and fenced.value.found == exe.version == 2
        assert paths(node) == [COMMIT] and table_counts(node.path) == counts


EXPECTED_REQUESTS = {
    "open (schema ready)": 4,
    "load": 1,
    "load_for_event": 1,
    "is_processed": 1,
    "commit (any shape)": 1,
    "commit (lost CAS)": 1,
    "commit (already processed)": 1,
    "append_trace": 1,
    "read_trace": 1,
    "pending_outbox": 1,
    "ack_outbox": 1,
    "pending_spawns": 1,
    "ack_spawn": 1,
    "due_timers": 1,
    "delete_timer": 1,
    "list_executions (a page)": 1,
    "purge": 1,
    "purge (refused: active)": 1,
    "prune_processed (5 marks, batch 2)": 3,
    "claim (nothing due)": 1,
    "claim": 2,
    "renew": 1,
    "release": 1,
    "list_leases": 1,
    "enqueue": 1,
}
"""What the README's table says; the test below measures it."""


async def test_requests_per_operation(
    node: FakeRqlite, opener: Callable[..., Any], flavour: str
) -> None:
    await opener(node.url)  # creates the schema
    counts: dict[str, int] = {}

    async def count(label: str, call: Callable[[], Any]) -> Any:
        node.take_requests()
        value = await call()
        counts[label] = len(node.take_requests())
        return value

    store = await count("open (schema ready)", lambda: opener(node.url))
    assert await count("claim (nothing due)", lambda: store.claim("w", time.time())) == []
    exe = new_exe()
    await count("commit (any shape)", lambda: store.commit(exe, **EVERYTHING))
    claims = await count("claim", lambda: store.claim("w", time.time()))
    assert {claim.execution_id for claim in claims} == {"e1", "other", None}
    await count("renew", lambda: store.renew("w", "e1", time.time()))
    leases = await count("list_leases", lambda: store.list_leases(time.time()))
    assert {lease.execution_id for lease in leases} == {"e1", "other", None}
    await count("release", lambda: store.release("w", "e1"))
    await count("enqueue", lambda: store.enqueue("e1", Event(id="q1", kind="Go")))
    with pytest.raises(StoreConflict):
        await count("commit (lost CAS)", lambda: store.commit(new_exe(version=5), []))
    counts["commit (lost CAS)"] = len(node.take_requests())
    with pytest.raises(AlreadyProcessed):
        await count("commit (already processed)", lambda: store.commit(exe, [], "in-1"))
    counts["commit (already processed)"] = len(node.take_requests())
    await count("load", lambda: store.load("e1"))
    await count("load_for_event", lambda: store.load_for_event("e1", "in-1"))
    await count("is_processed", lambda: store.is_processed("e1", "in-1"))
    await count("append_trace", lambda: store.append_trace("e1", {"extra": 1}))
    await count("read_trace", lambda: store.read_trace("e1"))
    outbox = await count("pending_outbox", lambda: store.pending_outbox(limit=10))
    await count("ack_outbox", lambda: store.ack_outbox(outbox[0].seq))
    spawns = await count("pending_spawns", lambda: store.pending_spawns())
    await count("ack_spawn", lambda: store.ack_spawn(spawns[0].seq))
    await count("due_timers", lambda: store.due_timers(10.0))
    await count("delete_timer", lambda: store.delete_timer("e1", "/t", 5.5))
    await count("list_executions (a page)", lambda: store.list_executions(limit=1))
    with pytest.raises(StoreError):
        await count("purge (refused: active)", lambda: store.purge("e1"))
    counts["purge (refused: active)"] = len(node.take_requests())
    await count("purge", lambda: store.purge("e1", force=True))
    other = new_exe("p")
    for n in range(5):
        await store.commit(other, [], f"mark-{n}")
    await count(
        "prune_processed (5 marks, batch 2)",
        lambda: store.prune_processed(time.time() + 60, batch_size=2),
    )
    print(f"\nrequests per operation ({flavour}): {counts}")
    assert counts == EXPECTED_REQUESTS


async def test_a_commit_is_one_round_trip_on_the_wire(
    node: FakeRqlite, opener: Callable[..., Any]
) -> None:
    with CountingProxy("127.0.0.1", node.port) as proxy:
        store = await opener(f"rqlite://127.0.0.1:{proxy.port}")
        exe = new_exe()
        await store.commit(exe, [])
        for shape in SHAPES.values():
            proxy.reset()
            await store.commit(exe, **{**shape, "processed_event_id": None})
            assert proxy.round_trips == 1, shape


@pytest.mark.parametrize("unified", [True, False])
async def test_an_enqueue_is_one_execute_transaction_and_its_seq_comes_back(
    node: FakeRqlite, opener: Callable[..., Any], unified: bool
) -> None:
    store = await opener(node.url, unified=unified)
    await store.commit(new_exe("a"), [("t", Event(id="e1", kind="Go"))])
    paths(node)
    seqs = [await store.enqueue("t", Event(id=f"q{n}", kind="Go"), priority=2) for n in range(2)]
    assert paths(node) == ["POST /db/execute?transaction"] * 2
    assert seqs == [2, 3]
    outbox = await store.pending_outbox()
    assert [(e.seq, e.event.id) for e in outbox] == [(1, "e1"), (2, "q0"), (3, "q1")]
    with CountingProxy("127.0.0.1", node.port) as proxy:
        other = await opener(f"rqlite://127.0.0.1:{proxy.port}", unified=unified)
        proxy.reset()
        assert await other.enqueue("nobody", Event(id="q2", kind="Go")) == 4
        assert proxy.round_trips == 1


async def test_without_the_unified_endpoint_commits_use_execute(
    node: FakeRqlite, opener: Callable[..., Any]
) -> None:
    store = await opener(node.url, unified=False)
    exe = new_exe()
    paths(node)
    await store.commit(exe, **EVERYTHING)
    assert paths(node) == ["POST /db/execute?transaction"]
    with pytest.raises(StoreConflict) as lost:
        await store.commit(new_exe(version=5), **EVERYTHING)
    assert lost.value.found == 1
    assert paths(node) == ["POST /db/execute?transaction", "POST /db/query?level=strong"]


async def test_without_the_unified_endpoint_claims_are_refused_with_advice(
    node: FakeRqlite, opener: Callable[..., Any]
) -> None:
    store = await opener(node.url, unified=False)
    await store.commit(new_exe(), **EVERYTHING)
    paths(node)
    with pytest.raises(StoreConfigError, match="unified=true"):
        await store.claim("w", time.time())
    assert paths(node) == []  # refused before anything is sent
    with pytest.raises(LeaseLost):  # renew and release need no read in the write
        await store.renew("w", "e1", time.time())
    with pytest.raises(LeaseLost):
        await store.release("w", "e1")
    renew, release = ["POST /db/execute"], ["POST /db/execute?transaction"]
    read = ["POST /db/query?level=strong"]  # the row, read for the error only
    assert paths(node) == [*renew, *read, *release, *read]


async def test_sweeps_can_read_at_a_weaker_level(
    node: FakeRqlite, opener: Callable[..., Any]
) -> None:
    store = await opener(node.url, sweep_level="weak", level="linearizable")
    paths(node)
    await store.pending_outbox()
    await store.due_timers(1.0)
    await store.load("x")
    assert paths(node) == [
        "POST /db/query?level=weak",
        "POST /db/query?level=weak",
        "POST /db/query?level=linearizable",
    ]


# -- cluster behaviour ---------------------------------------------------------------------------


async def test_leader_redirects_are_followed(tmp_path: Path, opener: Callable[..., Any]) -> None:
    with FakeRqlite(tmp_path / "leader.db") as leader, FakeRqlite(tmp_path / "f.db") as follower:
        follower.redirect_to = leader.http_url
        store = await opener(follower.url)
        exe = new_exe()
        paths(leader), paths(follower)
        await store.commit(exe, **EVERYTHING)
        assert paths(follower) == [COMMIT]  # answered 301 ...
        assert paths(leader) == [COMMIT]  # ... and re-sent, same method and body
        assert (await store.load("e1")) == exe
        assert len(await store.pending_outbox()) == 2
        with sqlite3.connect(follower.path) as db:  # nothing was written on the follower
            assert db.execute("SELECT name FROM sqlite_master").fetchall() == []


async def test_from_url_waits_until_a_leader_exists(
    node: FakeRqlite, opener: Callable[..., Any]
) -> None:
    node.leader = False
    threading.Timer(0.3, lambda: setattr(node, "leader", True)).start()
    started = time.monotonic()
    await opener(node.url, retry=True, connect_retries=10, retry_delay=0.05)
    assert time.monotonic() - started >= 0.3
    readyz = [p for p in paths(node) if p == "GET /readyz"]
    assert len(readyz) >= 2  # refused while there was no leader, then ready


async def test_a_node_that_never_gets_a_leader_fails_after_bounded_retries(
    node: FakeRqlite, opener: Callable[..., Any]
) -> None:
    node.leader = False
    with pytest.raises(StoreUnavailable, match="after 3 attempt") as failed:
        await opener(node.url, retry=True, connect_retries=2, retry_delay=0.01)
    assert "no leader" in str(failed.value)
    assert paths(node) == ["GET /readyz"] * 3


async def test_from_url_parses_its_url_once_however_often_it_retries(
    node: FakeRqlite, opener: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    parsed: list[str] = []
    parse = BackendSpec.parse_url

    def counting(spec: BackendSpec, url: str) -> Any:
        parsed.append(url)
        return parse(spec, url)

    monkeypatch.setattr(BackendSpec, "parse_url", counting)
    node.leader = False
    with pytest.raises(StoreUnavailable, match="after 3 attempt"):
        await opener(f"{node.url}?level=weak", retry=True, connect_retries=2, retry_delay=0.01)
    assert parsed == [f"{node.url}?level=weak"]
    node.leader = True
    await opener(node.url, retry=True, connect_retries=0)
    assert parsed == [f"{node.url}?level=weak", node.url]


async def test_an_unreachable_node_fails_after_bounded_retries(
    node: FakeRqlite, opener: Callable[..., Any]
) -> None:
    node.stop()  # nothing listens on its port any more
    started = time.monotonic()
    with pytest.raises(StoreUnavailable, match=r"after 3 attempt.*cannot connect"):
        await opener(node.url, retry=True, connect_retries=2, retry_delay=0.01)
    assert time.monotonic() - started < 10


async def test_a_node_stopped_mid_run_then_back(
    node: FakeRqlite, opener: Callable[..., Any]
) -> None:
    store = await opener(node.url)
    exe = new_exe()
    await store.commit(exe, [])
    node.stop()
    for call in (
        lambda: store.commit(exe, **EVERYTHING),
        lambda: store.load("e1"),
        lambda: store.pending_outbox(),
        lambda: store.ack_outbox(1),
    ):
        with pytest.raises(StoreUnavailable) as down:
            await call()
        assert down.value.retryable
    assert exe.version == 1  # the failed commit restored it
    node.start()  # same port, same file: the same store object works again
    assert (await store.load("e1")).version == 1
    assert await store.pending_outbox() == [] and not await store.is_processed("e1", "in-1")
    await store.commit(exe, **EVERYTHING)
    assert exe.version == 2 and len(await store.pending_outbox()) == 2


async def test_a_reply_lost_after_the_commit_applied_never_duplicates(
    node: FakeRqlite, opener: Callable[..., Any]
) -> None:
    store = await opener(node.url)
    exe = new_exe()
    await store.commit(exe, [])
    node.drop_replies = True
    with pytest.raises(CommitOutcomeUnknown, match="may or may not be stored"):
        await store.commit(exe, **EVERYTHING)
    assert exe.version == 1  # the caller cannot know; the store says so
    node.drop_replies = False
    await store.commit(exe, **EVERYTHING)  # the re-send: its receipt says it was stored
    assert exe.version == 2
    assert len(await store.pending_outbox()) == 2  # once, not twice


# -- lost CASes write nothing --------------------------------------------------------------------


async def test_a_byte_identical_loser_writes_nothing(
    node: FakeRqlite, opener: Callable[..., Any]
) -> None:
    first, second = await opener(node.url), await opener(node.url)
    await first.commit(new_exe(context={"n": 1}), [])
    winner, loser = await first.load("e1"), await second.load("e1")
    assert winner is not None and loser is not None
    assert encode_execution(winner) == encode_execution(loser)
    effects = {**EVERYTHING, "trace": {"event_kind": "Same"}}
    await first.commit(winner, **effects)
    assert encode_execution(winner) == encode_execution(loser.model_copy(update={"version": 2}))
    with pytest.raises(StoreConflict) as lost:
        await second.commit(loser, **effects)  # the very same document and effects
    assert (lost.value.found, loser.version) == (2, 1)
    footprint = RqliteHarness(node.url).footprint("e1")
    assert footprint.count("processed:in-1") == 1
    assert len([label for label in footprint if label.startswith("spawn:")]) == 2
    assert len([label for label in footprint if label.startswith("trace:")]) == 1
    assert len(await first.pending_outbox()) == 2  # not 4


async def test_an_absent_execution_is_never_recreated(
    node: FakeRqlite, opener: Callable[..., Any]
) -> None:
    store = await opener(node.url)
    ghost = new_exe("ghost", version=3)
    with pytest.raises(StoreConflict) as lost:
        await store.commit(ghost, **EVERYTHING)
    assert (lost.value.expected, lost.value.found, ghost.version) == (3, None, 3)
    assert await store.load("ghost") is None
    assert RqliteHarness(node.url).footprint("ghost") == []
    assert await store.pending_outbox() == [] and await store.pending_spawns() == []


# -- cancellation (async: the store's worker thread) ---------------------------------------------


async def _until(condition: Callable[[], bool], what: str) -> None:
    """Yield to the loop until ``condition()`` holds (bounded: a hang fails the test)."""
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.005)


async def test_a_commit_cancelled_on_the_wire_waits_for_its_reply(node: FakeRqlite) -> None:
    with CountingProxy("127.0.0.1", node.port) as proxy:
        store = await AsyncRqliteStore.open(f"rqlite://127.0.0.1:{proxy.port}")
        try:
            exe = new_exe()
            await store.commit(exe, [])
            paths(node)
            proxy.delay = 0.2  # a slow network from now on
            commit = asyncio.create_task(store.commit(exe, **EVERYTHING))
            await _until(lambda: bool(node.requests), "the commit to reach the node")
            commit.cancel()  # its reply is still on its way back
            with pytest.raises(asyncio.CancelledError):
                await commit
            assert exe.version == 2  # returned only after the reply: it says "stored"
            proxy.delay = 0
            assert paths(node) == [COMMIT]  # one request, not resent
            stored = await store.load("e1")
            assert stored is not None and stored.version == 2  # the store agrees
            assert len(await store.pending_outbox()) == 2  # the step, once
        finally:
            await store.close()


async def test_a_call_cancelled_before_it_started_sends_nothing(node: FakeRqlite) -> None:
    with CountingProxy("127.0.0.1", node.port) as proxy:
        store = await AsyncRqliteStore.open(f"rqlite://127.0.0.1:{proxy.port}")
        try:
            paths(node)
            proxy.delay = 0.2  # a slow network from now on
            slow = asyncio.create_task(store.load("e0"))  # the worker is busy with it
            await _until(lambda: bool(node.requests), "the load to reach the node")
            exe = new_exe()
            queued = asyncio.create_task(store.commit(exe, **EVERYTHING))
            await asyncio.sleep(0)  # queued behind the load
            queued.cancel()
            with pytest.raises(asyncio.CancelledError):
                await queued
            assert exe.version == 0  # withdrawn: nothing stored, version restored
            assert await slow is None
            proxy.delay = 0
            assert paths(node) == ["POST /db/query?level=strong"]  # the load alone
            assert await store.load("e1") is None
        finally:
            await store.close()


# -- errors --------------------------------------------------------------------------------------


async def test_a_failing_statement_rolls_the_whole_commit_back(
    node: FakeRqlite, opener: Callable[..., Any]
) -> None:
    store = await opener(node.url)
    exe = new_exe()
    await store.commit(exe, [])
    async with httpx.AsyncClient() as client:  # behind the store's back
        drop = await client.post(f"{node.http_url}/db/execute", json=[["DROP TABLE outbox"]])
        drop.raise_for_status()
    with pytest.raises(StoreCorrupted, match="no such table: outbox"):
        await store.commit(exe, **EVERYTHING)
    assert exe.version == 1
    loaded = await store.load("e1")
    assert loaded is not None and loaded.version == 1  # the CAS before it was undone
    assert not await store.is_processed("e1", "in-1")


async def test_http_errors_are_typed(node: FakeRqlite, opener: Callable[..., Any]) -> None:
    with pytest.raises(StoreError, match=r"HTTP 404.*is this an rqlite node"):
        await opener(f"{node.url}/not-rqlite")
    secured = FakeRqlite(node.path.with_name("secured.db"), auth=("ann", "right")).start()
    try:
        with pytest.raises(StoreConfigError, match="HTTP 401") as refused:
            await opener(f"rqlite://ann:wrong-pw@127.0.0.1:{secured.port}")
        assert "wrong-pw" not in str(refused.value)
        store = await opener(secured.url)
        await store.commit(new_exe(), [])
    finally:
        secured.close()


def test_placeholder_and_foreign_urls_are_refused() -> None:
    with pytest.raises(InvalidStoreURL, match="placeholder"):
        RqliteStore("rqlite://local-fake")
    with pytest.raises(InvalidStoreURL):
        RqliteStore("sqlite:///x.db")
    with pytest.raises(InvalidStoreURL, match="cannot be addressed"):  # idna fails: no DNS asked
        RqliteStore("rqlite://exa_mple..invalid", timeout=1)


def test_the_registry_opens_both_schemes(node: FakeRqlite) -> None:
    store = open_store(node.url)
    assert isinstance(store, RqliteStore) and store.options.base_url == node.http_url
    store.close()
    with pytest.raises(StoreUnavailable, match="cannot connect"):  # TLS on a plain-HTTP node
        open_store(f"rqlites://127.0.0.1:{node.port}", connect_retries=0)


async def test_a_closed_store_says_so(node: FakeRqlite, opener: Callable[..., Any]) -> None:
    store = await opener(node.url)
    await store.close()
    with pytest.raises(StoreError, match="closed"):
        await store.load("e1")
    with pytest.raises(StoreError, match="closed"):
        await store.commit(new_exe(), [])


# -- hostile ids ---------------------------------------------------------------------------------

HOSTILE = [
    ":",
    "{id}",
    "a.b",
    "$set",
    "100%_off",
    "it's",
    'say "hi"',
    "back\\slash",
    "tab\tnew\nline",
    "[*?]",
    "".join(chr(plane * 0x10000 + 0x1F600 % 0x10000) for plane in range(17)),
    "é" * 512,  # 1024 bytes: at the limit
]


async def test_hostile_ids_round_trip(node: FakeRqlite, opener: Callable[..., Any]) -> None:
    store = await opener(node.url)
    for hostile in HOSTILE:
        exe = new_exe(hostile, status=Status.DONE)
        await store.commit(
            exe,
            [(hostile, Event(id=hostile, kind="K"))],
            hostile,
            [TimerOp.schedule(hostile, 1.0)],
            [(hostile, hostile, {hostile: hostile})],
            {hostile: hostile},
        )
        assert await store.load(hostile) == exe
        assert await store.load_for_event(hostile, hostile) == (exe, True)
        assert (hostile, hostile, 1.0) in await store.due_timers(2.0)
        page = await store.list_executions(definition_id="def", limit=len(HOSTILE) + 1)
        assert hostile in [summary.id for summary in page.items]
        assert await store.purge(hostile) is True
        assert RqliteHarness(node.url).footprint(hostile) == []


async def test_unstorable_ids_are_refused_before_any_request(
    node: FakeRqlite, opener: Callable[..., Any]
) -> None:
    store = await opener(node.url)
    paths(node)
    for bad in ("x" * 65536, "nul\x00id", "lone\ud800", ""):
        with pytest.raises(InvalidIdentifier):
            await store.commit(new_exe(bad), [])
        with pytest.raises(InvalidIdentifier):
            await store.load(bad)
    assert paths(node) == []


# -- secrets -------------------------------------------------------------------------------------

PASSWORD = "s3cr/et#pw?@x"
ENCODED = "s3cr%2Fet%23pw%3F%40x"


def test_the_password_is_never_printed(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with FakeRqlite(tmp_path / "auth.db", auth=("ann", PASSWORD)) as node:
        url = f"rqlite://ann:{ENCODED}@127.0.0.1:{node.port}"
        wrong = f"rqlite://ann:{ENCODED}-wrong@127.0.0.1:{node.port}"
        shown: list[str] = []
        with RqliteStore.from_url(url) as store:  # the decoded password authenticates
            store.commit(new_exe(), [])
            shown += [repr(store), repr(store.options), str(store.options), store.options.where]
        for attempt in (
            lambda: RqliteStore(wrong),
            lambda: RqliteStore.from_url(wrong, connect_retries=0),
            lambda: RqliteStore(f"rqlite://ann:{ENCODED}@127.0.0.1:1", timeout=1),
            lambda: RqliteStore(f"rqlite://ann:{ENCODED}@127.0.0.1:1?level=bogus"),
        ):
            with pytest.raises(StoreError) as failed:
                attempt()
            shown += [str(failed.value), repr(failed.value), str(failed.value.__cause__ or "")]
        env = {**os.environ, "STM_STORE_URL": wrong}
        empty = FakeRqlite(tmp_path / "kit.db", auth=("ann", PASSWORD)).start()  # for the kit
        kit_url = f"rqlite://ann:{ENCODED}@127.0.0.1:{empty.port}"
        for command in (["list"], ["list", "--store", wrong], ["conformance", kit_url, "-x"]):
            if command[0] == "conformance":
                command += ["-k", "test_first_save_inserts_version_1 or test_stale_save"]
            done = subprocess.run(
                [sys.executable, "-m", "harel.cli", *command],
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
            shown += [done.stdout, done.stderr]
            if command[0] == "conformance":
                assert done.returncode == 0 and " passed" in done.stdout, done.stdout[-2000:]
        empty.close()
        with pytest.raises(StoreConfigError, match="already holds harel tables") as guarded:
            harness_from_url(url, tmp_path)  # the kit refuses a database holding data
        shown.append(str(guarded.value))
        shown.append(caplog.text)
    everything = "\n".join(shown)
    for secret in (PASSWORD, ENCODED, "s3cr/et", "et#pw"):
        assert secret not in everything


# -- data model: indexes serve the sweeps --------------------------------------------------------


def test_sweeps_and_listing_are_served_by_indexes(node: FakeRqlite) -> None:
    store = RqliteStore(node.url)  # creates the schema
    store.close()
    sql = rqlite_plan(store.options).sql
    finished = {"finished0": "CANCELLED", "finished1": "DONE", "finished2": "FAILED"}
    queries = {
        "due_timers": (sql.due_timers.bind(now=1.0, limit=10), "timers_due"),
        "pending_outbox": (sql.pending_outbox.bind(limit=10), "SCAN outbox"),  # seq order
        "prune_processed": (
            sql.prune_processed.bind(older_than=1.0, batch=10),
            "processed_events_age",
        ),
        "listing by definition": (
            sql.listing(["definition_id = :definition_id"], 0).bind(definition_id="d", probe=9),
            "executions_definition",
        ),
        "listing by status": (
            sql.listing([], 1).bind(status0="DONE", probe=9),
            "executions_status",
        ),
        "list_leases": (sql.list_leases.bind(now=1.0, limit=10), "work_ready"),
        "purge of an outbox target": (
            sql.purge[2].bind(id="e", force=0, **finished),
            "outbox_target",
        ),
    }
    with sqlite3.connect(node.path) as db:
        for label, (statement, index) in queries.items():
            rows = db.execute(f"EXPLAIN QUERY PLAN {statement.sql}", statement.params)
            plan = " | ".join(str(row[-1]) for row in rows)
            assert index in plan, f"{label}: {plan}"
            assert "TEMP B-TREE" not in plan, f"{label} sorts every match: {plan}"


# -- layout versions -----------------------------------------------------------------------------


def test_a_version_2_database_is_upgraded_in_place(tmp_path: Path) -> None:
    path = tmp_path / "v2.db"
    exe = version_2_file(path)
    with FakeRqlite(path) as fake, RqliteStore(fake.url) as store:
        assert store.load("old") == exe
        record = store.export_execution("old")
        assert record is not None and record.processed == (("ev-old", 40.0),)
        assert record.timers == (("a.b", 99.5),) and len(record.outbox) == 1
        assert [step["index"] for step in record.trace] == [4, 5]
        page = store.list_executions(status=[Status.RUNNING], roots_only=True)
        assert [summary.id for summary in page.items] == ["old"]
        store.commit(exe, [(None, Event(kind="K"))], "ev-new")
        assert schema_row(path) == (1, SCHEMA_VERSION, release_of("harel-store-rqlite"))
        assert index_names(path) >= VERSION_3_INDEXES
        RqliteStore(fake.url).close()  # a second opener finds it ready
    assert schema_row(path)[1] == SCHEMA_VERSION


def test_a_version_4_database_is_upgraded_with_its_work_claimable(tmp_path: Path) -> None:
    path = tmp_path / "v4.db"
    version_4_file(path)
    with FakeRqlite(path) as fake, closing(RqliteStore(fake.url)) as store:
        assert schema_row(path) == (1, SCHEMA_VERSION, release_of("harel-store-rqlite"))
        fake.take_requests()
        claims = store.claim("w", 1000.0)
        assert len(fake.take_requests()) == 2  # the probe, then one transaction
        assert [claim.execution_id for claim in claims] == [None, "old", "t2"]
        assert claims[1].timers == (("a.b", 99.5),) and len(claims[1].spawns) == 1
        assert claims[2].timers == (("y", 5.0), ("x", 7.0))
        assert store.claim("w2", 1000.0) == []
    assert index_names(path) >= VERSION_5_INDEXES


def test_a_newer_layout_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    path = tmp_path / "newer.db"
    version_2_file(path)
    with sqlite3.connect(path, isolation_level=None) as db:
        db.execute("ALTER TABLE harel_schema ADD COLUMN written_by TEXT")
        db.execute("UPDATE harel_schema SET version = 99, written_by = 'harel-store-rqlite 9.0'")
    counts, indexes = table_counts(path), index_names(path)
    with FakeRqlite(path) as fake:
        with pytest.raises(SchemaVersionError) as info:
            RqliteStore(fake.url)
        assert all(
            request.path == "/readyz" or "query" in request.path for request in fake.requests
        )
    message = str(info.value)
    assert "version 99" in message and f"version {SCHEMA_VERSION}" in message
    assert "pip install 'harel-store-rqlite>=9.0'" in message
    assert table_counts(path) == counts and index_names(path) == indexes
    assert schema_row(path) == (1, 99, "harel-store-rqlite 9.0")
