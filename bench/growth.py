"""Figure 3: what each operation costs as the stored data grows (1k, 10k, 100k executions).

One dataset grows step by step.  Each stored execution has a dedupe mark, a timer far in the
future, a trace step and one outbox entry (acknowledged again, as a relay would); a handful of
due timers, pending outbox entries and spawn intents (the same at every size) and, per size,
finished executions for ``purge`` to remove.  The population imports the executions through
the sync store (:func:`populate`: what a commit stores, checked at the start of every dataset;
per backend as :data:`POPULATION` says), within the mode's time budget per backend (a size that
would not fit is replaced by a smaller one, or skipped, and says so); after a rest, the
operations are timed on the same store (median of ``reps`` calls, in ms, garbage collection
held off).
"""

from __future__ import annotations

import gc
import random
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from common import FAR_FUTURE, Mode, Target, execution, open_harness, timed_ms, with_query
from harel.model import Event, Status
from harel.store.common.trace import INDEX_KEY
from harel.store.contract import ExecutionRecord, OutboxEntry, TimerOp

OPERATIONS = (
    "due_timers",
    "pending_outbox",
    "pending_spawns",
    "load",
    "list first page",
    "list middle page",
    "purge",
    "prune_processed",
)
GROWTH_LIMIT = 2.0
"""Target: the cost at the largest size is at most this many times the cost at the smallest."""
HANDFUL = 10
SETTLE = 1.0
"""Seconds of rest between populating and timing (a server finishes its background work
after a burst of writes, e.g. Redis rehashing its key space)."""


@dataclass
class Growth:
    """``cost[size][operation]`` in ms, population speed, and sizes left out (with why)."""

    target: Target
    cost: dict[int, dict[str, float]] = field(default_factory=dict)
    populate_rate: float | None = None
    skipped: list[str] = field(default_factory=list)
    error: str | None = None

    def ratio(self, operation: str) -> float | None:
        """Cost at the largest measured size over the cost at the smallest."""
        sizes = sorted(self.cost)
        if len(sizes) < 2:
            return None
        first, last = self.cost[sizes[0]].get(operation), self.cost[sizes[-1]].get(operation)
        return last / first if first and last else None


def record(n: int, now: float, *, outbox: bool = True) -> ExecutionRecord:
    """What the commit of execution ``n`` writes (see :func:`commit_one`), as a record to
    import: the snapshot at version 1, its dedupe mark, its far timer, its trace step and (with
    ``outbox``) its outbox entry, the times ``now``."""
    exe = execution(f"g{n:07d}", n)
    exe.version = 1
    return ExecutionRecord(
        execution_id=exe.id,
        execution=exe,
        updated_at=now,
        processed=((f"g{n}-ev", now),),
        timers=(("Main.Waiting", FAR_FUTURE + n),),
        outbox=(OutboxEntry(seq=0, target_id=exe.id, event=Event(kind="Tick")),) if outbox else (),
        trace=({"event": "Tick", INDEX_KEY: 0},),
    )


def commit_one(store: Any, n: int) -> None:
    """Store execution ``n`` through ``store.commit``: the snapshot, one emit to itself, a
    dedupe mark, a far timer and a trace step."""
    exe = execution(f"g{n:07d}", n)
    store.commit(
        exe,
        [(exe.id, Event(kind="Tick"))],
        f"g{n}-ev",
        (TimerOp.schedule("Main.Waiting", FAR_FUTURE + n),),
        trace={"event": "Tick"},
    )


def _shape(store: Any, n: int) -> tuple[Any, ...]:
    """What the store holds for execution ``n``, its own id, event ids and times left out."""
    found = store.export_execution(f"g{n:07d}")
    if found is None:
        raise PopulationMismatch(f"execution {n} was not stored")
    exe = found.execution
    return (
        None
        if exe is None
        else {
            **exe.model_dump(mode="json"),
            "id": "",
            "definition_id": "",
            "context": {k: v for k, v in exe.context.items() if k != "n"},
        },
        tuple(event_id.replace(f"g{n}-", "g-") for event_id, _at in found.processed),
        tuple((path, at - n) for path, at in found.timers),
        tuple(
            (e.target_id == found.execution_id, e.event.kind, e.event.data) for e in found.outbox
        ),
        found.spawns,
        found.trace,
    )


class PopulationMismatch(RuntimeError):
    """The fast population path stored something else than a commit does: fix :func:`record`
    (or the backend's fast path) until both shapes agree."""


def _fast_dynamodb(store: Any) -> Callable[[ExecutionRecord | None], None]:
    """moto copies the whole table on every ``TransactWriteItems`` (to roll a failed one
    back), so each transaction costs O(stored items): this sends the items of the store's own
    import plan as a plain ``UpdateItem`` (the execution) and batched ``PutItem``s (the
    rest), the same items, no transaction.  Call the result with ``None`` to flush."""
    from harel.store.common.drive import drive
    from harel_store_dynamodb._requests import Call

    table = store.options.table
    puts: list[dict[str, Any]] = []

    def flush() -> None:
        nonlocal puts
        while puts:
            batch, puts = puts[:25], puts[25:]
            reply = store._execute(Call("batch_write_item", {"RequestItems": {table: batch}}))
            puts += reply.get("UnprocessedItems", {}).get(table, [])

    def send(request: Any) -> Any:
        if getattr(request, "operation", None) != "transact_write_items":
            return store._execute(request)
        for action in request.params["TransactItems"]:
            ((kind, params),) = action.items()
            if kind == "Put":
                puts.append({"PutRequest": {"Item": params["Item"]}})
            elif kind == "Update":
                store._execute(Call("update_item", params))
            else:
                raise PopulationMismatch(f"the import plan sent a {kind} action: extend this path")
        if len(puts) >= 25:
            flush()
        return {}

    def write(item: ExecutionRecord | None) -> None:
        if item is None:
            flush()
        else:
            drive(store._plan.import_execution(store._prepare_import(item)), send)

    return write


@dataclass(frozen=True)
class Population:
    """How one backend's dataset is filled (the same data every way, see :func:`populate`).

    ``workers``: threads importing side by side (PostgreSQL group-commits them); ``ack``:
    write each outbox entry and acknowledge it as a relay would (``False``: leave it out, for
    stores whose ack deletes outright and costs O(stored) in their fake: what remains is the
    same); ``fast``: a backend fast path (:func:`_fast_dynamodb`); ``setting``: a connection
    setting (query parameters) for the whole figure, named in its label."""

    workers: int = 1
    ack: bool = True
    fast: str = ""
    setting: str | None = None


POPULATION: dict[str, Population] = {
    # 8 threads: 1,300 executions/s against 400 one at a time; synchronous_commit=off: 2,400
    # (no WAL flush per write, so the figure measures the data structures, not the disk)
    "postgres": Population(workers=8, setting="options=-c synchronous_commit=off"),
    # moto copies the table on every transaction and mongomock scans a collection for every
    # ack (and unique-index check): O(stored) per write in the fakes, not in the stores
    "dynamodb": Population(ack=False, fast="dynamodb"),
    "mongo": Population(ack=False),
    "jsondir": Population(ack=False),
}
"""Backends not listed import one execution at a time, acknowledging each outbox entry
(measured: more threads gain nothing on them)."""


def _import(store: Any, item: ExecutionRecord | None) -> None:
    """``store.import_execution(item)``; ``None`` (flush) does nothing."""
    if item is not None:
        store.import_execution(item)


def populate(store: Any, start: int, stop: int, how: Population = Population()) -> None:
    """Store executions ``start`` .. ``stop - 1`` (see :func:`record`) as ``how`` says, their
    outbox entries acknowledged (as a relay would) or never written.  They are imported (one
    atomic write each), which stores what a commit stores: the first two executions of a
    dataset are stored one by commit, one by import, and compared once acknowledged
    (:class:`PopulationMismatch` when they differ)."""
    write = _fast_dynamodb(store) if how.fast == "dynamodb" else partial(_import, store)
    if start == 0 and stop >= 2:
        commit_one(store, 0)
        write(record(1, time.time(), outbox=how.ack))
        write(None)
        _acknowledge(store, 1)
        if _shape(store, 0) != _shape(store, 1):
            raise PopulationMismatch(
                f"a commit stored {_shape(store, 0)}, the import {_shape(store, 1)}"
            )
        start = 2
    now = time.time()
    if how.workers > 1:
        with ThreadPoolExecutor(how.workers) as pool:
            list(pool.map(lambda n: write(record(n, now, outbox=how.ack)), range(start, stop)))
    else:
        for n in range(start, stop):
            write(record(n, now, outbox=how.ack))
    write(None)
    if how.ack:
        _acknowledge(store, how.workers)


def _acknowledge(store: Any, workers: int) -> None:
    """Acknowledge every pending outbox entry of the population (not the handful)."""
    while bulk := [
        entry.seq
        for entry in store.pending_outbox(limit=500 + HANDFUL)
        if (entry.target_id or "").startswith("g")  # the handful ("h-..") stays pending
    ]:
        if workers > 1:
            with ThreadPoolExecutor(workers) as pool:
                list(pool.map(store.ack_outbox, bulk))
        else:
            for seq in bulk:
                store.ack_outbox(seq)


def add_handful(store: Any, step: int, reps: int) -> None:
    """At the first step, the handful of due timers, pending outbox entries and spawn intents
    (the same handful at every size: what the sweeps return stays the same); at every step,
    ``reps`` finished executions for ``purge``."""
    for i in range(HANDFUL if step == 0 else 0):
        exe = execution(f"h-{i:02d}", i)
        store.commit(
            exe,
            [(exe.id, Event(kind="Wake"))],
            None,
            (TimerOp.schedule("Main.Waiting", 1_000.0 + i),),
            [(f"h-{i:02d}-child", "Main.Fork.R", {})],
        )
    for i in range(reps):
        store.commit(execution(f"p{step}-{i:03d}", status=Status.DONE), [])


def grow(
    fill: Callable[[int, int], None],
    stored: int,
    size: int,
    budget_left: float,
    speed: float | None,
) -> tuple[int, float, float | None, str | None]:
    """Populate (``fill(start, stop)``) from ``stored`` up to ``size`` in chunks while the time
    it would take (at ``speed``, executions/s, as measured so far) fits ``budget_left``:
    ``(now stored, seconds spent, speed, why it stopped short or None)``."""
    spent, first = 0.0, stored
    while stored < size:
        if speed and spent + (size - stored) / speed > budget_left:
            need = spent + (size - stored) / speed
            why = (
                f"skipped {size:,}: populating would take ~{need:.0f} s at {speed:.0f} "
                f"executions/s (budget left {budget_left:.0f} s; `--budget S`)"
            )
            return stored, spent, speed, why
        chunk = min(size - stored, max(100, (size - stored) // 10))
        started = time.perf_counter()
        fill(stored, stored + chunk)
        spent += time.perf_counter() - started
        stored += chunk
        speed = (stored - first) / spent
    return stored, spent, speed, None


def fallbacks(size: int, smallest: int | None) -> tuple[int, ...]:
    """The sizes tried, largest first, when ``size`` does not fit the budget: half of it down
    to a fifth (5,000 .. 2,000 for 10,000), each at least twice the ``smallest`` size measured
    (none before any size was measured: a figure needs its first size)."""
    if smallest is None:
        return ()
    return tuple(f * size // 10 for f in (5, 4, 3, 2) if f * size // 10 >= 2 * smallest)


def time_operations(store: Any, size: int, step: int, reps: int, t0: float) -> dict[str, float]:
    """The median ms of each operation of :data:`OPERATIONS` at this size."""
    pick = random.Random(step)
    middle = store.list_executions(limit=max(1, size // 2)).next_cursor
    calls: dict[str, Any] = {
        "due_timers": lambda r: store.due_timers(time.time(), limit=100),
        "pending_outbox": lambda r: store.pending_outbox(limit=100),
        "pending_spawns": lambda r: store.pending_spawns(limit=100),
        "load": lambda r: store.load(f"g{pick.randrange(size):07d}"),
        "list first page": lambda r: store.list_executions(limit=100),
        "list middle page": lambda r: store.list_executions(limit=100, cursor=middle),
        "purge": lambda r: store.purge(f"p{step}-{r:03d}"),
        "prune_processed": lambda r: store.prune_processed(t0),
    }
    cost: dict[str, list[float]] = {name: [] for name in calls}
    gc.collect()  # as timeit does: no collection of earlier garbage inside a timed call
    gc.disable()
    try:
        for r in range(reps):
            for name, call in calls.items():
                cost[name].append(timed_ms(partial(call, r)))
    finally:
        gc.enable()
    return {name: statistics.median(values) for name, values in cost.items()}


def measure(target: Target, workdir: Path, mode: Mode) -> Growth:
    """Figure 3 for one backend (an error is reported, not raised): each size of ``mode`` in
    turn while its population fits the budget; the first that does not is replaced by the
    largest of its :func:`fallbacks` that fits, else by the size the budget reached when that
    is at least twice the first size (said in ``skipped``), and the figure stops there."""
    how = POPULATION.get(target.backend, Population())
    if how.setting is not None and target.setting is None:
        label = how.setting.removeprefix("options=-c ")
        target = Target(target.backend, with_query(target.url, how.setting), label)
    result = Growth(target)
    t0 = time.time() - 1  # every mark is younger: prune_processed finds nothing to drop
    spent, stored = 0.0, 0
    try:
        with open_harness(target, workdir) as harness:
            store = harness.open_sync()
            fill = partial(populate, store, how=how)
            try:
                for step, size in enumerate(mode.sizes):
                    smallest = min(result.cost, default=None)
                    reached: int | None = None
                    shorts: list[str] = []
                    for goal in (size, *fallbacks(size, smallest)):
                        if goal < stored:
                            continue
                        stored, took, speed, short = grow(
                            fill, stored, goal, mode.budget - spent, result.populate_rate
                        )
                        spent += took
                        result.populate_rate = speed
                        if short is None:
                            reached = goal
                            break
                        shorts.append(short)
                    if reached is None and smallest is not None and stored >= 2 * smallest:
                        reached = stored  # past the fallbacks that fit, short of the next
                        shorts[0] += f"; measured at {reached:,} instead (what the budget reached)"
                    elif reached is not None and reached != size:
                        shorts[0] += (
                            f"; measured at {reached:,} instead (the largest of "
                            f"{', '.join(f'{f:,}' for f in fallbacks(size, smallest))} that fit)"
                        )
                    result.skipped += shorts[:1]
                    if reached is None:
                        break
                    add_handful(store, step, mode.reps)
                    time.sleep(SETTLE)
                    result.cost[reached] = time_operations(store, reached, step, mode.reps, t0)
                    if reached != size:
                        break
            finally:
                store.close()
    except Exception as exc:  # a benchmark reports a broken backend and goes on
        result.error = f"{type(exc).__name__}: {exc}"[:300]
    return result
