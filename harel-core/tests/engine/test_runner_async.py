"""AsyncDurableRunner parity (engine.md §8 item 11): same scenarios, identical store contents."""

from __future__ import annotations

import importlib.util
import inspect
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, cast

import pytest
from harel import AsyncDictStore, AsyncDurableRunner, DictStore, DurableRunner, Event, Status
from harel.engine import UnknownDefinition
from harel.engine.dsl import definition_from_dsl

MACHINES = """
event Paid {}  event IdOk {}  event IdBad {}  event ScoreReady { score: int }  event Boom {}
machine invoice {
  initial Open
  state Open { timeout 60 }
  final Settled success {}
  final Expired expired {}
  from Open to Settled on Paid
  from Open to Expired on Timeout
}
machine onboarding {
  initial Checks
  orthogonal Checks {
    state Identity { initial Pending  state Pending { timeout 30 }   final Verified success {}
                     final Refused refused {}
                     from Pending to Verified on IdOk
                     from Pending to Refused on IdBad | Timeout }
    state Credit   { carry score  initial Waiting  state Waiting {}
                     final Scored success { on enter keep_score }
                     from Waiting to Scored on ScoreReady }
  }
  final Accepted success {}
  final Rejected rejected { on enter tell }
  from Checks join all to Accepted else to Rejected
}
machine fragile {
  initial A
  state A { on enter note }
  final B success { on enter explode }
  from A to B on Boom
}
"""


def keep_score(stm: Any, event: Event | None, **_: Any) -> None:
    assert event is not None
    stm.execution_ctx["score"] = event.data["score"]


async def tell(stm: Any, event: Event | None, **_: Any) -> None:
    stm.send("inv-2", Event(id=f"paid-by-{stm.idempotency_key}", kind="Paid"))


def note(stm: Any, event: Event | None, **_: Any) -> None:
    stm.execution_ctx["key"] = stm.idempotency_key


async def explode(stm: Any, event: Event | None, **_: Any) -> None:
    raise RuntimeError("no")


def definitions() -> dict[str, Any]:
    actions = {"keep_score": keep_score, "tell": tell, "note": note, "explode": explode}
    return {
        name: definition_from_dsl(MACHINES, name, actions=actions)
        for name in ("invoice", "onboarding", "fragile")
    }


SCENARIO: list[tuple[Any, ...]] = [
    ("create", "invoice", "inv-1"),
    ("create", "invoice", "inv-2"),
    ("create", "onboarding", "p"),
    ("create", "onboarding", "q"),
    ("create", "fragile", "f"),
    ("process", "inv-1", Event(id="e1", kind="Paid")),
    ("process", "inv-1", Event(id="e1", kind="Paid")),
    ("process", "p", Event(id="e2", kind="IdOk")),
    ("process", "p", Event(id="e3", kind="ScoreReady", data={"score": 7})),
    ("process", "q", Event(id="e4", kind="ScoreReady", data={"score": 1})),
    ("clock", 700.0),
    ("fire",),
    ("process", "f", Event(id="e5", kind="Boom")),
    ("process", "f", Event(id="e6", kind="Nothing")),
    ("clock", 2000.0),
    ("idle",),
]


async def _maybe(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


async def play(runner: Any, clock: list[float]) -> list[Any]:
    """Run SCENARIO through a sync or async runner; returns each call's result summary."""
    results = []
    for op, *args in SCENARIO:
        if op == "clock":
            clock[0] = args[0]
            continue
        if op == "create":
            result = await _maybe(runner.create(args[0], execution_id=args[1]))
        elif op == "process":
            result = await _maybe(runner.process(args[0], args[1]))
        elif op == "fire":
            result = await _maybe(runner.fire_due_timers())
        else:
            result = await _maybe(runner.run_until_idle())
        results.append(result.model_dump() if hasattr(result, "model_dump") else result)
    return results


async def dump(store: Any) -> dict[str, Any]:
    """Everything observable through the contract, with random Finished ids left out."""
    page = await _maybe(store.list_executions(limit=1000))
    out: dict[str, Any] = {"timers": await _maybe(store.due_timers(1e18))}
    out["outbox"] = [(e.target_id, e.event.kind) for e in await _maybe(store.pending_outbox())]
    out["spawns"] = [(s.child_id, s.root_path) for s in await _maybe(store.pending_spawns())]
    for summary in page.items:
        exe = await _maybe(store.load(summary.id))
        out[summary.id] = (exe.model_dump(), await _maybe(store.read_trace(summary.id)))
    for exe_id, event_id in [("inv-1", "e1"), ("p:Checks.Credit:0", "e3"), ("f", "e5")]:
        out[f"{exe_id}/{event_id}"] = await _maybe(store.is_processed(exe_id, event_id))
    return out


async def _stores(kind: str, tmp_path: Path) -> tuple[Any, Any]:
    if kind == "memory":
        return DictStore(), AsyncDictStore()
    if importlib.util.find_spec("harel_store_sqlite") is None:
        pytest.skip("harel-store-sqlite not installed")
    from harel_store_sqlite import AsyncSqliteStore, SqliteStore

    async_store = await AsyncSqliteStore.open(str(tmp_path / "async.db"))
    return SqliteStore(str(tmp_path / "sync.db")), async_store


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_sync_and_async_runners_leave_identical_stores(kind: str, tmp_path: Path) -> None:
    sync_store, async_store = await _stores(kind, tmp_path)
    sync_clock, async_clock = [500.0], [500.0]
    sync_runner = DurableRunner(
        sync_store, definitions(), clock=lambda: sync_clock[0], trace=True, trace_max=50
    )
    async_runner = AsyncDurableRunner(
        async_store, definitions(), clock=lambda: async_clock[0], trace=True, trace_max=50
    )
    try:
        sync_results = await play(sync_runner, sync_clock)
        async_results = await play(async_runner, async_clock)
        assert sync_results == async_results
        sync_dump, async_dump = await dump(sync_store), await dump(async_store)
        assert sync_dump == async_dump
    finally:
        sync_store.close()
        await cast(Awaitable[None], async_store.close())
    # the scenario really exercised timers, joins, emits and failures
    assert sync_dump["p"][0]["outcome"] == "success"
    assert sync_dump["q"][0]["outcome"] == "rejected"  # Identity timed out (region timer)
    assert sync_dump["inv-2"][0]["outcome"] == "success"  # paid by q's emitted event
    assert sync_dump["f"][0]["status"] == Status.FAILED and sync_dump["f"][0]["error"]
    assert sync_dump["f"][1][-1]["actions"] == []  # the event after the failure: a no-op
    assert sync_dump["f"][1][-2]["actions"] == ["explode"]
    assert sync_dump["inv-1/e1"] and sync_dump["f/e5"]
    assert sync_dump["timers"] == [] and sync_dump["outbox"] == [] and sync_dump["spawns"] == []


@pytest.mark.anyio
async def test_async_runner_errors() -> None:
    runner = AsyncDurableRunner(AsyncDictStore(), definitions())
    with pytest.raises(UnknownDefinition):
        await runner.create("missing")
    with pytest.raises(KeyError):
        await runner.process("missing", Event(kind="Paid"))
    exe = await runner.create("fragile")
    assert exe.context == {"key": f"{exe.id}:0:0"}  # a sync action ran in a worker thread
    await runner.recover()
