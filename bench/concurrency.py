"""Figure 5: throughput under concurrency, and how often writers collide.

* Async store, 1 / 16 / 64 tasks, each committing (state-only) to an execution of its own:
  commits per second, and the conflicts seen (none expected).
* 1 / 2 / 4 worker processes over one dataset (multi-process backends; the quick mode takes
  SQLite, PostgreSQL and Redis): each opens the store through the registry on the harness's
  URL and repeats load + commit on one of 16 shared executions picked at random, for a fixed
  time; commits per second in all, and the share of attempts refused with ``StoreConflict``.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import random
import time
from dataclasses import dataclass, field
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

from common import Mode, Target, execution, open_harness
from harel.registry import open_store
from harel.store.errors import StoreConflict

TASKS = (1, 16, 64)
PROCESSES = (1, 2, 4)
QUICK_PROCESS_BACKENDS = ("sqlite", "postgres", "redis")
SHARED = 16


@dataclass
class Concurrency:
    """``tasks[n]`` / ``processes[n]`` = ``(commits per second, conflict share)``."""

    target: Target
    tasks: dict[int, tuple[float, float]] = field(default_factory=dict)
    processes: dict[int, tuple[float, float]] = field(default_factory=dict)
    error: str | None = None


async def _tasks(harness: Any, count: int, seconds: float) -> tuple[float, float]:
    store = await harness.open_async()
    try:
        own = [execution(f"ct{count}-{t}", t) for t in range(count)]
        for exe in own:
            await store.commit(exe, [])
        done = conflicts = 0
        deadline = time.perf_counter() + seconds

        async def task(exe: Any) -> None:
            nonlocal done, conflicts
            while time.perf_counter() < deadline:
                exe.context["n"] += 1
                try:
                    await store.commit(exe, [])
                    done += 1
                except StoreConflict:
                    conflicts += 1

        started = time.perf_counter()
        await asyncio.gather(*(task(exe) for exe in own))
        took = time.perf_counter() - started
        return done / took, conflicts / max(1, done + conflicts)
    finally:
        await store.close()


def worker(url: str, seconds: float, ready: Barrier, out: Queue[tuple[int, int]]) -> None:
    """One process: open the store, wait for the others, then load + commit at random."""
    store = open_store(url)
    pick = random.Random()
    done = conflicts = 0
    try:
        ready.wait()
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            exe = store.load(f"cp-{pick.randrange(SHARED)}")
            assert exe is not None
            exe.context["n"] += 1
            try:
                store.commit(exe, [])
                done += 1
            except StoreConflict:
                conflicts += 1
    finally:
        store.close()
        out.put((done, conflicts))


def _processes(url: str, count: int, seconds: float) -> tuple[float, float]:
    context = multiprocessing.get_context("spawn")
    ready = context.Barrier(count + 1)
    out: Queue[tuple[int, int]] = context.Queue()
    procs = [context.Process(target=worker, args=(url, seconds, ready, out)) for _ in range(count)]
    for proc in procs:
        proc.start()
    try:
        ready.wait(timeout=120)
        started = time.perf_counter()
        results = [out.get(timeout=seconds + 120) for _ in procs]
        took = max(time.perf_counter() - started, seconds)
    finally:
        for proc in procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()
    done = sum(r[0] for r in results)
    conflicts = sum(r[1] for r in results)
    return done / took, conflicts / max(1, done + conflicts)


def measure(target: Target, workdir: Path, mode: Mode, *, processes: bool) -> Concurrency:
    """Figure 5 for one backend (an error is reported, not raised)."""
    result = Concurrency(target)
    seconds = max(1.0, mode.seconds * 3)
    try:
        with open_harness(target, workdir / "tasks") as harness:
            for count in TASKS:
                result.tasks[count] = asyncio.run(_tasks(harness, count, seconds))
        if not processes:
            return result
        with open_harness(target, workdir / "processes") as harness:
            url = harness.url()
            if url is None:
                return result
            store = harness.open_sync()
            try:
                for n in range(SHARED):
                    store.commit(execution(f"cp-{n}", n), [])
            finally:
                store.close()
            for count in PROCESSES:
                result.processes[count] = _processes(url, count, seconds)
    except Exception as exc:  # a benchmark reports a broken backend and goes on
        result.error = f"{type(exc).__name__}: {exc}"[:300]
    return result
