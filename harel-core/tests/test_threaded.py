"""ThreadedRunner and ThreadedAsyncStore: one worker thread, serialised whole operations,
cancellation-safe."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from harel.model import Event, Execution
from harel.store.common.threaded import RunnerClosed, ThreadedAsyncStore, ThreadedRunner
from harel.store.errors import StoreError
from harel.store.memory import DictStore


@pytest.fixture
def runner() -> Iterator[ThreadedRunner]:
    r = ThreadedRunner(name="test-runner")
    yield r
    r.close()


def test_runs_in_one_dedicated_thread_and_returns_results(runner: ThreadedRunner) -> None:
    async def main() -> None:
        threads = {await runner.run(threading.get_ident) for _ in range(5)}
        assert threads == {runner.thread.ident}
        assert threading.get_ident() not in threads
        assert await runner.run(lambda a, b: a + b, 2, 3) == 5

    asyncio.run(main())


def test_errors_propagate_unchanged(runner: ThreadedRunner) -> None:
    def boom() -> None:
        raise KeyError("nope")

    async def main() -> None:
        with pytest.raises(KeyError, match="nope"):
            await runner.run(boom)
        assert await runner.run(lambda: "still serving") == "still serving"

    asyncio.run(main())


def test_operations_are_serialised_in_submission_order(runner: ThreadedRunner) -> None:
    running = 0
    overlap = False
    order: list[int] = []

    def op(n: int) -> None:
        nonlocal running, overlap
        running += 1
        overlap = overlap or running > 1
        order.append(n)
        for _ in range(1000):  # give another thread a chance to interleave, if it could
            pass
        running -= 1

    async def main() -> None:
        await asyncio.gather(*(runner.run(op, n) for n in range(50)))

    asyncio.run(main())
    assert not overlap
    assert order == list(range(50))


def test_cancel_before_start_withdraws_the_operation(runner: ThreadedRunner) -> None:
    gate = threading.Event()
    started = threading.Event()
    ran: list[str] = []

    def blocker() -> None:
        started.set()
        gate.wait()

    async def main() -> None:
        first = asyncio.ensure_future(runner.run(blocker))
        await asyncio.to_thread(started.wait)
        second = asyncio.ensure_future(runner.run(ran.append, "queued"))
        await asyncio.sleep(0)
        second.cancel()
        with pytest.raises(asyncio.CancelledError):
            await second
        gate.set()
        await first
        await runner.run(ran.append, "after")

    asyncio.run(main())
    assert ran == ["after"]


def test_cancel_while_running_waits_for_the_operation(runner: ThreadedRunner) -> None:
    started = threading.Event()
    gate = threading.Event()
    done: list[str] = []

    def slow() -> str:
        started.set()
        gate.wait()
        done.append("finished")
        return "value"

    async def main() -> None:
        task = asyncio.ensure_future(runner.run(slow))
        await asyncio.to_thread(started.wait)
        task.cancel()
        await asyncio.sleep(0)
        task.cancel()  # a second cancellation does not cut the wait short either
        for _ in range(3):
            await asyncio.sleep(0)
        assert not task.done()  # still waiting for the operation
        gate.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert done == ["finished"]  # the outcome is settled when the caller sees the cancel

    asyncio.run(main())


def test_cancellation_at_every_point_leaves_a_consistent_outcome(runner: ThreadedRunner) -> None:
    """The outcome rule: whatever the moment, the caller sees the cancel only once the
    operation either never ran or has finished."""
    state = {"applied": 0, "in_flight": False}

    def op() -> None:
        state["in_flight"] = True
        state["applied"] += 1
        state["in_flight"] = False

    async def main() -> None:
        for delay in range(200):
            before = state["applied"]
            task = asyncio.ensure_future(runner.run(op))
            for _ in range(delay % 4):
                await asyncio.sleep(0)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            assert not state["in_flight"]
            assert state["applied"] in (before, before + 1)
        assert await runner.run(lambda: "usable") == "usable"

    asyncio.run(main())


def test_close_drains_queued_work_and_refuses_new_work() -> None:
    runner = ThreadedRunner()
    ran: list[int] = []
    gate, _started = _hold_worker(runner)
    callers = [threading.Thread(target=runner.call, args=(ran.append, n)) for n in range(10)]
    for caller in callers:
        caller.start()
        while runner._jobs.qsize() < callers.index(caller) + 1:  # queued in this order
            time.sleep(0.001)
    gate.set()
    runner.close()
    assert ran == list(range(10))
    assert not runner.thread.is_alive()
    runner.close()  # idempotent
    with pytest.raises(RunnerClosed):
        runner.call(ran.append, 99)

    async def main() -> None:
        with pytest.raises(RunnerClosed):
            await runner.run(ran.append, 99)

    asyncio.run(main())
    assert runner.closed


def test_aclose_stops_the_thread_without_blocking_the_loop() -> None:
    async def main() -> ThreadedRunner:
        runner = ThreadedRunner()
        assert await runner.run(lambda: 1) == 1
        await runner.aclose()
        await runner.aclose()
        return runner

    runner = asyncio.run(main())
    runner.thread.join(timeout=30)
    assert not runner.thread.is_alive()


def test_call_blocks_and_is_reentrant_from_the_worker(runner: ThreadedRunner) -> None:
    assert runner.call(lambda: threading.current_thread().name) == "test-runner"
    assert runner.call(lambda: runner.call(lambda: 7)) == 7


def test_a_forgotten_runner_stops_its_thread_when_collected() -> None:
    runner = ThreadedRunner()
    thread = runner.thread
    del runner
    gc.collect()
    thread.join(timeout=30)
    assert not thread.is_alive()


def test_an_unclosed_runner_never_hangs_interpreter_exit() -> None:
    code = (
        "import asyncio, threading\n"
        "from harel.store.common.threaded import ThreadedRunner\n"
        "keep = ThreadedRunner()\n"
        "asyncio.run(keep.run(lambda: None))\n"
        "threading.Thread(target=keep.call, args=(threading.Event().wait, 0.05)).start()\n"
        "print('exiting')\n"
    )
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "exiting"
    assert time.monotonic() - started < 60


# -- batched hand-back: results of back-to-back operations ride on one wake-up of the loop -----


class CountingLoop(asyncio.SelectorEventLoop):
    """An event loop counting the worker's wake-ups (``call_soon_threadsafe`` calls)."""

    wakeups = 0

    def call_soon_threadsafe(  # type: ignore[override]
        self, callback: Callable[..., object], *args: Any, context: Any = None
    ) -> asyncio.Handle:
        self.wakeups += 1
        return super().call_soon_threadsafe(callback, *args, context=context)


def _hold_worker(runner: ThreadedRunner) -> tuple[threading.Event, threading.Event]:
    """Occupy the worker until the returned ``gate`` is set (``started`` once it is held)."""
    gate, started = threading.Event(), threading.Event()

    def blocker() -> None:
        started.set()
        gate.wait()

    threading.Thread(target=runner.call, args=(blocker,)).start()
    started.wait()
    return gate, started


def _settle(settled: list[int], n: int, _future: object) -> None:
    settled.append(n)


def test_batched_results_reach_their_own_callers_in_order(runner: ThreadedRunner) -> None:
    settled: list[int] = []

    def op(n: int) -> int:
        if n % 7 == 3:
            raise ValueError(f"op {n} failed")
        return n * 10

    async def main() -> tuple[list[int | BaseException], int]:
        loop = asyncio.get_running_loop()
        assert isinstance(loop, CountingLoop)
        gate, _started = _hold_worker(runner)
        futures = [asyncio.ensure_future(runner.run(op, n)) for n in range(60)]
        for n, future in enumerate(futures):
            future.add_done_callback(functools.partial(_settle, settled, n))
        await asyncio.sleep(0)  # every call queued behind the blocker
        before = loop.wakeups
        gate.set()
        outcomes = await asyncio.gather(*futures, return_exceptions=True)
        return outcomes, loop.wakeups - before

    with asyncio.Runner(loop_factory=CountingLoop) as loop_runner:
        outcomes, wakeups = loop_runner.run(main())
    for n, outcome in enumerate(outcomes):
        if n % 7 == 3:
            assert isinstance(outcome, ValueError) and str(outcome) == f"op {n} failed"
        else:
            assert outcome == n * 10
    assert settled == list(range(60))  # each caller settled, in submission order
    assert wakeups < 30  # back-to-back results shared wake-ups (one each would be 60)


def test_cancelling_one_queued_call_withdraws_only_that_call(runner: ThreadedRunner) -> None:
    ran: list[int] = []

    def op(n: int) -> int:
        ran.append(n)
        return n

    async def main() -> list[int | BaseException]:
        gate, _started = _hold_worker(runner)
        tasks = [asyncio.ensure_future(runner.run(op, n)) for n in range(10)]
        await asyncio.sleep(0)
        tasks[4].cancel()
        await asyncio.sleep(0)
        gate.set()
        return await asyncio.gather(*tasks, return_exceptions=True)

    outcomes = asyncio.run(main())
    assert ran == [0, 1, 2, 3, 5, 6, 7, 8, 9]
    assert isinstance(outcomes[4], asyncio.CancelledError)
    assert [o for n, o in enumerate(outcomes) if n != 4] == [0, 1, 2, 3, 5, 6, 7, 8, 9]


def test_a_held_result_reaches_its_caller_while_a_later_operation_runs(
    runner: ThreadedRunner,
) -> None:
    """A result held back for batching still reaches its caller (within ``HOLD``) while the
    next operation of the same loop runs for long — here it waits for that very caller."""
    seen = threading.Event()

    async def main() -> tuple[str, bool, float]:
        gate, _started = _hold_worker(runner)
        quick = asyncio.ensure_future(runner.run(lambda: "quick"))
        waiting = asyncio.ensure_future(runner.run(seen.wait, 30))
        await asyncio.sleep(0)
        started = time.monotonic()
        gate.set()
        first = await quick
        seen.set()
        return first, await waiting, time.monotonic() - started

    first, was_seen, took = asyncio.run(main())
    assert first == "quick"
    assert was_seen  # the caller got its result while the next operation was still running
    assert took < 15


def test_results_of_two_loops_each_reach_their_own_loop(runner: ThreadedRunner) -> None:
    def in_loop(tag: str) -> list[str]:
        async def main() -> list[str]:
            return list(await asyncio.gather(*(runner.run(f"{tag}{n}".upper) for n in range(50))))

        return asyncio.run(main())

    results: dict[str, list[str]] = {}

    def keep(tag: str) -> None:
        results[tag] = in_loop(tag)

    threads = [threading.Thread(target=keep, args=(tag,)) for tag in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert results == {tag: [f"{tag.upper()}{n}" for n in range(50)] for tag in ("a", "b")}


# -- ThreadedAsyncStore: the async twin of a sync store, one hop per operation ---------------------


class AsyncMemory(ThreadedAsyncStore[DictStore]):
    """The memory store's sync flavour, served through the adapter."""


def test_threaded_store_runs_every_method_whole_in_its_thread() -> None:
    async def main() -> None:
        store = await AsyncMemory.start(DictStore, name="memory-twin")
        exe = Execution(id="e", definition_id="d")
        await store.commit(exe, [(None, Event(id="out", kind="K"))], "in", trace={"a": 1})
        assert exe.version == 1 and (await store.load("e")) == exe
        assert await store.load_for_event("e", "in") == (exe, True)
        assert [e.event.id for e in await store.pending_outbox(limit=5)] == ["out"]
        assert (await store.list_executions(limit=1)).items[0].id == "e"
        store.trace_max = 7
        assert store.store.trace_max == 7
        await store.close()
        await store.close()
        with pytest.raises(StoreError, match="closed"):
            await store.load("e")

    asyncio.run(main())


def test_threaded_store_cancelled_commit_tells_its_outcome() -> None:
    async def main() -> None:
        store = await AsyncMemory.start(DictStore)
        exe = Execution(id="e", definition_id="d")
        landed = 0
        for attempt in range(100):
            before = exe.version
            task = asyncio.ensure_future(store.commit(exe, [], f"in-{attempt}"))
            for _ in range(attempt % 3):
                await asyncio.sleep(0)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            stored = await store.load("e")
            assert (stored.version if stored else 0) == exe.version in (before, before + 1)
            landed += exe.version - before
        assert landed == exe.version
        store.close_blocking()

    asyncio.run(main())
