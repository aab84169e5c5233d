"""Figure 3: what each operation costs as the stored data grows (1k, 10k, 100k executions).

One dataset grows step by step.  Each stored execution has a dedupe mark, a timer far in the
future, a trace step and one outbox entry (acknowledged again, as a relay would); each step
adds a handful of due timers, pending outbox entries and spawn intents, and finished
executions for ``purge`` to remove.  The population runs through the async store, 16 tasks at a
time, within the mode's time budget per backend (a size that would not fit is skipped and says
so); the operations are then timed on the sync store (median of ``reps`` calls, in ms).
"""

from __future__ import annotations

import asyncio
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
TASKS = 16


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


async def _in_tasks(count: int, job: Any) -> None:
    """``job(i)`` for i in ``range(count)``, :data:`TASKS` at a time."""

    async def worker(offset: int) -> None:
        for i in range(offset, count, TASKS):
            await job(i)

    await asyncio.gather(*(worker(t) for t in range(min(TASKS, count))))


async def populate(harness: Any, start: int, stop: int) -> None:
    """Store executions ``start`` .. ``stop - 1``, each with a dedupe mark, a far timer, a
    trace step and an outbox entry, which is then acknowledged (as a relay would)."""
    store = await harness.open_async()
    try:

        async def bulk(i: int) -> None:
            exe = execution(f"g{start + i:07d}", start + i)
            await store.commit(
                exe,
                [(exe.id, Event(kind="Tick"))],
                f"g{start + i}-ev",
                (TimerOp.schedule("Main.Waiting", FAR_FUTURE + start + i),),
                trace={"event": "Tick"},
            )

        await _in_tasks(stop - start, bulk)
        while entries := await store.pending_outbox(limit=500):
            await _in_tasks(len(entries), lambda i: store.ack_outbox(entries[i].seq))
    finally:
        await store.close()


async def add_handful(harness: Any, step: int, reps: int) -> None:
    """This step's handful of due timers, pending outbox entries and spawn intents, and
    ``reps`` finished executions for ``purge``."""
    store = await harness.open_async()
    try:

        async def handful(i: int) -> None:
            exe = execution(f"h{step}-{i:02d}", i)
            await store.commit(
                exe,
                [(exe.id, Event(kind="Wake"))],
                None,
                (TimerOp.schedule("Main.Waiting", 1_000.0 + i),),
                [(f"h{step}-{i:02d}-child", "Main.Fork.R", {})],
            )

        async def finished(i: int) -> None:
            await store.commit(execution(f"p{step}-{i:03d}", status=Status.DONE), [])

        await _in_tasks(HANDFUL, handful)
        await _in_tasks(reps, finished)
    finally:
        await store.close()


def grow(harness: Any, stored: int, size: int, budget_left: float) -> tuple[int, float, str | None]:
    """Populate from ``stored`` up to ``size`` in chunks while the estimate fits the budget:
    ``(now stored, seconds spent, why it stopped short or None)``."""
    spent = 0.0
    while stored < size:
        chunk = min(size - stored, max(200, size // 10))
        started = time.perf_counter()
        asyncio.run(populate(harness, stored, stored + chunk))
        spent += time.perf_counter() - started
        stored += chunk
        speed = chunk / max(spent, 1e-9) if spent else 0.0
        estimate = (size - stored) / speed if speed else 0.0
        if stored < size and spent + estimate > budget_left:
            return (
                stored,
                spent,
                (
                    f"{size:,}: populating would take ~{spent + estimate:.0f} s more at "
                    f"{speed:.0f} executions/s (budget left {budget_left:.0f} s; "
                    "`--full` or `--budget SECONDS`)"
                ),
            )
    return stored, spent, None


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
    for r in range(reps):
        for name, call in calls.items():
            cost[name].append(timed_ms(partial(call, r)))
    return {name: statistics.median(values) for name, values in cost.items()}


def measure(target: Target, workdir: Path, mode: Mode) -> Growth:
    """Figure 3 for one backend (an error is reported, not raised)."""
    result = Growth(target)
    t0 = time.time() - 1  # every mark is younger: prune_processed finds nothing to drop
    spent, stored = 0.0, 0
    try:
        with open_harness(target, workdir) as harness:
            for step, size in enumerate(mode.sizes):
                before = stored
                stored, took, short = grow(harness, stored, size, mode.budget - spent)
                spent += took
                result.populate_rate = (stored - before) / took if took else None
                if short is not None:
                    result.skipped.append(short)
                    break
                asyncio.run(add_handful(harness, step, mode.reps))
                store = harness.open_sync()
                try:
                    result.cost[size] = time_operations(store, size, step, mode.reps, t0)
                finally:
                    store.close()
    except Exception as exc:  # a benchmark reports a broken backend and goes on
        result.error = f"{type(exc).__name__}: {exc}"[:300]
    return result
