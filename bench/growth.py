"""Figure 3: what each operation costs as the stored data grows (1k, 10k, 100k executions).

One dataset grows step by step.  Each stored execution has a dedupe mark, a timer far in the
future, a trace step and one outbox entry (acknowledged again, as a relay would); a handful of
due timers, pending outbox entries and spawn intents (the same at every size) and, per size,
finished executions for ``purge`` to remove.  The population runs through the sync store, one
commit after the other (measured faster than 16 async tasks on every backend but PostgreSQL:
mongomock, rqlite's fake node and moto serialise requests), within the mode's time budget per
backend (a size that would not fit is skipped and says so); after a rest, the operations are
timed on the same store (median of ``reps`` calls, in ms, garbage collection held off).
"""

from __future__ import annotations

import gc
import random
import statistics
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from common import FAR_FUTURE, Mode, Target, execution, open_harness, timed_ms
from harel.model import Event, Status
from harel.store.contract import TimerOp

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


def populate(store: Any, start: int, stop: int) -> None:
    """Store executions ``start`` .. ``stop - 1``, each with a dedupe mark, a far timer, a
    trace step and an outbox entry, which is then acknowledged (as a relay would)."""
    for n in range(start, stop):
        exe = execution(f"g{n:07d}", n)
        store.commit(
            exe,
            [(exe.id, Event(kind="Tick"))],
            f"g{n}-ev",
            (TimerOp.schedule("Main.Waiting", FAR_FUTURE + n),),
            trace={"event": "Tick"},
        )
    while bulk := [
        entry
        for entry in store.pending_outbox(limit=500 + HANDFUL)
        if (entry.target_id or "").startswith("g")  # the handful ("h-..") stays pending
    ]:
        for entry in bulk:
            store.ack_outbox(entry.seq)


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
    store: Any, stored: int, size: int, budget_left: float, speed: float | None
) -> tuple[int, float, float | None, str | None]:
    """Populate from ``stored`` up to ``size`` in chunks while the time it would take (at
    ``speed``, executions/s, as measured so far) fits ``budget_left``: ``(now stored, seconds
    spent, speed, why it stopped short or None)``."""
    spent, first = 0.0, stored
    while stored < size:
        if speed and spent + (size - stored) / speed > budget_left:
            why = (
                f"{size:,}: populating would take ~{spent + (size - stored) / speed:.0f} s at "
                f"{speed:.0f} executions/s (budget left {budget_left:.0f} s; `--budget S`)"
            )
            return stored, spent, speed, why
        chunk = min(size - stored, max(100, (size - stored) // 10))
        started = time.perf_counter()
        populate(store, stored, stored + chunk)
        spent += time.perf_counter() - started
        stored += chunk
        speed = (stored - first) / spent
    return stored, spent, speed, None


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
    """Figure 3 for one backend (an error is reported, not raised)."""
    result = Growth(target)
    t0 = time.time() - 1  # every mark is younger: prune_processed finds nothing to drop
    spent, stored = 0.0, 0
    try:
        with open_harness(target, workdir) as harness:
            store = harness.open_sync()
            try:
                for step, size in enumerate(mode.sizes):
                    stored, took, speed, short = grow(
                        store, stored, size, mode.budget - spent, result.populate_rate
                    )
                    spent += took
                    result.populate_rate = speed
                    if short is not None:
                        result.skipped.append(short)
                        break
                    add_handful(store, step, mode.reps)
                    time.sleep(SETTLE)
                    result.cost[size] = time_operations(store, size, step, mode.reps, t0)
            finally:
                store.close()
    except Exception as exc:  # a benchmark reports a broken backend and goes on
        result.error = f"{type(exc).__name__}: {exc}"[:300]
    return result
