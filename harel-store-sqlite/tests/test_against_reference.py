"""The SQLite stores, sync and async, must behave exactly like the in-memory reference.

One scripted scenario exercises every contract method; its observations from DictStore,
AsyncDictStore, SqliteStore and AsyncSqliteStore must be identical.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from harel.model import Event, Execution, Status
from harel.store import AsyncDictStore, DictStore, TimerOp
from harel.store.errors import ExecutionNotFound, InvalidCursor, StoreConflict
from harel_store_sqlite import AsyncSqliteStore, SqliteStore

T = TypeVar("T")

pytestmark = pytest.mark.anyio


async def call(result: T | Awaitable[T]) -> T:
    """Await the async flavour, pass the sync one through."""
    if inspect.isawaitable(result):
        return await result
    return result


def outbox_view(entries: list[Any]) -> list[tuple[Any, ...]]:
    # seqs differ between backends (Dict shares one counter); their order must not.
    assert [e.seq for e in entries] == sorted(e.seq for e in entries)
    return [(e.target_id, e.event.id, e.event.kind, e.event.data) for e in entries]


def spawn_view(entries: list[Any]) -> list[tuple[Any, ...]]:
    assert [e.seq for e in entries] == sorted(e.seq for e in entries)
    return [(e.parent_id, e.child_id, e.root_path, e.context) for e in entries]


async def scenario(store: Any) -> list[Any]:
    seen: list[Any] = []
    note = seen.append
    store.trace_max = 3

    a = Execution(id="a", definition_id="flow", context={"n": 1})
    b = Execution(id="b", definition_id="flow", parent_id="a", status=Status.RUNNING)
    c = Execution(id="c", definition_id="other", status=Status.DONE, outcome="ok")
    go = Event(id="ev-go", kind="Go", data={"x": 1.5})
    await call(
        store.commit(
            a,
            [(None, go), ("b", Event(id="ev-2", kind="Ping"))],
            "ev-0",
            (TimerOp.schedule("s1", 10.25), TimerOp.schedule("s2", 5.0)),
            (("b", "r1", {"k": [1, 2]}),),
            {"event_kind": "Start", "index": 99, "context_out": {"n": 1}},
        )
    )
    await call(store.commit(b, [], None, (TimerOp.schedule("s1", 5.0),)))
    await call(store.save(c))
    note(("versions", a.version, b.version, c.version))

    loaded = await call(store.load("a"))
    note(("load", loaded.model_dump(mode="json")))
    loaded.context["n"] = 99  # a copy: the store must not change
    note(("reload", (await call(store.load("a"))).context))
    note(("load-missing", await call(store.load("zzz"))))
    note(
        (
            "lfe",
            [
                (e is not None, seen_)
                for e, seen_ in [
                    await call(store.load_for_event("a", "ev-0")),
                    await call(store.load_for_event("a", "ev-x")),
                    await call(store.load_for_event("zzz", "ev-0")),
                ]
            ],
        )
    )
    note(
        (
            "processed",
            await call(store.is_processed("a", "ev-0")),
            await call(store.is_processed("b", "ev-0")),
        )
    )

    note(("outbox", outbox_view(await call(store.pending_outbox()))))
    note(("outbox-1", outbox_view(await call(store.pending_outbox(limit=1)))))
    note(("spawns", spawn_view(await call(store.pending_spawns()))))
    note(("due-none", await call(store.due_timers(4.0))))
    note(("due", await call(store.due_timers(10.25))))
    note(("due-1", await call(store.due_timers(100.0, limit=1))))

    # cancel + re-arm of one path in one commit: the last op wins.
    await call(
        store.commit(
            a, [], "ev-1", (TimerOp.cancel("s1"), TimerOp.schedule("s1", 7.0), TimerOp.cancel("s2"))
        )
    )
    note(("due-after-rearm", await call(store.due_timers(100.0))))
    await call(store.delete_timer("a", "s1", 10.25))  # stale time: no-op
    note(("due-stale-delete", await call(store.due_timers(100.0))))
    await call(store.delete_timer("a", "s1", 7.0))
    note(("due-exact-delete", await call(store.due_timers(100.0))))

    # conflicts: stale copy, absent record with version > 0, duplicate first insert.
    stale = await call(store.load("a"))
    await call(store.commit(a, [(None, Event(id="ev-w", kind="Win"))]))
    stale.context["loser"] = True
    for exe in (
        stale,
        Execution(id="ghost", definition_id="flow", version=3),
        Execution(id="c", definition_id="other"),
    ):
        before = exe.version
        try:
            await call(
                store.commit(
                    exe,
                    [(None, Event(id="ev-lose", kind="Lose"))],
                    "ev-lose",
                    (TimerOp.schedule("lose", 1.0),),
                    (("x", "r", {}),),
                    {"event_kind": "Lose"},
                )
            )
        except StoreConflict as exc:
            note(("conflict", exc.execution_id, exc.expected, exc.found, exe.version == before))
    note(
        (
            "after-conflicts",
            (await call(store.load("a"))).context,
            await call(store.load("ghost")),
            await call(store.is_processed("a", "ev-lose")),
            outbox_view(await call(store.pending_outbox())),
            await call(store.due_timers(100.0)),
        )
    )

    # acks
    for entry in await call(store.pending_outbox(limit=2)):
        await call(store.ack_outbox(entry.seq))
    await call(store.ack_outbox(10_000))
    note(("outbox-acked", outbox_view(await call(store.pending_outbox()))))
    for spawn in await call(store.pending_spawns()):
        await call(store.ack_spawn(spawn.seq))
    note(("spawns-acked", await call(store.pending_spawns())))

    # trace ring: contiguous indices, caller index ignored, lowering trace_max trims next write
    for step in range(4):
        await call(store.append_trace("a", {"event_kind": "Go", "step": step, "index": -5}))
    note(("trace-3", await call(store.read_trace("a"))))
    store.trace_max = 2
    await call(store.commit(a, [], None, (), (), {"event_kind": "Last"}))
    note(("trace-2", await call(store.read_trace("a"))))
    store.trace_max = None
    await call(store.append_trace("a", {"event_kind": "Unbounded"}))
    note(("trace-unbounded", [s["index"] for s in await call(store.read_trace("a"))]))
    note(("trace-missing", await call(store.read_trace("zzz"))))
    try:
        await call(store.append_trace("zzz", {"event_kind": "Nope"}))
    except ExecutionNotFound as exc:
        note(("trace-unknown", exc.execution_id))

    # listing
    for i in range(7):
        await call(
            store.save(
                Execution(
                    id=f"m{i}",
                    definition_id="many",
                    status=[Status.DONE, Status.FAILED, Status.RUNNING][i % 3],
                    parent_id=None if i % 2 else "a",
                )
            )
        )

    async def ids(**kw: Any) -> list[list[str]]:
        pages, cursor = [], None
        while True:
            page = await call(store.list_executions(cursor=cursor, **kw))
            pages.append([item.id for item in page.items])
            cursor = page.next_cursor
            if cursor is None:
                return pages

    note(("list-all", await ids(limit=4)))
    note(("list-def", await ids(definition_id="many", limit=2)))
    note(("list-status", await ids(status=[Status.DONE], limit=2)))
    note(("list-2status", await ids(status=[Status.DONE, Status.FAILED], limit=2)))
    note(
        (
            "list-def-2status",
            await ids(definition_id="many", status=[Status.FAILED, Status.RUNNING], limit=3),
        )
    )
    note(("list-roots", await ids(roots_only=True, limit=3)))
    note(("list-roots-status", await ids(roots_only=True, status=[Status.DONE], limit=1)))
    note(("list-empty-status", await ids(status=[])))
    note(("list-exact", await ids(definition_id="many", limit=7)))
    page = await call(store.list_executions(definition_id="flow"))
    note(("summaries", [s.model_dump(mode="json") for s in page.items]))
    for bad in ("garbage!", "eyJ2IjogOX0"):
        try:
            await call(store.list_executions(cursor=bad))
        except InvalidCursor:
            note(("bad-cursor", bad))
    try:
        await call(store.list_executions(limit=0))
    except ValueError:
        note("limit-0")
    return seen


async def run(store: Any) -> list[Any]:
    try:
        return await scenario(store)
    finally:
        await call(store.close())


@pytest.fixture
async def reference() -> list[Any]:
    return await run(DictStore())


async def test_sync_sqlite_matches_reference(tmp_path: Path, reference: list[Any]) -> None:
    assert await run(SqliteStore(str(tmp_path / "s.db"))) == reference


async def test_sync_sqlite_in_memory_matches_reference(reference: list[Any]) -> None:
    assert await run(SqliteStore()) == reference


async def test_async_sqlite_matches_reference(tmp_path: Path, reference: list[Any]) -> None:
    assert await run(await AsyncSqliteStore.open(str(tmp_path / "a.db"))) == reference


async def test_async_reference_matches_sync_reference(reference: list[Any]) -> None:
    assert await run(AsyncDictStore()) == reference


async def test_reference_scenario_observes_what_it_should(reference: list[Any]) -> None:
    """Guard against a vacuous comparison: the scenario really saw the contract's answers."""
    by_key = {item[0]: item[1:] for item in reference if isinstance(item, tuple)}
    assert by_key["versions"] == (1, 1, 1)
    assert by_key["lfe"] == ([(True, True), (True, False), (False, False)],)
    assert by_key["due"] == ([("a", "s2", 5.0), ("b", "s1", 5.0), ("a", "s1", 10.25)],)
    assert by_key["due-after-rearm"] == ([("b", "s1", 5.0), ("a", "s1", 7.0)],)
    assert [c for c in reference if c[0] == "conflict"] == [
        ("conflict", "a", 2, 3, True),
        ("conflict", "ghost", 3, None, True),
        ("conflict", "c", 0, 1, True),
    ]
    assert [s["index"] for s in by_key["trace-3"][0]] == [2, 3, 4]
    assert [s["index"] for s in by_key["trace-2"][0]] == [4, 5]
    assert by_key["trace-unbounded"] == ([4, 5, 6],)
    assert by_key["list-empty-status"] == ([[]],)
    assert by_key["list-2status"] == ([["c", "m0"], ["m1", "m3"], ["m4", "m6"]],)
    assert "limit-0" in reference
