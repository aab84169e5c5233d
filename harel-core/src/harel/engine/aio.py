"""``AsyncDurableRunner``: the async shell around :mod:`harel.engine.plan` (engine.md §5.2).

It answers the plan's requests with awaits: store coroutines, ``async def`` actions
awaited, sync actions in a worker thread (``anyio.to_thread.run_sync``).  Timers, spawns and
broadcast targets are handled sequentially, in the same order as the sync runner.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Mapping
from typing import Any, TypeVar

import anyio.to_thread

from harel.engine.plan import (
    CallAction,
    Plan,
    ReadClock,
    Request,
    RunnerShell,
    StoreCall,
    WorkDone,
)
from harel.model import Event, Execution
from harel.store.contract import DEFAULT_LEASE, AsyncExecutionStore

T = TypeVar("T")


async def _call_async_action(request: CallAction) -> None:
    call = functools.partial(request.fn, request.stm, request.event, **request.inputs)
    if inspect.iscoroutinefunction(request.fn):
        await call()
        return
    result = await anyio.to_thread.run_sync(call)
    if inspect.isawaitable(result):
        await result


class AsyncDurableRunner(RunnerShell[AsyncExecutionStore]):
    """The async twin of :class:`~harel.engine.runner.DurableRunner` (same plan, same results)."""

    async def _answer(self, request: Request) -> Any:
        if isinstance(request, StoreCall):
            return await getattr(self.store, request.method)(*request.args, **request.kwargs)
        if isinstance(request, ReadClock):
            return self.clock()
        return await _call_async_action(request)

    async def _run(self, plan: Plan[T]) -> T:
        reply: Any = None
        error: BaseException | None = None
        while True:
            try:
                request = plan.throw(error) if error is not None else plan.send(reply)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            error = None
            try:
                reply = await self._answer(request)
            except Exception as err:
                reply, error = None, err

    async def create(
        self,
        definition_id: str,
        context: Mapping[str, Any] | None = None,
        execution_id: str | None = None,
        priority: int = 0,
        *,
        _relay: bool = True,
    ) -> Execution:
        """Start a new execution and return its committed copy (see ``DurableRunner.create``)."""
        return await self._run(
            self.plan.create(definition_id, context, execution_id, priority, relay=_relay)
        )

    async def process(self, execution_id: str, event: Event, *, _relay: bool = True) -> Execution:
        """Deliver one event exactly once per ``event.id`` and return the settled execution."""
        return await self._run(self.plan.process(execution_id, event, relay=_relay))

    async def enqueue(self, execution_id: str, event: Event, *, priority: int = 0) -> int:
        """Hand ``event`` to the workers in one store write; the entry's seq (see
        ``DurableRunner.enqueue``)."""
        self._can_enqueue()
        return await self._run(self.plan.enqueue(execution_id, event, priority))

    async def relay(self) -> int:
        """Drain pending spawns and outbox entries store-wide; returns how many were acked."""
        return await self._run(self.plan.relay())

    async def recover(self) -> None:
        """Finish whatever a crashed runner left pending."""
        await self.relay()

    async def fire_due_timers(self) -> int:
        """Deliver every timer due at ``clock()``; returns how many fired."""
        return await self._run(self.plan.fire_due_timers())

    async def work(self, owner: str, *, lease: float = DEFAULT_LEASE, limit: int = 100) -> WorkDone:
        """Claim up to ``limit`` due units as ``owner`` and do them, each group released when
        done (see ``DurableRunner.work``)."""
        return await self._run(self.plan.work(owner, lease, limit))

    async def run_until_idle(self, max_rounds: int = 1000) -> int:
        """Relay and sweep until nothing is due or pending; returns the timers fired."""
        return await self._run(self.plan.run_until_idle(max_rounds))
