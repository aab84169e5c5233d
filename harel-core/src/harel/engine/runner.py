"""``DurableRunner``: the synchronous shell around :mod:`harel.engine.plan` (engine.md §5.1).

It answers the plan's requests with plain calls: store methods directly, sync actions
directly, ``async def`` actions to completion with ``anyio.run`` (in a helper thread when
the calling thread already runs an event loop).  No event loop or
background thread is needed, so it is safe with thread-affine stores (SQLite ``:memory:``).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import anyio

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
from harel.store.contract import DEFAULT_LEASE, ExecutionStore

T = TypeVar("T")


def _run_coroutine(func: Callable[[], Awaitable[Any]]) -> None:
    """Run an async action to completion; in a helper thread if this thread runs a loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        anyio.run(func)
        return
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="harel-action") as pool:
        pool.submit(anyio.run, func).result()


def _call_sync_action(request: CallAction) -> None:
    call = functools.partial(request.fn, request.stm, request.event, **request.inputs)
    if inspect.iscoroutinefunction(request.fn):
        _run_coroutine(call)
        return
    result = call()
    if inspect.isawaitable(result):

        async def _await() -> None:
            await result

        _run_coroutine(_await)


def drive_sync(plan: Plan[T], answer: Callable[[Request], Any]) -> T:
    """Run a plan to completion, answering each request with ``answer`` (errors thrown back)."""
    reply: Any = None
    error: BaseException | None = None
    while True:
        try:
            request = plan.throw(error) if error is not None else plan.send(reply)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        error = None
        try:
            reply = answer(request)
        except Exception as err:
            reply, error = None, err


class DurableRunner(RunnerShell[ExecutionStore]):
    """Creates executions and delivers events durably through an :class:`ExecutionStore`.

    Every state change is one atomic ``commit``; spawns and emitted events are relayed
    after it, so a crash at any point is survived by ``recover()`` (engine.md §2.8).
    """

    def _answer(self, request: Request) -> Any:
        if isinstance(request, StoreCall):
            return getattr(self.store, request.method)(*request.args, **request.kwargs)
        if isinstance(request, ReadClock):
            return self.clock()
        return _call_sync_action(request)

    def _run(self, plan: Plan[T]) -> T:
        return drive_sync(plan, self._answer)

    def create(
        self,
        definition_id: str,
        context: Mapping[str, Any] | None = None,
        execution_id: str | None = None,
        priority: int = 0,
        *,
        _relay: bool = True,
    ) -> Execution:
        """Start a new execution and return its committed copy.

        Raises ``ExecutionAlreadyExists`` for a taken id and ``UnknownDefinition`` for an
        unregistered definition id.
        """
        return self._run(
            self.plan.create(definition_id, context, execution_id, priority, relay=_relay)
        )

    def process(self, execution_id: str, event: Event, *, _relay: bool = True) -> Execution:
        """Deliver one event (exactly once per ``event.id``) and return the settled execution.

        Raises ``ExecutionNotFound`` (a ``KeyError``) when the execution is not stored.
        """
        return self._run(self.plan.process(execution_id, event, relay=_relay))

    def enqueue(self, execution_id: str, event: Event, *, priority: int = 0) -> int:
        """Hand ``event`` to the workers for ``execution_id`` in one store write, without running
        the step here; returns the outbox entry's seq.

        A worker (``harel worker``, :meth:`work`, :meth:`relay`) delivers it exactly once per
        ``event.id``; ``priority`` (0-4) is the work group's when this write creates it.  The
        target is not read: an entry for an execution that is not stored is dropped by the
        relay.  After ``StoreUnavailable`` enqueue the same event again (the outcome is open;
        a duplicate is delivered once).  ``StoreConfigError`` for a store without ``enqueue``.
        """
        self._can_enqueue()
        return self._run(self.plan.enqueue(execution_id, event, priority))

    def relay(self) -> int:
        """Drain pending spawns and outbox entries store-wide; returns how many were acked."""
        return self._run(self.plan.relay())

    def recover(self) -> None:
        """Finish whatever a crashed runner left pending (the relay over the whole store)."""
        self.relay()

    def fire_due_timers(self) -> int:
        """Deliver every timer due at ``clock()``; returns how many fired."""
        return self._run(self.plan.fire_due_timers())

    def work(self, owner: str, *, lease: float = DEFAULT_LEASE, limit: int = 100) -> WorkDone:
        """Claim up to ``limit`` due units as ``owner`` and do them, each group released when
        done (see :meth:`RunnerPlan.work <harel.engine.plan.RunnerPlan.work>`)."""
        return self._run(self.plan.work(owner, lease, limit))

    def run_until_idle(self, max_rounds: int = 1000) -> int:
        """Relay and sweep until nothing is due or pending; returns the timers fired."""
        return self._run(self.plan.run_until_idle(max_rounds))
