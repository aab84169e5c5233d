"""Commits per second of SqliteStore and AsyncSqliteStore (10 tasks, one store), and their ratio.

Each commit is one realistic step: the execution snapshot, one outbox emit, a processed-event
mark and a timer (re-)arm, on a rotating set of executions.  Sync and async rounds alternate
(each on a fresh file) and the median of each is reported, so disk noise hits both alike.
Measures only; asserts nothing.

    .venv/bin/python bench/sqlite_commit.py [--commits N] [--rounds R] [--tasks T]
                                            [--executions K] [--synchronous FULL]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from harel.model import Event, Execution
from harel.store import TimerOp
from harel_store_sqlite import AsyncSqliteStore, SqliteStore


def _executions(count: int) -> list[Execution]:
    return [
        Execution(
            id=f"bench-{n:05d}", definition_id="bench", context={"n": n, "payload": "x" * 200}
        )
        for n in range(count)
    ]


def bench_sync(path: Path, commits: int, executions: int, synchronous: str) -> float:
    """Seconds for ``commits`` commits through one SqliteStore."""
    store = SqliteStore(str(path), synchronous=synchronous)
    pool = _executions(executions)
    try:
        started = time.perf_counter()
        for i in range(commits):
            exe = pool[i % executions]
            exe.context["step"] = i
            store.commit(
                exe,
                [(None, Event(kind="Tick", data={"i": i}))],
                f"ev-{i}",
                (TimerOp.schedule("/wait", 1_000.0 + i),),
            )
        return time.perf_counter() - started
    finally:
        store.close()


async def bench_async(
    path: Path, commits: int, executions: int, synchronous: str, tasks: int
) -> float:
    """Seconds for ``commits`` commits through one AsyncSqliteStore from ``tasks`` tasks."""
    store = await AsyncSqliteStore.open(str(path), synchronous=synchronous)
    pool = _executions(executions)

    async def worker(offset: int) -> None:
        for i in range(offset, commits, tasks):
            exe = pool[i % executions]  # task t owns executions t, t+tasks, ... (no conflicts)
            exe.context["step"] = i
            await store.commit(
                exe,
                [(None, Event(kind="Tick", data={"i": i}))],
                f"ev-{i}",
                (TimerOp.schedule("/wait", 1_000.0 + i),),
            )

    try:
        started = time.perf_counter()
        await asyncio.gather(*(worker(t) for t in range(tasks)))
        return time.perf_counter() - started
    finally:
        await store.close()


def main() -> None:
    """Run both flavours round after round; print the medians (commits/s) and the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per flavour")
    parser.add_argument("--executions", type=int, default=100)
    parser.add_argument("--tasks", type=int, default=10, help="concurrent tasks (async)")
    parser.add_argument("--synchronous", default="FULL", choices=("FULL", "NORMAL", "EXTRA"))
    args = parser.parse_args()
    if args.executions % args.tasks:
        parser.error("--executions must be a multiple of --tasks (each task owns its executions)")
    sync_rates: list[float] = []
    async_rates: list[float] = []
    with tempfile.TemporaryDirectory(prefix="harel-bench-") as tmp:
        for n in range(args.rounds):
            sync_s = bench_sync(
                Path(tmp) / f"sync-{n}.db", args.commits, args.executions, args.synchronous
            )
            sync_rates.append(args.commits / sync_s)
            async_s = asyncio.run(
                bench_async(
                    Path(tmp) / f"async-{n}.db",
                    args.commits,
                    args.executions,
                    args.synchronous,
                    args.tasks,
                )
            )
            async_rates.append(args.commits / async_s)
    sync_rate = statistics.median(sync_rates)
    async_rate = statistics.median(async_rates)
    label = f"synchronous={args.synchronous}, {args.commits} commits, median of {args.rounds}"
    print(f"SqliteStore       {sync_rate:8.0f} commits/s  ({label})")
    print(f"AsyncSqliteStore  {async_rate:8.0f} commits/s  ({label}, {args.tasks} tasks)")
    print(f"async / sync      {async_rate / sync_rate:8.2f}")


if __name__ == "__main__":
    main()
