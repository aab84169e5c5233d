"""Cancellation safety of the async store: a cancelled call leaves an outcome the caller can tell.

The rule (the contract's, for every async method that writes): after a call is cancelled —
by ``task.cancel()`` after any number of event-loop iterations, or by an ``asyncio.wait_for``
timeout — either nothing of it is stored and, for ``commit``, ``exe.version`` is restored, or
all of it is stored and ``exe.version`` is bumped.  Never a mismatch (stored but restored: a
retry would write the step twice; bumped but absent: the caller believes a lost step landed),
never a torn write, never a lock or transaction left behind: a second store over the same
dataset (and, for ``multi_process`` backends, another process) serves its next call within
``cancellation_timeout`` seconds.  An async store that is never closed does not keep the
interpreter from exiting.

The cancellation points are spread over the whole duration of each call: the kit first counts
how many event-loop iterations an uncancelled call takes, then cancels after 0, 1, ... of
them.  ``cancellation_rounds`` of the profile (:mod:`harel.conformance.profiles`) sets how many
cancellations each test makes.

Under trio the same points are reached with anyio: a cancel scope around the call, cancelled
after ``index`` checkpoints of the test (``task.cancel()``'s counterpart), or
``anyio.move_on_after`` (``wait_for``'s); the outcome rule is the same.  A lock a cancelled
call left held makes trio raise ``BrokenResourceError`` where asyncio waits: the kit reports
both as a lock left behind.
"""

from __future__ import annotations

import asyncio
import gc
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar, TypeVar

import anyio
import anyio.lowlevel
import anyio.to_thread
import pytest

from harel.conformance.harness import StoreHarness
from harel.conformance.profiles import kit_size
from harel.conformance.suite._base import KitBase, declared_capabilities, new_exe, step
from harel.model import Event, Execution, Status
from harel.store.common.offload import on_asyncio
from harel.store.contract import AsyncExecutionStore, TimerOp

T = TypeVar("T")

LAST_INSTANT = 1.7976931348623157e308

CHILD_SCRIPT = """
import asyncio, os, sys
from harel.model import Execution
from harel.registry import open_async_store

async def main():
    store = await open_async_store(os.environ["HAREL_KIT_URL"])
    exe = Execution(id=os.environ["HAREL_KIT_ID"], definition_id="kit.other-process")
    await store.commit(exe, [])
    assert (await store.load(exe.id)).version == 1
    if os.environ.get("HAREL_KIT_CLOSE") == "1":
        await store.close()

asyncio.run(main())
print("committed", flush=True)
"""
"""What the other process runs: open the store by URL, commit, (maybe) leave it unclosed."""


def run_child(url: str, execution_id: str, *, close: bool, timeout: float) -> str:
    """Run :data:`CHILD_SCRIPT` in a fresh interpreter; its output, or a failure naming why.

    The URL travels in the environment, never on the command line or in a test id.
    """
    env = dict(os.environ, HAREL_KIT_URL=url, HAREL_KIT_ID=execution_id)
    env["HAREL_KIT_CLOSE"] = "1" if close else "0"
    try:
        done = subprocess.run(
            [sys.executable, "-c", CHILD_SCRIPT],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(
            f"the other process did not finish within {timeout:.0f} s "
            f"({'after closing' if close else 'with its async store left unclosed'}): "
            "a lock is held, or an unclosed store keeps the interpreter from exiting",
            pytrace=False,
        )
    if done.returncode != 0 or "committed" not in done.stdout:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        pytest.fail(
            f"the other process could not commit (exit code {done.returncode}): "
            + " | ".join(tail),
            pytrace=False,
        )
    return done.stdout


@dataclass(frozen=True)
class Span:
    """How long one uncancelled call takes: event-loop iterations and seconds."""

    iterations: int
    seconds: float

    def merge(self, other: Span) -> Span:
        """The longer of two spans, field by field."""
        return Span(max(self.iterations, other.iterations), max(self.seconds, other.seconds))


async def measure(call: Callable[[], Awaitable[Any]]) -> Span:
    """How many event-loop iterations (at least 1) and seconds one uncancelled ``call()`` takes."""
    ticks = 0
    running = True

    async def ticker() -> None:
        nonlocal ticks
        while running:
            ticks += 1
            await anyio.lowlevel.checkpoint()

    if not on_asyncio():  # trio: the ticker in a task group
        async with anyio.create_task_group() as group:
            group.start_soon(ticker)
            started = time.perf_counter()
            try:
                await call()
            finally:
                elapsed = time.perf_counter() - started
                running = False
        return Span(max(ticks, 1), elapsed)
    task = asyncio.create_task(ticker())
    started = time.perf_counter()
    try:
        await call()
    finally:
        elapsed = time.perf_counter() - started
        running = False
        await task
    return Span(max(ticks, 1), elapsed)


@dataclass
class Cancelled:
    """How one cancelled call ended: ``completed`` when it finished before the cancel took."""

    completed: bool


@dataclass(frozen=True)
class Point:
    """Where to cancel: after ``index`` of ``span.iterations + 1`` steps, by ``mode``."""

    index: int
    mode: str
    span: Span

    @property
    def timeout(self) -> float:
        """The ``wait_for`` timeout: the same fraction of the measured duration."""
        return self.span.seconds * 1.2 * self.index / (self.span.iterations + 1)

    def __str__(self) -> str:
        if self.mode == "wait_for":
            return f"wait_for timeout {self.timeout * 1e3:.3f} ms"
        return f"task.cancel() after {self.index} loop iteration(s)"


DENSE = 8
"""The first rounds cancel after 0, 1, ... ``DENSE - 1`` iterations (where most bugs hide)."""


def schedule(rounds: int, span: Span) -> list[Point]:
    """``rounds`` cancellation points over 0 .. ``span.iterations + 1``.

    The first :data:`DENSE` are the earliest points; the rest follow a low-discrepancy
    sequence, so any number of rounds covers the whole call evenly.  Every third round uses an
    ``asyncio.wait_for`` timeout instead of ``task.cancel()``.
    """
    width = span.iterations + 2
    points = []
    for r in range(rounds):
        index = r if r < DENSE else int(((r * 0.6180339887498949) % 1.0) * width)
        points.append(Point(min(index, width - 1), "wait_for" if r % 3 == 2 else "cancel", span))
    return points


async def cancel_at(call: Callable[[], Awaitable[Any]], point: Point) -> Cancelled:
    """Run ``call()`` and cancel it at ``point``."""
    if not on_asyncio():
        return await _cancel_at_anyio(call, point)
    if point.mode == "wait_for":
        try:
            await asyncio.wait_for(call(), timeout=point.timeout)
        except TimeoutError:
            return Cancelled(completed=False)
        return Cancelled(completed=True)
    task = asyncio.ensure_future(call())
    for _ in range(point.index):
        await asyncio.sleep(0)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        return Cancelled(completed=False)
    return Cancelled(completed=True)


async def _cancel_at_anyio(call: Callable[[], Awaitable[Any]], point: Point) -> Cancelled:
    """:func:`cancel_at` with anyio (trio): a cancel scope cancelled after ``point.index``
    checkpoints, or ``move_on_after(point.timeout)``."""
    if point.mode == "wait_for":
        with anyio.move_on_after(point.timeout) as timed:
            await call()
        return Cancelled(completed=not timed.cancelled_caught)
    scope = anyio.CancelScope()
    completed = False

    async def run() -> None:
        nonlocal completed
        with scope:
            await call()
            completed = True

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        for _ in range(point.index):
            await anyio.lowlevel.checkpoint()
        scope.cancel()
    return Cancelled(completed=completed)


def _left_broken(exc: BaseException) -> bool:
    """Whether ``exc`` is the async library's report of a resource a cancelled task left held
    (trio raises it on acquiring a lock whose owner ended without releasing it, where asyncio
    would wait forever)."""
    kinds: list[type[BaseException]] = [anyio.BrokenResourceError]
    trio = sys.modules.get("trio")
    if trio is not None:
        kinds.append(trio.BrokenResourceError)
    return isinstance(exc, tuple(kinds))


class CancellationTests(KitBase):
    """Cancelled async calls: all or nothing, version honest, no duplicate, no lock held."""

    cancellation_timeout: ClassVar[float] = 30.0
    """Seconds any call may take after a cancellation before the kit calls it a held lock."""

    async def _bounded(self, awaitable: Awaitable[T], what: str) -> T:
        try:
            if not on_asyncio():
                with anyio.fail_after(self.cancellation_timeout):
                    return await awaitable
            return await asyncio.wait_for(awaitable, timeout=self.cancellation_timeout)
        except TimeoutError:
            pytest.fail(
                f"{what} did not finish within {self.cancellation_timeout} s after a "
                "cancellation: a lock or transaction is still held",
                pytrace=False,
            )
        except Exception as exc:
            if not _left_broken(exc):
                raise
            pytest.fail(
                f"{what} raised {type(exc).__module__}.{type(exc).__name__} after a "
                f"cancellation ({exc}): a cancelled call left its lock or connection behind; "
                "release them when a call is cancelled",
                pytrace=False,
            )

    async def _witness(self, other: AsyncExecutionStore, ns: str, n: int) -> None:
        """A second store commits right away: nothing is left locked."""
        exe = new_exe(f"{ns}witness-{n}")
        await self._bounded(other.commit(exe, []), "a commit through a second store")

    # -- commit ------------------------------------------------------------------------------

    async def test_cancelled_commits_follow_the_outcome_rule(
        self, harel_harness: StoreHarness
    ) -> None:
        """Commits cancelled at every point: all or nothing, exe.version says which."""
        store = await harel_harness.open_async()
        other = await harel_harness.open_async()
        ns = f"cx{uuid.uuid4().hex[:8]}-"
        try:
            exe = new_exe(f"{ns}main")
            await store.commit(exe, [])
            span = await measure(
                lambda: store.commit(
                    exe, [(None, Event(id=f"{ns}probe", kind="P"))], trace=step("P")
                )
            )
            for entry in await store.pending_outbox():
                await store.ack_outbox(entry.seq)
            for n, point in enumerate(schedule(kit_size("cancellation_rounds"), span)):
                await self._one_commit(store, other, exe, ns, n, point)
            caps = declared_capabilities(type(harel_harness))
            url = harel_harness.url()
            if caps is not None and caps.multi_process and url is not None:
                # another process commits while this one's stores are still open
                child = partial(
                    run_child,
                    url,
                    f"{ns}other-process",
                    close=True,
                    timeout=self.cancellation_timeout * 2,
                )
                await anyio.to_thread.run_sync(child)
        finally:
            await store.close()
            await other.close()

    async def _one_commit(
        self,
        store: AsyncExecutionStore,
        other: AsyncExecutionStore,
        exe: Execution,
        ns: str,
        n: int,
        point: Point,
    ) -> None:
        tag = f"{ns}r{n}"
        effects: dict[str, Any] = {
            "emits": [(None, Event(id=f"{tag}-out", kind="Cancelled", data={"n": n}))],
            "processed_event_id": f"{tag}-in",
            "timers": (TimerOp.schedule("/cancel", float(n)),),
            "spawns": [(f"{tag}-child", "/r", {"n": n})],
            "trace": step("Cancelled", n=n),
        }
        exe.context["n"] = n
        old = exe.version
        where = f"commit cancelled by {point} (round {n})"
        ended = await cancel_at(lambda: store.commit(exe, **effects), point)
        if ended.completed:
            assert exe.version == old + 1, f"{where}: it completed but exe.version is {exe.version}"
        landed = await self._landed(other, exe.id, tag, n, old, where)
        if exe.version == old + 1:
            assert landed, f"{where}: exe.version was bumped but nothing of the commit is stored"
        else:
            assert exe.version == old, (
                f"{where}: exe.version is {exe.version}, not {old} or {old + 1}"
            )
            assert not landed, (
                f"{where}: the commit is stored but exe.version was restored to {old}; a retry "
                "would write the step twice"
            )
            await self._bounded(store.commit(exe, **effects), "the retried commit")
            assert await self._landed(other, exe.id, tag, n, old, f"{where}, retried")
        await self._witness(other, ns, n)
        await self._ack_round(other, tag)

    async def _landed(
        self, other: AsyncExecutionStore, execution_id: str, tag: str, n: int, old: int, where: str
    ) -> bool:
        """Whether the round's commit is stored, checking it is stored whole (or not at all)."""
        loaded = await self._bounded(other.load(execution_id), "load through a second store")
        assert loaded is not None
        outbox = [e for e in await other.pending_outbox() if e.event.id == f"{tag}-out"]
        spawns = [s for s in await other.pending_spawns() if s.child_id == f"{tag}-child"]
        processed = await other.is_processed(execution_id, f"{tag}-in")
        trace = [t for t in await other.read_trace(execution_id) if t.get("n") == n]
        parts = {
            "snapshot": loaded.version == old + 1,
            "outbox entry": len(outbox) == 1,
            "spawn intent": len(spawns) == 1,
            "dedupe mark": processed,
            "trace step": len(trace) == 1,
        }
        assert max(len(outbox), len(spawns), len(trace)) <= 1, f"{where}: a side effect twice"
        assert loaded.version in (old, old + 1), f"{where}: stored version {loaded.version}"
        values = set(parts.values())
        assert len(values) == 1, f"{where}: a torn commit: {parts}"
        return values == {True}

    async def _ack_round(self, other: AsyncExecutionStore, tag: str) -> None:
        for entry in await other.pending_outbox():
            if entry.event.id.startswith(tag):
                await other.ack_outbox(entry.seq)
        for spawn in await other.pending_spawns():
            if spawn.child_id.startswith(tag):
                await other.ack_spawn(spawn.seq)

    # -- the other writing calls ---------------------------------------------------------------

    async def test_cancelled_side_calls_are_all_or_nothing(
        self, harel_harness: StoreHarness
    ) -> None:
        """``append_trace``, ``ack_outbox``, ``ack_spawn``, ``delete_timer`` and ``purge``."""
        store = await harel_harness.open_async()
        other = await harel_harness.open_async()
        ns = f"cs{uuid.uuid4().hex[:8]}-"
        ops = ("append_trace", "ack_outbox", "ack_spawn", "delete_timer", "purge")
        try:
            span = Span(1, 0.0)
            for index, op in enumerate(ops):
                span = span.merge(await self._measure(store, ns, op, -1 - index))
            for n, point in enumerate(schedule(kit_size("cancellation_rounds"), span)):
                await self._one_side_call(store, other, ns, n, ops[n % len(ops)], point)
        finally:
            await store.close()
            await other.close()

    async def _prepare(self, store: AsyncExecutionStore, ns: str, n: int) -> Execution:
        exe = new_exe(f"{ns}s{n}", status=Status.DONE)
        await store.commit(
            exe,
            [(None, Event(id=f"{ns}s{n}-out", kind="Side"))],
            processed_event_id=f"{ns}s{n}-in",
            timers=(TimerOp.schedule("/side", 7.0),),
            spawns=[(f"{ns}s{n}-child", "/r", {})],
            trace=step("Side"),
        )
        return exe

    def _side_call(
        self, store: AsyncExecutionStore, exe: Execution, op: str, seqs: dict[str, int]
    ) -> Callable[[], Awaitable[Any]]:
        calls: dict[str, Callable[[], Awaitable[Any]]] = {
            "append_trace": lambda: store.append_trace(exe.id, step("Appended")),
            "ack_outbox": lambda: store.ack_outbox(seqs["outbox"]),
            "ack_spawn": lambda: store.ack_spawn(seqs["spawn"]),
            "delete_timer": lambda: store.delete_timer(exe.id, "/side", 7.0),
            "purge": lambda: store.purge(exe.id),
        }
        return calls[op]

    async def _seqs(self, store: AsyncExecutionStore, exe: Execution) -> dict[str, int]:
        (entry,) = [e for e in await store.pending_outbox() if e.event.id == f"{exe.id}-out"]
        (spawn,) = [s for s in await store.pending_spawns() if s.parent_id == exe.id]
        return {"outbox": entry.seq, "spawn": spawn.seq}

    async def _measure(self, store: AsyncExecutionStore, ns: str, op: str, n: int) -> Span:
        exe = await self._prepare(store, ns, n)
        span = await measure(self._side_call(store, exe, op, await self._seqs(store, exe)))
        await self._cleanup(store, exe)
        return span

    async def _cleanup(self, store: AsyncExecutionStore, exe: Execution) -> None:
        for entry in await store.pending_outbox():
            if entry.event.id == f"{exe.id}-out":
                await store.ack_outbox(entry.seq)
        for spawn in await store.pending_spawns():
            if spawn.parent_id == exe.id:
                await store.ack_spawn(spawn.seq)
        await store.delete_timer(exe.id, "/side", 7.0)

    async def _state(self, other: AsyncExecutionStore, exe: Execution, op: str) -> bool | None:
        """Whether ``op`` took effect (checked whole), seen through the second store."""
        if op == "append_trace":
            trace = await self._bounded(other.read_trace(exe.id), "read_trace")
            indices = [t["index"] for t in trace]
            assert indices == list(range(indices[0], indices[0] + len(indices))), indices
            assert len(trace) in (1, 2), f"append_trace stored {len(trace) - 1} steps"
            return len(trace) == 2
        if op == "ack_outbox":
            outbox = await self._bounded(other.pending_outbox(), "pending_outbox")
            return not [e for e in outbox if e.event.id == f"{exe.id}-out"]
        if op == "ack_spawn":
            spawns = await self._bounded(other.pending_spawns(), "pending_spawns")
            return not [s for s in spawns if s.parent_id == exe.id]
        if op == "delete_timer":
            timers = await self._bounded(other.due_timers(LAST_INSTANT), "due_timers")
            return not [t for t in timers if t[0] == exe.id]
        loaded = await self._bounded(other.load(exe.id), "load")
        trace = await other.read_trace(exe.id)
        marked = await other.is_processed(exe.id, f"{exe.id}-in")
        timers = [t for t in await other.due_timers(LAST_INSTANT) if t[0] == exe.id]
        spawns = [s for s in await other.pending_spawns() if s.parent_id == exe.id]
        gone = {
            "execution": loaded is None,
            "trace": not trace,
            "dedupe mark": not marked,
            "timer": not timers,
            "spawn intent": not spawns,
        }
        assert len(set(gone.values())) == 1, f"a torn purge, gone: {gone}"
        return gone["execution"]

    async def _one_side_call(
        self,
        store: AsyncExecutionStore,
        other: AsyncExecutionStore,
        ns: str,
        n: int,
        op: str,
        point: Point,
    ) -> None:
        exe = await self._bounded(self._prepare(store, ns, n), "a commit")
        seqs = await self._seqs(store, exe)
        call = self._side_call(store, exe, op, seqs)
        where = f"{op} cancelled by {point} (round {n})"
        ended = await cancel_at(call, point)
        took = await self._state(other, exe, op)
        if ended.completed:
            assert took, f"{where}: it completed but took no effect"
        if not took:
            await self._bounded(call(), f"{op} retried")
            assert await self._state(other, exe, op), f"{where}: the retry took no effect"
        await self._witness(other, ns, n)
        await self._cleanup(other, exe)

    # -- exit ----------------------------------------------------------------------------------

    def test_unclosed_async_store_does_not_hang_exit(self, harel_harness: StoreHarness) -> None:
        """A process whose async store is never closed still exits.

        With ``url()`` the kit runs that process; without, it checks in-process that an
        unclosed, unreferenced store leaves no non-daemon thread behind (what blocks exit).
        """
        url = harel_harness.url()
        execution_id = f"exit-{uuid.uuid4().hex[:8]}"
        if url is not None:
            run_child(url, execution_id, close=False, timeout=self.cancellation_timeout * 2)
            return
        before = {t.ident for t in threading.enumerate()}

        async def abandon() -> None:
            store = await harel_harness.open_async()
            await store.commit(new_exe(execution_id), [])
            assert await store.load(execution_id) is not None

        asyncio.run(abandon())
        gc.collect()
        deadline = time.monotonic() + 5.0
        left: list[threading.Thread] = []
        while time.monotonic() < deadline:
            left = [
                t
                for t in threading.enumerate()
                if t.ident not in before and not t.daemon and t.is_alive()
            ]
            if not left:
                return
            time.sleep(0.05)
        pytest.fail(
            f"an unclosed async store left non-daemon thread(s) {[t.name for t in left]} "
            "running: interpreter exit would wait for them forever",
            pytrace=False,
        )


__all__ = ["CancellationTests", "Point", "Span", "cancel_at", "measure", "run_child", "schedule"]
