"""AsyncDurableRunner under trio over real async stores: a timer fires, a cancelled commit keeps
the outcome rule (before trio support every store but memory failed with ``RuntimeError: no
running event loop``)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from harel import AsyncDurableRunner, Event, Status
from harel.engine.dsl import definition_from_dsl
from harel.model import Execution
from harel.registry import open_async_store
from harel.store.contract import AsyncExecutionStore

pytest.importorskip("trio")

pytestmark = [pytest.mark.anyio, pytest.mark.harel_trio]

MACHINE = """
event Paid {}
machine invoice {
  initial Open
  state Open { timeout 60 }
  final Settled success {}
  final Expired expired {}
  from Open to Settled on Paid
  from Open to Expired on Timeout
}
"""


@pytest.fixture
def anyio_backend() -> str:
    return "trio"


async def _cancel_after(checkpoints: int, call: Callable[[], Any]) -> None:
    """Run ``call()`` in a cancel scope cancelled after ``checkpoints`` of this task."""
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as group:
            group.start_soon(call)
            for _ in range(checkpoints):
                await anyio.lowlevel.checkpoint()
            scope.cancel()


async def _check_cancelled_commits(store: AsyncExecutionStore) -> None:
    """Commits cancelled after 0..7 checkpoints: stored exactly when ``exe.version`` says."""
    exe = Execution(id="trio-cancel", definition_id="d")
    await store.commit(exe, [])
    for n in range(8):
        old = exe.version
        exe.context["n"] = n
        await _cancel_after(n, partial(store.commit, exe, [], processed_event_id=f"ev-{n}"))
        loaded = await store.load(exe.id)
        assert loaded is not None
        assert exe.version in (old, old + 1), f"round {n}: exe.version {exe.version}"
        assert loaded.version == exe.version, f"round {n}: stored {loaded.version}"
        assert await store.is_processed(exe.id, f"ev-{n}") == (exe.version == old + 1)


@pytest.mark.parametrize("backend", ["sqlite", "postgres", "redis"])
async def test_async_runner_under_trio(
    backend: str, isolated_url: Callable[[str], str], anyio_backend: str
) -> None:
    url = isolated_url(backend)
    store = await open_async_store(url)
    clock = [1000.0]
    runner = AsyncDurableRunner(
        store, {"invoice": definition_from_dsl(MACHINE, "invoice")}, clock=lambda: clock[0]
    )
    try:
        expiring = await runner.create("invoice", execution_id="inv-late")
        paid = await runner.create("invoice", execution_id="inv-paid")
        assert expiring.status == Status.RUNNING and paid.status == Status.RUNNING
        await runner.process("inv-paid", Event(id="pay-1", kind="Paid"))
        clock[0] += 61
        assert await runner.fire_due_timers() == 1  # inv-paid's timer was disarmed
        late = await store.load("inv-late")
        assert late is not None and late.status == Status.DONE and late.outcome == "expired"
        # a process() cancelled at once is applied whole or not at all (its commit may already
        # have reached the store's thread: then it is awaited to its end); delivered again, it
        # applies once
        before = late.version
        await _cancel_after(0, lambda: runner.process("inv-late", Event(id="x-1", kind="Paid")))
        applied = await store.is_processed("inv-late", "x-1")
        stored = await store.load("inv-late")
        assert stored is not None and stored.version in (before, before + 1)
        assert applied == (stored.version == before + 1)
        for _ in range(2):
            await runner.process("inv-late", Event(id="x-1", kind="Paid"))
            assert await store.is_processed("inv-late", "x-1")
        again = await store.load("inv-late")
        assert again is not None and again.version == max(stored.version, before + 1)
        await _check_cancelled_commits(store)
    finally:
        await store.close()
