"""Async store against its sync store, same backend, one run: issues 6 and 10's 0.8x target.

For each backend whose async store is the thread adapter
(:class:`harel.store.author.ThreadedAsyncStore`: SQLite in ``synchronous=NORMAL`` and ``FULL``,
libSQL, rqlite on its local test node), one dataset, one sync and one async store over it, and
these loops taking turns round after round (the median of the rounds is reported):

* sync: ``store.commit`` from one thread, round robin over 10 executions;
* async, 1 task: ``await astore.commit`` one at a time, round robin over 10 executions;
* async, 10 tasks: 10 tasks on one async store, each committing to an execution of its own;

each for a state-only commit and a side commit (one emit, a dedupe mark, a timer and a trace
step: :func:`common.side_writes`).  Every loop has executions of its own.  Besides commits per
second, the process CPU time per commit (all threads) is reported: it shows the adapter's own
cost, whatever else the machine is doing, while the rates (what the target judges) move with
the machine's load.

    python bench/async_ratio.py [--full] [--backend NAME]... [--rounds N] [--seconds S]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import queue
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from common import FULL, QUICK, Target, execution, open_twins, side_writes, targets
from harel.model import Execution
from harel.store.common.threaded import ThreadedRunner

TARGET = 0.8
BACKENDS = ("sqlite", "libsql", "rqlite")
EXECUTIONS = 10
TASKS = 10
KINDS = ("state", "side")
LOOPS = ("sync", "async 1 task", f"async {TASKS} tasks")


@dataclass
class Sample:
    """One timed run of a loop: commits per second and process CPU µs per commit."""

    rate: float
    cpu_us: float


@dataclass
class Ratios:
    """One backend setting: median commits/s and CPU µs per commit by ``(loop, kind)``."""

    target: Target
    rates: dict[tuple[str, str], float] = field(default_factory=dict)
    cpu_us: dict[tuple[str, str], float] = field(default_factory=dict)
    error: str | None = None

    def ratio(self, loop: str, kind: str) -> float | None:
        """Async rate ÷ sync rate for ``kind`` commits."""
        top, bottom = self.rates.get((loop, kind)), self.rates.get(("sync", kind))
        return top / bottom if top and bottom else None


def _commit_args(exe: Execution, kind: str) -> dict[str, Any]:
    """The keyword arguments of one commit of ``kind`` on ``exe`` (bumps its context)."""
    exe.context["n"] += 1
    if kind == "side":
        return side_writes(exe, exe.version)  # the version: a dedupe mark never used before
    return {"emits": []}


def _timed(run: Callable[[], int]) -> Sample:
    """``run()`` returns how many commits it made; time it in wall and process CPU time."""
    cpu, wall = time.process_time(), time.perf_counter()
    done = run()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return Sample(done / wall, cpu / max(done, 1) * 1e6)


def _sync_loop(store: Any, own: list[Execution], kind: str, seconds: float) -> Callable[[], int]:
    def run() -> int:
        done, deadline = 0, time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            exe = own[done % len(own)]
            store.commit(exe, **_commit_args(exe, kind))
            done += 1
        return done

    return run


async def _one_task(astore: Any, own: list[Execution], kind: str, seconds: float) -> int:
    done, deadline = 0, time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        exe = own[done % len(own)]
        await astore.commit(exe, **_commit_args(exe, kind))
        done += 1
    return done


async def _many_tasks(astore: Any, own: list[Execution], kind: str, seconds: float) -> int:
    done, deadline = 0, time.perf_counter() + seconds

    async def task(exe: Execution) -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            await astore.commit(exe, **_commit_args(exe, kind))
            done += 1

    await asyncio.gather(*(task(exe) for exe in own))
    return done


def _on(runner: asyncio.Runner, make: Callable[[], Coroutine[Any, Any, int]]) -> Callable[[], int]:
    def run() -> int:
        return runner.run(make())

    return run


def _noop() -> None:
    """The operation of a bare hop."""


async def _hops(runner: ThreadedRunner, tasks: int, seconds: float) -> int:
    done, deadline = 0, time.perf_counter() + seconds

    async def task() -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            await runner.run(_noop)
            done += 1

    await asyncio.gather(*(task() for _ in range(tasks)))
    return done


def _floor_worker(jobs: queue.SimpleQueue[asyncio.Future[None] | None]) -> None:
    while (future := jobs.get()) is not None:
        future.get_loop().call_soon_threadsafe(future.set_result, None)


async def _floor_hops(seconds: float) -> int:
    """The least a hop can cost: a bare queue to a thread and ``call_soon_threadsafe`` back."""
    jobs: queue.SimpleQueue[asyncio.Future[None] | None] = queue.SimpleQueue()
    thread = threading.Thread(target=_floor_worker, args=(jobs,), daemon=True)
    thread.start()
    loop = asyncio.get_running_loop()
    done, deadline = 0, time.perf_counter() + seconds
    try:
        while time.perf_counter() < deadline:
            future = loop.create_future()
            jobs.put(future)
            await future
            done += 1
    finally:
        jobs.put(None)
    return done


def hop_costs(rounds: int, seconds: float) -> dict[str, Sample]:
    """Median wall and CPU time of one hop (a no-op operation) through the adapter, driven by
    1 and by 10 tasks, and of the bare mechanism (:func:`_floor_hops`)."""
    runner = ThreadedRunner("bench-hops")
    try:
        with asyncio.Runner() as loop:
            loops = {
                "adapter, 1 task": _on(loop, partial(_hops, runner, 1, seconds)),
                f"adapter, {TASKS} tasks": _on(loop, partial(_hops, runner, TASKS, seconds)),
                "bare queue + call_soon_threadsafe, 1 task": _on(
                    loop, partial(_floor_hops, seconds)
                ),
            }
            samples: dict[str, list[Sample]] = {name: [] for name in loops}
            for _ in range(rounds):
                for name, run in loops.items():
                    samples[name].append(_timed(run))
    finally:
        runner.close()
    return {
        name: Sample(
            statistics.median(s.rate for s in values), statistics.median(s.cpu_us for s in values)
        )
        for name, values in samples.items()
    }


def measure(target: Target, workdir: Path, rounds: int, seconds: float) -> Ratios:
    """Every loop of the module docstring on ``target`` (an error is reported, not raised)."""
    result = Ratios(target)
    try:
        with open_twins(target, workdir) as (_harness, runner, store, astore):
            loops: dict[tuple[str, str], Callable[[], int]] = {}
            for kind in KINDS:
                own = {
                    loop: [execution(f"ar-{kind}-{n}-{i}", i) for i in range(EXECUTIONS)]
                    for n, loop in enumerate(LOOPS)
                }
                for exes in own.values():
                    for exe in exes:
                        store.commit(exe, [])
                loops["sync", kind] = _sync_loop(store, own["sync"], kind, seconds)
                one, many = own[LOOPS[1]], own[LOOPS[2]]
                loops[LOOPS[1], kind] = _on(runner, partial(_one_task, astore, one, kind, seconds))
                loops[LOOPS[2], kind] = _on(
                    runner, partial(_many_tasks, astore, many, kind, seconds)
                )
            samples: dict[tuple[str, str], list[Sample]] = {key: [] for key in loops}
            for _ in range(rounds):
                for key, loop in loops.items():
                    samples[key].append(_timed(loop))
            for key, values in samples.items():
                result.rates[key] = statistics.median(s.rate for s in values)
                result.cpu_us[key] = statistics.median(s.cpu_us for s in values)
    except Exception as exc:  # a benchmark reports a broken backend and goes on
        result.error = f"{type(exc).__name__}: {exc}"[:300]
    return result


def _mark(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:.2f}x {'✓' if value >= TARGET else '✗'}"


def render(
    results: list[Ratios],
    hops: dict[str, Sample],
    command: str,
    load: list[float],
    rounds: int,
    seconds: float,
) -> str:
    """The markdown report: one row per backend setting and commit kind."""
    lines = [
        f"Command: `{command}`; median of {rounds} interleaved rounds of {seconds} s; "
        f"load average (1 min) {load[0]:.1f} at the start, {load[1]:.1f} at the end; "
        f"{os.cpu_count()} CPUs.  Target: async ÷ sync ≥ {TARGET}.  CPU = process CPU time "
        "per commit (every thread), µs.",
        "",
        "| backend | commit | sync/s | async 1 task/s | ÷ sync | async 10 tasks/s | ÷ sync "
        "| CPU µs sync / 1 task / 10 tasks |",
        "|---|---|---|---|---|---|---|---|",
    ]
    many = f"async {TASKS} tasks"
    for result in results:
        if result.error:
            lines.append(f"| {result.target.label} | error: {result.error} |||||||")
            continue
        for kind in KINDS:
            rate = {loop: result.rates.get((loop, kind), 0.0) for loop in LOOPS}
            cpu = " / ".join(f"{result.cpu_us.get((loop, kind), 0.0):.0f}" for loop in LOOPS)
            lines.append(
                f"| {result.target.label} | {'side' if kind == 'side' else 'state-only'} "
                f"| {rate['sync']:,.0f} | {rate['async 1 task']:,.0f} "
                f"| {_mark(result.ratio('async 1 task', kind))} | {rate[many]:,.0f} "
                f"| {_mark(result.ratio(many, kind))} | {cpu} |"
            )
    lines += ["", "| one hop (no-op operation) | wall µs | CPU µs |", "|---|---|---|"]
    lines += [f"| {name} | {1e6 / h.rate:.1f} | {h.cpu_us:.1f} |" for name, h in hops.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Measure, print the table; 1 if a backend could not be measured."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="longer samples, more rounds")
    parser.add_argument("--backend", action="append", choices=BACKENDS, help="repeatable")
    parser.add_argument("--rounds", type=int, help="interleaved rounds (median reported)")
    parser.add_argument("--seconds", type=float, help="seconds per sample")
    args = parser.parse_args(argv)
    mode = FULL if args.full else QUICK
    rounds = args.rounds or mode.rounds
    seconds = args.seconds or mode.seconds
    command = "python bench/async_ratio.py " + " ".join(sys.argv[1:] if argv is None else argv)
    load = [os.getloadavg()[0]]
    results: list[Ratios] = []
    with tempfile.TemporaryDirectory(prefix="harel-async-ratio-") as tmp:
        for target in targets(Path(tmp), args.backend or list(BACKENDS), every_setting=True):
            print(f"[async ratio] {target.label}", file=sys.stderr, flush=True)
            results.append(measure(target, Path(tmp) / target.label, rounds, seconds))
    print("[async ratio] hops", file=sys.stderr, flush=True)
    hops = hop_costs(rounds, seconds)
    load.append(os.getloadavg()[0])
    print(render(results, hops, command.strip(), load, rounds, seconds))
    return 1 if any(result.error for result in results) else 0


if __name__ == "__main__":
    raise SystemExit(main())
