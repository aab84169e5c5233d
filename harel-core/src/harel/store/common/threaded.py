"""One sync-to-async adapter for stores whose driver is synchronous only.

:class:`ThreadedRunner` owns one dedicated worker thread.  An async store hands it *whole
operations* (a whole commit: the plan and every driver call of it) with ``await
runner.run(fn, *args)``; the operations run one after another, in submission order, in that
thread.  So a driver connection created by the worker (``await runner.run(connect, ...)``) is
only ever touched by one thread, transactions are serialised without an ``asyncio.Lock``, and
one operation costs one thread hop however many statements it runs.

Cancellation rule (the contract's outcome rule follows from it): when the task awaiting
:meth:`ThreadedRunner.run` is cancelled

* before the operation started, the operation is withdrawn and never runs;
* once the operation started, ``run`` waits — shielded, ignoring further cancellations — until
  the operation has finished, and only then re-raises :class:`asyncio.CancelledError`.

Either way, when the caller sees the cancellation nothing of the operation is still running: a
commit that bumps and restores ``exe.version`` inside the operation has left ``exe.version``
telling whether it was stored, and no transaction is open.

Results go back to the event loop in batches: while further operations of the same loop are
queued and quick, the worker runs them back to back and wakes the loop once for all of their
results (one ``call_soon_threadsafe``), each result still settling its own caller's future, in
submission order; a held result waits at most about :data:`HOLD` (1 ms) whatever the worker
does next, because the loop then collects it by itself.  So many tasks on one store cost
about one wake-up per batch instead of one per operation; one task awaiting one operation at a
time still pays one round trip between the threads per operation (about 20 µs of CPU on a
2-core VM: ``bench/async_ratio.py``).

Under trio (no asyncio loop in the calling thread) :meth:`ThreadedRunner.run` hands the
operation to the same worker thread and waits on a ``trio.Event`` that the worker sets through
the run's ``TrioToken.run_sync_soon``; the cancellation rule is the same (a not-yet-started
operation is withdrawn; a started one is awaited in a shielded cancel scope before
``trio.Cancelled`` goes on).  Any other library raises
:class:`~harel.store.errors.UnsupportedEventLoop`.

:meth:`ThreadedRunner.close` (or :meth:`~ThreadedRunner.aclose`) lets queued operations finish
and stops the thread.  The thread is a daemon, and a runner that is garbage collected without
being closed stops its thread, so an unclosed runner never keeps the interpreter from exiting.
:meth:`ThreadedRunner.call` is the blocking form for synchronous code (teardown, harnesses).

Why not :class:`concurrent.futures.ThreadPoolExecutor` (``max_workers=1``, awaited through
:func:`asyncio.wrap_future`; issue 18): it keeps the order, the thread and the cancellation
rule, but measured side by side it costs more CPU per hop (one wake-up per result, no batching;
for a no-op 45-54 against 33-36 µs with one task, 19-23 against 7-8 µs with ten tasks), SQLite
state-only commits from ten tasks ran at 0.55x, and the executor's thread is joined at exit, so
an unclosed runner whose operation never returns would hang the interpreter
(``bench/FINDINGS.md``, Async ÷ sync).

:class:`ThreadedAsyncStore` is the whole async twin built on a runner: every method of the
async contract runs the sync store's method whole in the worker thread.  A backend whose driver
is sync-only writes its sync store and gets the async one as a subclass that only says how to
open it (``harel_store_sqlite.aio`` is the example).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import queue
import threading
import time
import weakref
from collections.abc import Callable, Coroutine
from typing import Any, ClassVar, Concatenate, Generic, ParamSpec, Protocol, Self, TypeVar

from harel.store.common.offload import current_library
from harel.store.contract import Capabilities, ExecutionStore
from harel.store.errors import StoreError

__all__ = ["RunnerClosed", "SyncHops", "ThreadedAsyncStore", "ThreadedRunner"]

T = TypeVar("T")
P = ParamSpec("P")
S = TypeVar("S", bound=ExecutionStore)

_STOP = None
_names = itertools.count(1)

HOLD = 0.001
"""Seconds a finished result may be held back so that it rides on one wake-up of its event
loop with the results of the operations queued behind it (see :func:`_work`)."""


class _Sink(Protocol):
    """Where a finished job goes: ``post`` hands it over and says whether the sink must be
    woken (``wake``) before the worker waits for more work."""

    def post(self, job: _Job, /) -> bool: ...

    def wake(self) -> None: ...


class _Job:
    """One queued operation and, once run, its outcome (``ok`` and ``value``).

    ``claim`` holds one token: the worker pops it to start the operation, a cancelled caller
    pops it to withdraw the operation; ``list.pop`` is atomic, so exactly one of them wins and
    no lock is taken per operation.
    """

    __slots__ = (
        "args",
        "claim",
        "delivered",
        "fn",
        "future",
        "kwargs",
        "ok",
        "sink",
        "value",
        "waiter",
    )

    def __init__(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        sink: _Sink,
        future: asyncio.Future[Any] | None = None,
    ) -> None:
        self.fn: Callable[..., Any] | None = fn
        self.args = args
        self.kwargs = kwargs
        self.sink = sink
        self.future = future
        self.claim: list[None] = [None]
        self.ok = False
        self.value: Any = None
        self.delivered = False
        self.waiter: asyncio.Future[None] | None = None

    def outcome(self) -> Any:
        """The operation's result, or raise its exception."""
        if self.ok:
            return self.value
        raise self.value


def _nothing() -> None:
    """The marker job queued by ``close``: done once every earlier job is."""


class RunnerClosed(RuntimeError):
    """An operation was submitted to a :class:`ThreadedRunner` after :meth:`close`.

    Stores map it to their own "store is closed" error.
    """


def _wake_all(dirty: list[_Sink]) -> None:
    for sink in dirty:
        sink.wake()
    dirty.clear()


def _next(jobs: queue.SimpleQueue[_Job | None], dirty: list[_Sink]) -> _Job | None:
    """The next job; when none is queued yet, the sinks holding finished jobs are woken before
    the worker sleeps."""
    if dirty:
        try:
            return jobs.get_nowait()
        except queue.Empty:
            _wake_all(dirty)
    return jobs.get()


def _work(jobs: queue.SimpleQueue[_Job | None]) -> None:
    """The worker thread's loop: run each job not withdrawn by its caller, until ``_STOP``.

    A finished job goes to its sink (its caller's event loop) at once, and the loop is woken
    when the worker runs out of queued jobs — or before the next job starts, unless that job
    is for the same loop and expected (from the last job's duration) to finish within
    :data:`HOLD` of the oldest result not yet handed over.  So tasks that keep the queue busy
    with short operations are answered in batches, one wake-up each, instead of a wake-up (and
    a fight for the GIL) per operation; slow operations are answered one by one as before; and
    the loop's own :meth:`_Mailbox._tick` bounds a held result's wait by ``HOLD`` whatever the
    next operation does.

    Holds no reference to the runner, so a forgotten runner can be garbage collected.
    """
    dirty: list[_Sink] = []
    held_since = took = 0.0
    while True:
        job = _next(jobs, dirty)
        if job is _STOP:
            _wake_all(dirty)
            return
        try:
            job.claim.pop()
        except IndexError:
            continue  # withdrawn: the caller was cancelled before the operation started
        started = time.perf_counter()
        if dirty and (dirty[0] is not job.sink or started - held_since + took >= HOLD):
            _wake_all(dirty)  # held results only ride along with jobs of their own loop
        fn, args, kwargs = job.fn, job.args, job.kwargs
        job.fn, job.args, job.kwargs = None, (), {}
        try:
            job.value = fn(*args, **kwargs) if fn is not None else None
            job.ok = True
        except BaseException as exc:  # handed to the caller
            job.value = exc
        finished = time.perf_counter()
        took = finished - started
        if job.sink.post(job):
            if not dirty:
                held_since = finished
            dirty.append(job.sink)
        del job, fn, args, kwargs


class _Blocking:
    """The sink of a blocking :meth:`ThreadedRunner.call`: sets ``done``."""

    __slots__ = ("done",)

    def __init__(self) -> None:
        self.done = threading.Event()

    def post(self, job: _Job, /) -> bool:
        self.done.set()
        return False

    def wake(self) -> None:
        """Nothing to wake: ``post`` already released the caller."""


class _TrioSink:
    """The sink of one operation awaited under trio: ``post`` sets ``done`` in the trio run
    (``run_sync_soon`` is the thread-safe wake-up; a finished run has nobody waiting)."""

    __slots__ = ("_finished", "_token", "done")

    def __init__(self) -> None:
        import trio

        self._token = trio.lowlevel.current_trio_token()
        self._finished: type[BaseException] = trio.RunFinishedError
        self.done = trio.Event()

    def post(self, job: _Job, /) -> bool:
        with contextlib.suppress(self._finished):
            self._token.run_sync_soon(self.done.set)
        return False

    def wake(self) -> None:
        """Nothing to wake: ``post`` already did."""

    async def wait(self) -> None:
        """Wait for ``done`` ignoring cancellation, then raise a cancel that came meanwhile."""
        import trio

        with trio.CancelScope(shield=True):
            await self.done.wait()
        await trio.lowlevel.checkpoint_if_cancelled()


class _Mailbox:
    """Finished jobs on their way back to one event loop.

    ``post`` asks for a wake-up only when none is pending, so jobs finishing before the loop
    got round to collecting the earlier ones ride on the same wake-up.  The worker holds a
    result back only while it runs another job of the same loop, so only while two or more jobs
    of this loop are outstanding; meanwhile the loop collects finished jobs every :data:`HOLD`
    seconds by itself, so a held result never waits longer than that for its caller.
    """

    __slots__ = ("_finished", "_lock", "_loop", "_outstanding", "_pending", "_timer")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = weakref.ref(loop)  # the runner's mailboxes are keyed weakly by loop
        self._lock = threading.Lock()
        self._finished: list[_Job] = []
        self._pending = False  # the worker will wake the loop (or has): set by post only
        self._outstanding = 0  # loop side: jobs submitted, neither delivered nor withdrawn
        self._timer: asyncio.TimerHandle | None = None

    def expect(self, loop: asyncio.AbstractEventLoop) -> None:
        """Loop side: a job for this mailbox was queued."""
        self._outstanding += 1
        if self._outstanding > 1 and self._timer is None:
            self._timer = loop.call_later(HOLD, self._tick)

    def withdrawn(self) -> None:
        """Loop side: a queued job was withdrawn (it will never be posted)."""
        self._outstanding -= 1

    def post(self, job: _Job, /) -> bool:
        """Worker side: keep a finished job; True when the loop must be woken for it."""
        with self._lock:
            self._finished.append(job)
            if self._pending:
                return False
            self._pending = True
            return True

    def wake(self) -> None:
        """Worker side: have the loop collect the finished jobs (a closed loop has nobody
        waiting: nothing to do)."""
        loop = self._loop()
        if loop is not None and not loop.is_closed():
            # RuntimeError: the loop closed meanwhile, nobody is waiting any more
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._drain)

    def _drain(self) -> None:
        """Loop side, on the worker's wake-up: deliver every finished job."""
        with self._lock:
            finished, self._finished = self._finished, []
            self._pending = False
        self._deliver(finished)

    def _tick(self) -> None:
        """Loop side, every ``HOLD`` while jobs are outstanding: deliver the finished jobs
        (leaving ``_pending`` alone: a wake-up the worker owes still comes, finding less)."""
        self._timer = None
        with self._lock:
            finished, self._finished = self._finished, []
        self._deliver(finished)
        loop = self._loop()
        if self._outstanding > 1 and loop is not None and not loop.is_closed():
            self._timer = loop.call_later(HOLD, self._tick)

    def _deliver(self, finished: list[_Job]) -> None:
        self._outstanding -= len(finished)
        for job in finished:
            _deliver(job)


def _deliver(job: _Job) -> None:
    """Loop side: settle the caller's future (unless it was cancelled) and wake a cancelled
    caller waiting for the operation to finish."""
    job.delivered = True
    if job.waiter is not None and not job.waiter.done():
        job.waiter.set_result(None)
    future = job.future
    if future is None or future.done():
        return
    if job.ok:
        future.set_result(job.value)
    else:
        future.set_exception(job.value)


async def _wait_uncancellable(waiter: asyncio.Future[Any]) -> bool:
    """Wait until ``waiter`` is done, ignoring (but counting) cancellations of the current task.

    Returns whether the task was cancelled meanwhile; the waiter's own outcome is discarded.
    """
    cancelled = False
    while not waiter.done():
        try:
            await asyncio.shield(waiter)
        except asyncio.CancelledError:
            cancelled = True
        except BaseException:  # the operation's own outcome, discarded
            break
    return cancelled


def _running_loop() -> asyncio.AbstractEventLoop | None:
    """The asyncio loop running in this thread, else ``None`` (trio, or no loop at all)."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class ThreadedRunner:
    """Runs synchronous operations one at a time in one dedicated worker thread.

    Guarantees: operations run in submission order, never two at once, always in the same
    thread; :meth:`run` is cancellation-safe as described in the module docstring; ``close``
    is idempotent and waits for queued operations; an unclosed runner never blocks exit.
    """

    def __init__(self, name: str | None = None) -> None:
        """Start the worker thread (named ``name``, for debugging and thread dumps)."""
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._closed = False
        self._mailboxes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Mailbox] = (
            weakref.WeakKeyDictionary()
        )
        self._last: tuple[weakref.ref[asyncio.AbstractEventLoop], _Mailbox] | None = None
        self._thread = threading.Thread(
            target=_work,
            args=(self._jobs,),
            name=name or f"harel-store-worker-{next(_names)}",
            daemon=True,
        )
        self._thread.start()
        # A forgotten runner stops its thread when collected (the loop holds no ref to self).
        self._finalizer = weakref.finalize(self, self._jobs.put, _STOP)

    @property
    def closed(self) -> bool:
        """True once :meth:`close` or :meth:`aclose` was called."""
        return self._closed

    @property
    def thread(self) -> threading.Thread:
        """The worker thread (its identity is what thread-bound drivers care about)."""
        return self._thread

    def _mailbox(self, loop: asyncio.AbstractEventLoop) -> _Mailbox:
        last = self._last
        if last is not None and last[0]() is loop:
            return last[1]
        mailbox = self._mailboxes.get(loop)
        if mailbox is None:
            mailbox = self._mailboxes[loop] = _Mailbox(loop)
        self._last = (weakref.ref(loop), mailbox)
        return mailbox

    def _put(self, job: _Job) -> None:
        with self._lock:
            if self._closed:
                raise RunnerClosed("this store's worker thread is closed; open a new store")
            self._jobs.put(job)

    async def run(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Run ``fn(*args, **kwargs)`` in the worker thread and return its result (or raise
        its error).

        Raises :class:`RunnerClosed` after :meth:`close`.  If the awaiting task is cancelled,
        a not-yet-started operation is withdrawn; a started one is awaited to completion (its
        result discarded) before ``CancelledError`` is re-raised.
        """
        loop = _running_loop()
        if loop is None:  # trio (outside the except: no "during handling" chain on errors)
            return await self._run_trio(fn, args, kwargs)
        future: asyncio.Future[T] = loop.create_future()
        mailbox = self._mailbox(loop)
        job = _Job(fn, args, kwargs, mailbox, future)
        self._put(job)
        mailbox.expect(loop)
        try:
            return await future
        except asyncio.CancelledError:
            try:
                job.claim.pop()
                mailbox.withdrawn()
            except IndexError:  # the worker took it: let it finish before unwinding
                if not job.delivered:
                    job.waiter = loop.create_future()
                    await _wait_uncancellable(job.waiter)
            raise

    async def _run_trio(self, fn: Callable[..., T], args: tuple[Any, ...], kwargs: Any) -> T:
        """:meth:`run` under trio (same order, thread and cancellation rule)."""
        current_library()  # trio, or UnsupportedEventLoop saying what to do
        import trio

        sink = _TrioSink()
        job = _Job(fn, args, kwargs, sink)
        self._put(job)
        try:
            await sink.done.wait()
        except trio.Cancelled:
            try:
                job.claim.pop()  # not started: withdrawn, never runs
            except IndexError:  # the worker took it: let it finish before unwinding
                with trio.CancelScope(shield=True):
                    await sink.done.wait()
            raise
        result: T = job.outcome()
        return result

    def call(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Run ``fn(*args, **kwargs)`` in the worker thread and block until it is done (sync
        callers).

        Called from the worker thread itself it runs ``fn`` directly (no deadlock).
        """
        if threading.current_thread() is self._thread:
            return fn(*args, **kwargs)
        sink = _Blocking()
        job = _Job(fn, args, kwargs, sink)
        self._put(job)
        sink.done.wait()
        result: T = job.outcome()
        return result

    def _stop(self, sink: _Sink, future: asyncio.Future[None] | None = None) -> bool:
        """Mark closed and queue a marker job (posted to ``sink`` once every earlier job is
        done) and the stop; ``False`` when already closed."""
        with self._lock:
            if self._closed:
                return False
            self._jobs.put(_Job(_nothing, (), {}, sink, future))
            self._closed = True
            self._finalizer.detach()
            self._jobs.put(_STOP)
            return True

    def close(self) -> None:
        """Let queued operations finish, then stop the worker thread (idempotent).

        Blocks until the thread has exited (unless called from the worker itself).
        """
        self._stop(_Blocking())
        if threading.current_thread() is not self._thread:
            self._thread.join()

    async def aclose(self) -> None:
        """:meth:`close` without blocking the event loop (idempotent).

        If the awaiting task is cancelled, the queued operations still finish before
        ``CancelledError`` is re-raised.
        """
        loop = _running_loop()
        if loop is None:
            current_library()  # trio, or UnsupportedEventLoop saying what to do
            sink = _TrioSink()
            if self._stop(sink) and threading.current_thread() is not self._thread:
                await sink.wait()
            return
        drained: asyncio.Future[None] = loop.create_future()
        mailbox = self._mailbox(loop)
        if not self._stop(mailbox, drained):
            return
        mailbox.expect(loop)
        if threading.current_thread() is self._thread:
            return
        if await _wait_uncancellable(drained):
            raise asyncio.CancelledError

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"ThreadedRunner({self._thread.name!r}, {state})"


class _Runs(Protocol):
    """What runs a :class:`SyncHops` store's operations: :meth:`ThreadedRunner.run` or
    :meth:`harel.store.common.Offload.run`."""

    async def run(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T: ...


def _hop(
    method: Callable[Concatenate[Any, P], T],
) -> Callable[Concatenate[SyncHops[Any], P], Coroutine[Any, Any, T]]:
    """The async twin of a contract method: the sync store's method, whole, in one hop."""
    name = method.__name__

    async def hop(self: SyncHops[Any], /, *args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await self._runner.run(getattr(self.store, name), *args, **kwargs)
        except RunnerClosed:
            raise StoreError(f"{self!r} is closed; open a new store") from None

    hop.__name__ = hop.__qualname__ = name
    hop.__doc__ = (
        f"``{name}`` of the wrapped sync store, run whole in the worker thread (one hop); "
        "cancellation-safe as described in :mod:`harel.store.common.threaded`."
    )
    return hop


class SyncHops(Generic[S]):
    """Every method of the async contract as the wrapped sync store's (``store``), run whole
    by ``_runner`` (one hop per operation; cancellation as the runner's ``run`` says).

    The base of :class:`ThreadedAsyncStore` and of the trio form of the asyncio-only
    backends (:meth:`harel.store.common.AsyncPlanStore.in_threads`).
    """

    _runner: _Runs
    store: S

    @property
    def trace_max(self) -> int | None:
        """The wrapped store's trace ring size (setting it changes the wrapped store's)."""
        return self.store.trace_max

    @trace_max.setter
    def trace_max(self, value: int | None) -> None:
        self.store.trace_max = value

    async def _run(self, call: Callable[[], T]) -> T:
        try:
            return await self._runner.run(call)
        except RunnerClosed:
            raise StoreError(f"{self!r} is closed; open a new store") from None

    load = _hop(ExecutionStore.load)
    load_for_event = _hop(ExecutionStore.load_for_event)
    save = _hop(ExecutionStore.save)
    commit = _hop(ExecutionStore.commit)
    is_processed = _hop(ExecutionStore.is_processed)
    pending_outbox = _hop(ExecutionStore.pending_outbox)
    ack_outbox = _hop(ExecutionStore.ack_outbox)
    pending_spawns = _hop(ExecutionStore.pending_spawns)
    ack_spawn = _hop(ExecutionStore.ack_spawn)
    due_timers = _hop(ExecutionStore.due_timers)
    delete_timer = _hop(ExecutionStore.delete_timer)
    claim = _hop(ExecutionStore.claim)
    renew = _hop(ExecutionStore.renew)
    release = _hop(ExecutionStore.release)
    list_leases = _hop(ExecutionStore.list_leases)
    enqueue = _hop(ExecutionStore.enqueue)
    read_trace = _hop(ExecutionStore.read_trace)
    append_trace = _hop(ExecutionStore.append_trace)
    list_executions = _hop(ExecutionStore.list_executions)
    purge = _hop(ExecutionStore.purge)
    prune_processed = _hop(ExecutionStore.prune_processed)
    export_execution = _hop(ExecutionStore.export_execution)
    import_execution = _hop(ExecutionStore.import_execution)


class ThreadedAsyncStore(SyncHops[S]):
    """An :class:`~harel.store.contract.AsyncExecutionStore` made of a sync store and a
    :class:`ThreadedRunner`: every contract method runs the sync store's method whole in the
    runner's thread, so operations are serialised, one operation costs one thread hop, and a
    cancelled call returns only once its operation was withdrawn or finished (a cancelled
    ``commit`` has left ``exe.version`` telling whether it was stored).

    Subclasses set ``capabilities`` and provide ``from_url``; they build instances with
    :meth:`start`, which constructs the sync store in the worker thread.
    """

    capabilities: ClassVar[Capabilities]
    _runner: ThreadedRunner

    def __init__(self, runner: ThreadedRunner, store: S) -> None:
        """Wrap ``store``, which ``runner``'s thread owns from now on (use :meth:`start`)."""
        self._runner = runner
        self.store: S = store
        """The wrapped sync store: call it only through this object (its thread owns it)."""

    @classmethod
    async def start(cls, factory: Callable[[], S], *, name: str | None = None) -> Self:
        """Start a worker thread, build the sync store with ``factory()`` in it, wrap it.

        If building fails (or the caller is cancelled) the thread is stopped again.
        """
        runner = ThreadedRunner(name)
        try:
            store = await runner.run(factory)
        except BaseException:
            runner.close()  # nothing queued behind the factory: returns at once
            raise
        return cls(runner, store)

    async def close(self) -> None:
        """Close the wrapped store in its thread, then stop the thread (idempotent)."""
        if self._runner.closed:
            return
        try:
            await self._run(self.store.close)
        finally:
            await self._runner.aclose()

    def close_blocking(self) -> None:
        """:meth:`close` for synchronous teardown code (a test harness); blocks until done.

        Must not be called from the event loop while operations of this store are pending.
        """
        if self._runner.closed:
            return
        try:
            self._runner.call(self.store.close)
        finally:
            self._runner.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.store!r})"
